#!/bin/bash
#
# test_sigterm.sh - SIGTERM (systemctl stop/restart) while a writer has
# written half of a new value. Before, the daemon committed the half over
# the intact old value at once, and the writer got ENOTCONN. A value is
# committed only by its writer's close() or fsync(), so now on SIGTERM
# the daemon refuses new opens of keys (ESHUTDOWN), waits up to
# shutdown_grace seconds for files open for writing to be closed (their
# close commits as usual), then unmounts and drops what is still
# uncommitted, saying so in the log; the key keeps its old value.

# shellcheck source=harness.sh disable=SC2154 # rfs_helper uses printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"
# shellcheck source=../common/halfwriter.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/halfwriter.sh"

rfs_init
M=$RFS_MNT
hw_setup 50000

wait_log()
{
	local i
	for ((i = 0; i < 200; i++)); do
		grep -q "$1" "$RFS_LOG" && return 0
		sleep 0.05
	done
	rfs_fail "the log never said '$1'"
}

# ---- the writer closes within the grace period: its value is committed --

rfs_mount -o shutdown_grace=60
echo old >"$M/main/k" || rfs_fail "write main/k"
echo other >"$M/main/other" || rfs_fail "write main/other"
hw_start "$M/main/k"
kill -TERM "$RFS_PID"
wait_log "waiting up to 60 s for 1 file open for writing"
rfs_is_mounted || rfs_fail "unmounted while a writer was open"
rfs_expect_err "Cannot send after transport endpoint shutdown" cat "$M/main/other"
rfs_expect_err "Cannot send after transport endpoint shutdown" \
	sh -c "echo new >'$M/main/new'"
rfs_ok "SIGTERM with an open writer: new opens get ESHUTDOWN, the mount stays"
hw_finish
[ "$HWLINE" = "closed 0" ] || rfs_fail "halfwriter in the grace period: '$HWLINE'"
rfs_wait_daemon 20 || rfs_fail "the daemon did not exit after the writer closed"
[ "$RFS_DAEMON_RC" = 0 ] || rfs_fail "the daemon exited with $RFS_DAEMON_RC"
rfs_ok "the writer's close during the grace period commits; then the daemon exits 0"
rfs_unmount_dir "$RFS_MNT"
rfs_mount
cmp "$M/main/k" "$W/full" || rfs_fail "main/k is not the value closed in the grace period"
rfs_ok "after a restart main/k holds the whole value"

# ---- the writer does not close in time: its half is dropped --------------

echo old >"$M/main/k" || rfs_fail "rewrite main/k"
rfs_umount
rfs_mount -o shutdown_grace=1
hw_start "$M/main/k"
kill -TERM "$RFS_PID"
rfs_wait_daemon 20 || rfs_fail "the daemon did not exit after the grace period"
[ "$RFS_DAEMON_RC" = 0 ] || rfs_fail "the daemon exited with $RFS_DAEMON_RC"
hw_finish
case $HWLINE in
"write "* | "closed "[!0]*) ;;
*) rfs_fail "the writer after the grace period: '$HWLINE', expected an error" ;;
esac
rfs_unmount_dir "$RFS_MNT"
grep -q "shutdown: main/k was still open for writing: its 50000 uncommitted bytes are dropped" \
	"$RFS_LOG" || rfs_fail "the dropped data is not logged"
grep -q "shutdown: dropped the uncommitted data of 1 open file (50000 bytes)" \
	"$RFS_LOG" || rfs_fail "the dropped data is not summed up"
rfs_mount
[ "$(cat "$M/main/k")" = old ] ||
	rfs_fail "main/k is not its old value (half a write was committed?)"
rfs_umount
rfs_ok "after the grace period the half-written value is dropped and logged; the old value stays"
rfs_done
