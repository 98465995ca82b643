#!/bin/bash
#
# test_stats.sh - the .regionfs/ files on a real mount: their names, the
# config files, counters that follow the operations (misses and loads on a
# first read, hits on the second, invalidations after a write, evictions in
# a region with max_entries 4), global sums, one snapshot per open, and
# metrics.prom passing `promtool check metrics` with no output.
#
# The keys are written in a first mount and read in a second one, so the
# cache starts empty whatever the daemon does at write time (write-through
# or not): the first read of a key must then be a miss.

# shellcheck source=../common/harness.sh disable=SC2154 # rfs_stat/rfs_helper use printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
rfs_mount
M=$RFS_MNT
V=$M/.regionfs
for i in 1 2 3 4 5 6 7 8; do
	echo "main value $i" >"$M/main/k$i" || rfs_fail "write main/k$i"
	echo "small value $i" >"$M/small/k$i" || rfs_fail "write small/k$i"
done
rfs_umount
rfs_mount

# ---- names and config files ------------------------------------------------

[ "$(ls "$V" | tr '\n' ' ')" = "config metrics.prom regions stats " ] ||
	rfs_fail ".regionfs lists '$(ls "$V" | tr '\n' ' ')'"
[ "$(ls "$V/regions" | tr '\n' ' ')" = "main other small tiny " ] ||
	rfs_fail ".regionfs/regions lists '$(ls "$V/regions" | tr '\n' ' ')'"
[ "$(ls "$V/regions/small" | tr '\n' ' ')" = "config stats " ] ||
	rfs_fail ".regionfs/regions/small lists the wrong files"
rfs_expect_err "No such file or directory" cat "$V/regions/nope/stats"
rfs_expect_err "No such file or directory" cat "$V/nope"
rfs_ok ".regionfs/ has the documented files"

rfs_stat v "$V/config" path
[ "$v" = "$RFS_INI" ] || rfs_fail "config path '$v'"
if rfs_store_is_pg; then # a connection string: blanks in the value
	v=$(sed -n 's/^database  *//p' "$V/config")
else
	rfs_stat v "$V/config" database
fi
[ "$v" = "$RFS_DB" ] || rfs_fail "config database '$v'"
rfs_stat v "$V/config" generation
[ "$v" = 1 ] || rfs_fail "config generation '$v'"
rfs_stat v "$V/config" last_reload
[ "$v" = ok ] || rfs_fail "config last_reload '$v'"
rfs_stat v "$V/config" loaded_at
[ "$v" -gt 1600000000 ] || rfs_fail "config loaded_at '$v'"
grep -qx 'last_error *' "$V/config" || rfs_fail "no empty last_error line"
[ "$(awk '$1 == "region" { printf "%s ", $2 }' "$V/config")" = \
	"main other small tiny " ] || rfs_fail "config region lines"
rfs_ok ".regionfs/config shows path, database, generation, reload, regions"

rfs_stat v "$V/regions/small/config" name
[ "$v" = small ] || rfs_fail "small/config name '$v'"
rfs_stat v "$V/regions/small/config" max_entries
[ "$v" = 4 ] || rfs_fail "small/config max_entries '$v'"
rfs_stat v "$V/regions/tiny/config" max_value_size
[ "$v" = 1024 ] || rfs_fail "tiny/config max_value_size '$v'"
rfs_stat v "$V/regions/main/config" max_value_size
[ "$v" = 2097152 ] || rfs_fail "main/config max_value_size '$v'"
rfs_ok "per-region config files show the effective settings"

# ---- line format -------------------------------------------------------------

for f in "$V/stats" "$V/regions/main/stats" "$V/regions/small/stats"; do
	bad=$(grep -Ev '^[a-z0-9_]+ [0-9]+(\.[0-9]+)?$' "$f" |
		grep -Ev '^(version|region) [^ ]+$')
	[ -z "$bad" ] || rfs_fail "$f has lines that are not 'name number': $bad"
	dup=$(awk '{ print $1 }' "$f" | sort | uniq -d)
	[ -z "$dup" ] || rfs_fail "$f repeats: $dup"
done
for n in gets hits misses coalesced loads load_failures load_not_found \
	load_time_us stale_puts_rejected uncacheable installs write_installs \
	invalidations_local invalidations_outside invalidations \
	evictions_size evictions_ttl evictions_tti evictions entries bytes \
	flights stripes hit_ratio max_entries max_bytes keys_stored \
	value_bytes_stored; do
	rfs_stat v "$V/regions/main/stats" "$n"
