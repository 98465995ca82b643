#!/bin/bash
#
# test_persist.sh - data survives unmount/remount and SIGTERM; a daemonized
# mount (no -f) works and exits on unmount; --check-config accepts a good
# file and rejects a bad one with FILE:LINE and exit code 1; startup errors
# (bad config, missing mount point, unusable database) exit non-zero with
# one clear line and leave nothing mounted.

# shellcheck source=../common/harness.sh disable=SC2154 # rfs_stat/rfs_helper use printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
M=$RFS_MNT
W=$RFS_TMP/work
mkdir "$W"

# ---- unmount and remount --------------------------------------------------

rfs_mount
head -c 300000 /dev/urandom >"$W/blob"
cp "$W/blob" "$M/main/blob" || rfs_fail "write blob"
for i in $(seq 1 50); do
	echo "value $i" >"$M/other/key-$i" || rfs_fail "write other/key-$i"
done
echo "to be removed" >"$M/other/gone" && rm "$M/other/gone" ||
	rfs_fail "write+rm gone"
echo "renamed" >"$M/other/before" && mv "$M/other/before" "$M/other/after" ||
	rfs_fail "write+mv"
printf 'x' >"$M/main/.dot name ü" || rfs_fail "write an odd name"
rfs_umount
rfs_ok "wrote 54 keys, removed one, renamed one, unmounted"

check_data()
{
	cmp -s "$M/main/blob" "$W/blob" || rfs_fail "$1: blob differs"
	for i in $(seq 1 50); do
		[ "$(cat "$M/other/key-$i")" = "value $i" ] ||
			rfs_fail "$1: other/key-$i"
	done
	[ ! -e "$M/other/gone" ] || rfs_fail "$1: a removed key came back"
	[ ! -e "$M/other/before" ] || rfs_fail "$1: a renamed key came back"
	[ "$(cat "$M/other/after")" = renamed ] || rfs_fail "$1: renamed key"
	[ "$(cat "$M/main/.dot name ü")" = x ] || rfs_fail "$1: odd name"
	[ "$(ls "$M/other" | wc -l)" = 51 ] || rfs_fail "$1: other lists" \
		"$(ls "$M/other" | wc -l) keys, not 51"
}

rfs_mount
check_data "after remount"
rfs_ok "every value, removal and rename persists across remount"

# ---- SIGTERM ---------------------------------------------------------------

echo "written before SIGTERM" >"$M/main/term" || rfs_fail "write term"
kill -TERM "$RFS_PID"
rfs_wait_daemon 10 || rfs_fail "the daemon ignored SIGTERM for 10 s"
[ "$RFS_DAEMON_RC" = 0 ] || rfs_fail "SIGTERM: exit status $RFS_DAEMON_RC"
! rfs_is_mounted || rfs_fail "still mounted after SIGTERM"
rfs_mount
[ "$(cat "$M/main/term")" = "written before SIGTERM" ] ||
	rfs_fail "a value written before SIGTERM is lost"
check_data "after SIGTERM"
rfs_umount
rfs_ok "SIGTERM unmounts, exits 0 and keeps the data"

# ---- daemonized (no -f) ------------------------------------------------------

ASAN_OPTIONS=$RFS_ASAN_OPTIONS TSAN_OPTIONS=$RFS_TSAN_OPTIONS \
	"$RFS_BIN" -o "config=$RFS_INI" "$RFS_DB" "$M" </dev/null >>"$RFS_LOG" 2>&1 || rfs_fail "daemonizing mount exited non-zero"
