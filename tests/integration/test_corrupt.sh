#!/bin/bash
#
# test_corrupt.sh - a damaged page in the database (a broken overflow
# chain of one key's value). Before, reads and rm of the key failed with
# EIO, nothing was logged, and only errors_total moved (which counts every
# ENOENT lookup too). Now each store error is logged with SQLite's message
# and the key, counted by kind (store_errors_corrupt, and
# regionfs_store_failures_total{kind="corrupt"}), a lookup of a missing
# name counts in no store_errors_* line, the other keys are served, and
# the salvage procedure of doc/schema.md ("A damaged database") removes
# the damaged key while keeping every other one.

# shellcheck source=harness.sh disable=SC2154 # rfs_stat uses printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

command -v sqlite3 >/dev/null || rfs_fail "the sqlite3 shell is not installed"
rfs_init
M=$RFS_MNT
ST=$M/.regionfs/stats

store_errors_sum()
{
	awk '$1 ~ /^store_errors_/ { s += $2 } END { print s + 0 }' "$ST"
}

rfs_mount
echo good >"$M/main/good" || rfs_fail "write main/good"
head -c 200000 /dev/urandom >"$M/main/bad" || rfs_fail "write main/bad"
echo other >"$M/other/k" || rfs_fail "write other/k"
rfs_umount

# the head of bad's overflow chain points past the end of the file
page=$(sqlite3 "$RFS_DB" "SELECT pageno FROM dbstat WHERE name = 'kv'
	AND pagetype = 'overflow' ORDER BY path LIMIT 1") ||
	rfs_skip "this sqlite3 has no dbstat table"
psize=$(sqlite3 "$RFS_DB" "PRAGMA page_size")
printf '\177\377\377\377' |
	dd of="$RFS_DB" bs=1 seek=$(((page - 1) * psize)) conv=notrunc 2>/dev/null ||
	rfs_fail "dd into page $page"
rfs_ok "damaged the overflow chain of main/bad (page $page)"

rfs_mount
e0=$(store_errors_sum)
for i in 1 2 3; do
	rfs_expect_err "No such file or directory" cat "$M/main/missing$i"
done
[ "$(store_errors_sum)" = "$e0" ] ||
	rfs_fail "ENOENT lookups counted as store errors ($e0 -> $(store_errors_sum))"
rfs_ok "a missing key is no store error"

rfs_expect_err "Input/output error" cat "$M/main/bad"
[ "$(cat "$M/main/good")" = good ] || rfs_fail "main/good beside the damage"
[ "$(cat "$M/other/k")" = other ] || rfs_fail "other/k beside the damage"
rfs_stat v "$ST" store_errors_corrupt
[ "$v" -ge 1 ] || rfs_fail "store_errors_corrupt is $v"
grep -q '^regionfs_store_failures_total{kind="corrupt"} [1-9]' \
	"$M/.regionfs/metrics.prom" || rfs_fail "no corrupt failures in metrics.prom"
grep -Eq "store error \(corrupt\) in (stat|load) main/bad: database disk image is malformed" \
	"$RFS_LOG" || rfs_fail "the damaged read is not logged with its key"
rfs_ok "reading the damaged key: EIO, logged with the key and SQLite's message, counted as corrupt"

n0=$(grep -c "store error (corrupt)" "$RFS_LOG")
rfs_expect_err "Input/output error" rm "$M/main/bad"
[ "$(grep -c "store error (corrupt)" "$RFS_LOG")" -gt "$n0" ] ||
	rfs_fail "the failed rm is not logged"
rfs_ok "rm of the damaged key: EIO (SQLite cannot free its pages), logged"
rfs_umount

# the salvage procedure of doc/schema.md, as an operator runs it
DB=$RFS_DB
NEW=$RFS_TMP/salvaged.db
sqlite3 -bail "$DB" ".schema --nosys" >"$RFS_TMP/schema.sql" ||
	rfs_fail "dump the schema"
sqlite3 -bail "$NEW" >/dev/null <<SQL || rfs_fail "salvage into $NEW"
.read $RFS_TMP/schema.sql
PRAGMA user_version = $(sqlite3 "$DB" "PRAGMA user_version");
PRAGMA journal_mode = WAL;
ATTACH '$DB' AS old;
INSERT INTO kv SELECT * FROM old.kv
  WHERE NOT (region = 'main' AND key = 'bad');
DELETE FROM changes;
SQL

[ "$(sqlite3 "$NEW" "PRAGMA integrity_check")" = ok ] ||
	rfs_fail "the salvaged database is not ok"
chmod 0600 "$NEW"
mv "$NEW" "$DB" || rfs_fail "mv the salvaged database into place"
rm -f "$DB-wal" "$DB-shm"
rfs_mount
[ "$(ls "$M/main")" = good ] || rfs_fail "main lists '$(ls "$M/main")' after salvage"
[ "$(cat "$M/main/good")" = good ] || rfs_fail "main/good after salvage"
[ "$(cat "$M/other/k")" = other ] || rfs_fail "other/k after salvage"
echo new >"$M/main/bad" || rfs_fail "write main/bad after salvage"
[ "$(cat "$M/main/bad")" = new ] || rfs_fail "main/bad after salvage"
rfs_umount
rfs_ok "the documented salvage removes the damaged key and keeps the others"
rfs_done
