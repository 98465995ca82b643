#!/bin/bash
#
# test_shell.sh - what a user does on the mount with the shell tools:
# echo/cat/ls/rm/mv/truncate/append round trips, awkward names, a 1 MiB
# value, the errors a Linux user expects (ENAMETOOLONG, EFBIG, ENOENT,
# EPERM, EACCES/EROFS), mv across regions, and open files that keep the
# value they opened while it is overwritten or removed.

# shellcheck source=../common/harness.sh disable=SC2154 # rfs_stat/rfs_helper use printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
rfs_mount
M=$RFS_MNT
W=$RFS_TMP/work
mkdir "$W"

# same_file FILE REF WHAT: FILE holds exactly the bytes of REF.
same_file()
{
	cmp "$1" "$2" >/dev/null 2>&1 || {
		cmp "$1" "$2"
		rfs_fail "$3: $1 differs from the reference"
	}
	[ "$(stat -c %s "$1")" = "$(stat -c %s "$2")" ] ||
		rfs_fail "$3: stat size of $1 is not $(stat -c %s "$2")"
}

# ---- the root and the regions ------------------------------------------

got=$(ls -A "$M" | tr '\n' ' ')
[ "$got" = ".regionfs main other small tiny " ] ||
	rfs_fail "root lists '$got'"
[ -d "$M/main" ] && [ -d "$M/.regionfs" ] || rfs_fail "regions are not dirs"
[ -z "$(ls -A "$M/main")" ] || rfs_fail "a new region is not empty"
rfs_ok "the root lists the regions and .regionfs"

# ---- echo, cat, append, overwrite, truncate -----------------------------

echo hello >"$M/main/greeting" || rfs_fail "echo > key"
[ "$(cat "$M/main/greeting")" = hello ] || rfs_fail "cat after echo"
[ -f "$M/main/greeting" ] || rfs_fail "a key is not a regular file"
[ "$(stat -c %s "$M/main/greeting")" = 6 ] || rfs_fail "size after echo"
rfs_ok "echo > key; cat key"

echo world >>"$M/main/greeting" || rfs_fail "echo >> key"
printf 'hello\nworld\n' >"$W/ref"
same_file "$M/main/greeting" "$W/ref" "append"
rfs_ok "echo >> key appends"

printf short >"$M/main/greeting" || rfs_fail "overwrite"
printf short >"$W/ref"
same_file "$M/main/greeting" "$W/ref" "overwrite with a shorter value"
rfs_ok "a shorter overwrite reads back without stale bytes or size"

truncate -s 2 "$M/main/greeting" || rfs_fail "truncate -s 2"
printf sh >"$W/ref"
same_file "$M/main/greeting" "$W/ref" "truncate down"
truncate -s 6 "$M/main/greeting" || rfs_fail "truncate -s 6"
printf 'sh\0\0\0\0' >"$W/ref"
same_file "$M/main/greeting" "$W/ref" "truncate up"
truncate -s 0 "$M/main/greeting" || rfs_fail "truncate -s 0"
[ -f "$M/main/greeting" ] && [ ! -s "$M/main/greeting" ] ||
	rfs_fail "truncate -s 0 does not leave an empty key"
rfs_ok "truncate shrinks, extends with zeros and empties"

: >"$M/main/empty" || rfs_fail "create an empty key"
[ -f "$M/main/empty" ] && [ ! -s "$M/main/empty" ] ||
	rfs_fail "an empty key is not there"
rfs_ok "an empty key can be created"

head -c 4096 /dev/urandom >"$W/bin"
cp "$W/bin" "$M/main/binary" || rfs_fail "cp a binary value"
same_file "$M/main/binary" "$W/bin" "binary"
rfs_ok "a binary value with NUL bytes round-trips"

# ---- rm ------------------------------------------------------------------

rm "$M/main/greeting" || rfs_fail "rm key"
rfs_expect_err "No such file or directory" cat "$M/main/greeting"
# shellcheck disable=SC2010 # the listing itself is under test
ls "$M/main" | grep -qx greeting && rfs_fail "rm'ed key still listed"
rfs_expect_err "No such file or directory" rm "$M/main/greeting"
rfs_ok "rm removes a key; a second rm says ENOENT"

