# shellcheck shell=bash
#
# harness.sh - private regionfs mounts for the consistency tests.
#
# Sourced by tests/consistency/*.sh. Unlike tests/integration/harness.sh it
# runs SEVERAL daemons at once (two mounts of one database file), each
# known by a name: cons_mount NAME mounts $CONS_TMP/NAME from $CONS_DB with
# $CONS_INI and logs to $CONS_TMP/NAME.log.
#
# cons_init makes the temporary directory and installs a trap that ALWAYS,
# on success, failure, INT, TERM and HUP: kills the test's helper
# processes, unmounts every mount (fusermount3 -u, then -uz, then
# umount -l), stops every daemon (SIGTERM, then SIGKILL after a bounded
# wait) and removes the directory (kept with CONS_KEEP=1).
#
# Environment (set by tests/consistency/meson.build):
#   REGIONFS       the daemon executable (required)
#   CONS_BIN       directory of the C programs (torture, cons_wait, ...)
#   CONS_KEEP=1    keep the temporary directory
#
# Exit codes: 0 pass, 1 fail, 77 skip - only when /dev/fuse is missing or
# unusable, fusermount3 is missing for a non-root user, or the kernel
# refuses the mount itself (a container without the right to mount).
#
# Every wait is for a condition with a bound (the mount appearing in
# /proc/self/mountinfo, a daemon exiting); no sleep hopes a race went one
# way.

set -u
set -o pipefail
export LC_ALL=C

CONS_TMP=
CONS_NCHECKS=0
CONS_CHILDREN=
declare -A CONS_PID=()

cons_fail()
{
	echo "FAIL: $*" >&2
	exit 1
}

cons_skip()
{
	echo "SKIP: $*"
	exit 77
}

cons_ok()
{
	CONS_NCHECKS=$((CONS_NCHECKS + 1))
	echo "ok $CONS_NCHECKS - $*"
}

cons_done()
{
	echo "PASS: $CONS_NCHECKS checks"
}

# cons_is_mounted DIR
cons_is_mounted()
{
	awk -v m="$1" '$5 == m { f = 1 } END { exit !f }' /proc/self/mountinfo
}

cons_unmount_dir()
{
	cons_is_mounted "$1" || return 0
	fusermount3 -u "$1" 2>/dev/null ||
		fusermount3 -uz "$1" 2>/dev/null ||
		umount -l "$1" 2>/dev/null
	! cons_is_mounted "$1"
}

