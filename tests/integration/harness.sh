# shellcheck shell=bash
#
# harness.sh - mounts a private regionfs instance for one end-to-end test.
#
# Sourced by tests/integration/test_*.sh and tests/bench/run_bench_fs.sh.
# rfs_init makes a temporary directory holding the database, regions.ini,
# the mount point and the daemon's log, and installs a trap that ALWAYS
# unmounts (fusermount3 -u, then -uz, then umount -l), stops the daemon
# (SIGTERM, then SIGKILL), kills the test's own helper processes and
# removes the directory, on success, on failure and on INT/TERM/HUP.
#
# Environment (set by tests/integration/meson.build):
#   REGIONFS         the daemon executable (required)
#   RFS_HELPERS      directory of the C helper programs (listdir, ...)
#   RFS_DEFAULT_INI  the shipped regions.ini
#   RFS_KEEP=1       keep the temporary directory (for debugging)
#
# Exit codes: 0 pass, 1 fail, 77 skip (meson's SKIP) - only when
# /dev/fuse is missing, or we are not root and fusermount3 is missing.
#
# Waiting is always for a condition with a bound (the mount appearing in
# /proc/self/mountinfo, a process exiting), never a sleep that hopes a
# race went one way.

set -u
set -o pipefail
export LC_ALL=C

RFS_BIN=${REGIONFS:-}
# For sanitizer builds of the daemon: see asan-daemon.supp and
# tsan-daemon.supp for the one suppression each and why. Harmless for other
# builds. Only the daemon gets them (rfs_mount, test_persist.sh).
RFS_SUPP_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RFS_ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}suppressions=$RFS_SUPP_DIR/asan-daemon.supp"
RFS_TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}suppressions=$RFS_SUPP_DIR/tsan-daemon.supp"
RFS_TMP=
RFS_PID=
RFS_CHILDREN=
RFS_NCHECKS=0

rfs_log_tail()
{
	if [ -n "$RFS_TMP" ] && [ -s "$RFS_TMP/daemon.log" ]; then
		echo "---- daemon log (last 40 lines) ----" >&2
		tail -n 40 "$RFS_TMP/daemon.log" >&2
		echo "------------------------------------" >&2
	fi
}

rfs_fail()
{
	echo "FAIL: $*" >&2
	exit 1
}

rfs_skip()
{
	echo "SKIP: $*"
	exit 77
}

# One passed check: "ok N - what".
rfs_ok()
{
	RFS_NCHECKS=$((RFS_NCHECKS + 1))
	echo "ok $RFS_NCHECKS - $*"
}

rfs_done()
{
	echo "PASS: $RFS_NCHECKS checks"
}

rfs_is_mounted()
{
	awk -v m="$RFS_MNT" '$5 == m { f = 1 } END { exit !f }' \
		/proc/self/mountinfo
}

rfs_unmount_any()
{
	rfs_is_mounted || return 0
	fusermount3 -u "$RFS_MNT" 2>/dev/null ||
		fusermount3 -uz "$RFS_MNT" 2>/dev/null ||
		umount -l "$RFS_MNT" 2>/dev/null
	! rfs_is_mounted
}

# Waits up to $1 seconds for the daemon to exit; sets RFS_DAEMON_RC.
# Returns 1 if it is still running.
rfs_wait_daemon()
{
	local i

	RFS_DAEMON_RC=
	[ -n "$RFS_PID" ] || return 0
	for ((i = 0; i < $1 * 20; i++)); do
		kill -0 "$RFS_PID" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$RFS_PID" 2>/dev/null && return 1
	wait "$RFS_PID"
	RFS_DAEMON_RC=$?
	RFS_PID=
	return 0
}

rfs_cleanup()
{
	local rc=$? pid

	trap - EXIT INT TERM HUP
	for pid in $RFS_CHILDREN; do
		kill -KILL "$pid" 2>/dev/null
	done
	if [ -n "$RFS_TMP" ]; then
		rfs_unmount_any || echo "WARNING: $RFS_MNT still mounted" >&2
	fi
	if [ -n "$RFS_PID" ]; then
		kill -TERM "$RFS_PID" 2>/dev/null
		if ! rfs_wait_daemon 5; then
			kill -KILL "$RFS_PID" 2>/dev/null
			rfs_wait_daemon 5
		fi
	fi
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
		rfs_log_tail
	fi
	if [ -n "$RFS_TMP" ] && [ "${RFS_KEEP:-0}" != 1 ] && ! rfs_is_mounted
	then
		rm -rf "$RFS_TMP"
	elif [ -n "$RFS_TMP" ]; then
		echo "kept $RFS_TMP" >&2
	fi
	exit "$rc"
}

# The regions most tests use.
rfs_write_default_ini()
{
	cat >"$RFS_INI" <<'EOF'
; regions.ini of the end-to-end tests
[defaults]
max_entries = 10000
max_bytes = 256M
max_value_size = 2M
stripes = 4

[main]

[other]

; evictions show up quickly here
[small]
max_entries = 4
stripes = 1

; values over 1 KiB are refused with EFBIG
[tiny]
max_value_size = 1K
EOF
}

