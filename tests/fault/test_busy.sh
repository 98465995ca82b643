#!/bin/bash
#
# test_busy.sh - an outside writer holds SQLite's write lock (the sqlite3
# shell in BEGIN IMMEDIATE). doc/schema.md: writes through the mount wait
# for the busy timeout (5 s) and then fail with EAGAIN; reads are never
# blocked (WAL).
#  1. while the lock is held: every key reads back as written, from a
#     cold cache (reads go to SQLite) and listings work; a create, an
#     overwrite, a rename and an unlink, run at once, each fail with
#     EAGAIN after waiting at least the busy timeout, and change nothing;
#     the failures are counted (store_errors_busy) and logged;
#  2. a write that starts while the lock is held and is seen waiting
#     (store_busy_retries moves) succeeds once the outside writer lets go;
#  3. after that, random operations all work and the keys are as the
#     model says, also after a remount.

# shellcheck source=../common/harness.sh disable=SC2154
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
rfs_helper FAULTOPS faultops
D=$RFS_MNT/main
STATE=$RFS_TMP/model
ST=$RFS_MNT/.regionfs/stats
EAGAIN_MSG="Resource temporarily unavailable"

rfs_mount
"$FAULTOPS" run "$D" "$STATE" 1 80 none || rfs_fail "faultops: populate"
printf 'old value\n' >"$RFS_MNT/other/old" || rfs_fail "write other/old"
rfs_umount
rfs_mount # a cold cache: the reads below go to SQLite

# hold_lock: the sqlite3 shell takes the write lock and keeps it until
# release_lock.
SQLIN=$RFS_TMP/sql.in
hold_lock()
{
	local i

	rm -f "$SQLIN" "$RFS_TMP/sql.out"
	mkfifo "$SQLIN" || rfs_fail "mkfifo"
	sqlite3 -batch "$RFS_DB" <"$SQLIN" >"$RFS_TMP/sql.out" 2>&1 &
	SQLPID=$!
	RFS_CHILDREN="$RFS_CHILDREN $SQLPID"
	exec 7>"$SQLIN"
	printf '.timeout 10000\nBEGIN IMMEDIATE;\nSELECT '"'"'locked'"'"';\n' >&7
	for ((i = 0; i < 1000; i++)); do
		grep -q '^locked$' "$RFS_TMP/sql.out" && return 0
		kill -0 "$SQLPID" 2>/dev/null || break
		sleep 0.01
	done
	rfs_fail "the sqlite3 shell did not take the lock: $(cat "$RFS_TMP/sql.out")"
}

release_lock()
{
	printf 'ROLLBACK;\n.quit\n' >&7
	exec 7>&-
	wait "$SQLPID" || rfs_fail "sqlite3 shell: $(cat "$RFS_TMP/sql.out")"
	RFS_CHILDREN=${RFS_CHILDREN/ $SQLPID/}
}

# an existing key to overwrite, rename and unlink, and a free name
present=$(awk '$4 == 0 { printf "%s ", $1 }' "$STATE")
set -- $present
[ $# -ge 3 ] || rfs_fail "the model holds fewer than 3 keys"
K1=$1 K2=$2
free=
for k in k00 k01 k02 k03 k04 k05 k06 k07 k08 k09 k10 k11 k12 k13 k14 k15; do
	case " $present " in *" $k "*) ;; *) free=$k; break ;; esac
done
[ -n "$free" ] || rfs_fail "no free key name"
rfs_stat busy0 "$ST" store_errors_busy

hold_lock
"$FAULTOPS" verify "$D" "$STATE" || rfs_fail "reads while the lock is held"
rfs_ok "lock held: every key reads back from SQLite, the listing is right"

t0=$(date +%s%N)
# cp, not the shell: a shell's redirection ignores what close() returns.
# The create and the unlink are in other regions: the kernel runs the
# creates, renames and unlinks of one directory one after another, and
# each would wait the whole timeout.
printf 'new value\n' >"$RFS_TMP/new"
( rfs_expect_err "$EAGAIN_MSG" cp "$RFS_TMP/new" "$RFS_MNT/small/new" ) & p1=$!
( rfs_expect_err "$EAGAIN_MSG" cp "$RFS_TMP/new" "$D/$K1" ) & p2=$!
( rfs_expect_err "$EAGAIN_MSG" mv "$D/$K2" "$D/$free.r" ) & p3=$!
( rfs_expect_err "$EAGAIN_MSG" rm "$RFS_MNT/other/old" ) & p4=$!
RFS_CHILDREN="$RFS_CHILDREN $p1 $p2 $p3 $p4"
for p in $p1 $p2 $p3 $p4; do
	wait "$p" || rfs_fail "a write did not fail with EAGAIN (see above)"
