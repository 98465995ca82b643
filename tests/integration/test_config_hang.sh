#!/bin/bash
#
# test_config_hang.sh - regions.ini on a file system that stops answering
# (a hung NFS server). Before, the background thread read the file
# itself: a SIGHUP then left it asleep in the kernel, and with it expiry,
# pruning and SIGTERM. Now a loader thread reads it: the daemon stays
# responsive, logs the stall after 5 s, and SIGTERM still unmounts.
#
# The hung file system is a second regionfs mount (cfg) holding
# regions.ini, whose daemon is stopped with SIGSTOP: every lookup in it
# then waits, as on a dead server. It is continued and unmounted at the
# end (the harness kills it with SIGKILL if the test fails first).

# shellcheck source=harness.sh disable=SC2154 # rfs_stat uses printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
rfs_mount_as cfg
cp "$RFS_INI" "$RFS_TMP/cfg/main/regions.ini" || rfs_fail "regions.ini into cfg"
RFS_INI=$RFS_TMP/cfg/main/regions.ini
rfs_mount
M=$RFS_MNT
[ -d "$M/main" ] || rfs_fail "the mount did not load regions.ini from cfg"

kill -STOP "${RFS_PIDS[cfg]}"
# kill returns before every thread of cfg has stopped; one still running
# could answer the reload's lookup. Wait until all of them are stopped.
all_stopped()
{
	local st
	for st in /proc/"$1"/task/*/stat; do
		[ "$(sed 's/^.*) //' "$st" 2>/dev/null | cut -d' ' -f1)" = T ] || return 1
	done
}
for ((i = 0; i < 200; i++)); do
	all_stopped "${RFS_PIDS[cfg]}" && break
	sleep 0.05
done
all_stopped "${RFS_PIDS[cfg]}" ||
	{ kill -CONT "${RFS_PIDS[cfg]}"; rfs_fail "SIGSTOP did not stop every thread of cfg"; }
kill -HUP "$RFS_PID"
for ((i = 0; i < 300; i++)); do # the stall is logged after 5 s
	grep -q "has taken .* ms so far" "$RFS_LOG" && break
	sleep 0.05
done
grep -q "has taken .* ms so far" "$RFS_LOG" ||
	{ kill -CONT "${RFS_PIDS[cfg]}"; rfs_fail "the stalled read is not logged"; }
rfs_stat gen "$M/.regionfs/config" generation
[ "$gen" = 1 ] || rfs_fail "generation $gen while the read hangs"
echo v >"$M/main/k" && [ "$(cat "$M/main/k")" = v ] ||
	{ kill -CONT "${RFS_PIDS[cfg]}"; rfs_fail "the mount stopped working"; }
rfs_ok "a reload hanging in the kernel is logged; the mount keeps working"

# SIGTERM must unmount at once. The process then exits (its stuck loader
# thread dies with it), except under LeakSanitizer, whose exit-time scan
# must stop every thread and waits for the one asleep in the hung file
# system: so the exit is checked after cfg is continued.
kill -TERM "$RFS_PID"
for ((i = 0; i < 200; i++)); do
	rfs_is_mounted || break
	sleep 0.05
done
if rfs_is_mounted; then
	kill -CONT "${RFS_PIDS[cfg]}"
	rfs_fail "SIGTERM did not unmount while the config read hangs"
fi
kill -CONT "${RFS_PIDS[cfg]}"
rfs_wait_daemon 20 || rfs_fail "the daemon did not exit after SIGTERM"
[ "$RFS_DAEMON_RC" = 0 ] || rfs_fail "the daemon exited with $RFS_DAEMON_RC"
rfs_ok "SIGTERM unmounts at once while the config read hangs, and the daemon exits 0"

rfs_umount cfg
rfs_done
