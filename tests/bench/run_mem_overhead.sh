#!/bin/bash
#
# run_mem_overhead.sh - the daemon's RSS beyond a region's max_bytes.
#
#   REGIONFS=build/fs/regionfs tests/bench/run_mem_overhead.sh [VALUE_KB] [MAX_MB]
#
# Mounts a private instance (harness.sh) with one region of max_bytes
# MAX_MB (default 64), writes 3 x MAX_MB of VALUE_KB-sized keys (default
# 100 KiB), reads every key twice so the cache is full, and prints the RSS
# before, after the writes and after the reads, with the region's cached
# bytes and the ratio RSS / max_bytes. A figure, not a test.

# shellcheck source=../common/harness.sh disable=SC2154
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

VKB=${1:-100}
MAXMB=${2:-64}
rfs_init
cat >"$RFS_INI" <<EOF2
[r]
max_bytes = ${MAXMB}M
max_entries = 1000000
max_value_size = 2M
EOF2
rfs_mount
M=$RFS_MNT
n=$((3 * MAXMB * 1024 / VKB))
rss() { awk '/^VmRSS/ { print $2 }' "/proc/$RFS_PID/status"; }
head -c $((VKB * 1024)) /dev/urandom >"$RFS_TMP/v"
r0=$(rss)
for ((i = 0; i < n; i++)); do cp "$RFS_TMP/v" "$M/r/k$i"; done
r1=$(rss)
for pass in 1 2; do
	for ((i = 0; i < n; i++)); do cat "$M/r/k$i" >/dev/null; done
done
r2=$(rss)
rfs_stat cached "$M/.regionfs/regions/r/stats" bytes
echo "values ${VKB} KiB, $n keys, max_bytes ${MAXMB} MiB: RSS start ${r0} kB," \
	"after writes ${r1} kB, after 2 read passes ${r2} kB; cached $((cached / 1024)) kB;" \
	"RSS / max_bytes = $(awk -v r="$r2" -v m="$MAXMB" 'BEGIN { printf "%.2f", r / 1024 / m }')"
rfs_umount