done
RFS_CHILDREN=${RFS_CHILDREN/ $p1 $p2 $p3 $p4/}
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -ge 4900 ] || rfs_fail "the writes failed after $ms ms, before the 5 s busy timeout"
rfs_alive
"$FAULTOPS" verify "$D" "$STATE" || rfs_fail "a failed write changed something"
[ "$(cat "$RFS_MNT/other/old")" = "old value" ] || rfs_fail "other/old changed"
[ ! -e "$RFS_MNT/small/new" ] && [ ! -e "$D/$free.r" ] ||
	rfs_fail "a failed create or rename left a name behind"
rfs_stat busy1 "$ST" store_errors_busy
[ "$busy1" -ge $((busy0 + 4)) ] || rfs_fail "store_errors_busy $busy0 -> $busy1"
grep -q "store error (busy)" "$RFS_LOG" || rfs_fail "no busy error in the log"
rfs_ok "lock held: create, overwrite, rename, unlink waited $ms ms and failed with EAGAIN, changed nothing, counted and logged"

# 2. a write waiting for the lock succeeds once it is released. It is
# seen waiting when the thread running its batch sleeps in the store's
# busy handler (nanosleep; otherwise threads wait on a condition variable
# or on /dev/fuse): the writer thread (regionfs-store) or the FUSE worker
# that leads its own commit (regionfs-fuse, fs/loop.c; store/sqlite.c).
# Only those two count: other threads nap too (regionfs-feed after a
# database event; under TSan its runtime's background thread, named like
# the main thread, sleeps periodically), and the outside writer holding
# the lock writes nothing.
napping()
{
	local t comm wchan
	for t in /proc/"$RFS_PID"/task/*; do # read, not cat: no fork per thread
		read -r comm <"$t/comm" 2>/dev/null || continue
		case $comm in
		regionfs-store | regionfs-fuse) ;;
		*) continue ;;
		esac
		wchan=
		read -r wchan <"$t/wchan" 2>/dev/null # no newline: read says 1
		case $wchan in
		*nanosleep*) return 0 ;;
		esac
	done
	return 1
}
rfs_stat r0 "$ST" store_busy_retries
printf 'after the lock\n' >"$RFS_TMP/val"
( cp "$RFS_TMP/val" "$D/$free" ) & pw=$!
RFS_CHILDREN="$RFS_CHILDREN $pw"
for ((i = 0; i < 400; i++)); do
	napping && break
	sleep 0.01
done
[ "$i" -lt 400 ] || rfs_fail "the writer never waited for the lock"
release_lock
wait "$pw" || rfs_fail "a write waiting for the lock failed after it was released"
RFS_CHILDREN=${RFS_CHILDREN/ $pw/}
cmp -s "$RFS_TMP/val" "$D/$free" || rfs_fail "the waiting write's value"
rfs_stat r1 "$ST" store_busy_retries
[ "$r1" -gt "$r0" ] || rfs_fail "store_busy_retries $r0 -> $r1"
rm "$D/$free" || rfs_fail "rm $free"
# the writes whose close() failed stay failed: nothing (the RELEASE after
# the close, before the fix) stores their bytes once the lock is gone
"$FAULTOPS" verify "$D" "$STATE" || rfs_fail "a write whose close() failed was stored after the lock went"
rfs_ok "a write that waited for the lock succeeded once it was released; the failed ones stayed failed"

"$FAULTOPS" run "$D" "$STATE" 3 80 none || rfs_fail "operations after the lock"
rfs_umount
rfs_mount
"$FAULTOPS" verify "$D" "$STATE" || rfs_fail "after a remount"
rfs_umount
rfs_ok "after the lock: every operation works, the keys are as the model says after a remount"
rfs_done
