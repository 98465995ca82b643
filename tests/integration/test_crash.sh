#!/bin/bash
#
# test_crash.sh - kill -9 of the daemon mid-write loses no value whose
# close() returned 0.
#
# crashwriter writes values in a loop and logs each op after its close()
# returned 0. Once it has logged enough ops (a progress condition, bounded
# by a deadline), the daemon is killed with SIGKILL while the writer is
# still writing, the dead mount is lazily unmounted, the daemon remounted,
# and crashwriter verify checks every logged value. Two rounds: the second
# crashes a database that already went through one.

# shellcheck source=../common/harness.sh disable=SC2154 # rfs_stat/rfs_helper use printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
rfs_helper CRASHWRITER crashwriter

crash_round()
{
	local region=$1 after=$2 log=$RFS_TMP/crash-$1.log wpid i rc

	rfs_mount
	"$CRASHWRITER" write "$RFS_MNT/$region" "$log" 64 10000000 &
	wpid=$!
	RFS_CHILDREN="$RFS_CHILDREN $wpid"
	for ((i = 0; i < 1200; i++)); do
		[ "$(grep -c '^ok' "$log" 2>/dev/null)" -ge "$after" ] && break
		kill -0 "$wpid" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$wpid" 2>/dev/null || rfs_fail "the writer stopped early: $(tail -1 "$log")"
	[ "$(grep -c '^ok' "$log")" -ge "$after" ] ||
		rfs_fail "the writer logged fewer than $after ops in 60 s"
	rfs_kill9
	for ((i = 0; i < 400; i++)); do
		kill -0 "$wpid" 2>/dev/null || break
		sleep 0.05
	done
	kill -0 "$wpid" 2>/dev/null && rfs_fail "the writer hangs after the kill"
	wait "$wpid"
	rc=$?
	[ "$rc" = 0 ] || rfs_fail "the writer exited $rc"
	grep -q '^fail ' "$log" || rfs_fail "the writer did not see the crash"
	rfs_ok "$region: daemon killed after $(grep -c '^ok' "$log") committed" \
		"writes ($(grep '^fail' "$log"))"
	rfs_mount
	"$CRASHWRITER" verify "$RFS_MNT/$region" "$log" 64 ||
		rfs_fail "committed values lost after kill -9"
	rfs_umount
	rfs_ok "$region: every value whose close() returned 0 survived"
}

crash_round main 300
crash_round other 500
rfs_mount
"$CRASHWRITER" verify "$RFS_MNT/main" "$RFS_TMP/crash-main.log" 64 ||
	rfs_fail "the second crash lost values of the first round"
rfs_umount
rfs_ok "the first round's values survived the second crash"
rfs_done
