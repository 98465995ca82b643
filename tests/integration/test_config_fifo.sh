#!/bin/bash
#
# test_config_fifo.sh - regions.ini that is not a regular file. Before, a
# FIFO in its place blocked the reader in open(): --check-config hung, and
# the running daemon's background thread hung with it, so expiry stopped
# and SIGTERM was ignored. Now a file that is not a regular file is refused
# (--check-config says so and exits 1; a reload keeps the old
# configuration and says why in .regionfs/config), and the configuration
# is read on a thread of its own, so even a read that blocks for good (a
# hung network file system) never stops sweeps or shutdown.

# shellcheck source=harness.sh disable=SC2154 # rfs_stat uses printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
M=$RFS_MNT
mkfifo "$RFS_TMP/fifo.ini" || rfs_fail "mkfifo"

rc=0
out=$(timeout 10 "$RFS_BIN" --check-config "$RFS_TMP/fifo.ini" 2>&1) || rc=$?
[ "$rc" -ne 124 ] || rfs_fail "--check-config on a FIFO hangs"
[ "$rc" -eq 1 ] || rfs_fail "--check-config on a FIFO exited $rc: $out"
case $out in
*"not a regular file"*) ;;
*) rfs_fail "--check-config on a FIFO says: $out" ;;
esac
rfs_ok "--check-config on a FIFO: refused at once ($out)"

rfs_mount
mv "$RFS_TMP/fifo.ini" "$RFS_INI" || rfs_fail "put the FIFO in place"
kill -HUP "$RFS_PID"
rfs_wait_for grep -q "not a regular file" "$M/.regionfs/config" ||
	rfs_fail "the reload of a FIFO is not refused: $(cat "$M/.regionfs/config")"
rfs_stat v "$M/.regionfs/config" last_reload
[ "$v" = error ] || rfs_fail "last_reload is $v"
[ -d "$M/main" ] || rfs_fail "the old configuration is gone"
rfs_ok "a reload of a FIFO is refused; the old configuration keeps running"

kill -TERM "$RFS_PID"
rfs_wait_daemon 10 || rfs_fail "SIGTERM did not stop the daemon in 10 s"
[ "$RFS_DAEMON_RC" = 0 ] || rfs_fail "the daemon exited with $RFS_DAEMON_RC"
rfs_unmount_dir "$RFS_MNT"
rfs_ok "SIGTERM still works"
rfs_done
