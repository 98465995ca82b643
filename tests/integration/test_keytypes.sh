#!/bin/bash
#
# test_keytypes.sh - keys of every SQLite type written by an outside writer
# (the sqlite3 shell), as doc/schema.md defines them: a TEXT key is a file
# name; INTEGER and REAL keys become TEXT through the column's affinity and
# show under their text ("42", "1.5"); a NULL key is refused by SQLite
# (NOT NULL); a BLOB key (what Python's sqlite3 binds for bytes) is not a
# file name: listing, lookup and the change feed all ignore it, and it no
# longer makes a listing endless (it sorted after every TEXT key, so the
# `key > last` cursor returned it forever). A row whose region is a BLOB
# belongs to no region.

# shellcheck source=harness.sh disable=SC2154 # rfs_stat uses printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

command -v sqlite3 >/dev/null || rfs_fail "the sqlite3 shell is not installed"
rfs_init
rfs_mount
M=$RFS_MNT
ST=$M/.regionfs/stats

sq()
{
	sqlite3 -batch -bail -cmd '.timeout 10000' "$RFS_DB" "$@"
}

echo a >"$M/main/a" || rfs_fail "write main/a"
blobname=$(printf 'caf\351')

sq "INSERT INTO kv(region, key, value) VALUES ('main', X'636166e9', X'78');
    INSERT INTO kv(region, key, value) VALUES ('main', 42, X'34');
    INSERT INTO kv(region, key, value) VALUES ('main', 1.5, X'35');
    INSERT INTO kv(region, key, value) VALUES (X'6d61696e', 'rb', X'36');" ||
	rfs_fail "outside inserts"
rfs_expect_err "NOT NULL constraint failed" \
	sq "INSERT INTO kv(region, key, value) VALUES ('main', NULL, X'37')"
[ "$(sq "SELECT group_concat(typeof(key), ' ') FROM
	(SELECT key FROM kv ORDER BY key)")" = "text text text text blob" ] ||
	rfs_fail "key types in the table: $(sq "SELECT typeof(key) FROM kv")"
rfs_ok "outside writer: BLOB, INTEGER, REAL keys stored, NULL refused"

got=$(timeout 20 ls "$M/main" | tr '\n' ' ') ||
	rfs_fail "ls main did not finish in 20 s (endless listing?)"
[ "$got" = "1.5 42 a " ] || rfs_fail "ls main lists '$got'"
rfs_ok "listing ends and shows the TEXT keys (INTEGER/REAL as text) only"

[ "$(cat "$M/main/42")" = 4 ] || rfs_fail "cat main/42"
[ "$(cat "$M/main/1.5")" = 5 ] || rfs_fail "cat main/1.5"
rfs_expect_err "No such file or directory" cat "$M/main/$blobname"
rfs_expect_err "No such file or directory" cat "$M/main/rb"
rfs_ok "lookup: numeric keys by their text, BLOB key and BLOB region absent"

# a TEXT key with the BLOB key's bytes is a different row, and is served
printf text >"$M/main/$blobname" || rfs_fail "write the TEXT twin"
[ "$(cat "$M/main/$blobname")" = text ] || rfs_fail "cat the TEXT twin"
[ "$(sq "SELECT count(*) FROM kv WHERE CAST(key AS BLOB) = X'636166e9'")" = 2 ] ||
	rfs_fail "the TEXT twin replaced the BLOB row"
got=$(timeout 20 ls "$M/main" | tr '\n' ' ') || rfs_fail "ls main (twin)"
[ "$got" = "1.5 42 a $blobname " ] || rfs_fail "ls main lists '$got' (twin)"
rm "$M/main/$blobname" || rfs_fail "rm the TEXT twin"
[ "$(sq "SELECT typeof(key) FROM kv WHERE CAST(key AS BLOB) = X'636166e9'")" = blob ] ||
	rfs_fail "rm of the TEXT twin touched the BLOB row"
rfs_ok "a TEXT key with the same bytes is its own file; rm leaves the BLOB row"

# the change feed: a change of a BLOB-keyed row (or a BLOB region) is no
# change of any file; one transaction with a TEXT change too, so the feed
# reads all of them in one pass
rfs_stat c0 "$ST" feed_changes
sq "BEGIN;
    UPDATE kv SET value = X'79' WHERE key = X'636166e9';
    UPDATE kv SET value = X'79' WHERE region = X'6d61696e';
    UPDATE kv SET value = X'38' WHERE region = 'main' AND key = '42';
    COMMIT;" || rfs_fail "outside updates"
for ((i = 0; i < 200; i++)); do
	rfs_stat c1 "$ST" feed_changes
	[ "$c1" -gt "$c0" ] && break
	sleep 0.05
done
[ "$c1" -eq $((c0 + 1)) ] ||
	rfs_fail "feed_changes went $c0 -> $c1, expected one change (42 only)"
[ "$(cat "$M/main/42")" = 8 ] || rfs_fail "main/42 after the outside update"
rfs_ok "the change feed applies the TEXT key's change only"

rfs_umount
rfs_done
