#!/bin/bash
#
# test_outside_shell.sh - the sqlite3 shell as an outside writer: UPDATE,
# INSERT, DELETE and a key rename made directly in the database show
# through the mount within the stated delay (CONS_FEED_BOUND_MS), even for
# keys the mount had cached.
#
# Every delay is measured by cons_wait from the moment the sqlite3 shell
# exited (its transaction committed) to the end of the first read through
# the mount that shows the change; cons_wait polls every 1 ms and gives
# up after 2 s. Before each UPDATE the key is shown to be cached (a read
# counts a hit), so the change must come through the change feed's
# invalidation, not through a fresh load.

# rfs_helper and rfs_stat set the variables they are given (printf -v):
# shellcheck disable=SC2154
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

ROUNDS=20
bound_ms=${CONS_FEED_BOUND_MS:-100}

rfs_init
rfs_helper waiter cons_wait
cat >"$RFS_INI" <<'EOF'
[ow]
max_entries = 100
max_value_size = 64K
stripes = 4
EOF
rfs_mount_as a
M=$RFS_TMP/a
R=$M/ow
ST=$M/.regionfs/regions/ow/stats
max_us=0
sum_us=0

# wait_for WHAT MODE PATH [VALUE] [-o OLD]: runs cons_wait from the commit
# just made ($t0) and checks the delay against the stated bound.
wait_for()
{
	local what=$1 out us
	shift
	out=$("$waiter" -s "$t0" -t 2000 "$@") || rfs_fail "$what: not visible through the mount"
	us=$(sed -n 's/^visible after \([0-9]*\) us.*/\1/p' <<<"$out")
	[ -n "$us" ] || rfs_fail "$what: cons_wait said '$out'"
	[ "$us" -le $((bound_ms * 1000)) ] ||
		rfs_fail "$what: visible after $us us, over the stated $bound_ms ms"
	LAST_US=$us
}

# cached KEY: reading KEY twice through the mount counts a hit.
assert_cached()
{
	local h0 h1

	cat "$R/$1" >/dev/null || rfs_fail "cat $R/$1"
	rfs_stat h0 "$ST" hits
	cat "$R/$1" >/dev/null || rfs_fail "cat $R/$1"
	rfs_stat h1 "$ST" hits
	[ "$h1" -gt "$h0" ] || rfs_fail "$1 is not cached (hits $h0 -> $h1)"
}

# ---- UPDATE of a cached key ----------------------------------------------

printf 'v0' >"$R/k" || rfs_fail "write $R/k"
old=v0
for ((i = 1; i <= ROUNDS; i++)); do
	assert_cached k
	# a length that changes every round (a stale size would show); odd
	# rounds store TEXT, even rounds a BLOB, as shell users may
	new=$(printf 'shell update %d %*s|' "$i" $((i * 13 % 50)) '')
	if ((i % 2)); then
		rfs_sql "UPDATE kv SET value = '$new' WHERE region = 'ow' AND key = 'k'"
	else
		hex=$(printf '%s' "$new" | od -An -v -tx1 | tr -d ' \n')
		rfs_sql "UPDATE kv SET value = X'$hex' WHERE region = 'ow' AND key = 'k'"
	fi
	t0=$EPOCHREALTIME
	wait_for "update $i" -o "$old" value "$R/k" "$new"
	((LAST_US > max_us)) && max_us=$LAST_US
	sum_us=$((sum_us + LAST_US))
	[ "$(stat -c %s "$R/k")" = "${#new}" ] || rfs_fail "update $i: stale size"
	old=$new
done
echo "sqlite3 UPDATE of a cached key: $ROUNDS rounds, delay max ${max_us} us, mean $((sum_us / ROUNDS)) us"
rfs_ok "UPDATE through the sqlite3 shell shows within $bound_ms ms ($ROUNDS rounds, max $max_us us)"

# ---- INSERT ---------------------------------------------------------------