rfs_is_mounted || rfs_fail "daemonizing mount returned before mounting"
# Our daemon is the process whose command line names our mount point.
for p in /proc/[0-9]*; do
	if tr '\0' '\n' <"$p/cmdline" 2>/dev/null | grep -qxF "$M"; then
		dpid=${p#/proc/}
	fi
done
[ -n "${dpid:-}" ] || rfs_fail "cannot find the daemonized process"
check_data "daemonized"
fusermount3 -u "$M" || rfs_fail "unmount the daemonized mount"
for ((i = 0; i < 200; i++)); do
	kill -0 "$dpid" 2>/dev/null || break
	sleep 0.05
done
if kill -0 "$dpid" 2>/dev/null; then
	kill -KILL "$dpid"
	rfs_fail "the daemonized process did not exit after unmount"
fi
rfs_ok "without -f it daemonizes, serves, and exits on unmount"

# ---- --check-config --------------------------------------------------------------

out=$("$RFS_BIN" --check-config "$RFS_INI" 2>&1) ||
	rfs_fail "--check-config rejects a good file: $out"
for r in main other small tiny; do
	grep -qw "$r" <<<"$out" || rfs_fail "--check-config does not show $r"
done
if [ -n "${RFS_DEFAULT_INI:-}" ] && [ -f "$RFS_DEFAULT_INI" ]; then
	out=$("$RFS_BIN" --check-config "$RFS_DEFAULT_INI" 2>&1) ||
		rfs_fail "the shipped regions.ini does not check: $out"
fi
rfs_ok "--check-config accepts good files (and the shipped regions.ini)"

BAD=$RFS_TMP/bad.ini
printf '[main]\nmax_entries = 10\nmax_entires = 5\n' >"$BAD"
out=$("$RFS_BIN" --check-config "$BAD" 2>&1)
rc=$?
[ "$rc" = 1 ] || rfs_fail "--check-config on a bad file exits $rc, not 1"
grep -q "$BAD:3:" <<<"$out" || rfs_fail "no '$BAD:3:' in: $out"
rfs_ok "--check-config on a bad file: '$out', exit 1"

# ---- startup errors ----------------------------------------------------------------

# startup_error WHAT EXPECT ARGS...: the daemon must exit non-zero within
# 10 s, print exactly one line that contains EXPECT, and mount nothing.
startup_error()
{
	local what=$1 expect=$2 rc
	shift 2
	ASAN_OPTIONS=$RFS_ASAN_OPTIONS TSAN_OPTIONS=$RFS_TSAN_OPTIONS \
		timeout -s KILL 10 "$RFS_BIN" "$@" </dev/null >"$W/out" 2>"$W/err"
	rc=$?
	[ "$rc" -ne 0 ] || rfs_fail "$what: exit status 0"
	[ "$rc" -ne 137 ] || rfs_fail "$what: still running after 10 s"
	! rfs_is_mounted || rfs_fail "$what: left a mount"
	[ "$(grep -c . "$W/err")" = 1 ] || {
		cat "$W/err"
		rfs_fail "$what: not exactly one line on stderr"
	}
	grep -q -- "$expect" "$W/err" || rfs_fail "$what: no '$expect' in: $(cat "$W/err")"
	[ ! -s "$W/out" ] || rfs_fail "$what: wrote to stdout: $(cat "$W/out")"
	rfs_ok "$what: exit $rc, '$(cat "$W/err")'"
}

startup_error "bad config (-f)" "$BAD:3:" -f -o "config=$BAD" "$RFS_DB" "$M"
startup_error "bad config (daemon)" "$BAD:3:" -o "config=$BAD" "$RFS_DB" "$M"
startup_error "missing config" "$RFS_TMP/none.ini" -f \
	-o "config=$RFS_TMP/none.ini" "$RFS_DB" "$M"
startup_error "missing mount point" "$RFS_TMP/nomnt" -f \
	-o "config=$RFS_INI" "$RFS_DB" "$RFS_TMP/nomnt"
if rfs_store_is_pg; then
	startup_error "unreachable PostgreSQL server" "$RFS_TMP/nodir" -f \
		-o "config=$RFS_INI" "host=$RFS_TMP/nodir dbname=x" "$M"
else
	startup_error "database in a missing directory" "$RFS_TMP/nodir/db" -f \
		-o "config=$RFS_INI" "$RFS_TMP/nodir/db" "$M"
fi

# The failed starts did not harm the data.
rfs_mount
check_data "after failed starts"
rfs_umount
rfs_ok "data intact after the failed starts"
rfs_done
