#!/bin/bash
#
# test_pagecache.sh - the kernel page cache for keys (fs/ops.c, fs/inode.c:
# one immutable inode per row): a warm reread is served by the kernel
# without a READ; a read after a write through the mount keeps the
# kernel's dentry (one LOOKUP); an open reader keeps every byte of the
# value it opened, also pages it had not read yet, across an overwrite
# (which must get past it: ESTALE and the kernel's retry) and a
# truncate(2); an O_RDWR writer sees its pending size, everyone else the
# committed one; mmap(MAP_SHARED) of a read-only key works; an outside
# writer that replaces a row keeping its size, mtime and version (DELETE
# and INSERT with the old values) still shows through the mount, and no
# read ever mixes the two values.
#
# Request counts come from .regionfs/stats. Before a count is taken the
# test waits (bounded, polling) until the daemon has processed every
# RELEASE: the kernel sends them after close() returns.

# shellcheck source=../common/harness.sh disable=SC2154 # rfs_stat uses printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
rfs_mount
M=$RFS_MNT
S=$M/.regionfs/stats
W=$RFS_TMP/work
mkdir "$W"

# wait_idle: until the daemon holds no handle but the stats file's own.
wait_idle()
{
	local i h

	for ((i = 0; i < 2000; i++)); do
		rfs_stat h "$S" open_handles
		[ "$h" -le 1 ] && return 0
		sleep 0.005
	done
	rfs_fail "handles still open after 10 s: $h"
}

# fill FILE CHAR N: N bytes of CHAR.
fill()
{
	head -c "$3" /dev/zero | tr '\0' "$2" >"$1"
}

# same FILE REF WHAT: FILE (read through the mount) is exactly REF.
same()
{
	cmp -s "$1" "$2" || rfs_fail "$3: $1 differs from $2"
}

SIZE=12388 # three pages and a bit
fill "$W/A" A $SIZE
fill "$W/B" B $SIZE

# ---- a warm reread needs no READ ---------------------------------------------

cp "$W/A" "$M/main/k" || rfs_fail "write main/k"
same "$M/main/k" "$W/A" "first read"
wait_idle
rfs_stat r0 "$S" reads
rfs_stat o0 "$S" opens
for i in 1 2 3; do
	same "$M/main/k" "$W/A" "reread $i"
done
rfs_stat r1 "$S" reads
rfs_stat o1 "$S" opens
[ "$o1" -ge $((o0 + 3)) ] || rfs_fail "rereads: opens $o0 -> $o1"
[ "$r1" = "$r0" ] || rfs_fail "rereads sent READs ($r0 -> $r1): no page cache"
rfs_ok "three warm rereads: $((o1 - o0)) OPENs, no READ"

# ---- a read after a write keeps the dentry -------------------------------------

cp "$W/B" "$M/main/k" || rfs_fail "overwrite main/k"
wait_idle
rfs_stat l0 "$S" lookups
rfs_stat r0 "$S" reads
rfs_stat f0 "$S" kernel_fills
same "$M/main/k" "$W/B" "read after write"
rfs_stat l1 "$S" lookups
rfs_stat r1 "$S" reads
rfs_stat f1 "$S" kernel_fills
[ "$l1" = $((l0 + 1)) ] ||
	rfs_fail "read after write: $((l1 - l0)) LOOKUPs, not 1 (dentry lost)"
# the open filled the page cache (test_fill.sh has the details)
[ "$f1" = $((f0 + 1)) ] && [ "$r1" = "$r0" ] ||
	rfs_fail "read after write: $((f1 - f0)) fills, $((r1 - r0)) READs (want 1, 0)"
rfs_ok "a read after a write: one LOOKUP, the writer's inode serves the row"

# ---- an open reader keeps its value across an overwrite ------------------------

exec 3<"$M/main/k"
head -c 4096 <&3 >"$W/part1" || rfs_fail "read the first page"
cp "$W/A" "$M/main/k" || rfs_fail "overwrite while a reader holds the file"
cat <&3 >"$W/part2" || rfs_fail "read the rest"
exec 3<&-
cat "$W/part1" "$W/part2" >"$W/got"
same "$W/got" "$W/B" "the open reader"
same "$M/main/k" "$W/A" "a new reader after the overwrite"
rfs_ok "an open reader reads all of its value, before and after an overwrite"

# ---- truncate(2) of a key a reader holds open -----------------------------------

