#!/bin/bash
#
# run_opcost.sh - the daemon's cost per operation, counted rather than
# timed: CPU time, system calls and context switches of the whole daemon
# (every thread) per create, rewrite (+read-back) and unlink, and how
# often the store's writer thread was woken and how many commits each
# operation took. For issue 9: on a shared machine these counts move
# far less than the rates run_bench_fs.sh prints.
#
#   tests/bench/run_opcost.sh [-n KEYS] [-s SIZE] [-t THREADS] [-d] [-S]
#                             [BUILDDIR]
#
#   -n KEYS     keys per phase (default 1000)
#   -s SIZE     value size in bytes (default 1024)
#   -t THREADS  bench_fs threads (default 1)
#   -d          the region is durable (durable = true)
#   -S          instead of perf stat, strace -c -f the daemon: the calls
#               by name (strace slows the daemon down many times: its
#               counts, not its times, are the figures)
#   BUILDDIR    the meson build directory (default ./build)
#
# Each phase is bench_fs -p PHASE on a fresh mount (one mount for the
# three phases, after a warm-up of 200 creates and unlinks), with
#   perf stat -e task-clock,context-switches,raw_syscalls:sys_enter -p PID
# attached to the daemon for the phase; the script prints per operation
#   PHASE cpu_us/op C (stat T) syscalls/op S ctxsw/op X
#   PHASE writer-thread wakeups/op W commits/op K
# where T is utime+stime from /proc/PID/stat (10 ms ticks), W the
# voluntary context switches of the thread regionfs-store and K the
# store_commits of the stats file. Needs perf (Debian: linux-perf) or,
# with -S, strace; root or perf_event_paranoid <= 0 to attach.

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
n=1000 size=1024 threads=1 durable=false use_strace=0
while getopts "n:s:t:dSh" opt; do
	case $opt in
	n) n=$OPTARG ;;
	s) size=$OPTARG ;;
	t) threads=$OPTARG ;;
	d) durable=true ;;
	S) use_strace=1 ;;
	*)
		sed -n '3,33p' "$0" | sed 's/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
build=${1:-build}
export REGIONFS=${REGIONFS:-$build/fs/regionfs}
BENCH_FS=${BENCH_FS:-$build/tests/bench/bench_fs}

# shellcheck source=tests/common/harness.sh
. "$here/../common/harness.sh"

[ -x "$BENCH_FS" ] || rfs_fail "$BENCH_FS is not built"
tool=perf
[ "$use_strace" = 1 ] && tool=strace
command -v "$tool" >/dev/null || rfs_skip "$tool is not installed"

rfs_init
cat >"$RFS_INI" <<INI
[bench]
max_entries = $((n * 2 + 1000))
max_bytes = $(((n * size * 2 >> 20) + 64))M
durable = $durable
INI
rfs_mount
pid=$RFS_PID
dir=$RFS_MNT/bench
# outside $RFS_TMP: the daemon watches the database's directory
out=$(mktemp /tmp/rfs-opcost.XXXXXX) || rfs_fail "mktemp"
RFS_CHILDREN=
"$BENCH_FS" -n 200 -s "$size" -t "$threads" -p create,unlink "$dir" \
	>/dev/null || rfs_fail "bench_fs warm-up failed"

writer_wakeups()
{
	local t
	for t in /proc/"$pid"/task/*; do
		[ "$(cat "$t/comm" 2>/dev/null)" = regionfs-store ] &&
			awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status"
	done
}
commits() { awk '$1 == "store_commits" { print $2 }' "$RFS_MNT/.regionfs/stats"; }
ticks() { awk '{ print $14 + $15 }' /proc/"$pid"/stat; }

measure()
{
	local phase=$1 t0 t1 w0 w1 k0 k1 spid
	t0=$(ticks) w0=$(writer_wakeups) k0=$(commits)
	if [ "$use_strace" = 1 ]; then
		strace -c -f -p "$pid" -o "$out" 2>/dev/null &
	else
		perf stat -x, -e task-clock,context-switches,raw_syscalls:sys_enter \
			-p "$pid" -o "$out" 2>/dev/null &
	fi
	spid=$!
	sleep 0.5 # attached
	"$BENCH_FS" -n "$n" -s "$size" -t "$threads" -p "$phase" "$dir" \
		>"$RFS_TMP/bench.out" || rfs_fail "bench_fs -p $phase failed"
	kill -INT "$spid"
	wait "$spid"
	t1=$(ticks) w1=$(writer_wakeups) k1=$(commits)
	if [ "$use_strace" = 1 ]; then
		echo "== $phase (calls per op)"
		awk -v n="$n" '$1 ~ /^[0-9.]+$/ && NF >= 5 {
			printf "  %-16s %8.2f\n", $NF, $4 / n }' "$out"
	else
		awk -F, -v phase="$phase" -v n="$n" -v ticks=$((t1 - t0)) '
			/task-clock/ { tc = $1 }
			/context-switches/ { cs = $1 }
			/sys_enter/ { sc = $1 }
			END { printf "%-8s cpu_us/op %7.1f (stat %6.1f) syscalls/op %6.2f ctxsw/op %6.2f\n",
				phase, tc * 1000 / n, ticks * 10000 / n, sc / n, cs / n }' "$out"
	fi
	awk -v phase="$phase" -v n="$n" -v w=$((w1 - w0)) -v k=$((k1 - k0)) 'END {
		printf "%-8s writer-thread wakeups/op %.3f commits/op %.3f\n",
			phase, w / n, k / n }' </dev/null
}

measure create
measure rewrite
measure unlink
rm -f "$out"
rfs_umount
