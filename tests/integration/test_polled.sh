#!/bin/bash
#
# test_polled.sh - the polled session loop (-o poll_us, fs/loop.c): the
# concurrent readers and writers of test_concurrent.sh (no torn value, no
# stale read after a close() returned, the last commit wins) with one
# leader polling the device and the other workers handed the lead; an
# idle polled mount spends no CPU (it polls only for poll_us after a
# request); bad values are refused at start-up; SIGTERM ends a polled
# daemon (its workers are not cancelled: they leave by themselves).

# shellcheck source=../common/harness.sh disable=SC2154 # rfs_stat/rfs_helper use printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
rfs_helper CONCURRENT concurrent
cat >>"$RFS_INI" <<'INI'

[churn]
max_entries = 2
stripes = 1
ttl = 1s
INI

for bad in abc -1 100001 12x; do
	rfs_expect_err "bad poll_us=$bad" "$RFS_BIN" -f -o "config=$RFS_INI" \
		-o "poll_us=$bad" "$RFS_DB" "$RFS_MNT"
done
rfs_is_mounted "$RFS_MNT" && rfs_fail "a refused start mounted"
rfs_ok "poll_us=abc, -1, 100001, 12x refused at start-up"

# The daemon's CPU time (user + system) in clock ticks.
cpu_ticks()
{
	awk '{ print $14 + $15 }' "/proc/$RFS_PID/stat"
}

# A long poll (100 ms), so that any polling left running while idle
# would show.
rfs_mount -o poll_us=100000
"$CONCURRENT" "$RFS_MNT/main" 4 2 3 120 || rfs_fail "concurrent on main"
rfs_ok "2 writers, 3 readers, 4 keys on main, polled"
"$CONCURRENT" "$RFS_MNT/churn" 6 3 2 60 || rfs_fail "concurrent on churn"
rfs_ok "3 writers, 2 readers, 6 keys on a region of 2 entries, polled"
for i in $(seq 1 50); do
	echo "v$i" >"$RFS_MNT/main/k$i" || rfs_fail "write k$i"
done
for i in $(seq 1 50); do
	[ "$(cat "$RFS_MNT/main/k$i")" = "v$i" ] || rfs_fail "read k$i"
done
rfs_ok "50 writes and reads back in one thread, polled"
sleep 0.5 # the last poll (100 ms) is over
t0=$(cpu_ticks)
sleep 2
t1=$(cpu_ticks)
# Polling for 2 s would be 200 ticks (at USER_HZ 100); an idle daemon
# spends next to none. Half a second is far from both.
[ $((t1 - t0)) -lt 50 ] ||
	rfs_fail "an idle polled mount used $((t1 - t0)) ticks of CPU in 2 s"
rfs_ok "idle polled mount: $((t1 - t0)) ticks of CPU in 2 s"
rfs_umount
rfs_ok "clean unmount, daemon exited 0"

# SIGTERM while the leader sleeps in poll() and the followers on their
# semaphore: polled workers are not cancelled, they leave by themselves.
rfs_mount -o poll_us=1000
echo v >"$RFS_MNT/main/t" || rfs_fail "write main/t"
sleep 0.2 # the poll is over: the leader sleeps
kill -TERM "$RFS_PID"
rfs_wait_daemon 20 || rfs_fail "a polled daemon did not exit on SIGTERM"
[ "$RFS_DAEMON_RC" = 0 ] || rfs_fail "the daemon exited with $RFS_DAEMON_RC"
rfs_unmount_dir "$RFS_MNT"
rfs_ok "SIGTERM: a polled daemon exits 0"
rfs_done