exec 3<"$M/main/k"
truncate -s 5 "$M/main/k" || rfs_fail "truncate -s 5"
cat <&3 >"$W/got" || rfs_fail "read the held file"
exec 3<&-
same "$W/got" "$W/A" "the reader held across truncate"
[ "$(cat "$M/main/k")" = AAAAA ] || rfs_fail "new reader after truncate"
[ "$(stat -c %s "$M/main/k")" = 5 ] || rfs_fail "size after truncate"
rfs_ok "truncate(2): a held reader keeps its value, new readers see 5 bytes"

# ---- an O_RDWR writer's pending size ---------------------------------------------

# (not from the shell: a builtin's redirection closes a dup of the file,
# and every close() commits)
if command -v python3 >/dev/null; then
	python3 - "$M/main/k" <<'EOF' || rfs_fail "O_RDWR pending size"
import os, sys
p = sys.argv[1]
fd = os.open(p, os.O_RDWR)
os.write(fd, b"0123456789")
mine, theirs = os.fstat(fd).st_size, os.stat(p).st_size
end = os.lseek(fd, 0, os.SEEK_END)
if (mine, theirs, end) != (10, 5, 10):
    sys.exit("writer fstat %d lseek %d, others %d (want 10 10 5)"
             % (mine, end, theirs))
os.close(fd)
if os.stat(p).st_size != 10 or open(p, "rb").read() != b"0123456789":
    sys.exit("after close: not committed")
EOF
	rfs_ok "an O_RDWR writer sees its pending size, others the committed one"
else
	echo "# python3 missing: O_RDWR check skipped"
fi

# ---- mmap -------------------------------------------------------------------------

cp "$W/B" "$M/main/k" || rfs_fail "write main/k for mmap"
if command -v python3 >/dev/null; then
	python3 - "$M/main/k" "$W/mmap" <<'EOF' || rfs_fail "mmap(MAP_SHARED)"
import mmap, sys
with open(sys.argv[1], "rb") as f, open(sys.argv[2], "wb") as out:
    m = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ)
    out.write(m[:])
    m.close()
EOF
	same "$W/mmap" "$W/B" "mmap"
	rfs_ok "mmap(MAP_SHARED, PROT_READ) of a key reads its value"
else
	echo "# python3 missing: mmap check skipped"
fi

# ---- an outside writer keeping size, mtime and version ------------------------------

if command -v sqlite3 >/dev/null; then
	sql()
	{
		sqlite3 -batch -bail -cmd '.timeout 10000' "$RFS_DB" "$@" ||
			rfs_fail "sqlite3: $*"
	}
	same "$M/main/k" "$W/B" "before the outside replace"
	row=$(sql "SELECT size || ' ' || mtime_ns || ' ' || version FROM kv
		WHERE region = 'main' AND key = 'k'")
	read -r size mtime version <<<"$row"
	[ "$size" = $SIZE ] || rfs_fail "stored size $size"
	exec 3<"$M/main/k"
	fill "$W/C" C $SIZE
	sql "BEGIN; DELETE FROM kv WHERE region = 'main' AND key = 'k';
	     INSERT INTO kv(region, key, value, size, mtime_ns, version)
	     VALUES ('main', 'k',
	             CAST(replace(hex(zeroblob($SIZE)), '00', 'C') AS BLOB),
	             $size, $mtime, $version);
	     COMMIT;"
	[ "$(sql "SELECT size || ' ' || mtime_ns || ' ' || version FROM kv
		WHERE region = 'main' AND key = 'k'")" = "$row" ] ||
		rfs_fail "the replaced row does not keep size, mtime and version"
	seen=
	for ((i = 0; i < 2000; i++)); do
		cat "$M/main/k" >"$W/got" || rfs_fail "read during the replace"
		if cmp -s "$W/got" "$W/C"; then
			seen=1
			break
		fi
		cmp -s "$W/got" "$W/B" || rfs_fail "a read mixed old and new bytes"
		sleep 0.001
	done
	[ -n "$seen" ] || rfs_fail "the outside replace never showed"
	cat <&3 >"$W/got" || rfs_fail "read the held reader"
	exec 3<&-
	same "$W/got" "$W/B" "a reader held across the outside replace"
	same "$M/main/k" "$W/C" "a read after the outside replace showed"
	rfs_ok "an outside replace keeping size, mtime and version shows after $i polls"
else
	echo "# sqlite3 missing: outside replace check skipped"
fi

rfs_umount
rfs_ok "clean unmount, daemon exited 0"
rfs_done
