#!/bin/bash
#
# test_outside_two_mounts.sh - two regionfs daemons mounted on one database
# file: a write through one mount shows through the other within the
# stated delay (CONS_FEED_BOUND_MS), 50 writes in each direction, each to
# a key the other mount had cached (twomounts.c explains the rounds).
# Then both mounts unmount cleanly and a third mount sees the last values.
# Last, the same A->B rounds with B mounted read-only (-o ro: zero-request
# opens, the kernel serves B's reads from its page cache with no OPEN):
# every read through B is exactly the old or the new value, the new one
# within the bound.

# rfs_helper and rfs_stat set the variables they are given (printf -v):
# shellcheck disable=SC2154
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

bound_ms=${CONS_FEED_BOUND_MS:-100}

rfs_init
rfs_helper twomounts twomounts
cat >"$RFS_INI" <<'EOF2'
[ow]
max_entries = 100
max_value_size = 64K
EOF2
rfs_mount_as a
rfs_mount_as b
A=$RFS_TMP/a
B=$RFS_TMP/b

rfs_run "$twomounts" -a "$A/ow" -b "$B/ow" -n 50 -k 4 -t 2000 -B "$bound_ms" ||
	rfs_fail "twomounts"
rfs_ok "50 writes each way through one mount show through the other within $bound_ms ms"

for m in a b; do
	rfs_stat inv "$RFS_TMP/$m/.regionfs/regions/ow/stats" invalidations_outside
	rfs_stat lag "$RFS_TMP/$m/.regionfs/stats" feed_lag_ms
	echo "mount $m: invalidations_outside=$inv feed_lag_ms=$lag"
	[ "$inv" -ge 50 ] || rfs_fail "mount $m counted $inv outside invalidations, want >= 50"
done
rfs_ok "each mount counts the other's writes as outside invalidations"

# the last value of every key, as both mounts see it
for k in t00 t01 t02 t03; do
	[ "$(cat "$A/ow/$k")" = "$(cat "$B/ow/$k")" ] || rfs_fail "$k differs between the mounts"
	printf -v "last_$k" '%s' "$(cat "$A/ow/$k")"
done
rfs_umount a
rfs_umount b
rfs_mount_as c
for k in t00 t01 t02 t03; do
	want=last_$k
	[ "$(cat "$RFS_TMP/c/ow/$k")" = "${!want}" ] || rfs_fail "$k lost after remount"
done
rfs_ok "after both unmount, a new mount reads the last values"
rfs_umount c

rfs_mount_as a
rfs_mount_as b -o ro
rfs_run "$twomounts" -a "$A/ow" -b "$B/ow" -n 50 -k 4 -t 2000 -B "$bound_ms" -1 ||
	rfs_fail "twomounts to a read-only mount"
rfs_stat e "$B/.regionfs/stats" errors
[ "$e" = 0 ] || rfs_fail "the read-only mount answered $e requests with an error"
rfs_umount a
rfs_umount b
rfs_ok "50 writes through one mount show through a read-only mount within $bound_ms ms"
rfs_done
