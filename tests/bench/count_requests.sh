#!/bin/bash
#
# count_requests.sh - FUSE requests per operation, counted from the
# daemon's debug output (-d), for issue 9's targets: a warm
# open/read/close, stat of a cached key, create+write+close, a rewrite, a
# read after the rewrite, unlink, and ls -l of a listing.
#
#   tests/bench/count_requests.sh [-n KEYS] [BUILDDIR]
#
# Each operation runs on KEYS keys (default 100) after a warm-up; the
# script prints, per operation, the requests per key by opcode, e.g.
#   warm read: OPEN 1.00 RELEASE 1.00
# and the store's write transactions per key ("store commits": the
# shell's '>' closes its descriptor once before it writes, so a shell
# create commits twice; cp's one open, write, close commits once).
# (RELEASE is asynchronous: close() does not wait for it; FORGET and
# BATCH_FORGET likewise. After a READ the kernel asks GETATTR once at the
# next fstat(), which wants the atime it marked stale; the first
# page-cache open of an inode stores values up to 128 KiB into the page
# cache, so their first read sends no READ.) The reads are
# counted again on a read-only remount (-o ro: zero-request opens).
# Needs /dev/fuse; mounts under a temporary
# directory and unmounts on exit (tests/common/harness.sh).

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
n=100
while getopts "n:h" opt; do
	case $opt in
	n) n=$OPTARG ;;
	*)
		sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
build=${1:-build}
export REGIONFS=${REGIONFS:-$build/fs/regionfs}

# shellcheck source=tests/common/harness.sh
. "$here/../common/harness.sh"

rfs_init
rfs_mount -d ${COUNT_MOUNT_OPTS:-}
R=$RFS_MNT/main
S=$RFS_MNT/.regionfs/stats

# settle: until the daemon holds no handle but the stats file's own, so
# every asynchronous RELEASE of the last step is in the log
settle()
{
	local i h
	for ((i = 0; i < 2000; i++)); do
		h=$(awk '$1 == "open_handles" { print $2 }' "$S")
		[ "$h" -le 1 ] && return 0
		sleep 0.005
	done
	rfs_fail "handles still open after 10 s"
}

# count WHAT CMD...: runs CMD, prints the requests it caused per key.
count()
{
	local what=$1 before c0 c1
	shift
	settle
	before=$(wc -l <"$RFS_LOG")
	c0=$(awk '$1 == "store_commits" { print $2 }' "$S")
	"$@"
	settle
	c1=$(awk '$1 == "store_commits" { print $2 }' "$S")
	tail -n +"$((before + 1))" "$RFS_LOG" |
		awk -v n="$n" -v what="$what" -v commits=$((c1 - c0)) '
		# skip the stats file (node 3) and .regionfs/ (node 2): settle() reads them
		/unique: [0-9]+, opcode: / {
			for (i = 1; i < NF; i++) {
				if ($i == "opcode:")
					op = $(i + 1)
				if ($i == "nodeid:")
					node = $(i + 1)
			}
			if (node != "2," && node != "3,")
				c[op]++
		}
		END {
			printf "%s:", what
			for (op in c)
				printf " %s %.2f", op, c[op] / n
			printf " (store commits %.2f)\n", commits / n
		}'
}

each()
{
	local i
	for ((i = 0; i < n; i++)); do
		"$@" "$R/k$i"
	done
}
write1() { printf 'value of %s' "$1" >"$1"; }
src=$RFS_TMP/value
printf 'a value to copy' >"$src"
cp1() { cp "$src" "$1.c"; }
rmc() { rm "$1.c"; }
write2() { printf 'another value of %s' "$1" >"$1"; }
read1() { cat "$1" >/dev/null; }
stat1() { stat "$1" >/dev/null; }
lsl() { ls -l "$R" >/dev/null; }

count "create+write+close" each write1
count "create+write+close with one descriptor (cp)" each cp1
each rmc
count "first read after create" each read1
count "second read (a READ before would leave atime to ask for)" each read1
count "warm read" each read1
count "stat" each stat1
count "rewrite (open O_TRUNC, write, close)" each write2
count "read after rewrite" each read1
count "second read after rewrite" each read1
count "warm read again" each read1
count "ls -l of the keys (per key)" lsl
# a read-only remount: zero-request opens (fs/ops.c)
rfs_umount
rfs_mount -d -o ro ${COUNT_MOUNT_OPTS:-}
count "first read on -o ro" each read1
count "warm read on -o ro" each read1
count "stat on -o ro" each stat1
rfs_umount
rfs_mount -d ${COUNT_MOUNT_OPTS:-}
count "unlink" each rm
rfs_umount
rfs_done