# cons_wait_pid NAME SECONDS: waits for daemon NAME to exit and sets
# CONS_DAEMON_RC; returns 1 if it is still running after SECONDS.
cons_wait_pid()
{
	local pid=${CONS_PID[$1]:-} i

	CONS_DAEMON_RC=0
	[ -n "$pid" ] || return 0
	for ((i = 0; i < $2 * 20; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$pid" 2>/dev/null && return 1
	wait "$pid"
	CONS_DAEMON_RC=$?
	unset "CONS_PID[$1]"
	return 0
}

# Shows each daemon log: from the first sanitizer report if there is one
# (its head is what matters), else the last 30 lines.
cons_log_tails()
{
	local f n

	for f in "$CONS_TMP"/*.log; do
		[ -s "$f" ] || continue
		n=$(grep -n -m1 -E '(ERROR|WARNING): [A-Za-z]*Sanitizer|runtime error:' "$f" | cut -d: -f1)
		if [ -n "$n" ]; then
			echo "---- $(basename "$f") (sanitizer report) ----" >&2
			sed -n "$n,$((n + 50))p" "$f" >&2
		else
			echo "---- $(basename "$f") (last 30 lines) ----" >&2
			tail -n 30 "$f" >&2
		fi
	done
}

# cons_alive NAME: fails unless daemon NAME is still running (a daemon
# that died under the test is the finding, not the errors it caused).
cons_alive()
{
	local pid=${CONS_PID[$1]:-}

	if [ -z "$pid" ] || ! kill -0 "$pid" 2>/dev/null; then
		cons_fail "daemon $1 died during the test (see its log below)"
	fi
}

cons_cleanup()
{
	local rc=$? pid name still=0

	trap - EXIT INT TERM HUP
	for pid in $CONS_CHILDREN; do
		kill -KILL "$pid" 2>/dev/null
	done
	for name in "${!CONS_PID[@]}"; do
		cons_unmount_dir "$CONS_TMP/$name" ||
			{ echo "WARNING: $CONS_TMP/$name still mounted" >&2; still=1; }
		kill -TERM "${CONS_PID[$name]}" 2>/dev/null
		if ! cons_wait_pid "$name" 5; then
			kill -KILL "${CONS_PID[$name]}" 2>/dev/null
			cons_wait_pid "$name" 5
		fi
	done
	[ "$rc" -ne 0 ] && [ "$rc" -ne 77 ] && [ -n "$CONS_TMP" ] && cons_log_tails
	if [ -n "$CONS_TMP" ]; then
		if [ "${CONS_KEEP:-0}" = 1 ] || [ $still = 1 ]; then
			echo "kept $CONS_TMP" >&2
		else
			rm -rf "$CONS_TMP"
		fi
	fi
	exit "$rc"
}

# Checks the environment, makes the private directory, installs the trap.
cons_init()
{
	[ -n "${REGIONFS:-}" ] || cons_fail "REGIONFS is not set (run me via meson test)"
	[ -x "$REGIONFS" ] || cons_fail "REGIONFS=$REGIONFS is not executable"
	[ -c /dev/fuse ] || cons_skip "/dev/fuse is missing"
	if [ ! -r /dev/fuse ] || [ ! -w /dev/fuse ]; then
		cons_skip "/dev/fuse is not usable"
	fi
	if [ "$(id -u)" -ne 0 ] && ! command -v fusermount3 >/dev/null; then
		cons_skip "not root and no fusermount3"
	fi
	CONS_TMP=$(mktemp -d /tmp/rfs-cons.XXXXXX) || cons_fail "mktemp"
	CONS_DB=$CONS_TMP/data.db
	CONS_INI=$CONS_TMP/regions.ini
	trap cons_cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	trap 'exit 129' HUP
}

# cons_prog VAR NAME: VAR gets the path of the C program NAME.
cons_prog()
{
	local p=${CONS_BIN:-}/$2

	[ -x "$p" ] || cons_fail "program $p not built (CONS_BIN)"
	printf -v "$1" '%s' "$p"
}

# A mount that failed because the kernel or libfuse refused it (no right
# to mount here) is a skip; anything else the daemon says is a failure.
cons_mount_refused()
{
	grep -qiE 'fuse: (mount failed|failed to open /dev/fuse|device not found)|fusermount3?: .*(not permitted|permission denied)' "$1"
}

# cons_mount NAME [daemon options...]: starts the daemon in the foreground
# (in the background of this shell) on $CONS_TMP/NAME and waits up to 10 s
# for the mount. The daemon inherits this shell's environment.
cons_mount()
{
	local name=$1 mnt=$CONS_TMP/$1 log=$CONS_TMP/$1.log i rc
	shift

	mkdir -p "$mnt" || cons_fail "mkdir $mnt"
	cons_is_mounted "$mnt" && cons_fail "$mnt is already mounted"
	echo "== $REGIONFS -f -o config=$CONS_INI $* $CONS_DB $mnt" >>"$log"
	"$REGIONFS" -f -o "config=$CONS_INI" "$@" "$CONS_DB" "$mnt" \
		</dev/null >>"$log" 2>&1 &
	CONS_PID[$name]=$!
	for ((i = 0; i < 200; i++)); do
		cons_is_mounted "$mnt" && return 0
		if ! kill -0 "${CONS_PID[$name]}" 2>/dev/null; then
			wait "${CONS_PID[$name]}"
			rc=$?
			unset "CONS_PID[$name]"
			cons_mount_refused "$log" &&
				cons_skip "cannot mount here: $(tail -n 1 "$log")"
			cons_fail "daemon $name exited ($rc) before mounting"
		fi
		sleep 0.05
	done
	cons_fail "$mnt not mounted after 10 s"
}

# cons_umount NAME: unmounts cleanly and requires the daemon to exit 0
# within 10 s (a sanitizer report at shutdown fails the test here).
cons_umount()
{
	local mnt=$CONS_TMP/$1

	fusermount3 -u "$mnt" || cons_fail "fusermount3 -u $mnt failed"
	cons_wait_pid "$1" 10 || cons_fail "daemon $1 did not exit after unmount"
	[ "$CONS_DAEMON_RC" -eq 0 ] ||
		cons_fail "daemon $1 exited with status $CONS_DAEMON_RC"
}

# cons_stat VAR FILE NAME: VAR gets the value of the single "NAME value"
# line of a stats file.
cons_stat()
{
	local v

	v=$(awk -v n="$3" '$1 == n { print $2; c++ } END { exit c != 1 }' \
		"$2") || cons_fail "no single '$3' line in $2"
	printf -v "$1" '%s' "$v"
}

# cons_listed DIR NAME: NAME is among the entries readdir returns for DIR.
cons_listed()
{
	find "$1" -mindepth 1 -maxdepth 1 -name "$2" -printf '%f\n' |
		grep -qxF -- "$2"
}

# cons_run CMD...: runs CMD in the background and waits for it, returning
# its status. A signal then interrupts the wait at once (bash runs traps
# only between foreground commands), and the cleanup kills CMD.
cons_run()
{
	local pid rc

	"$@" &
	pid=$!
	CONS_CHILDREN="$CONS_CHILDREN $pid"
	wait "$pid"
	rc=$?
	CONS_CHILDREN=${CONS_CHILDREN/ $pid/}
	return $rc
}

# cons_sql SQL...: runs statements with the sqlite3 shell on $CONS_DB, as
# an outside writer would (waiting up to 10 s for the daemons' writers).
cons_sql()
{
	sqlite3 -batch -bail -cmd '.timeout 10000' "$CONS_DB" "$@" ||
		cons_fail "sqlite3: $*"
}
