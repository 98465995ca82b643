#!/bin/bash
#
# test_kcache.sh - the kernel caches key entries, negative entries and
# attributes (fs/ops.c, fs/kinval.c), and every change of a name still
# shows exactly:
#  - a stat or reread of a cached key sends no LOOKUP (caching is on);
#  - a write through the mount, by another process or on another fd,
#    shows in stat and cat as soon as its close() has returned (checked
#    once, no polling: close() waits for the kernel's entry to go);
#  - truncate(2), rename (also onto a cached key), unlink: at once;
#  - a key created after a failed lookup (negative entry) through the
#    mount: at once; by the sqlite3 shell: once the change feed applies
#    it (polled with a deadline that is a failure bound, not a race);
#  - the sqlite3 shell's UPDATE and DELETE of a key the kernel has
#    cached: the same;
#  - a reload that changes a region's mode: the keys' modes follow.
#
# Request counts come from .regionfs/stats.

# shellcheck source=../common/harness.sh disable=SC2154 # rfs_stat uses printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
rfs_mount
M=$RFS_MNT
R=$M/main
S=$M/.regionfs/stats

# size PATH: st_size, or "none" if stat fails.
size()
{
	stat -c %s "$1" 2>/dev/null || echo none
}

# expect WHAT GOT WANT
expect()
{
	[ "$2" = "$3" ] || rfs_fail "$1: got '$2', want '$3'"
}

is_size()
{
	[ "$(size "$1")" = "$2" ]
}

# ---- caching is on --------------------------------------------------------------

printf 'hello' >"$R/a" || rfs_fail "write a"
cat "$R/a" >/dev/null
stat "$R/a" >/dev/null
rfs_stat l0 "$S" lookups
for i in 1 2 3 4 5; do
	expect "stat a" "$(size "$R/a")" 5
	expect "cat a" "$(cat "$R/a")" hello
done
rfs_stat l1 "$S" lookups
expect "LOOKUPs for 5 stats and 5 cats of a cached key" $((l1 - l0)) 0
stat "$R/missing" 2>/dev/null && rfs_fail "missing key exists"
rfs_stat l0 "$S" lookups
for i in 1 2 3; do
	stat "$R/missing" 2>/dev/null && rfs_fail "missing key exists"
done
rfs_stat l1 "$S" lookups
expect "LOOKUPs for 3 stats of a missing key" $((l1 - l0)) 0
rfs_ok "cached: stat and reread of a key, stat of a missing key, no LOOKUP"

# ---- our own writes, other processes and fds --------------------------------------

exec 3<"$R/a"
printf 'second value' >"$R/a" || rfs_fail "overwrite a"
expect "stat after another process's close" "$(size "$R/a")" 12
expect "cat after another process's close" "$(cat "$R/a")" "second value"
expect "the held reader" "$(cat <&3)" hello
exec 3<&-
if command -v python3 >/dev/null; then
	python3 - "$R/a" <<'EOF' || rfs_fail "two fds"
import os, sys
p = sys.argv[1]
r = os.open(p, os.O_RDONLY)
w = os.open(p, os.O_WRONLY | os.O_TRUNC)
os.write(w, b"xyz")
if os.stat(p).st_size != 12:
    sys.exit("a writer's pending size shows to stat by path")
os.close(w)
if os.stat(p).st_size != 3:
    sys.exit("stat after close: %d, not 3" % os.stat(p).st_size)
with open(p, "rb") as f:
    if f.read() != b"xyz":
        sys.exit("read after close is not the new value")
if os.read(r, 100) != b"second value":
    sys.exit("the fd opened before the write lost its value")
os.close(r)
EOF
	# a writer with no reader around: its open drops the kernel's entry,
	# and its close need not unless someone looked the name up since.
	# The other process starts before the writer opens (a child forked
	# later would inherit the file, and its exec's close would commit).
	python3 - "$R/w" <<'EOF' || rfs_fail "stat by another process while a writer is open"