done
rfs_stat v "$V/regions/main/stats" keys_stored
[ "$v" = 8 ] || rfs_fail "main keys_stored '$v'"
rfs_ok "stats files are unique 'name value' lines with every field"

# ---- misses, loads, hits -----------------------------------------------------

S=$V/regions/main/stats
rfs_stat m0 "$S" misses
rfs_stat l0 "$S" loads
rfs_stat h0 "$S" hits
[ "$(cat "$M/main/k1")" = "main value 1" ] || rfs_fail "read main/k1"
rfs_stat m1 "$S" misses
rfs_stat l1 "$S" loads
rfs_stat h1 "$S" hits
[ "$m1" -ge $((m0 + 1)) ] || rfs_fail "first read: misses $m0 -> $m1"
[ "$l1" -ge $((l0 + 1)) ] || rfs_fail "first read: loads $l0 -> $l1"
rfs_ok "a first read counts a miss and a load ($m0->$m1, $l0->$l1)"
[ "$(cat "$M/main/k1")" = "main value 1" ] || rfs_fail "reread main/k1"
rfs_stat m2 "$S" misses
rfs_stat l2 "$S" loads
rfs_stat h2 "$S" hits
[ "$h2" -ge $((h1 + 1)) ] || rfs_fail "second read: hits $h1 -> $h2"
[ "$m2" = "$m1" ] || rfs_fail "second read: misses $m1 -> $m2"
[ "$l2" = "$l1" ] || rfs_fail "second read: loads $l1 -> $l2"
rfs_stat e "$S" entries
[ "$e" -ge 1 ] || rfs_fail "entries $e after a load"
rfs_ok "a second read counts a hit and no miss ($h1->$h2)"

# ---- one snapshot per open -----------------------------------------------------

exec 3<"$S"
cat "$M/main/k1" >/dev/null
cat "$M/main/k2" >/dev/null
snap=$(awk '$1 == "gets" { print $2 }' <&3)
exec 3<&-
rfs_stat g "$S" gets
[ "$snap" -lt "$g" ] || rfs_fail "a stats handle is not a snapshot at open"
rfs_ok "a stats file is one snapshot taken at open ($snap < $g)"

# ---- invalidations after a write -------------------------------------------------

rfs_stat i0 "$S" invalidations_local
rfs_stat w0 "$S" write_installs
echo "main value 1 again" >"$M/main/k1" || rfs_fail "rewrite main/k1"
rfs_stat i1 "$S" invalidations_local
rfs_stat it "$S" invalidations
rfs_stat io "$S" invalidations_outside
rfs_stat w1 "$S" write_installs
rfs_stat l3 "$S" loads
[ "$i1" -ge $((i0 + 1)) ] || rfs_fail "write: invalidations_local $i0 -> $i1"
[ "$it" = $((i1 + io)) ] || rfs_fail "invalidations is not local + outside"
[ "$(cat "$M/main/k1")" = "main value 1 again" ] ||
	rfs_fail "the rewrite is not read back"
rfs_ok "a write counts invalidations ($i0->$i1)"
# write-through: the commit left its bytes in the cache, nothing loads them
rfs_stat l4 "$S" loads
[ "$w1" -ge $((w0 + 1)) ] || rfs_fail "write: write_installs $w0 -> $w1"
[ "$l4" = "$l3" ] || rfs_fail "read back of a write: loads $l3 -> $l4"
rfs_ok "a write installs what it committed, read back with no load ($w0->$w1)"

# ---- a rewrite's RELEASE reply waits for the read back's OPEN (fs/linger.c) ------
# k1 was just read: the write open drops its entry, so its RELEASE lingers
# (counted when the daemon takes the asynchronous RELEASE, hence the poll)
rfs_stat r0 "$M/.regionfs/stats" release_lingers
printf 'main value 1, third' >"$M/main/k1" || rfs_fail "rewrite main/k1"
[ "$(cat "$M/main/k1")" = "main value 1, third" ] ||
	rfs_fail "the rewrite is not read back"
[ "$(stat -c %s "$M/main/k1")" = 19 ] || rfs_fail "stale size after a rewrite"
lingered() { rfs_stat r1 "$M/.regionfs/stats" release_lingers && [ "$r1" -gt "$r0" ]; }
rfs_poll_until "release_lingers after a rewrite" lingered
rfs_ok "a rewrite's RELEASE reply lingered ($r0->$r1), value and size exact"

# ---- evictions in a small region -------------------------------------------------

Z=$V/regions/small/stats
rfs_stat z0 "$Z" evictions_size
for i in 1 2 3 4 5 6 7 8; do
	[ "$(cat "$M/small/k$i")" = "small value $i" ] || rfs_fail "small/k$i"
