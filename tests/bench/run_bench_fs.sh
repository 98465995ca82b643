#!/bin/bash
#
# run_bench_fs.sh - mounts a private regionfs instance and runs bench_fs on
# it against a private tmpfs, then always unmounts both (the harness of the
# end-to-end tests does the regionfs side, bench_fs its own tmpfs).
#
#   tests/bench/run_bench_fs.sh [BUILDDIR] [bench_fs options...]
#
# BUILDDIR defaults to ./build; REGIONFS and BENCH_FS override the paths
# of the daemon and of the benchmark program. Needs root (tmpfs mount).

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
build=${1:-build}
[ $# -gt 0 ] && shift
export REGIONFS=${REGIONFS:-$build/fs/regionfs}
BENCH_FS=${BENCH_FS:-$build/tests/bench/bench_fs}

. "$here/../common/harness.sh"

[ -x "$BENCH_FS" ] || rfs_fail "$BENCH_FS is not built"
rfs_init
cat >"$RFS_INI" <<'INI'
; the benchmark's region: room for every value, so rereads are hits
[bench]
max_entries = 100000
max_bytes = 256M
INI
rfs_mount
"$BENCH_FS" "$@" "$RFS_MNT/bench" || rfs_fail "bench_fs failed"
echo "--- $RFS_MNT/.regionfs/regions/bench/stats (excerpt)"
grep -E '^(gets|hits|misses|loads|installs|invalidations|evictions) ' \
	"$RFS_MNT/.regionfs/regions/bench/stats"
grep -E '^(commits|store_commits|store_rows|store_max_batch) ' \
	"$RFS_MNT/.regionfs/stats"
rfs_umount
