#!/bin/bash
#
# test_outside_bulk.sh - a bulk change through the sqlite3 shell while
# readers run: 100,000 rows replaced in one transaction. Reads must not
# stall (none slower than STALL_MS), every read returns the old or the new
# value of its key, and every key read after the commit plus the stated
# delay (CONS_FEED_BOUND_MS) shows the new value (bulk.c explains the
# checks and prints the latencies and delays).

# rfs_helper and rfs_stat set the variables they are given (printf -v):
# shellcheck disable=SC2154
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

NKEYS=100000
STALL_MS=${CONS_STALL_MS:-500}
bound_ms=${CONS_FEED_BOUND_MS:-100}

rfs_init
rfs_helper bulk bulk
cat >"$RFS_INI" <<'EOF2'
; big enough for the readers' hot set (2000 keys), far smaller than the
; 100,000 keys of the region
[bulk]
max_entries = 5000
max_value_size = 1K
stripes = 16
EOF2
rfs_mount_as a
M=$RFS_TMP/a

t=$EPOCHREALTIME
rfs_sql "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < $((NKEYS - 1)))
INSERT INTO kv(region, key, value)
  SELECT 'bulk', printf('b%06d', i), 'gen=1 key=' || printf('b%06d', i) FROM c;"
echo "inserted $NKEYS rows through the shell in $(awk -v a="$t" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", (b - a) * 1000 }') ms"
n=$(find "$M/bulk" -mindepth 1 -maxdepth 1 -name 'b*' | wc -l)
[ "$n" -eq "$NKEYS" ] || rfs_fail "the mount lists $n keys, want $NKEYS"
rfs_ok "the mount lists the $NKEYS rows inserted through the shell"

rfs_run "$bulk" -d "$M/bulk" -N "$NKEYS" -H 2000 -r 4 -w 1500 -a 3000 \
	-B "$bound_ms" -t 2000 -L "$STALL_MS" -S 1000 -- \
	sqlite3 -batch -bail -cmd '.timeout 10000' "$RFS_DB" \
	"BEGIN; UPDATE kv SET value = 'gen=2 key=' || key || ' replaced-in-bulk' WHERE region = 'bulk'; SELECT 'bulk update: ' || changes() || ' rows'; COMMIT;" ||
	rfs_fail "bulk"
rfs_ok "a 100,000-row transaction while readers run: no stall over $STALL_MS ms, no stale read after $bound_ms ms"

rfs_stat inv "$M/.regionfs/regions/bulk/stats" invalidations_outside
rfs_stat fc "$M/.regionfs/stats" feed_changes
echo "stats: invalidations_outside=$inv feed_changes=$fc"
rfs_umount a
rfs_ok "clean unmount"
rfs_done
