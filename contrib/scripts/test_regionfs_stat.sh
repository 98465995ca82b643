#!/bin/bash
#
# test_regionfs_stat.sh - regionfs-stat against a live mount.
#
# Mounts a private regionfs (tests/common/harness.sh) with the test
# regions main, other, small (max_entries 4) and tiny, makes traffic, and
# checks that:
#   - the table has one row per region in regions.ini order, and every cell
#     agrees with the region's stats file read right after (the mount is
#     idle meanwhile, and reading stats files counts nothing);
#   - -r selects regions; an unknown region, a path that is not a regionfs
#     mount, and a dead mount (daemon killed) fail with a clear message;
#   - -i 0.2 -c 3 prints one header and 3 samples per region, and on the
#     idle mount every rate is exactly 0;
#   - a reload that adds a region shows it in the next samples.
# The rate arithmetic, restarts and unmounts while watching are covered
# deterministically by test_regionfs_stat.py on a fake tree.

# shellcheck disable=SC2119 # rfs_mount: no daemon options here
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../tests/common/harness.sh
. "$HERE/../../tests/common/harness.sh"

STAT=$HERE/regionfs-stat

# cell REGION COLUMN: the cell of a region's row in the snapshot $table.
cell()
{
	awk -v r="$1" -v c="$2" '$1 == r { print $c }' <<<"$table"
}

# expect_row REGION: compares the row with the stats file.
expect_row()
{
	local r=$1 f=$RFS_MNT/.regionfs/regions/$1/stats
	local gets hits misses ev stale ent maxe hit

	rfs_stat gets "$f" gets
	rfs_stat hits "$f" hits
	rfs_stat misses "$f" misses
	rfs_stat ev "$f" evictions
	rfs_stat stale "$f" stale_puts_rejected
	rfs_stat ent "$f" entries
	rfs_stat maxe "$f" max_entries
	hit=-
	[ "$gets" -gt 0 ] && hit=$(awk -v h="$hits" -v g="$gets" \
		'BEGIN { printf "%.1f", 100 * h / g }')
	[ "$(cell "$r" 2)" = "$ent/$maxe" ] ||
		rfs_fail "$r entries/max '$(cell "$r" 2)', stats say $ent/$maxe"
	[ "$(cell "$r" 4)" = "$hit" ] ||
		rfs_fail "$r hit% '$(cell "$r" 4)', stats say $hit"
	[ "$(cell "$r" 5) $(cell "$r" 6) $(cell "$r" 7) $(cell "$r" 8)" = \
		"$gets $misses $ev $stale" ] ||
		rfs_fail "$r counters '$(awk -v r="$r" '$1 == r' <<<"$table")'," \
			"stats say gets $gets misses $misses evictions $ev stale $stale"
}

rfs_init
rfs_mount
M=$RFS_MNT
for i in 1 2 3 4 5 6 7 8; do
	echo "main $i" >"$M/main/k$i" || rfs_fail "write main/k$i"
	echo "small $i" >"$M/small/k$i" || rfs_fail "write small/k$i"
done
for _ in 1 2; do
	for i in 1 2 3 4 5 6 7 8; do
		cat "$M/main/k$i" "$M/small/k$i" >/dev/null || rfs_fail "read $i"
	done
done
cat "$M/main/absent" 2>/dev/null && rfs_fail "absent key read"

# ---- snapshot ---------------------------------------------------------------

table=$("$STAT" "$M") || rfs_fail "regionfs-stat failed"
awk '{ print "# " $0 }' <<<"$table"
[ "$(head -1 <<<"$table" | tr -s ' ')" = \
	"REGION ENTRIES/MAX BYTES/MAX HIT% GETS MISSES EVICT STALE" ] ||
	rfs_fail "header: $(head -1 <<<"$table")"
[ "$(awk 'NR > 1 { printf "%s ", $1 }' <<<"$table")" = \
	"main other small tiny " ] || rfs_fail "rows: $table"
for r in main other small tiny; do
	expect_row "$r"
done
[ "$(cell small 2)" = 4/4 ] || rfs_fail "small is not full: $(cell small 2)"
[ "$(cell small 7)" -gt 0 ] || rfs_fail "small shows no evictions"
[ "$(cell main 3)" = "$(awk '$1 == "bytes" { print $2 }' \
	"$M/.regionfs/regions/main/stats")/256M" ] ||
	rfs_fail "main bytes/max '$(cell main 3)'"
[ "$(cell other 4)" = - ] || rfs_fail "hit% of a region without gets"
rfs_ok "the snapshot matches every region's stats file"

table=$("$STAT" -r tiny -r small "$M") || rfs_fail "-r failed"
[ "$(awk 'NR > 1 { printf "%s ", $1 }' <<<"$table")" = "small tiny " ] ||
	rfs_fail "-r tiny -r small shows: $table"
rfs_expect_err "no region nope on $M (regions: main, other, small, tiny)" \
	"$STAT" -r nope "$M"
rfs_expect_err "is not a regionfs mount point" "$STAT" "$RFS_TMP"
rfs_expect_err "is not a regionfs mount point" "$STAT" "$M/main"
REGIONFS_MNT=$M "$STAT" >/dev/null || rfs_fail "REGIONFS_MNT is not used"
rfs_ok "-r, REGIONFS_MNT and wrong arguments"

# ---- -i -------------------------------------------------------------------------

out=$("$STAT" -i 0.2 -c 3 "$M") || rfs_fail "-i 0.2 -c 3 failed"
awk 'NR <= 5 { print "# " $0 }' <<<"$out"
[ "$(grep -c '^TIME' <<<"$out")" = 1 ] || rfs_fail "headers: $out"
[ "$(grep -vc '^TIME' <<<"$out")" = 12 ] || rfs_fail "want 3 x 4 rows: $out"
bad=$(awk 'NR > 1 && ($6 != "0" || $7 != "0" || $8 != "0" || $9 != "0")' \
	<<<"$out")
[ -z "$bad" ] || rfs_fail "an idle mount shows rates: $bad"
rfs_ok "-i -c: one header, 3 samples of every region, idle rates 0"

# A region added by a reload shows up in the next samples.
printf '\n[added]\n' >>"$RFS_INI"
kill -HUP "$RFS_PID"
for ((i = 0; i < 200; i++)); do
	[ -e "$M/.regionfs/regions/added/stats" ] && break
	sleep 0.05
done
[ -e "$M/.regionfs/regions/added/stats" ] || rfs_fail "reload did not add"
out=$("$STAT" -i 0.2 -c 1 "$M") || rfs_fail "-i after reload failed"
[ "$(awk 'NR > 1 { printf "%s ", $2 }' <<<"$out")" = \
	"main other small tiny added " ] || rfs_fail "after reload: $out"
rfs_ok "a region added by a reload is shown"

# ---- a dead mount -----------------------------------------------------------------

kill -KILL "$RFS_PID"
rfs_wait_daemon 10 || rfs_fail "the daemon survived SIGKILL"
rfs_expect_err "the regionfs daemon is gone" "$STAT" "$M"
rfs_ok "a dead mount is reported"

rfs_done
