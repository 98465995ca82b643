#!/bin/bash
#
# test_diskfull.sh - the database's file system full during creates,
# overwrites, renames and unlinks (tests/integration/test_diskfull.sh
# covers the reserve file itself). The database lives on a 8 MiB tmpfs.
# faultops does random operations on 16 keys, checking each result
# against its model: a failed operation must say ENOSPC and change
# nothing, a successful one exactly what it says.
#  1. room: 80 operations, none may fail;
#  2. the disk filled: 150 operations with values up to 256 KiB; writes
#     must have failed, and renames and unlinks must have worked (the
#     reserve is released for them);
#  3. filled again after the reserve is gone: 150 more operations, now
#     even renames and unlinks may get ENOSPC;
#  4. room again: 80 operations, none may fail; the reserve is made
#     again; the keys read back as the model says, also after a remount.

# shellcheck source=../common/harness.sh disable=SC2154
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
rfs_helper FAULTOPS faultops
SMALL=$RFS_TMP/small
mkdir "$SMALL"
mount -t tmpfs -o size=8m,mode=0700 tmpfs "$SMALL" ||
	rfs_skip "cannot mount a tmpfs"
trap 'rc=$?; umount -l "$SMALL" 2>/dev/null; (exit $rc); rfs_cleanup' EXIT
RFS_DB=$SMALL/data.db
D=$RFS_MNT/main
STATE=$RFS_TMP/model
ST=$RFS_MNT/.regionfs/stats

# ops SEED N ERRNOS MAXSIZE: a faultops run; sets OUT to its summary line.
ops()
{
	OUT=$(FAULTOPS_MAXSIZE=$4 "$FAULTOPS" run "$D" "$STATE" "$1" "$2" "$3" 2>&1) ||
		rfs_fail "faultops run (seed $1, allowed $3): $OUT"
	echo "$OUT"
	rfs_alive
}

# fill NAME: fills the tmpfs up with the file NAME.
fill()
{
	dd if=/dev/zero of="$SMALL/$1" bs=4k 2>/dev/null
	[ "$(df --output=avail -B1 "$SMALL" | tail -1)" -lt 8192 ] ||
		rfs_fail "the tmpfs is not full"
}

# count KIND OK|FAILED: from OUT's "KIND=OK/FAILED".
count()
{
	local v
	v=$(echo "$OUT" | sed -n "s/.* $1=\([0-9]*\)\/\([0-9]*\).*/\1 \2/p")
	if [ "$2" = OK ]; then echo "${v% *}"; else echo "${v#* }"; fi
}

rfs_mount
ops 1 80 none 65536
rfs_ok "with room: every operation worked"

fill filler1
ops 2 150 ENOSPC 262144
[ "$(count write FAILED)" -gt 0 ] || rfs_fail "no write failed on the full disk"
[ "$(count rename FAILED)" = 0 ] && [ "$(count unlink FAILED)" = 0 ] ||
	rfs_fail "a rename or unlink failed although the reserve was there"
rfs_stat used "$ST" store_reserve_used
rfs_ok "disk full: writes failed with ENOSPC and changed nothing, renames and unlinks worked (reserve used $used times)"

fill filler2
ops 3 150 ENOSPC 262144
rfs_faultops_verify() { "$FAULTOPS" verify "$D" "$STATE" || rfs_fail "verify: the mount differs from the model"; }
rfs_faultops_verify
rfs_ok "full again without the reserve: every failure was ENOSPC and changed nothing ($OUT)"

rm "$SMALL/filler1" "$SMALL/filler2"
ops 4 80 none 65536
for ((i = 0; i < 100; i++)); do # made again after a commit, once a second
	[ -f "$RFS_DB-reserve" ] && break
	echo "x$i" >"$RFS_MNT/other/tick" || rfs_fail "write other/tick"
	sleep 0.05
done
[ -f "$RFS_DB-reserve" ] || rfs_fail "the reserve was not made again"
rfs_faultops_verify
rfs_umount
rfs_mount
rfs_faultops_verify
rfs_umount
rfs_ok "room again: every operation worked, the reserve is back, the keys are as the model says, also after a remount"
rfs_done
