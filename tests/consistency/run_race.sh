#!/bin/bash
#
# run_race.sh [race options...] - mounts a private regionfs and runs the
# race program (race.c): two threads released together change one name
# (close vs unlink, close vs rename, open/create vs unlink, rename chains,
# rename onto a file being written, truncate(2) vs close), and every round
# must end in an outcome some serial order of the two gives.
#
# It also gets regions.ini (-c) and the daemon's pid (-p, for SIGHUP), so
# the close_reload scenario can take the region away with a reload while a
# close() commits, and the database (-D), so close_outside can write the
# key as an outside writer while a close() commits (-N rounds each).
#
# The rounds per scenario are race's -n (meson.build passes a few hundred,
# seconds in all). For a long run, thousands per scenario:
#   REGIONFS=build/fs/regionfs RFS_HELPERS=build/tests/consistency \
#       tests/consistency/run_race.sh -n 5000
# or, from a build directory:
#   RACE_ROUNDS=5000 RACE_SLOW_ROUNDS=500 meson test -C build race

# rfs_helper sets the variable it is given (printf -v):
# shellcheck disable=SC2154
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
rfs_helper race race
cat >"$RFS_INI" <<'INI'
[race]
max_entries = 64
max_value_size = 4K
stripes = 2
INI
rfs_mount_as a
M=$RFS_TMP/a
args=(-c "$RFS_INI" -p "${RFS_PIDS[a]}" -D "$RFS_DB" "$@")
if [ -n "${RACE_ROUNDS:-}" ]; then
	args+=(-n "$RACE_ROUNDS")
fi
if [ -n "${RACE_SLOW_ROUNDS:-}" ]; then
	args+=(-N "$RACE_SLOW_ROUNDS")
fi
out=$RFS_TMP/race.out
rfs_run "$race" -d "$M/race" "${args[@]}" >"$out"
rc=$?
cat "$out"
rfs_alive a
grep -q '^race: ' "$out" || rfs_fail "race printed no summary (exit $rc)"
case $rc in
0) rfs_ok "every round ended in a serial outcome" ;;
1) rfs_fail "rounds ended in outcomes no serial order gives (see above)" ;;
*) rfs_fail "race failed with errors (exit $rc)" ;;
esac
rfs_umount a
rfs_ok "clean unmount"
rfs_done