# ---- ls of a region --------------------------------------------------------

for k in alpha beta gamma delta epsilon; do
	echo "v-$k" >"$M/other/$k" || rfs_fail "write other/$k"
done
got=$(ls "$M/other" | tr '\n' ' ')
[ "$got" = "alpha beta delta epsilon gamma " ] || rfs_fail "ls other: '$got'"
for k in alpha beta gamma delta epsilon; do
	[ "$(cat "$M/other/$k")" = "v-$k" ] || rfs_fail "other/$k"
done
rfs_ok "ls of a region lists exactly its keys"

# ---- mv --------------------------------------------------------------------

mv "$M/other/alpha" "$M/other/omega" || rfs_fail "mv within a region"
[ "$(cat "$M/other/omega")" = v-alpha ] || rfs_fail "mv target value"
[ ! -e "$M/other/alpha" ] || rfs_fail "mv source still exists"
mv "$M/other/beta" "$M/other/omega" || rfs_fail "mv onto an existing key"
[ "$(cat "$M/other/omega")" = v-beta ] || rfs_fail "mv did not replace"
[ ! -e "$M/other/beta" ] || rfs_fail "replacing mv left the source"
rfs_ok "mv within a region renames and replaces the target"

mv "$M/other/gamma" "$M/main/gamma" || rfs_fail "mv across regions"
[ "$(cat "$M/main/gamma")" = v-gamma ] || rfs_fail "moved value"
[ ! -e "$M/other/gamma" ] || rfs_fail "mv across regions left the source"
rfs_ok "mv across regions moves the value (EXDEV fallback)"

# ---- names -----------------------------------------------------------------

name255=$(printf 'n%.0s' $(seq 255))
uni255=$(printf '\xe6\x97\xa5%.0s' $(seq 85)) # 85 x U+65E5, 255 bytes
for name in "with spaces  in it" ".hidden" "..dots" "-dash" \
	"ключ-日本語-é" "tab	and 'quote\" \\back" "$name255" "$uni255"; do
	printf '%s' "$name" >"$M/main/$name" || rfs_fail "create '$name'"
	printf '%s' "$name" >"$W/ref"
	same_file "$M/main/$name" "$W/ref" "name '$name'"
	# shellcheck disable=SC2010 # the listing itself is under test
	[ "$(ls -A "$M/main" | grep -Fxc -- "$name")" = 1 ] ||
		rfs_fail "'$name' is not listed exactly once"
