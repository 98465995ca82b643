#!/bin/bash
#
# test_pg_mounts.sh - three regionfs mounts on one PostgreSQL database
# (RFS_STORE=pg: harness.sh starts a throwaway cluster).
#
#   - a write closed on one mount is read on the other two, each of which
#     had the old value cached;
#   - psql changing a row (the outside-writer contract of doc/schema.md)
#     is seen by every mount;
#   - a transaction that took a LOWER change-log sequence number but
#     commits AFTER one with a higher number has been applied is still
#     seen (the snapshot-safe feed cursor; a "seq > last" cursor skips it);
#   - psql TRUNCATE empties every mount's view;
#   - a server restart under the mounts: writes and invalidations resume;
#   - a mount frozen with SIGSTOP holds back no writer and catches up;
#   - every mount's connections killed by the server: all converge again;
#   - -o store=SOURCE, and a password in SOURCE never shown.
#
# No timed assertion: every "is seen" waits for the value in a polling
# loop with a generous deadline (CONS_FEED_BOUND_MS scaled up), and
# prints how long it took.

# shellcheck disable=SC2154 # rfs_stat sets the variables it is given
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

RFS_STORE=pg
deadline_ms=$(( ${CONS_FEED_BOUND_MS:-1000} * 10 ))

rfs_init
cat >"$RFS_INI" <<'EOF2'
[r]
max_entries = 100
EOF2
for m in a b c; do
	rfs_mount_as $m
done

now_ms() { date +%s%3N; }

# wait_value FILE VALUE WHAT: FILE reads VALUE before the deadline.
wait_value()
{
	local t0 got
	t0=$(now_ms)
	while :; do
		got=$(cat "$1" 2>/dev/null)
		[ "$got" = "$2" ] && break
		[ $(( $(now_ms) - t0 )) -lt "$deadline_ms" ] ||
			rfs_fail "$3: $1 reads '$got', not '$2' after $deadline_ms ms"
		sleep 0.01
	done
	echo "# $3: $1 = '$2' after $(( $(now_ms) - t0 )) ms"
}

# wait_gone FILE WHAT: FILE disappears before the deadline.
wait_gone()
{
	local t0
	t0=$(now_ms)
	while [ -e "$1" ]; do
		[ $(( $(now_ms) - t0 )) -lt "$deadline_ms" ] ||
			rfs_fail "$2: $1 still there after $deadline_ms ms"
		sleep 0.01
	done
}

A=$RFS_TMP/a/r B=$RFS_TMP/b/r C=$RFS_TMP/c/r

echo v1 >"$A/k" || rfs_fail "write v1 through a"
wait_value "$B/k" v1 "a -> b"
wait_value "$C/k" v1 "a -> c"
rfs_ok "a value written on one mount is read on the other two"

# every mount has v1 cached now; b overwrites it
echo v2 >"$B/k" || rfs_fail "write v2 through b"
[ "$(cat "$B/k")" = v2 ] || rfs_fail "b does not read its own write"
wait_value "$A/k" v2 "b -> a (cached)"
wait_value "$C/k" v2 "b -> c (cached)"
rfs_ok "a write on b invalidates the value cached on a and c"

rfs_pg_psql "UPDATE regionfs.kv SET value = convert_to('v3' || chr(10), 'UTF8') WHERE region = 'r' AND key = 'k'" ||
	rfs_fail "psql update"
for m in "$A" "$B" "$C"; do
	wait_value "$m/k" v3 "psql -> $m"
done
rfs_ok "psql's UPDATE is seen by every mount"

# the late, lower-numbered transaction
echo old >"$A/late" || rfs_fail "write late"
echo old >"$A/early" || rfs_fail "write early"
for m in "$A" "$B" "$C"; do
	wait_value "$m/late" old "late cached on $m"
	wait_value "$m/early" old "early cached on $m"
done
mkfifo "$RFS_TMP/psql.in" || rfs_fail mkfifo
rfs_pg_as psql -X -q -v ON_ERROR_STOP=1 -h "$RFS_PG_SOCK" -U "$RFS_PG_USER" \
	-d rfs <"$RFS_TMP/psql.in" >"$RFS_TMP/psql.out" 2>&1 &
RFS_CHILDREN="$RFS_CHILDREN $!"
late_pid=$!
exec 3>"$RFS_TMP/psql.in"
echo "BEGIN; UPDATE regionfs.kv SET value = convert_to('new' || chr(10), 'UTF8') WHERE region = 'r' AND key = 'late';" >&3
# the held transaction's log row exists (its seq is taken) once the
# UPDATE ran: wait for psql to have run it, via the row lock it holds
t0=$(now_ms)
until [ "$(rfs_pg_psql "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE a.state = 'idle in transaction' AND l.locktype = 'transactionid'")" -ge 1 ]; do
	[ $(( $(now_ms) - t0 )) -lt "$deadline_ms" ] || rfs_fail "psql did not start its transaction"
	sleep 0.01
done
rfs_pg_psql "UPDATE regionfs.kv SET value = convert_to('new' || chr(10), 'UTF8') WHERE region = 'r' AND key = 'early'" ||
	rfs_fail "psql update early"
for m in "$A" "$B" "$C"; do
	wait_value "$m/early" new "early -> $m"