# Checks the environment, makes the private directory, installs the trap.
rfs_init()
{
	[ -n "$RFS_BIN" ] || rfs_fail "REGIONFS is not set (run me via meson test)"
	[ -x "$RFS_BIN" ] || rfs_fail "REGIONFS=$RFS_BIN is not executable"
	[ -c /dev/fuse ] || rfs_skip "/dev/fuse is missing"
	if [ "$(id -u)" -ne 0 ] && ! command -v fusermount3 >/dev/null; then
		rfs_skip "not root and no fusermount3"
	fi
	RFS_TMP=$(mktemp -d /tmp/rfs-it.XXXXXX) || rfs_fail "mktemp"
	RFS_MNT=$RFS_TMP/mnt
	RFS_DB=$RFS_TMP/data.db
	RFS_INI=$RFS_TMP/regions.ini
	RFS_LOG=$RFS_TMP/daemon.log
	trap rfs_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
	mkdir "$RFS_MNT" || rfs_fail "mkdir $RFS_MNT"
	rfs_write_default_ini
}

# rfs_mount [daemon options...]: starts the daemon in the foreground (in
# the background of this shell) and waits up to 10 s for the mount.
rfs_mount()
{
	local i rc

	rfs_is_mounted && rfs_fail "$RFS_MNT is already mounted"
	echo "== mount: $RFS_BIN -f -o config=$RFS_INI $* $RFS_DB $RFS_MNT" \
		>>"$RFS_LOG"
	ASAN_OPTIONS=$RFS_ASAN_OPTIONS TSAN_OPTIONS=$RFS_TSAN_OPTIONS \
		"$RFS_BIN" -f -o "config=$RFS_INI" "$@" "$RFS_DB" "$RFS_MNT" \
		</dev/null >>"$RFS_LOG" 2>&1 &
	RFS_PID=$!
	for ((i = 0; i < 200; i++)); do
		rfs_is_mounted && return 0
		if ! kill -0 "$RFS_PID" 2>/dev/null; then
			wait "$RFS_PID"
			rc=$?
			RFS_PID=
			rfs_fail "the daemon exited ($rc) before mounting"
		fi
		sleep 0.05
	done
	rfs_fail "$RFS_MNT not mounted after 10 s"
}

# Unmounts cleanly and requires the daemon to exit 0 within 10 s (a
# sanitizer report or a crash at shutdown fails the test here).
rfs_umount()
{
	fusermount3 -u "$RFS_MNT" || rfs_fail "fusermount3 -u $RFS_MNT failed"
	rfs_wait_daemon 10 || rfs_fail "the daemon did not exit after unmount"
	[ "${RFS_DAEMON_RC:-0}" -eq 0 ] ||
		rfs_fail "the daemon exited with status $RFS_DAEMON_RC"
}

# Kills the daemon with SIGKILL and lazily unmounts the dead mount.
rfs_kill9()
{
	[ -n "$RFS_PID" ] || rfs_fail "no daemon to kill"
	kill -KILL "$RFS_PID"
	rfs_wait_daemon 10 || rfs_fail "the daemon survived SIGKILL"
	fusermount3 -uz "$RFS_MNT" || umount -l "$RFS_MNT" ||
		rfs_fail "cannot unmount the dead mount"
	! rfs_is_mounted || rfs_fail "still mounted after fusermount3 -uz"
}

# rfs_expect_err MESSAGE CMD...: CMD must fail and say MESSAGE.
rfs_expect_err()
{
	local msg=$1 out
	shift
	if out=$("$@" 2>&1); then
		rfs_fail "succeeded, expected '$msg': $*"
	fi
	case $out in
	*"$msg"*) ;;
	*) rfs_fail "expected '$msg' from: $* -- got: $out" ;;
	esac
}

# rfs_write FILE: writes stdin to FILE through the shell (O_TRUNC).
rfs_write()
{
	cat >"$1"
}

# rfs_stat VAR FILE NAME: sets VAR to the value of the line "NAME value"
# of a stats file, which must hold exactly one such line.
rfs_stat()
{
	local _rfs_val # a name no caller passes as VAR
	_rfs_val=$(awk -v n="$3" '$1 == n { print $2; c++ } END { exit c != 1 }' \
		"$2") || rfs_fail "no single '$3' line in $2"
	printf -v "$1" '%s' "$_rfs_val"
}

# rfs_helper VAR NAME: sets VAR to the path of a C helper program.
rfs_helper()
{
	local _rfs_path=${RFS_HELPERS:-}/$2
	[ -x "$_rfs_path" ] || rfs_fail "helper $_rfs_path not built (RFS_HELPERS)"
	printf -v "$1" '%s' "$_rfs_path"
}