done
[ ${#name255} -eq 255 ] && [ "$(printf '%s' "$uni255" | wc -c)" -eq 255 ] ||
	rfs_fail "test names are not 255 bytes"
rfs_ok "names with spaces, dots, UTF-8 and 255 bytes round-trip"

name256=${name255}x
rfs_expect_err "File name too long" bash -c 'echo x >"$1"' _ "$M/main/$name256"
rfs_expect_err "File name too long" cat "$M/main/$name256"
rfs_expect_err "File name too long" mv "$M/main/.hidden" "$M/main/$name256"
[ -e "$M/main/.hidden" ] || rfs_fail "a refused mv lost the source"
rfs_ok "a 256-byte name is ENAMETOOLONG"

# ---- a 1 MiB value ------------------------------------------------------------

head -c 1048576 /dev/urandom >"$W/mib"
cp "$W/mib" "$M/main/mib" || rfs_fail "cp 1 MiB"
same_file "$M/main/mib" "$W/mib" "1 MiB"
dd if="$M/main/mib" bs=4096 skip=100 count=3 status=none >"$W/slice"
dd if="$W/mib" bs=4096 skip=100 count=3 status=none >"$W/ref"
same_file "$W/slice" "$W/ref" "1 MiB slice"
rfs_ok "a 1 MiB value round-trips (whole and in slices)"

# ---- EFBIG --------------------------------------------------------------------

head -c 1024 /dev/urandom >"$W/kib"
head -c 2000 /dev/urandom >"$W/2000"
cp "$W/kib" "$M/tiny/k" || rfs_fail "a value of exactly max_value_size"
same_file "$M/tiny/k" "$W/kib" "max_value_size"
rfs_expect_err "File too large" cp "$W/2000" "$M/tiny/k"
same_file "$M/tiny/k" "$W/kib" "after a refused cp (O_TRUNC, one fd)"
rfs_expect_err "File too large" dd if="$W/2000" of="$M/tiny/k" bs=2000 \
	conv=notrunc status=none
same_file "$M/tiny/k" "$W/kib" "after a refused dd conv=notrunc"
rfs_expect_err "File too large" bash -c 'echo more >>"$1"' _ "$M/tiny/k"
same_file "$M/tiny/k" "$W/kib" "after a refused append"
rfs_expect_err "File too large" truncate -s 2000 "$M/tiny/k"
same_file "$M/tiny/k" "$W/kib" "after a refused truncate"
rfs_expect_err "File too large" cp "$W/2000" "$M/tiny/new"
[ ! -s "$M/tiny/new" ] || rfs_fail "a refused new key holds data"
# The shell opens with O_TRUNC, then closes its first descriptor after
# dup2(): that close commits the truncation, as O_TRUNC does on any POSIX
# file system, before head's write is refused. Nothing of the refused
# write may be stored: the key is empty or intact.
rfs_expect_err "File too large" bash -c 'head -c 2000 /dev/zero >"$1"' _ \
	"$M/tiny/k"
[ ! -s "$M/tiny/k" ] || same_file "$M/tiny/k" "$W/kib" "after a refused >"
rfs_ok "values over max_value_size are EFBIG and the old value stays"

# ---- errors ---------------------------------------------------------------------

rfs_expect_err "No such file or directory" cat "$M/nope/k"
rfs_expect_err "No such file or directory" bash -c 'echo x >"$1"' _ \
	"$M/nope/k"
rfs_expect_err "No such file or directory" ls "$M/nope"
rfs_ok "an unknown region is ENOENT"

rfs_expect_err "Operation not permitted" mkdir "$M/newregion"
rfs_expect_err "Operation not permitted" mkdir "$M/main/sub"
rfs_expect_err "Operation not permitted" rmdir "$M/other"
rfs_expect_err "Operation not permitted" bash -c 'echo x >"$1"' _ "$M/rootkey"
[ -d "$M/other" ] || rfs_fail "rmdir removed a region"
rfs_ok "mkdir/rmdir/create at the root and mkdir in a region are EPERM"

for f in stats metrics.prom config regions/main/stats regions/main/config; do
	out=$(bash -c 'echo x >"$1"' _ "$M/.regionfs/$f" 2>&1) &&
		rfs_fail "writing .regionfs/$f succeeded"
	case $out in
	*"Permission denied"* | *"Read-only file system"*) ;;
	*) rfs_fail "writing .regionfs/$f: $out" ;;
	esac
	rm -f "$M/.regionfs/$f" 2>/dev/null && rfs_fail "rm .regionfs/$f worked"
	[ -n "$(cat "$M/.regionfs/$f")" ] || rfs_fail ".regionfs/$f is empty"
done
rfs_ok "virtual files cannot be written or removed (EACCES/EROFS)"

# ---- open files keep the value they opened -------------------------------------

echo "old value" >"$M/main/held" || rfs_fail "write held"
exec 3<"$M/main/held"
echo "the new and longer value" >"$M/main/held" || rfs_fail "overwrite held"
[ "$(cat <&3)" = "old value" ] || rfs_fail "an open reader lost its value"
exec 3<&-
[ "$(cat "$M/main/held")" = "the new and longer value" ] ||
	rfs_fail "a new reader does not see the overwrite"
exec 3<"$M/main/held"
rm "$M/main/held" || rfs_fail "rm held"
[ "$(cat <&3)" = "the new and longer value" ] ||
	rfs_fail "an open reader lost its value to rm"
exec 3<&-
[ ! -e "$M/main/held" ] || rfs_fail "held still exists"
rfs_ok "readers keep the value they opened across overwrite and rm"

rfs_umount
rfs_ok "clean unmount, daemon exited 0"
rfs_done
