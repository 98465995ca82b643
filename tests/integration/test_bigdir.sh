#!/bin/bash
#
# test_bigdir.sh - a region with 100,000 keys lists completely.
#
# The keys are bulk-loaded with the sqlite3 shell (a supported interface,
# doc/schema.md) between two mounts: the first mount creates the schema.
# listdir then reads the directory twice through readdir and requires
# exactly the names k000000..k099999, each once; ls agrees, and a few keys
# read back their values (loaded on demand, the listing loads none).

# shellcheck source=../common/harness.sh disable=SC2154 # rfs_stat/rfs_helper use printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

N=100000
rfs_init
rfs_helper LISTDIR listdir
command -v sqlite3 >/dev/null || rfs_fail "the sqlite3 shell is not installed"
cat >>"$RFS_INI" <<'INI'

[big]
max_entries = 1000
INI

rfs_mount
echo probe >"$RFS_MNT/big/probe" && rm "$RFS_MNT/big/probe" ||
	rfs_fail "cannot write to big"
rfs_umount

sqlite3 -bail "$RFS_DB" >/dev/null <<SQL || rfs_fail "bulk load with sqlite3"
PRAGMA busy_timeout = 5000;
BEGIN;
WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i < $N - 1)
INSERT INTO kv(region, key, value, size, mtime_ns, version)
SELECT 'big', printf('k%06d', i), CAST('value ' || i AS BLOB),
       length('value ' || i), 1700000000000000000, 1 FROM c;
COMMIT;
SQL
[ "$(sqlite3 "$RFS_DB" "SELECT count(*) FROM kv WHERE region = 'big'")" = $N ] ||
	rfs_fail "the bulk load did not insert $N rows"
rfs_ok "bulk-loaded $N keys with sqlite3"

rfs_mount
M=$RFS_MNT
rfs_stat loads0 "$M/.regionfs/regions/big/stats" loads
"$LISTDIR" "$M/big" $N k 6 || rfs_fail "listdir"
rfs_ok "readdir returns exactly the $N names, twice"

[ "$(ls "$M/big" | wc -l)" = $N ] || rfs_fail "ls counts $(ls "$M/big" | wc -l)"
[ "$(ls "$M/big" | sed -n '1p;50001p;100000p' | tr '\n' ' ')" = \
	"k000000 k050000 k099999 " ] || rfs_fail "ls order or names"
rfs_stat loads1 "$M/.regionfs/regions/big/stats" loads
[ "$loads1" = "$loads0" ] || rfs_fail "listing loaded values ($loads0 -> $loads1)"
rfs_ok "ls agrees; listing loaded no values"

for i in 0 1 12345 54321 99999; do
	k=$(printf 'k%06d' "$i")
	[ "$(cat "$M/big/$k")" = "value $i" ] || rfs_fail "big/$k"
	[ "$(stat -c %s "$M/big/$k")" = $((6 + ${#i})) ] ||
		rfs_fail "size of big/$k"
done
rfs_stat v "$M/.regionfs/regions/big/stats" keys_stored
[ "$v" = $N ] || rfs_fail "keys_stored $v"
rfs_ok "bulk-loaded keys read back; keys_stored is $N"

rfs_umount
rfs_done
