#!/bin/bash
#
# test_dbgone.sh - the database file deleted (rm) or replaced (mv another
# database over it) under a running mount. Before, writes kept "succeeding"
# into the unlinked file and were lost at the next mount. Now the first
# change after it fails with EIO (the writer checks the file's device and
# inode before each transaction), every key operation fails with EIO from
# then on, the log says what happened, store_file_lost is 1 in the stats
# and metrics, and the replacing database is left intact: the daemon's
# old WAL is not applied to it, at unmount or at the next mount.

# shellcheck source=harness.sh disable=SC2154 # rfs_stat uses printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

command -v sqlite3 >/dev/null || rfs_fail "the sqlite3 shell is not installed"
rfs_init
M=$RFS_MNT
ST=$M/.regionfs/stats

# expect_eio CMD...: CMD must fail with EIO. A shell write to a new or
# existing key fails at the create or open when the feed thread has
# already seen the file go (its 50 ms poll), else at the commit in
# close(): dash says "Input/output error" for the first, "I/O error" for
# the second. Either is the EIO this test wants.
expect_eio()
{
	local out
	if out=$("$@" 2>&1); then
		rfs_fail "succeeded, expected EIO: $*"
	fi
	case $out in
	*"Input/output error"* | *"I/O error"*) ;;
	*) rfs_fail "expected EIO from: $* -- got: $out" ;;
	esac
}

# ---- rm -------------------------------------------------------------------

rfs_mount
echo one >"$M/main/k1" || rfs_fail "write main/k1"
rm "$RFS_DB" || rfs_fail "rm the database"
expect_eio sh -c "echo two >'$M/main/k2'"
rfs_ok "rm database: the next write fails with EIO"
rfs_expect_err "Input/output error" cat "$M/main/k1"
rfs_expect_err "Input/output error" ls "$M/main"
rfs_ok "rm database: reads and listings fail with EIO, not ghost data"
rfs_stat v "$ST" store_file_lost
[ "$v" = 1 ] || rfs_fail "store_file_lost is $v after rm"
rfs_stat v "$ST" store_errors_lost
[ "$v" -ge 1 ] || rfs_fail "store_errors_lost is $v"
grep -qx 'regionfs_store_file_lost 1' "$M/.regionfs/metrics.prom" ||
	rfs_fail "metrics.prom has no regionfs_store_file_lost 1"
for ((i = 0; i < 200; i++)); do # the feed thread logs it (50 ms poll)
	grep -q "was deleted or replaced under the mount" "$RFS_LOG" && break
	sleep 0.05
done
grep -q "database $RFS_DB was deleted or replaced under the mount" "$RFS_LOG" ||
	rfs_fail "the log does not say the database was deleted or replaced"
rfs_ok "rm database: stats, metrics and the log say so"
rfs_umount
rfs_ok "rm database: unmounts cleanly"

# ---- mv other.db over it ------------------------------------------------------

rm -f "$RFS_DB" "$RFS_DB-wal" "$RFS_DB-shm"
rfs_mount
echo one >"$M/main/k1" || rfs_fail "write main/k1 (2)"
sqlite3 -bail "$RFS_DB" ".timeout 10000" ".backup '$RFS_TMP/other.db'" ||
	rfs_fail "backup to other.db"
sqlite3 -bail "$RFS_TMP/other.db" \
	"UPDATE kv SET value = CAST('other' AS BLOB) WHERE key = 'k1'" ||
	rfs_fail "update other.db"
mv "$RFS_TMP/other.db" "$RFS_DB" || rfs_fail "mv other.db over the database"
expect_eio sh -c "echo two >'$M/main/k1'"
expect_eio sh -c "echo three >'$M/main/k3'"
rfs_ok "mv over the database: writes fail with EIO"
rfs_umount
[ "$(sqlite3 "$RFS_DB" "PRAGMA integrity_check")" = ok ] ||
	rfs_fail "the replacing database is damaged"
[ "$(sqlite3 "$RFS_DB" "SELECT CAST(value AS TEXT) FROM kv WHERE key = 'k1'")" = other ] ||
	rfs_fail "the replacing database lost its k1"
[ "$(sqlite3 "$RFS_DB" "SELECT count(*) FROM kv WHERE key = 'k3'")" = 0 ] ||
	rfs_fail "a write after the replacement reached the new database"
rfs_mount
[ "$(cat "$M/main/k1")" = other ] || rfs_fail "k1 after remount"
[ ! -e "$M/main/k3" ] || rfs_fail "k3 exists after remount"
rfs_stat v "$ST" store_file_lost
[ "$v" = 0 ] || rfs_fail "store_file_lost is $v after remount"
rfs_umount
rfs_ok "mv over the database: the new file is intact at the next mount"
rfs_done