done
rfs_stat z1 "$Z" evictions_size
rfs_stat zt "$Z" evictions
rfs_stat ze "$Z" entries
rfs_stat zi "$Z" installs
[ "$ze" -le 4 ] || rfs_fail "small region holds $ze entries (max 4)"
[ "$zi" -ge 8 ] || rfs_fail "small region installed $zi values, not 8"
[ "$z1" -ge $((z0 + 4)) ] || rfs_fail "evictions_size $z0 -> $z1"
[ "$zt" -ge "$z1" ] || rfs_fail "evictions < evictions_size"
rfs_ok "8 keys in a region of 4 entries: $z1 evictions, $ze entries"

# ---- global sums ---------------------------------------------------------------

G=$V/stats
for n in gets hits misses loads installs invalidations evictions entries; do
	sum=0
	for r in main other small tiny; do
		rfs_stat v "$V/regions/$r/stats" "$n"
		sum=$((sum + v))
	done
	rfs_stat v "$G" "$n"
	[ "$v" = "$sum" ] || rfs_fail "global $n $v is not the sum $sum"
done
rfs_stat v "$G" pid
[ "$v" = "$RFS_PID" ] || rfs_fail "global pid $v is not $RFS_PID"
rfs_stat v "$G" regions
[ "$v" = 4 ] || rfs_fail "global regions $v"
rfs_stat v "$G" config_generation
[ "$v" = 1 ] || rfs_fail "global config_generation $v"
rfs_stat v "$G" commits
[ "$v" -ge 1 ] || rfs_fail "global commits $v after a write"
rfs_stat v "$G" store_commits
[ "$v" -ge 1 ] || rfs_fail "global store_commits $v after a write"
rfs_stat v "$G" version
[ -n "$v" ] || rfs_fail "no version"
for n in lookups opens reads read_bytes writes write_bytes commit_errors \
	unlinks renames readdirs errors open_handles inodes feed_changes \
	feed_lag_ms config_reloads config_failures uptime_seconds \
	store_rows store_max_batch store_errors store_busy_retries \
	store_commit_time_us keys_stored value_bytes_stored hit_ratio; do
	rfs_stat v "$G" "$n"
done
rfs_ok "global stats: daemon info, counters, store, sums of the regions"

# ---- metrics.prom --------------------------------------------------------------

cat "$V/metrics.prom" >"$RFS_TMP/metrics.prom" || rfs_fail "read metrics"
out=$(promtool check metrics <"$RFS_TMP/metrics.prom" 2>&1) ||
	rfs_fail "promtool check metrics failed: $out"
[ -z "$out" ] || rfs_fail "promtool check metrics warns: $out"
grep -q '^regionfs_build_info{version="[^"]*"} 1$' "$RFS_TMP/metrics.prom" ||
	rfs_fail "no regionfs_build_info"
rfs_stat h "$V/regions/small/stats" hits
grep -qx "regionfs_hits_total{region=\"small\"} $h" "$RFS_TMP/metrics.prom" ||
	rfs_fail "regionfs_hits_total of small is not $h"
grep -q '^regionfs_evictions_total{region="small",cause="size"} [1-9]' \
	"$RFS_TMP/metrics.prom" || rfs_fail "no size evictions for small"
grep -q '^regionfs_invalidations_total{region="main",origin="local"} [1-9]' \
	"$RFS_TMP/metrics.prom" || rfs_fail "no local invalidations for main"
grep -q '^regionfs_load_seconds_total{region="main"} [0-9.]*$' \
	"$RFS_TMP/metrics.prom" || rfs_fail "no regionfs_load_seconds_total"
grep -q 'k1' "$RFS_TMP/metrics.prom" && rfs_fail "a key name leaked into metrics"
rfs_ok "metrics.prom passes promtool check metrics silently"

# ---- memory that open files hold ------------------------------------------------

# wait_stat NAME VALUE: until the stats line NAME is VALUE (a RELEASE
# reaches the daemon after close() has returned), at most 10 s.
wait_stat()
{
	local i v

	for ((i = 0; i < 200; i++)); do
		rfs_stat v "$V/stats" "$1"
		[ "$v" = "$2" ] && return 0
		sleep 0.05
	done
	rfs_fail "$1 is $v, not $2"
}

