#!/bin/bash
#
# test_pg_strict.sh - coherence = strict across three regionfs mounts on
# one PostgreSQL database (RFS_STORE=pg: harness.sh starts a throwaway
# cluster). Region s is strict, r bounded; leases are short here
# (-o lease=2s,lease_renew=300ms) so that the lapses below take seconds.
#
#   - every mount takes its lease (store_lease_live 1); statfs reports the
#     database's size as used;
#   - a strict write closed on a is read on b and c at once, with the old
#     value cached on both: no waiting loop, the first read must see it;
#   - the race torture (strict_race.c): a writer on a counts up; after
#     each close() it publishes the number; readers on b and c each read
#     the published number, THEN the key, and must never see less (zero
#     stale reads); the same on bounded r only reports its stale reads;
#   - b frozen with SIGSTOP: a's strict close() still returns (after b's
#     lease ran out: bounded), and b, woken, serves no stale hit: its
#     first read shows the new value; b counts the lapse, then renews;
#   - a psql session that LISTENs on both channels and never reads: writes
#     keep succeeding;
#   - every regionfs connection killed by the server, then a server
#     restart: a strict write's close() is again read at once everywhere;
#   - region r made strict by a reload (SIGHUP): its writes wait for acks.
#
# No timed assertion: waits poll with generous deadlines and print how
# long they took; the "at once" reads are single reads, whose result the
# protocol (not timing) decides.

# shellcheck disable=SC2154 # rfs_stat sets the variables it is given
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

RFS_STORE=pg
deadline_ms=$(( ${CONS_FEED_BOUND_MS:-1000} * 10 ))
[ "$deadline_ms" -ge 20000 ] || deadline_ms=20000

rfs_init
cat >"$RFS_INI" <<'EOF2'
[s]
max_entries = 1000
coherence = strict
[r]
max_entries = 1000
EOF2
for m in a b c; do
	rfs_mount_as $m -o lease=2s -o lease_renew=300ms
done

now_ms() { date +%s%3N; }

A=$RFS_TMP/a/s B=$RFS_TMP/b/s C=$RFS_TMP/c/s
frozen=

# a failure while b is frozen must not leave it stopped for the cleanup
fail() {
	[ -n "$frozen" ] && kill -CONT "$frozen" 2>/dev/null
	rfs_fail "$@"
}

# wait_stat MOUNT LINE MIN WHAT: the stats line reaches MIN in time.
wait_stat()
{
	local t0 v
	t0=$(now_ms)
	while :; do
		rfs_stat v "$RFS_TMP/$1/.regionfs/stats" "$2"
		[ "$v" -ge "$3" ] && break
		[ $(( $(now_ms) - t0 )) -lt "$deadline_ms" ] ||
			fail "$4: $2 of $1 is $v, not >= $3 after $deadline_ms ms"
		sleep 0.05
	done
	echo "# $4: $2 of $1 = $v after $(( $(now_ms) - t0 )) ms"
}

# read_now FILE VALUE WHAT: one read, which must show VALUE.
read_now()
{
	local got
	got=$(cat "$1" 2>&1)
	[ "$got" = "$2" ] || fail "$3: $1 reads '$got', not '$2'"
}

for m in a b c; do
	wait_stat $m store_lease_live 1 "lease taken"
done
rfs_ok "every mount holds a live lease"

# statfs: the database's size as used, not zeros
read -r blocks avail < <(stat -f -c '%b %a' "$RFS_TMP/a") || fail "stat -f"
echo "# statfs: $blocks blocks, $avail available (4 KiB)"
[ "$blocks" -gt "$avail" ] && [ "$avail" -gt 0 ] || fail "statfs: $blocks blocks, $avail available"
rfs_ok "statfs reports the database's size used and space free"

echo v1 >"$A/k" || fail "write v1 through a"
read_now "$B/k" v1 "strict a -> b"
read_now "$C/k" v1 "strict a -> c"
echo v2 >"$B/k" || fail "write v2 through b"
read_now "$A/k" v2 "strict b -> a (cached)"
read_now "$C/k" v2 "strict b -> c (cached)"
rm "$C/k" || fail "unlink through c"
[ ! -e "$A/k" ] || fail "a still shows k after c's unlink returned"
[ ! -e "$B/k" ] || fail "b still shows k after c's unlink returned"
rfs_ok "a strict write's close() (and unlink) is seen at once on the other mounts"

# ---- the race torture ------------------------------------------------------
# strict_race.c: a writer thread on a publishes each number once close()
# returned; reader threads on b and c take the published number, then
# read, and must never see less. First on bounded r, reporting only (it
# shows that the torture can see the window bounded leaves), then on
# strict s, where one stale read fails the test.
race=${RFS_STRICT_RACE:-$(dirname "$RFS_BIN")/../tests/pg/strict_race}
[ -x "$race" ] || fail "strict_race not built ($race)"
N=${PG_STRICT_ROUNDS:-200}
out=$("$race" -s -n "$N" "$RFS_TMP/a/r" "$RFS_TMP/b/r" "$RFS_TMP/c/r" 2>&1) ||
	fail "strict_race on bounded r: $out"
echo "# torture on bounded r (report only): ${out##*$'\n'}"
t0=$(now_ms)
out=$("$race" -n "$N" "$A" "$B" "$C" 2>&1) || fail "race torture on strict s: $out"
echo "# torture on strict s: ${out##*$'\n'} in $(( $(now_ms) - t0 )) ms"
case $out in
*" stale=0 "*) ;;
*) fail "race torture: $out" ;;
esac
rfs_ok "race torture: $N strict writes on a, readers on b and c: zero stale reads after close()"

