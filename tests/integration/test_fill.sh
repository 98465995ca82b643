#!/bin/bash
#
# test_fill.sh - the first page-cache open of a key's inode stores the
# value into the kernel's page cache before its reply (fs/ops.c,
# fs/inode.c "Filling"; FUSE_NOTIFY_STORE), so the first read after a
# write sends no READ, and, no READ having marked the atime stale, the
# stat() and fstat() after it send no GETATTR. Requests are counted from
# the daemon's -d output (as tests/bench/count_requests.sh does) and from
# .regionfs/stats; every read is compared byte for byte:
#  - a value written through the mount, then read: LOOKUP, OPEN (and the
#    asynchronous RELEASE), no READ; the next stat and cat: no GETATTR,
#    no READ, no LOOKUP;
#  - a rewrite read back: no READ, the new bytes; a held reader of the
#    old value keeps it;
#  - a value of a few pages and a bit (the last page partly filled), read
#    whole, by its tail, and through mmap; its size as written (the
#    store does not extend it);
#  - one at the bound (128 KiB): stored; an empty value and one over the
#    bound (128 KiB + 1 byte): not stored, READ serves them, whole;
#  - eight readers racing to the first open of a new value all read it;
#  - kernel_fills and kernel_fill_bytes count the stores,
#    kernel_fill_failures none.

# shellcheck source=../common/harness.sh disable=SC2154 # rfs_stat uses printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
rfs_mount -d
M=$RFS_MNT
R=$M/main
S=$M/.regionfs/stats
W=$RFS_TMP/work
mkdir "$W"

# settle: until the daemon holds no handle but the stats file's own (and
# $held more), so that every asynchronous RELEASE of the last step is in
# the log.
held=0
settle()
{
	local i h

	for ((i = 0; i < 2000; i++)); do
		rfs_stat h "$S" open_handles
		[ "$h" -le $((1 + held)) ] && return 0
		sleep 0.005
	done
	rfs_fail "handles still open after 10 s: $h"
}

# mark: the log's length now; ops OPCODE: how many requests of OPCODE
# since the last mark, but for .regionfs/ (node 2) and its stats (node 3).
mark()
{
	settle
	logmark=$(wc -l <"$RFS_LOG")
}
ops()
{
	settle
	tail -n +"$((logmark + 1))" "$RFS_LOG" | awk -v op="$1" '
		/unique: [0-9]+, opcode: / {
			for (i = 1; i < NF; i++) {
				if ($i == "opcode:")
					o = $(i + 1)
				if ($i == "nodeid:")
					node = $(i + 1)
			}
			if (o == op && node != "2," && node != "3,")
				c++
		}
		END { print c + 0 }'
}

