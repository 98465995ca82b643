#!/bin/bash
#
# test_outside_two_mounts.sh - two regionfs daemons mounted on one database
# file: a write through one mount shows through the other within the
# stated delay (CONS_FEED_BOUND_MS), 50 writes in each direction, each to
# a key the other mount had cached (twomounts.c explains the rounds).
# Then both mounts unmount cleanly and a third mount sees the last values.

# cons_prog and cons_stat set the variables they are given (printf -v):
# shellcheck disable=SC2154
. "$(dirname "${BASH_SOURCE[0]}")/harness.sh"

bound_ms=${CONS_FEED_BOUND_MS:-100}

cons_init
cons_prog twomounts twomounts
cat >"$CONS_INI" <<'EOF2'
[ow]
max_entries = 100
max_value_size = 64K
EOF2
cons_mount a
cons_mount b
A=$CONS_TMP/a
B=$CONS_TMP/b

cons_run "$twomounts" -a "$A/ow" -b "$B/ow" -n 50 -k 4 -t 2000 -B "$bound_ms" ||
	cons_fail "twomounts"
cons_ok "50 writes each way through one mount show through the other within $bound_ms ms"

for m in a b; do
	cons_stat inv "$CONS_TMP/$m/.regionfs/regions/ow/stats" invalidations_outside
	cons_stat lag "$CONS_TMP/$m/.regionfs/stats" feed_lag_ms
	echo "mount $m: invalidations_outside=$inv feed_lag_ms=$lag"
	[ "$inv" -ge 50 ] || cons_fail "mount $m counted $inv outside invalidations, want >= 50"
done
cons_ok "each mount counts the other's writes as outside invalidations"

# the last value of every key, as both mounts see it
for k in t00 t01 t02 t03; do
	[ "$(cat "$A/ow/$k")" = "$(cat "$B/ow/$k")" ] || cons_fail "$k differs between the mounts"
	printf -v "last_$k" '%s' "$(cat "$A/ow/$k")"
done
cons_umount a
cons_umount b
cons_mount c
for k in t00 t01 t02 t03; do
	want=last_$k
	[ "$(cat "$CONS_TMP/c/ow/$k")" = "${!want}" ] || cons_fail "$k lost after remount"
done
cons_ok "after both unmount, a new mount reads the last values"
cons_umount c
cons_done