wait_stat memory_pinned_bytes 0
wait_stat memory_pinned_values 0
head -c 1000 /dev/urandom >"$M/main/p1" || rfs_fail "write main/p1"
head -c 3000 /dev/urandom >"$M/main/p2" || rfs_fail "write main/p2"
exec 6<"$M/main/p1" 7<"$M/main/p1" 8<"$M/main/p1" 9<"$M/main/p2"
rfs_stat pb "$V/stats" memory_pinned_bytes
rfs_stat pv "$V/stats" memory_pinned_values
[ "$pb" = 4000 ] && [ "$pv" = 2 ] ||
	rfs_fail "p1 open 3 times and p2 once pin $pb bytes in $pv values, not 4000 in 2"
grep -qx 'regionfs_memory_pinned_bytes 4000' "$V/metrics.prom" ||
	rfs_fail "metrics.prom: regionfs_memory_pinned_bytes is not 4000"
head -c 2000 /dev/urandom >"$M/main/p1" || rfs_fail "overwrite main/p1"
exec 5<"$M/main/p1"
rfs_stat pb "$V/stats" memory_pinned_bytes
[ "$pb" = 6000 ] || rfs_fail "the old and the new p1 and p2 pin $pb bytes, not 6000"
exec 6<&- 7<&- 8<&-
wait_stat memory_pinned_bytes 5000
exec 5<&- 9<&-
wait_stat memory_pinned_bytes 0
wait_stat memory_pinned_values 0
rfs_ok "memory_pinned_bytes: each value open files hold, once (4000, 6000 over an overwrite, 0 after the closes)"

wait_stat memory_write_buffer_bytes 0
exec 5>"$M/main/w1"
head -c 5000 /dev/zero >&5 || rfs_fail "write main/w1"
rfs_stat wb "$V/stats" memory_write_buffer_bytes
[ "$wb" -ge 5000 ] || rfs_fail "a file open with 5000 bytes written has $wb write-buffer bytes"
rfs_stat pb "$V/stats" memory_pinned_bytes
[ "$pb" = 0 ] || rfs_fail "a file open for writing pins $pb bytes of values"
exec 5>&-
wait_stat memory_write_buffer_bytes 0
[ "$(stat -c %s "$M/main/w1")" = 5000 ] || rfs_fail "main/w1 was not committed"
rfs_ok "memory_write_buffer_bytes: $wb while 5000 bytes are written and open, 0 after the close"

# ---- a reload that recreates a cache carries its entries over ---------------

# main: 12 keys cached, its stripes change (4 -> 2): every entry comes over.
# other: 5 keys cached, max_entries 2 (too few for 4 stripes): 2 come over.
# tiny: 3 keys cached, its stripes change and it gets a ttl: cold.
for i in $(seq 1 12); do
	echo "carry $i" >"$M/main/c$i" || rfs_fail "write main/c$i"
	cat "$M/main/c$i" >/dev/null || rfs_fail "read main/c$i"
done
for i in 1 2 3 4 5; do
	echo "other $i" >"$M/other/o$i" || rfs_fail "write other/o$i"
	cat "$M/other/o$i" >/dev/null || rfs_fail "read other/o$i"
done
for i in 1 2 3; do
	echo "tiny $i" >"$M/tiny/t$i" || rfs_fail "write tiny/t$i"
	cat "$M/tiny/t$i" >/dev/null || rfs_fail "read tiny/t$i"
done
R=$V/regions
rfs_stat me0 "$R/main/stats" entries
rfs_stat mh0 "$R/main/stats" hits
rfs_stat mm0 "$R/main/stats" misses
rfs_stat oe0 "$R/other/stats" entries
rfs_stat te0 "$R/tiny/stats" entries
[ "$me0" -ge 12 ] && [ "$oe0" -ge 5 ] && [ "$te0" -ge 3 ] ||
	rfs_fail "before the reload: main, other, tiny cache $me0, $oe0, $te0 entries"
rfs_stat gen0 "$V/config" generation
rfs_stat rb0 "$V/stats" config_cache_rebuilds
rfs_stat ca0 "$V/stats" config_cache_carried
sed -e 's/^\[main\]$/[main]\nstripes = 2/' \
	-e 's/^\[other\]$/[other]\nmax_entries = 2/' \
	-e 's/^\[tiny\]$/[tiny]\nstripes = 1\nttl = 1h/' "$RFS_INI" >"$RFS_INI.new"
mv "$RFS_INI.new" "$RFS_INI"
kill -HUP "$RFS_PID"
for ((i = 0; i < 200; i++)); do
	rfs_stat gen "$V/config" generation
	[ "$gen" -gt "$gen0" ] && break
	sleep 0.05
done
[ "$gen" -gt "$gen0" ] || rfs_fail "the reload did not happen"
rfs_stat rb1 "$V/stats" config_cache_rebuilds
[ "$rb1" -eq $((rb0 + 3)) ] ||
	rfs_fail "config_cache_rebuilds went $rb0 -> $rb1, not +3"
