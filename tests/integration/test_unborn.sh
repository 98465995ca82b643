#!/bin/bash
#
# test_unborn.sh - one commit per create. A key made by open(O_CREAT) is
# stored by its writer's first commit, with the data (close() or fsync();
# a close() before any write stores it empty); until then it is "unborn"
# (fs/commit.c): this mount shows it as an empty file to everyone else
# exactly as when the create committed an empty row at once, because
# whoever else needs its row (a LOOKUP, a listing, an open, an unlink, a
# rename, another create) commits that empty row first. Checked here
# with halfwriter (one descriptor, no close before the end) and the
# store's counters and rows.

# shellcheck source=harness.sh disable=SC2154 # rfs_stat uses printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"
# shellcheck source=../common/halfwriter.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/halfwriter.sh"

command -v sqlite3 >/dev/null || rfs_skip "sqlite3 is missing"
rfs_init
M=$RFS_MNT
ST=$M/.regionfs/stats
hw_setup 5000

rows() { sqlite3 "$RFS_DB" "SELECT count(*) FROM kv WHERE key = '$1'"; }

rfs_mount
echo x >"$M/main/warm" || rfs_fail "write main/warm"

# nobody looks: one store commit for create, write and close
rfs_stat c0 "$ST" store_commits
hw_start "$M/main/one"
[ "$(rows one)" = 0 ] || rfs_fail "the unborn key main/one is in the store"
hw_finish "closed 0"
rfs_stat c1 "$ST" store_commits
[ $((c1 - c0)) = 1 ] || rfs_fail "create+write+close took $((c1 - c0)) commits"
cmp -s "$M/main/one" "$W/full" || rfs_fail "main/one is not what was written"
rfs_ok "create, write, close: one store commit"

# a stat from another process sees the empty key (and stores it)
hw_start "$M/main/two"
[ -f "$M/main/two" ] || rfs_fail "the created main/two is not there for stat"
[ "$(stat -c %s "$M/main/two")" = 0 ] || rfs_fail "main/two is not empty"
[ "$(rows two)" = 1 ] || rfs_fail "main/two was looked up but is not stored"
[ -z "$(cat "$M/main/two")" ] || rfs_fail "cat main/two is not empty"
hw_finish "closed 0"
cmp -s "$M/main/two" "$W/full" || rfs_fail "main/two is not what was written"
rfs_ok "an unborn key is an empty file for stat and cat, as before"

# a listing shows it
hw_start "$M/main/three"
ls "$M/main" | grep -qx three || rfs_fail "ls does not list main/three"
[ "$(rows three)" = 1 ] || rfs_fail "main/three was listed but is not stored"
hw_finish "closed 0"
rfs_ok "an unborn key is listed"

# O_EXCL sees it; rename and unlink of it
hw_start "$M/main/four"
rfs_expect_err "File exists" sh -c "set -C; : >'$M/main/four'"
hw_finish "closed 0"
hw_start "$M/main/five"
mv "$M/main/five" "$M/main/six" || rfs_fail "mv of the unborn main/five"
hw_finish "closed 0"
[ ! -e "$M/main/five" ] || rfs_fail "main/five is still there after mv"
cmp -s "$M/main/six" "$W/full" || rfs_fail "the writer's data did not follow mv"
hw_start "$M/main/seven"
rm "$M/main/seven" || rfs_fail "rm of the unborn main/seven"
hw_finish "closed 0"
[ ! -e "$M/main/seven" ] || rfs_fail "main/seven came back after rm"
[ "$(rows seven)" = 0 ] || rfs_fail "main/seven is in the store after rm"
rfs_ok "O_EXCL, mv and rm of an unborn key act as on a stored empty one"

# a writer that ends without a commit (killed before its close) leaves
# nothing: its create was never stored
hw_start "$M/main/eight"
kill -9 "$HWPID"
wait "$HWPID" 2>/dev/null
exec 7>&- 8<&-
[ "$(rows eight)" = 1 ] || rfs_fail "main/eight: the exit's close did not store it"
rfs_ok "a writer's exit closes and stores its key"
rfs_umount
rfs_done