import os, subprocess, sys
p = sys.argv[1]
other = subprocess.Popen(["bash", "-c", 'read; stat -c %s "$0"; read; stat -c %s "$0"', p],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
def other_stat():
    other.stdin.write("go\n")
    other.stdin.flush()
    return other.stdout.readline().strip()
with open(p, "wb") as f:
    f.write(b"12345")
os.stat(p)
w = os.open(p, os.O_WRONLY | os.O_TRUNC)
os.write(w, b"abcdefgh")
got = other_stat()
if got != "5":
    sys.exit("another process's stat during the write: %r, not 5" % got)
os.close(w)
got = other_stat()
if got != "8" or os.stat(p).st_size != 8:
    sys.exit("stat after close: %r / %d, not 8" % (got, os.stat(p).st_size))
other.wait()
EOF
fi
rfs_ok "a write's close(): stat and read show it at once, held fds keep theirs"

# ---- truncate, rename, unlink -------------------------------------------------------

truncate -s 2 "$R/a" || rfs_fail "truncate a"
expect "stat after truncate(2)" "$(size "$R/a")" 2
expect "cat after truncate(2)" "$(cat "$R/a")" xy
printf 'bee value' >"$R/b" || rfs_fail "write b"
expect "stat b" "$(size "$R/b")" 9
mv "$R/a" "$R/b" || rfs_fail "mv a b"
expect "stat b after mv a b" "$(size "$R/b")" 2
expect "cat b after mv a b" "$(cat "$R/b")" xy
expect "stat a after mv a b" "$(size "$R/a")" none
rm "$R/b" || rfs_fail "rm b"
expect "stat b after rm" "$(size "$R/b")" none
cat "$R/b" 2>/dev/null && rfs_fail "b still reads after rm"
printf 'again' >"$R/b" || rfs_fail "create b after rm"
expect "stat b after create" "$(size "$R/b")" 5
rfs_ok "truncate(2), rename onto a cached key, unlink, create: at once"

# ---- outside writers through the change feed -------------------------------------

printf 'cached' >"$R/o" || rfs_fail "write o"
expect "stat o" "$(size "$R/o")" 6
expect "cat o" "$(cat "$R/o")" cached
rfs_sql "UPDATE kv SET value = 'outside update' WHERE region = 'main' AND key = 'o'"
rfs_poll_until "outside UPDATE in stat" is_size "$R/o" 14
expect "cat o after the outside update" "$(cat "$R/o")" "outside update"
rfs_sql "DELETE FROM kv WHERE region = 'main' AND key = 'o'"
rfs_poll_until "outside DELETE in stat" is_size "$R/o" none
cat "$R/o" 2>/dev/null && rfs_fail "o still reads after the outside DELETE"
# a negative entry: looked up and missing, then inserted outside
expect "stat n" "$(size "$R/n")" none
expect "stat n again" "$(size "$R/n")" none
rfs_sql "INSERT INTO kv(region, key, value) VALUES ('main', 'n', 'new key')"
rfs_poll_until "outside INSERT after a failed lookup" is_size "$R/n" 7
expect "cat n" "$(cat "$R/n")" "new key"
rfs_ok "the sqlite3 shell's UPDATE, DELETE and INSERT (after ENOENT) show"

# ---- ls -l: READDIRPLUS brings the attributes -----------------------------------------

rfs_sql "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 300)
	INSERT INTO kv(region, key, value) SELECT 'other', 'l' || i, 'v' || i FROM n"
listed300()
{
	[ "$(find "$M/other" -mindepth 1 -maxdepth 1 -name 'l*' | wc -l)" = 300 ]
}
rfs_poll_until "300 keys inserted outside" listed300
rfs_stat l0 "$S" lookups
ls -l "$M/other" >"$RFS_TMP/ls.out" || rfs_fail "ls -l"
rfs_stat l1 "$S" lookups
[ "$(grep -c ' l[0-9]*$' "$RFS_TMP/ls.out")" = 300 ] || rfs_fail "ls -l lists $(grep -c ' l[0-9]*$' "$RFS_TMP/ls.out") keys"
[ $((l1 - l0)) -lt 30 ] || rfs_fail "ls -l of 300 keys: $((l1 - l0)) LOOKUPs"
expect "size from the listing" "$(awk '$NF == "l123" { print $5 }' "$RFS_TMP/ls.out")" 4
rfs_ok "ls -l of 300 keys: $((l1 - l0)) LOOKUPs (READDIRPLUS)"

# ---- a reload that changes a region's mode ------------------------------------------

expect "mode before" "$(stat -c %a "$R/b")" 644
sed -i '/^\[main\]/a mode = 0600' "$RFS_INI"
kill -HUP "$RFS_PID"
mode_is()
{
	[ "$(stat -c %a "$R/b")" = 600 ]
}
rfs_poll_until "the new mode after the reload" mode_is
rfs_ok "a reload's new mode reaches cached key attributes"

rfs_umount
rfs_ok "clean unmount, daemon exited 0"
rfs_done
