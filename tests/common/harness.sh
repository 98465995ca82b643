# shellcheck shell=bash
#
# harness.sh - private regionfs mounts for end-to-end tests: the one
# harness of tests/integration, tests/consistency, tests/bench and the
# contrib tests.
#
# rfs_init makes a temporary directory $RFS_TMP holding the database
# ($RFS_DB), regions.ini ($RFS_INI, the default below until a test writes
# its own) and one directory per mount, and installs a trap that ALWAYS,
# on success, failure, INT, TERM and HUP: kills the test's helper
# processes, unmounts every mount under $RFS_TMP (fusermount3 -u, then
# -uz, then umount -l), stops every daemon (SIGTERM, then SIGKILL after a
# bounded wait), shows the daemon logs of a failed test and removes the
# directory.
#
# Mounts have names. rfs_mount_as NAME mounts $RFS_TMP/NAME from $RFS_DB
# with $RFS_INI and logs to $RFS_TMP/NAME.log; several may run at once
# (two mounts of one database). rfs_mount is rfs_mount_as mnt: its mount
# point is $RFS_MNT, its log $RFS_LOG and its daemon's pid $RFS_PID. Every
# daemon gets the sanitizer suppressions of this directory
# (asan-daemon.supp, tsan-daemon.supp: one suppression each, and why),
# harmless for other builds, and otherwise this shell's environment.
#
# Environment (set by the meson.build files):
#   REGIONFS         the daemon executable (required)
#   RFS_HELPERS      directories of the C helper programs, ':'-separated
#   RFS_DEFAULT_INI  the shipped regions.ini
#   RFS_KEEP=1       keep the temporary directory (for debugging)
#   RFS_STORE=pg     run against PostgreSQL: rfs_init starts a throwaway
#                    cluster (pg.sh; exit 77 without its binaries),
#                    $RFS_DB is its connection string (rfs_pg_psql runs
#                    SQL on it), and the cleanup stops it
#
# Exit codes: 0 pass, 1 fail, 77 skip (meson's SKIP) - only when
# /dev/fuse is missing or unusable, fusermount3 is missing for a non-root
# user, or the kernel refuses the mount itself (a container without the
# right to mount).
#
# Every wait is for a condition with a bound (the mount appearing in
# /proc/self/mountinfo, a daemon exiting), never a sleep that hopes a race
# went one way.

set -u
set -o pipefail
export LC_ALL=C

RFS_BIN=${REGIONFS:-}
RFS_SUPP_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
RFS_ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}suppressions=$RFS_SUPP_DIR/asan-daemon.supp"
RFS_TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}suppressions=$RFS_SUPP_DIR/tsan-daemon.supp"
RFS_TMP=
# shellcheck disable=SC2034 # RFS_MNT, RFS_LOG and RFS_PID are for the tests
RFS_MNT='' RFS_LOG='' RFS_PID=''
RFS_CHILDREN=
RFS_NCHECKS=0
RFS_DAEMON_RC=
RFS_KILL9_ABORTS=0
declare -A RFS_PIDS=()
declare -A RFS_CONNS=() # FUSE connection (device minor) of each mount

# ---- results ----------------------------------------------------------

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

# ---- mounts and daemons -----------------------------------------------

# rfs_is_mounted [DIR]: DIR (default $RFS_MNT) is a mount point.
rfs_is_mounted()
{
	awk -v m="${1:-$RFS_MNT}" '$5 == m { f = 1 } END { exit !f }' \
		/proc/self/mountinfo
}

# rfs_unmount_dir DIR: unmounts DIR if mounted, by any means; fails only
# if it is still mounted afterwards.
rfs_unmount_dir()
{
	rfs_is_mounted "$1" || return 0
	fusermount3 -u "$1" 2>/dev/null ||
		fusermount3 -uz "$1" 2>/dev/null ||
		umount -l "$1" 2>/dev/null
	! rfs_is_mounted "$1"
}

