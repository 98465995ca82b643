#!/bin/bash
#
# test_diskfull.sh - the database's file system full. Before, rm through
# the mount failed with ENOSPC too (a delete needs room for its WAL
# frames), so space could not be freed from the mount. Now the store keeps
# a reserve file (DB-reserve, 1 MiB) that it releases when a delete or
# rename fails for lack of space, and retries them: rm works on a full
# disk, writes still get ENOSPC, the log and the stats say so, and the
# reserve is made again once there is room.
#
# The database lives on a 8 MiB tmpfs mounted for this test (we are
# root); it is lazily unmounted before the harness cleans up.

# shellcheck source=harness.sh disable=SC2154 # rfs_stat uses printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
SMALL=$RFS_TMP/small
mkdir "$SMALL"
mount -t tmpfs -o size=8m,mode=0700 tmpfs "$SMALL" ||
	rfs_skip "cannot mount a tmpfs"
trap 'rc=$?; umount -l "$SMALL" 2>/dev/null; (exit $rc); rfs_cleanup' EXIT
RFS_DB=$SMALL/data.db
M=$RFS_MNT
ST=$M/.regionfs/stats

rfs_mount
[ -f "$RFS_DB-reserve" ] || rfs_fail "no reserve file beside the database"
rfs_stat v "$ST" store_reserve_ok
[ "$v" = 1 ] || rfs_fail "store_reserve_ok is $v"
for i in 1 2 3 4 5 6 7 8; do
	head -c 200000 /dev/urandom >"$M/main/k$i" || rfs_fail "write main/k$i"
done
dd if=/dev/zero of="$SMALL/filler" bs=64k 2>/dev/null # until ENOSPC
[ "$(df --output=avail -B1 "$SMALL" | tail -1)" -lt 65536 ] ||
	rfs_fail "the tmpfs is not full"
rfs_expect_err "No space left on device" \
	sh -c "head -c 300000 /dev/urandom >'$M/main/big'"
[ ! -e "$M/main/big" ] || rfs_fail "the failed new key was left behind"
rfs_expect_err "No space left on device" \
	sh -c "head -c 300000 /dev/urandom >'$M/main/k8'"
[ "$(wc -c <"$M/main/k8")" = 200000 ] || rfs_fail "main/k8 lost its value"
rfs_ok "the disk is full: a new value fails with ENOSPC and leaves no empty key; an old key keeps its value"

rm "$M/main/k1" || rfs_fail "rm on a full disk"
[ ! -e "$M/main/k1" ] || rfs_fail "main/k1 is still there"
rm "$M/main/k2" || rfs_fail "a second rm on a full disk"
rfs_stat v "$ST" store_reserve_used
[ "$v" -ge 1 ] || rfs_fail "store_reserve_used is $v"
grep -q "released the reserve file" "$RFS_LOG" ||
	rfs_fail "the log does not say the reserve was used"
rfs_ok "rm works on a full disk (the reserve was released), logged and counted"

rm "$SMALL/filler"
for ((i = 0; i < 100; i++)); do # the writer remakes it after a commit
	echo "x$i" >"$M/main/tick" || rfs_fail "write main/tick"
	[ -f "$RFS_DB-reserve" ] && break
	sleep 0.05
done
[ -f "$RFS_DB-reserve" ] || rfs_fail "the reserve was not made again"
[ "$(cat "$M/main/k3" | wc -c)" = 200000 ] || rfs_fail "main/k3 after all this"
rfs_umount
rfs_ok "with room again the reserve is made again; the other keys are intact"
rfs_done