[ ! -e "$R/fresh" ] || rfs_fail "fresh exists before the INSERT"
cat "$R/fresh" 2>/dev/null && rfs_fail "cat of a missing key succeeded"
rfs_sql "INSERT INTO kv(region, key, value) VALUES ('ow', 'fresh', 'inserted by the shell')"
t0=$EPOCHREALTIME
wait_for "insert" present "$R/fresh"
echo "sqlite3 INSERT: listed and readable after $LAST_US us"
[ "$(cat "$R/fresh")" = "inserted by the shell" ] || rfs_fail "the inserted value"
rfs_listed "$R" fresh || rfs_fail "readdir does not show the inserted key"
rfs_ok "INSERT through the sqlite3 shell: ls shows it, cat reads it"

# ---- DELETE of a cached key -------------------------------------------------

assert_cached k
rfs_sql "DELETE FROM kv WHERE region = 'ow' AND key = 'k'"
t0=$EPOCHREALTIME
wait_for "delete" absent "$R/k"
echo "sqlite3 DELETE of a cached key: gone after $LAST_US us"
rfs_listed "$R" k && rfs_fail "readdir still shows the deleted key"
rfs_ok "DELETE through the sqlite3 shell: cat fails with ENOENT, ls hides it"

# ---- a key renamed in the table -------------------------------------------

assert_cached fresh
rfs_sql "UPDATE kv SET key = 'renamed' WHERE region = 'ow' AND key = 'fresh'"
t0=$EPOCHREALTIME
wait_for "rename (old name)" absent "$R/fresh"
wait_for "rename (new name)" value "$R/renamed" "inserted by the shell"
rfs_ok "a key renamed in the table: the old name goes, the new one reads"

# ---- many keys in one transaction ------------------------------------------

for k in m1 m2 m3 m4 m5 m6 m7 m8; do
	printf 'before' >"$R/$k" || rfs_fail "write $R/$k"
	assert_cached "$k"
done
rfs_sql "BEGIN; UPDATE kv SET value = 'after ' || key WHERE region = 'ow' AND key GLOB 'm*'; COMMIT;"
t0=$EPOCHREALTIME
targets=()
for k in m1 m2 m3 m4 m5 m6 m7 m8; do
	targets+=("$R/$k" "after $k")
done
wait_for "multi-row update" -o before value "${targets[@]}"
echo "one transaction changing 8 cached keys: all visible after $LAST_US us"
rfs_ok "one transaction changing 8 cached keys: all show the new values"

# ---- a region the mount does not serve --------------------------------------

rfs_sql "INSERT INTO kv(region, key, value) VALUES ('not-configured', 'x', 'y')"
printf 'still' >"$R/alive" || rfs_fail "write after an unknown region's change"
[ "$(cat "$R/alive")" = still ] ||
	rfs_fail "the mount misbehaves after a change in an unknown region"
rfs_sql "UPDATE kv SET value = 'changed' WHERE region = 'ow' AND key = 'alive'"
t0=$EPOCHREALTIME
wait_for "update after an unknown region's change" -o still value "$R/alive" changed
rfs_ok "a change in a region the mount does not serve is ignored harmlessly"

# ---- the stats ---------------------------------------------------------------

rfs_stat inv "$ST" invalidations_outside
rfs_stat fc "$M/.regionfs/stats" feed_changes
rfs_stat lag "$M/.regionfs/stats" feed_lag_ms
echo "stats: invalidations_outside=$inv feed_changes=$fc feed_lag_ms=$lag"
[ "$inv" -ge $((ROUNDS + 10)) ] || rfs_fail "invalidations_outside=$inv, want >= $((ROUNDS + 10))"
[ "$fc" -ge $((ROUNDS + 12)) ] || rfs_fail "feed_changes=$fc, want >= $((ROUNDS + 12))"
rfs_ok "invalidations_outside and feed_changes count the shell's changes"

rfs_umount a
rfs_ok "clean unmount"
rfs_done