# ---- a frozen mount ---------------------------------------------------------
echo before >"$A/f" || fail "write f"
read_now "$B/f" before "f cached on b"
rfs_stat lapses0 "$RFS_TMP/b/.regionfs/stats" store_lease_lapses
rfs_stat waited0 "$RFS_TMP/a/.regionfs/stats" store_acks_waited
kill -STOP "${RFS_PIDS[b]}" || fail "SIGSTOP b"
frozen=${RFS_PIDS[b]}
t0=$(now_ms)
echo after >"$A/f" || fail "strict write on a while b is frozen"
t1=$(now_ms)
echo "# strict close() on a with b frozen: $((t1 - t0)) ms (b's lease: 2 s)"
read_now "$C/f" after "a -> c while b is frozen"
echo bounded >"$RFS_TMP/a/r/x" || fail "bounded write on a while b is frozen"
kill -CONT "${RFS_PIDS[b]}" || fail "SIGCONT b"
frozen=
read_now "$B/f" after "b's first read after it woke"
rfs_ok "b frozen: a's strict close() returned (bounded by b's lease), b woke to no stale hit"
wait_stat b store_lease_lapses $((lapses0 + 1)) "b saw its lapse"
wait_stat b store_lease_live 1 "b renewed and replayed"
rfs_stat waited "$RFS_TMP/a/.regionfs/stats" store_acks_waited
[ "$waited" -gt "$waited0" ] || fail "a's acks_waited did not grow ($waited0 -> $waited)"
rfs_ok "b counted the lapse and holds its lease again"

# ---- a listener that never reads --------------------------------------------
mkfifo "$RFS_TMP/listen.in" || fail mkfifo
rfs_pg_as psql -X -q -h "$RFS_PG_SOCK" -U "$RFS_PG_USER" -d rfs \
	<"$RFS_TMP/listen.in" >/dev/null 2>&1 &
lpid=$!
RFS_CHILDREN="$RFS_CHILDREN $lpid"
exec 4>"$RFS_TMP/listen.in"
echo "LISTEN regionfs; LISTEN regionfs_ack;" >&4
for ((i = 1; i <= 200; i++)); do
	echo "l$i" >"$A/l" || fail "write $i with a listener that never reads"
done
read_now "$B/l" l200 "a -> b with a stuck listener"
rfs_stat q "$RFS_TMP/a/.regionfs/stats" store_notify_queue_ppm
echo "# notification queue with a stuck listener: $q ppm"
exec 4>&-
wait "$lpid" 2>/dev/null
RFS_CHILDREN=${RFS_CHILDREN/ $lpid/}
rfs_ok "a listener that never reads: 200 strict writes succeed"

# ---- connections killed, server restart -------------------------------------
read_now "$C/f" after "f cached on c"
rfs_pg_psql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'regionfs'" >/dev/null ||
	fail "terminate the mounts' connections"
t0=$(now_ms)
until echo killed >"$A/f" 2>/dev/null; do
	[ $(( $(now_ms) - t0 )) -lt "$deadline_ms" ] || fail "no strict write after the kill"
	sleep 0.05
done
read_now "$B/f" killed "after the kill a -> b"
read_now "$C/f" killed "after the kill a -> c"
rfs_ok "connections killed: a strict close() is read at once on b and c"

rfs_pg_restart || fail "server restart"
t0=$(now_ms)
until echo restarted >"$B/f" 2>/dev/null; do
	[ $(( $(now_ms) - t0 )) -lt "$deadline_ms" ] || fail "no strict write after the restart"
	sleep 0.05
done
echo "# first strict write after the restart: $(( $(now_ms) - t0 )) ms"
read_now "$A/f" restarted "after the restart b -> a"
read_now "$C/f" restarted "after the restart b -> c"
for m in a b c; do
	wait_stat $m store_lease_live 1 "lease again after the restart"
done
rfs_ok "server restart: mounts recover, a strict close() is read at once"

# ---- live on reload -----------------------------------------------------------
grep -q '^coherence bounded$' "$RFS_TMP/a/.regionfs/regions/r/config" ||
	fail "r is not bounded before the reload"
sed -i 's/^\[r\]$/[r]\ncoherence = strict/' "$RFS_INI"
for m in a b c; do
	kill -HUP "${RFS_PIDS[$m]}" || fail "SIGHUP $m"
done
t0=$(now_ms)
for m in a b c; do
	until grep -q '^coherence strict$' "$RFS_TMP/$m/.regionfs/regions/r/config"; do
		[ $(( $(now_ms) - t0 )) -lt "$deadline_ms" ] || fail "r not strict on $m after the reload"
		sleep 0.05
	done
done
rfs_stat w0 "$RFS_TMP/a/.regionfs/stats" store_acks_waited
echo reloaded >"$RFS_TMP/a/r/x" || fail "write r/x after the reload"
rfs_stat w1 "$RFS_TMP/a/.regionfs/stats" store_acks_waited
[ "$w1" -gt "$w0" ] || fail "a write in r did not wait for acks after the reload ($w0 -> $w1)"
read_now "$RFS_TMP/b/r/x" reloaded "r strict after the reload a -> b"
rfs_ok "coherence applies live on a reload"

for m in a b c; do
	rfs_alive $m
	rfs_umount $m
done
rfs_done