grep -q "region main: cache recreated at the reload (its stripes changed): its $me0 cached entries are carried over" \
	"$RFS_TMP/mnt.log" || rfs_fail "the rebuild of main is not logged"
grep -q "region other: cache recreated at the reload (the new limits leave too few" \
	"$RFS_TMP/mnt.log" || rfs_fail "the rebuild of other is not logged"
grep -q "region tiny: cache recreated cold at the reload (its stripes changed): $te0 cached entries dropped (with ttl or tti set" \
	"$RFS_TMP/mnt.log" || rfs_fail "the cold rebuild of tiny is not logged"
# the carry runs on the background thread, a step every 100 ms
for ((i = 0; i < 200; i++)); do
	[ "$(grep -c "carrying the cache over ended" "$RFS_TMP/mnt.log")" -ge 2 ] && break
	sleep 0.05
done
grep -q "region main: carrying the cache over ended (complete): $me0 entries carried, 0 reloaded" \
	"$RFS_TMP/mnt.log" || rfs_fail "main's carry did not end complete with $me0 entries: $(grep "region main: carrying" "$RFS_TMP/mnt.log")"
grep -q "region other: carrying the cache over ended (the new cache is full): 2 entries carried, 0 reloaded" \
	"$RFS_TMP/mnt.log" || rfs_fail "other's carry did not stop at 2 entries: $(grep "region other: carrying" "$RFS_TMP/mnt.log")"
grep -q "region tiny: carrying" "$RFS_TMP/mnt.log" && rfs_fail "tiny's entries were carried despite its ttl"
rfs_stat ca1 "$V/stats" config_cache_carried
[ "$ca1" -eq $((ca0 + me0 + 2)) ] ||
	rfs_fail "config_cache_carried went $ca0 -> $ca1, not +$((me0 + 2))"
rfs_stat me1 "$R/main/stats" entries
rfs_stat oe1 "$R/other/stats" entries
rfs_stat te1 "$R/tiny/stats" entries
[ "$me1" = "$me0" ] && [ "$oe1" = 2 ] && [ "$te1" = 0 ] ||
	rfs_fail "after the carry: main, other, tiny cache $me1, $oe1, $te1 entries, not $me0, 2, 0"
# counters go on; a carried key is a hit, and its bytes are right
rfs_stat mh1 "$R/main/stats" hits
rfs_stat mm1 "$R/main/stats" misses
[ "$mh1" -ge "$mh0" ] && [ "$mm1" -eq $((mm0 + me0)) ] ||
	rfs_fail "main's counters: hits $mh0 -> $mh1, misses $mm0 -> $mm1 (+$me0 expected: one per carried entry)"
[ "$(cat "$M/main/c7")" = "carry 7" ] || rfs_fail "main/c7 reads '$(cat "$M/main/c7")'"
rfs_stat mh2 "$R/main/stats" hits
rfs_stat mm2 "$R/main/stats" misses
[ "$mh2" -eq $((mh1 + 1)) ] && [ "$mm2" -eq "$mm1" ] ||
	rfs_fail "reading carried main/c7: hits $mh1 -> $mh2, misses $mm1 -> $mm2"
rfs_ok "a reload that recreates caches: main carried $me0 entries, other 2 (its new limit), tiny (ttl) none; counters kept ($rb0 -> $rb1 rebuilds)"

# ---- write_through = false: the write evicts, the read back loads --------------

sed -i 's/^\[main\]$/[main]\nwrite_through = false/' "$RFS_INI"
kill -HUP "$RFS_PID"
rfs_wait_for grep -qx "write_through false" "$R/main/config" ||
	rfs_fail "main/config after a reload to write_through = false: $(cat "$R/main/config")"
rfs_stat w0 "$R/main/stats" write_installs
echo "no write-through" >"$M/main/wt" || rfs_fail "write main/wt"
rfs_stat w1 "$R/main/stats" write_installs
rfs_stat l0 "$R/main/stats" loads
[ "$(cat "$M/main/wt")" = "no write-through" ] || rfs_fail "main/wt is not read back"
rfs_stat l1 "$R/main/stats" loads
[ "$w1" = "$w0" ] || rfs_fail "write_through = false: write_installs $w0 -> $w1"
[ "$l1" = $((l0 + 1)) ] || rfs_fail "write_through = false: the read back loads $l0 -> $l1"
rfs_ok "write_through = false (live): a write installs nothing, its read back loads it"

rfs_umount
rfs_ok "clean unmount, daemon exited 0"
rfs_done