done
echo "COMMIT;" >&3
exec 3>&-
wait "$late_pid" || { cat "$RFS_TMP/psql.out"; rfs_fail "psql session failed"; }
RFS_CHILDREN=${RFS_CHILDREN/ $late_pid/}
seqs=$(rfs_pg_psql "SELECT string_agg(key_s || '=' || seq, ' ' ORDER BY seq) FROM (SELECT convert_from(key, 'UTF8') AS key_s, max(seq) AS seq FROM regionfs.changes WHERE key IN ('late', 'early') AND origin IS NULL GROUP BY key) x")
echo "# outside log rows: $seqs"
case $seqs in
"late="*" early="*) ;;
*) rfs_fail "the late transaction did not take the lower seq: $seqs" ;;
esac
for m in "$A" "$B" "$C"; do
	wait_value "$m/late" new "late (lower seq, committed last) -> $m"
done
rfs_ok "a lower-seq transaction committed late is seen by every mount"

# A descriptor open on k in A keeps the kernel's entry for k in use: the
# kernel then keeps that child entry when the region directory's entry is
# invalidated, so "everything changed" must invalidate each name too (it
# stayed for its entry timeout; the poll loop of wait_gone alone hit this
# now and then).
exec 4<"$A/k" || rfs_fail "open k on A"
rfs_pg_psql "TRUNCATE regionfs.kv" || rfs_fail "truncate"
for m in "$A" "$B" "$C"; do
	wait_gone "$m/k" "truncate on $m"
done
exec 4<&-
rfs_ok "psql's TRUNCATE empties every mount (k open on one of them)"

rfs_pg_restart || rfs_fail "server restart"
t0=$(now_ms)
until echo after >"$A/k2" 2>/dev/null; do
	[ $(( $(now_ms) - t0 )) -lt "$deadline_ms" ] || rfs_fail "no write succeeds after the restart"
	sleep 0.05
done
echo "# first write after the restart: $(( $(now_ms) - t0 )) ms"
wait_value "$B/k2" after "after restart a -> b"
wait_value "$C/k2" after "after restart a -> c"
echo again >"$C/k2" || rfs_fail "write through c after the restart"
wait_value "$A/k2" again "after restart c -> a"
rfs_ok "after a server restart, writes and invalidations resume"

# a mount frozen (SIGSTOP) does not hold back writers elsewhere (bounded
# coherence: nobody waits for it), and catches up when it wakes
kill -STOP "${RFS_PIDS[b]}" || rfs_fail "SIGSTOP b"
for i in $(seq 1 20); do
	echo "frozen$i" >"$A/k2" || { kill -CONT "${RFS_PIDS[b]}"; rfs_fail "write $i on a while b is frozen"; }
done
wait_value "$C/k2" frozen20 "a -> c while b is frozen"
kill -CONT "${RFS_PIDS[b]}" || rfs_fail "SIGCONT b"
wait_value "$B/k2" frozen20 "b after it woke"
rfs_ok "20 writes on a while b was frozen; b shows the last when it wakes"

# every regionfs connection killed on the server side (the LISTEN ones
# included): the mounts reconnect, and a psql write is still seen by all
rfs_pg_psql "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'regionfs'" >/dev/null ||
	rfs_fail "terminate the mounts' connections"
rfs_pg_psql "UPDATE regionfs.kv SET value = convert_to('killed' || chr(10), 'UTF8') WHERE region = 'r' AND key = 'k2'" ||
	rfs_fail "psql update after the kill"
for m in "$A" "$B" "$C"; do
	wait_value "$m/k2" killed "after the connections were killed -> $m"
done
rfs_ok "connections killed by the server: every mount reconnects and converges"

for m in a b c; do
	rfs_stat got "$RFS_TMP/$m/.regionfs/stats" store_doorbells_received
	rfs_stat sent "$RFS_TMP/$m/.regionfs/stats" store_doorbells_sent
	rfs_stat rec "$RFS_TMP/$m/.regionfs/stats" store_reconnects
	echo "# mount $m: doorbells sent $sent received $got, reconnects $rec"
	[ "$got" -ge 1 ] || rfs_fail "mount $m heard no doorbell"
done
rfs_ok "doorbells rung and heard, counted in the stats"

# -o store=SOURCE with the mount point alone; a password in SOURCE is
# never shown (trust authentication here ignores it)
mkdir "$RFS_TMP/d" || rfs_fail "mkdir d"
"$RFS_BIN" -f -o "config=$RFS_INI" -o "store=$RFS_DB password=s3cret" \
	"$RFS_TMP/d" </dev/null >>"$RFS_TMP/d.log" 2>&1 &
rfs_set_pid d $!
t0=$(now_ms)
until rfs_is_mounted "$RFS_TMP/d"; do
	rfs_alive d
	[ $(( $(now_ms) - t0 )) -lt "$deadline_ms" ] || rfs_fail "-o store= mount did not appear"
	sleep 0.05
done
[ "$(cat "$RFS_TMP/d/r/k2")" = killed ] || rfs_fail "-o store= mount reads '$(cat "$RFS_TMP/d/r/k2")'"
! grep -q s3cret /proc/self/mountinfo "$RFS_TMP/d/.regionfs/config" "$RFS_TMP/d.log" ||
	rfs_fail "the password shows in mountinfo, the config file or the log"
grep -q 'password=\*\*\*' /proc/self/mountinfo || rfs_fail "fsname without password=***"
rfs_ok "-o store=SOURCE mounts; its password is shown as ***"

for m in a b c d; do
	rfs_alive $m
	rfs_umount $m
done
rfs_done
