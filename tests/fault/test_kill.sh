#!/bin/bash
#
# test_kill.sh - SIGKILL of the daemon in the middle of renames and of
# unlinks/re-creates, many rounds. Each round: mount, start killops (one
# process renaming, or unlinking and re-creating, 32 keys at random and
# logging each operation before it starts and once acknowledged), wait
# until it has acknowledged a number of operations that changes from
# round to round, kill -9 the daemon, mount again and check: every key
# is exactly as its last acknowledged operation left it, the one
# operation in flight gave the old or the new state, no value is lost,
# torn or doubled and no stray name exists. The next round starts from
# that state. Where the kill lands is left to chance; what is checked is
# not.
#
# A daemon killed while its entry-invalidation thread (fs/kinval.c) waits
# in the kernel for a directory lock that a request to it holds cannot end
# until its FUSE connection is aborted: rfs_kill9 then aborts it, as an
# operator must (README), and counts it.
#
# RFS_FAULT_ROUNDS (default 12) rounds per mode.

# shellcheck source=../common/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
rfs_helper KILLOPS killops
ROUNDS=${RFS_FAULT_ROUNDS:-12}
NKEYS=32
LOG=$RFS_TMP/ops.log

# wait_acks N PID: until the log holds N acknowledged operations (or the
# helper ended: that is a failure, the daemon still runs).
wait_acks()
{
	local i

	for ((i = 0; i < 6000; i++)); do
		[ "$(grep -c '^A' "$LOG" 2>/dev/null)" -ge "$1" ] && return 0
		kill -0 "$2" 2>/dev/null || rfs_fail "killops ended early: $(cat "$RFS_TMP/run.out")"
		sleep 0.01
	done
	rfs_fail "killops did not reach $1 operations in 60 s"
}

for mode in rename unlink; do
	dir=$RFS_MNT/main
	[ $mode = rename ] || dir=$RFS_MNT/other
	rfs_mount
	"$KILLOPS" init "$dir" "$mode" $NKEYS ||
		rfs_fail "killops init $mode"
	old=0 new=0 empty=0
	for ((r = 1; r <= ROUNDS; r++)); do
		# Empty, not absent: wait_acks must not count the last run's
		# acknowledgements before this run has truncated the log.
		: >"$LOG"
		"$KILLOPS" run "$dir" "$mode" $NKEYS "$LOG" "$r" \
			>"$RFS_TMP/run.out" 2>&1 &
		op=$!
		RFS_CHILDREN="$RFS_CHILDREN $op"
		wait_acks $((1 + (r * 37) % 200)) "$op"
		rfs_kill9
		wait "$op"
		RFS_CHILDREN=${RFS_CHILDREN/ $op/}
		rfs_mount
		out=$("$KILLOPS" check "$dir" "$mode" $NKEYS "$LOG" 2>&1) ||
			rfs_fail "$mode round $r: $out"
		case $out in
		*"in flight: old"*) old=$((old + 1)) ;;
		*"in flight: new"*) new=$((new + 1)) ;;
		*"in flight: empty"*) empty=$((empty + 1)) ;;
		esac
	done
	rfs_umount
	rfs_ok "$mode: $ROUNDS rounds of kill -9, every acknowledged operation kept, the one in flight: old $old, new $new, empty re-create $empty; daemons whose connection had to be aborted so far: $RFS_KILL9_ABORTS"
done
rfs_done