# expect WHAT GOT WANT
expect()
{
	[ "$2" = "$3" ] || rfs_fail "$1: got '$2', want '$3'"
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

# ---- the first read after a write, and what follows it ------------------------

printf 'a small value' >"$W/a"
cp "$W/a" "$R/a" || rfs_fail "write a"
rfs_stat f0 "$S" kernel_fills
rfs_stat b0 "$S" kernel_fill_bytes
mark
same "$R/a" "$W/a" "first read of a"
expect "READs of the first read" "$(ops READ)" 0
expect "OPENs of the first read" "$(ops OPEN)" 1
rfs_stat f1 "$S" kernel_fills
rfs_stat b1 "$S" kernel_fill_bytes
expect "kernel_fills of the first read" $((f1 - f0)) 1
expect "kernel_fill_bytes of the first read" $((b1 - b0)) 13
mark
expect "stat a" "$(stat -c %s "$R/a")" 13
same "$R/a" "$W/a" "second read of a"
expect "stat a again" "$(stat -c %s "$R/a")" 13
expect "GETATTRs of stat, read, stat" "$(ops GETATTR)" 0
expect "READs of the second read" "$(ops READ)" 0
expect "LOOKUPs of stat, read, stat" "$(ops LOOKUP)" 0
rfs_stat f2 "$S" kernel_fills
expect "kernel_fills of a warm read" $((f2 - f1)) 0
rfs_ok "first read after a write: no READ; the stat and read after it: no request but OPEN"

# ---- a rewrite read back ------------------------------------------------------------

exec 3<"$R/a"
held=1
printf 'the value after the rewrite' >"$W/a2"
cp "$W/a2" "$R/a" || rfs_fail "rewrite a"
mark
same "$R/a" "$W/a2" "read after the rewrite"
expect "READs of the read after the rewrite" "$(ops READ)" 0
expect "stat after the rewrite" "$(stat -c %s "$R/a")" 27
expect "GETATTRs of the stat after the rewrite" "$(ops GETATTR)" 0
cat <&3 >"$W/held" || rfs_fail "read the held reader"
exec 3<&-
held=0
same "$W/held" "$W/a" "a reader held across the rewrite"
rfs_ok "a rewrite read back: no READ, the new bytes; a held reader keeps its own"

# ---- a few pages and a bit ------------------------------------------------------------

SIZE=12388
fill "$W/p" P $SIZE
cp "$W/p" "$R/p" || rfs_fail "write p"
rfs_stat b0 "$S" kernel_fill_bytes
mark
same "$R/p" "$W/p" "read of p"
expect "READs of p" "$(ops READ)" 0
rfs_stat b1 "$S" kernel_fill_bytes
expect "kernel_fill_bytes of p" $((b1 - b0)) $SIZE
expect "size of p" "$(stat -c %s "$R/p")" $SIZE
tail -c 100 "$R/p" >"$W/got" || rfs_fail "tail of p"
tail -c 100 "$W/p" >"$W/want"
same "$W/got" "$W/want" "the tail of p"
if command -v python3 >/dev/null; then
	python3 - "$R/p" "$W/mmap" <<'EOF' || rfs_fail "mmap of p"
import mmap, sys
with open(sys.argv[1], "rb") as f, open(sys.argv[2], "wb") as out:
    m = mmap.mmap(f.fileno(), 0, mmap.MAP_SHARED, mmap.PROT_READ)
    out.write(m[:])
    m.close()
EOF
	same "$W/mmap" "$W/p" "mmap of p"
fi
expect "READs of p's rereads" "$(ops READ)" 0
rfs_ok "$SIZE bytes: stored whole, read whole, by the tail and mapped, no READ"

# ---- not stored: empty, and over the bound -------------------------------------------

EDGE=$((128 * 1024))
fill "$W/edge" E $EDGE
cp "$W/edge" "$R/edge" || rfs_fail "write edge"
rfs_stat f0 "$S" kernel_fills
mark
same "$R/edge" "$W/edge" "read of edge"
rfs_stat f1 "$S" kernel_fills
expect "kernel_fills of $EDGE bytes" $((f1 - f0)) 1
expect "READs of $EDGE bytes" "$(ops READ)" 0
rfs_ok "$EDGE bytes, the bound: stored"

: >"$R/e" || rfs_fail "write e"
BIG=$((EDGE + 1))
fill "$W/big" B $BIG
cp "$W/big" "$R/big" || rfs_fail "write big"
rfs_stat f0 "$S" kernel_fills
mark
expect "read of e" "$(cat "$R/e" | wc -c)" 0
same "$R/big" "$W/big" "read of big"
rfs_stat f1 "$S" kernel_fills
expect "kernel_fills of e and big" $((f1 - f0)) 0
[ "$(ops READ)" -gt 0 ] || rfs_fail "big was read without READ"
same "$R/big" "$W/big" "reread of big"
rfs_ok "an empty value and one of $BIG bytes: not stored, READ serves them"

# ---- readers racing to the first open ------------------------------------------------

# Eight readers start together on a value just written: one open stores
# it, the others wait for the store (inode.c) or find it done; each reads
# the whole value.
for round in 1 2 3 4 5 6 7 8 9 10; do
	fill "$W/r" "$((round % 10))" 65536
	cp "$W/r" "$R/r" || rfs_fail "write r (round $round)"
	pids=()
	for j in 1 2 3 4 5 6 7 8; do
		cat "$R/r" >"$W/r.$j" &
		pids+=($!)
	done
	for p in "${pids[@]}"; do
		wait "$p" || rfs_fail "a racing reader failed (round $round)"
	done
	for j in 1 2 3 4 5 6 7 8; do
		same "$W/r.$j" "$W/r" "racing reader $j (round $round)"
	done
done
rfs_ok "eight readers racing to a new value's first open, ten times: every byte right"

rfs_stat x "$S" kernel_fill_failures
expect "kernel_fill_failures" "$x" 0

rfs_umount
rfs_ok "clean unmount, daemon exited 0"
rfs_done