# Records the pid of daemon NAME ("" when it is gone); RFS_PID mirrors mnt.
rfs_set_pid()
{
	if [ -n "$2" ]; then
		RFS_PIDS[$1]=$2
	else
		unset "RFS_PIDS[$1]"
	fi
	# shellcheck disable=SC2034 # for the tests
	[ "$1" != mnt ] || RFS_PID=$2
}

# rfs_wait_daemon SECONDS [NAME]: waits for daemon NAME (default mnt) to
# exit and sets RFS_DAEMON_RC; returns 1 if it still runs after SECONDS.
rfs_wait_daemon()
{
	local name=${2:-mnt} pid i

	pid=${RFS_PIDS[${2:-mnt}]:-}
	RFS_DAEMON_RC=0
	[ -n "$pid" ] || return 0
	for ((i = 0; i < $1 * 20; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$pid" 2>/dev/null && return 1
	wait "$pid"
	RFS_DAEMON_RC=$?
	rfs_set_pid "$name" ""
	return 0
}

# rfs_alive [NAME]: fails unless daemon NAME (default mnt) still runs (a
# daemon that died under the test is the finding, not the errors it caused).
rfs_alive()
{
	local pid=${RFS_PIDS[${1:-mnt}]:-}

	if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
		rfs_fail "daemon ${1:-mnt} died during the test (see its log below)"
	fi
}

# A mount that failed because the kernel or libfuse refused it (no right
# to mount here) is a skip; anything else the daemon says is a failure.
rfs_mount_refused()
{
	grep -qiE 'fuse: (mount failed|failed to open /dev/fuse|device not found)|fusermount3?: .*(not permitted|permission denied)' "$1"
}

# rfs_mount_as NAME [daemon options...]: starts a daemon in the foreground
# (in the background of this shell) on $RFS_TMP/NAME and waits up to 10 s
# for the mount.
rfs_mount_as()
{
	local name=$1 mnt=$RFS_TMP/$1 log=$RFS_TMP/$1.log i rc pid
	shift

	mkdir -p "$mnt" || rfs_fail "mkdir $mnt"
	rfs_is_mounted "$mnt" && rfs_fail "$mnt is already mounted"
	echo "== mount: $RFS_BIN -f -o config=$RFS_INI $* $RFS_DB $mnt" >>"$log"
	ASAN_OPTIONS=$RFS_ASAN_OPTIONS TSAN_OPTIONS=$RFS_TSAN_OPTIONS \
		"$RFS_BIN" -f -o "config=$RFS_INI" "$@" "$RFS_DB" "$mnt" \
		</dev/null >>"$log" 2>&1 &
	pid=$!
	rfs_set_pid "$name" "$pid"
	for ((i = 0; i < 200; i++)); do
		if rfs_is_mounted "$mnt"; then
			RFS_CONNS[$name]=$(mountpoint -d "$mnt" | cut -d: -f2)
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			wait "$pid"
			rc=$?
			rfs_set_pid "$name" ""
			rfs_mount_refused "$log" &&
				rfs_skip "cannot mount here: $(tail -n 1 "$log")"
			rfs_fail "daemon $name exited ($rc) before mounting"
		fi
		sleep 0.05
	done
	rfs_fail "$mnt not mounted after 10 s"
}

# rfs_mount [daemon options...]: the mount called mnt, on $RFS_MNT.
rfs_mount()
{
	rfs_mount_as mnt "$@"
}

# rfs_umount [NAME]: unmounts cleanly and requires daemon NAME (default
# mnt) to exit 0 within 10 s (a sanitizer report or a crash at shutdown
# fails the test here).
rfs_umount()
{
	local name=${1:-mnt}

	fusermount3 -u "$RFS_TMP/$name" ||
		rfs_fail "fusermount3 -u $RFS_TMP/$name failed"
	rfs_wait_daemon 10 "$name" ||
		rfs_fail "daemon $name did not exit after unmount"
	[ "$RFS_DAEMON_RC" -eq 0 ] ||
		rfs_fail "daemon $name exited with status $RFS_DAEMON_RC"
}

# rfs_fuse_abort NAME: aborts the FUSE connection of mount NAME, as the
# kernel does once a daemon's last thread is gone. A SIGKILL can find the
# entry-invalidation thread (fs/kinval.c) inside the kernel, waiting for a
# directory lock that a request in flight holds while it waits for the
# daemon's answer; that thread cannot die, so the process stays a zombie
# and the connection open until aborted (README: "A killed daemon").
rfs_fuse_abort()
{
	local conn=${RFS_CONNS[$1]:-} d=/sys/fs/fuse/connections

	[ -n "$conn" ] || return 0
	[ -d "$d/$conn" ] || mount -t fusectl fusectl "$d" 2>/dev/null
	if [ -w "$d/$conn/abort" ]; then
		echo "note: daemon $1 stuck after SIGKILL; aborting FUSE connection $conn" >&2
		echo 1 >"$d/$conn/abort"
	fi
}

# rfs_kill9 [NAME]: kills daemon NAME (default mnt) with SIGKILL and
# lazily unmounts the dead mount. A daemon that does not end within 3 s
# gets its connection aborted (rfs_fuse_abort), counted in
# RFS_KILL9_ABORTS.
rfs_kill9()
{
	local name=${1:-mnt} pid=${RFS_PIDS[${1:-mnt}]:-}

	[ -n "$pid" ] || rfs_fail "no daemon $name to kill"
	kill -KILL "$pid"
	if ! rfs_wait_daemon 3 "$name"; then
		RFS_KILL9_ABORTS=$((RFS_KILL9_ABORTS + 1))
		rfs_fuse_abort "$name"
		rfs_wait_daemon 10 "$name" ||
			rfs_fail "daemon $name survived SIGKILL and a connection abort"
	fi
	fusermount3 -uz "$RFS_TMP/$name" || umount -l "$RFS_TMP/$name" ||
		rfs_fail "cannot unmount the dead mount $name"
	! rfs_is_mounted "$RFS_TMP/$name" ||
		rfs_fail "still mounted after fusermount3 -uz"
}

# ---- set-up and clean-up ----------------------------------------------

# Shows each daemon log: from the first sanitizer report if there is one
# (its head is what matters), else the last 40 lines.
rfs_log_tails()
{
	local f n

	for f in "$RFS_TMP"/*.log; do
		[ -s "$f" ] || continue
		n=$(grep -n -m1 -E '(ERROR|WARNING): [A-Za-z]*Sanitizer|runtime error:' "$f" | cut -d: -f1)
		if [ -n "$n" ]; then
			echo "---- $(basename "$f") (sanitizer report) ----" >&2
			sed -n "$n,$((n + 50))p" "$f" >&2
		else
			echo "---- $(basename "$f") (last 40 lines) ----" >&2
			tail -n 40 "$f" >&2
		fi
	done
	echo "------------------------------------" >&2
}

# Every mount point under $RFS_TMP, daemonized mounts included.
rfs_our_mounts()
{
	awk -v t="$RFS_TMP/" 'index($5, t) == 1 { print $5 }' /proc/self/mountinfo
}

rfs_cleanup()
{
	local rc=$? pid name mnt still=0

	trap - EXIT INT TERM HUP
	for pid in $RFS_CHILDREN; do
		kill -KILL "$pid" 2>/dev/null
	done
	if [ -n "$RFS_TMP" ]; then
		for mnt in $(rfs_our_mounts); do
			rfs_unmount_dir "$mnt" ||
				{ echo "WARNING: $mnt still mounted" >&2; still=1; }
		done
	fi
	for name in "${!RFS_PIDS[@]}"; do
		kill -TERM "${RFS_PIDS[$name]}" 2>/dev/null
		if ! rfs_wait_daemon 5 "$name"; then
			kill -KILL "${RFS_PIDS[$name]}" 2>/dev/null
			rfs_wait_daemon 3 "$name" || {
				rfs_fuse_abort "$name"
				rfs_wait_daemon 5 "$name"
			}
		fi
	done
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -n "$RFS_TMP" ]; then
		rfs_log_tails
	fi
	if declare -F rfs_pg_stop >/dev/null; then
		rfs_pg_stop
	fi
	if [ -n "$RFS_TMP" ]; then
		if [ "${RFS_KEEP:-0}" = 1 ] || [ $still = 1 ]; then
			echo "kept $RFS_TMP" >&2
		else
			rm -rf "$RFS_TMP"
		fi
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
	if [ ! -r /dev/fuse ] || [ ! -w /dev/fuse ]; then
		rfs_skip "/dev/fuse is not usable"
	fi
	if [ "$(id -u)" -ne 0 ] && ! command -v fusermount3 >/dev/null; then
		rfs_skip "not root and no fusermount3"
	fi
	RFS_TMP=$(mktemp -d /tmp/rfs-test.XXXXXX) || rfs_fail "mktemp"
	RFS_MNT=$RFS_TMP/mnt
	# shellcheck disable=SC2034 # for the tests
	RFS_LOG=$RFS_TMP/mnt.log
	RFS_DB=$RFS_TMP/data.db
	RFS_INI=$RFS_TMP/regions.ini
	trap rfs_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
	mkdir "$RFS_MNT" || rfs_fail "mkdir $RFS_MNT"
	rfs_write_default_ini
	if rfs_store_is_pg; then
		# shellcheck source=pg.sh
		. "$RFS_SUPP_DIR/pg.sh"
		rfs_pg_start
		RFS_DB=$RFS_PG_CONNINFO
	fi
}

# True when the test runs against PostgreSQL (RFS_STORE=pg).
rfs_store_is_pg()
{
	[ "${RFS_STORE:-sqlite}" = pg ]
}

# ---- checks and tools -------------------------------------------------

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

# rfs_wait_for CMD...: runs CMD every 50 ms until it succeeds, for up to
# 10 s; returns its last status (for what a reload or the feed changes
# soon, not at once).
rfs_wait_for()
{
	local i
	for ((i = 0; i < 200; i++)); do
		"$@" && return 0
		sleep 0.05
	done
	"$@"
}

# rfs_poll_until WHAT CMD...: rfs_wait_for CMD..., and the test fails
# with WHAT if CMD has not succeeded in its 10 s.
rfs_poll_until()
{
	local what=$1
	shift
	rfs_wait_for "$@" || rfs_fail "$what: not visible after 10 s"
}

# rfs_helper VAR NAME: sets VAR to the path of the C helper program NAME,
# found in one of the RFS_HELPERS directories.
rfs_helper()
{
	local _rfs_dirs _rfs_dir
	IFS=: read -r -a _rfs_dirs <<<"${RFS_HELPERS:-}"
	for _rfs_dir in "${_rfs_dirs[@]}"; do
		if [ -x "$_rfs_dir/$2" ]; then
			printf -v "$1" '%s' "$_rfs_dir/$2"
			return 0
		fi
	done
	rfs_fail "helper $2 not built (RFS_HELPERS=${RFS_HELPERS:-})"
}

# rfs_listed DIR NAME: NAME is among the entries readdir returns for DIR.
rfs_listed()
{
	find "$1" -mindepth 1 -maxdepth 1 -name "$2" -printf '%f\n' |
		grep -qxF -- "$2"
}

# rfs_run CMD...: runs CMD in the background and waits for it, returning
# its status. A signal then interrupts the wait at once (bash runs traps
# only between foreground commands), and the cleanup kills CMD.
rfs_run()
{
	local pid rc

	"$@" &
	pid=$!
	RFS_CHILDREN="$RFS_CHILDREN $pid"
	wait "$pid"
	rc=$?
	RFS_CHILDREN=${RFS_CHILDREN/ $pid/}
	return $rc
}

# rfs_sql SQL...: runs statements with the sqlite3 shell on $RFS_DB, as an
# outside writer would (waiting up to 10 s for the daemons' writers).
rfs_sql()
{
	sqlite3 -batch -bail -cmd '.timeout 10000' "$RFS_DB" "$@" ||
		rfs_fail "sqlite3: $*"
}
