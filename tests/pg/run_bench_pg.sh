#!/bin/bash
#
# run_bench_pg.sh - the PostgreSQL store's figures, against a throwaway
# cluster (a benchmark: meson test does not run it).
#
#   tests/pg/run_bench_pg.sh [BUILDDIR] [SECONDS] [ROUNDS]
#
# 1. bench_pg writes: durable writes/s with 1, 4 and 8 writers through the
#    store against raw libpq single-row upserts, interleaved (ratio_wN).
# 2. Two mounts of the cluster's database; bench_pg latency: close() on
#    mount A to the new value read on mount B (p50, p99, max).
# 3. bench_pg close: close() latency on A in a bounded and a strict
#    region, interleaved, with 1 other mount (B), then 2 (B and C):
#    close_p50_{bounded,strict}_{1,2}other=ms and ack_cost_p50_*.
# 4. bench_pg reads: read costs through mount A next to a SQLite mount of
#    a database file beside it, interleaved: a hit (region h, every key
#    cached) and a miss (region m, 16 entries, LRU, read in a cycle), each
#    read open O_DIRECT + read + close; read_{hit,miss}_{pg,sqlite}_p50_us
#    and cost_ratio_{hit,miss}_pg_sqlite.
# Absolute figures depend on the machine's fsync and load; the ratios are
# the point (same run, same server).

build=${1:-build}
secs=${2:-4}
rounds=${3:-200}
export REGIONFS=${REGIONFS:-$build/fs/regionfs}
bench=${BENCH_PG:-$build/tests/pg/bench_pg}
export RFS_STORE=pg
# shellcheck source=../common/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
[ -x "$bench" ] || rfs_fail "$bench not built"
"$bench" writes "$RFS_DB" "$secs" 1,4,8 || rfs_fail "bench_pg writes"
cat >"$RFS_INI" <<'EOF2'
[b]
max_entries = 100
[s]
max_entries = 100
coherence = strict
[h]
max_entries = 100000
[m]
max_entries = 16
stripes = 1
strategy = lru
EOF2
rfs_mount_as a
rfs_mount_as b
"$bench" latency "$RFS_TMP/a/b" "$RFS_TMP/b/b" "$rounds" || rfs_fail "bench_pg latency"
# every mount's lease first (strict waits only for live leases)
lease_live() { grep -q '^store_lease_live 1$' "$RFS_TMP/$1/.regionfs/stats"; }
wait_leases() {
	local m i
	for m in "$@"; do
		for ((i = 0; i < 200; i++)); do lease_live "$m" && break; sleep 0.05; done
		lease_live "$m" || rfs_fail "mount $m holds no lease"
	done
}
wait_leases a b
"$bench" close 1other "$RFS_TMP/a/b" "$RFS_TMP/a/s" "$rounds" || rfs_fail "bench_pg close"
rfs_mount_as c
wait_leases c
"$bench" close 2other "$RFS_TMP/a/b" "$RFS_TMP/a/s" "$rounds" || rfs_fail "bench_pg close"
rfs_umount b
rfs_umount c
RFS_DB=$RFS_TMP/lite.db rfs_mount_as lite
"$bench" reads 1000 3 "$RFS_TMP/a/h" "$RFS_TMP/a/m" "$RFS_TMP/lite/h" "$RFS_TMP/lite/m" ||
	rfs_fail "bench_pg reads"
rfs_umount lite
rfs_umount a
