#!/bin/bash
#
# test_inject.sh - injected failures inside the daemon (faultinj.so,
# LD_PRELOADed; see faultinj.c): allocations of the daemon's own code
# (m=), SQLite's allocations (s=), SQLite's file reads and writes (i=)
# and a full disk under SQLite (f=), one kind at a time and then all at
# once. Under each, faultops does random writes, reads, renames, unlinks,
# listings and stats on 16 keys: every failure must be ENOMEM, EIO or
# ENOSPC and change nothing, every success exactly what it says. Then,
# with the faults off, the daemon must still run and every key read back
# as the model says (no value lost, torn or left behind by a failed
# operation, nothing stale in the cache), also after a clean unmount and
# a remount.
#
# Under ASan/TSan the sanitizer owns malloc, so m= cannot reach the
# daemon: that case is then skipped (faultinj reports active=0); the
# others run.

# shellcheck source=../common/harness.sh disable=SC2154
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
rfs_helper FAULTOPS faultops
rfs_helper SHIM faultinj.so
D=$RFS_MNT/main
STATE=$RFS_TMP/model
CTL=$RFS_TMP/faults
ROUNDS=${RFS_FAULT_ROUNDS:-1}

# set_faults "m=N s=N i=N f=N": the rates, rewritten in place
set_faults()
{
	printf '%-63s\n' "$1" 1<>"$CTL" || rfs_fail "cannot write $CTL"
}

# made LETTER: failures made so far of that kind
made()
{
	tail -c +65 "$CTL" | tr -d '\0' | sed -n "s/.* $1=\([0-9]*\).*/\1/p"
}

set_faults ""
cat >"$RFS_TMP/regionfs-faultinj" <<SH
#!/bin/sh
LD_PRELOAD="$SHIM\${LD_PRELOAD:+ \$LD_PRELOAD}" RFS_FAULT_CTL="$CTL" exec "$RFS_BIN" "\$@"
SH
chmod +x "$RFS_TMP/regionfs-faultinj"
RFS_BIN=$RFS_TMP/regionfs-faultinj

rfs_mount
"$FAULTOPS" run "$D" "$STATE" 1 60 none || rfs_fail "faultops: populate"
tail -c +65 "$CTL" | grep -q '^made ' || rfs_fail "faultinj is not loaded in the daemon"

seed=100
for ((r = 0; r < ROUNDS; r++)); do
	for faults in "m=25" "s=25" "i=30" "f=30" "m=60 s=60 i=80 f=80"; do
		seed=$((seed + 1))
		case $faults in
		m=*) [ "$(tail -c +65 "$CTL" | sed -n 's/.*active=\([01]\).*/\1/p')" = 1 ] || {
			echo "# $faults: skipped (malloc belongs to the sanitizer)"
			continue
		} ;;
		esac
		before=$(made "${faults:0:1}")
		set_faults "$faults"
		out=$(FAULTOPS_TRACE=1 FAULTOPS_MAXSIZE=20000 "$FAULTOPS" run "$D" "$STATE" $seed 200 ENOMEM,EIO,ENOSPC 2>&1)
		rc=$?
		set_faults ""
		echo "$out"
		rfs_alive
		[ "$rc" = 0 ] || rfs_fail "$faults: $out"
		after=$(made "${faults:0:1}")
		[ "$after" -gt "$before" ] || rfs_fail "$faults: no fault was injected"
		"$FAULTOPS" verify "$D" "$STATE" ||
			rfs_fail "$faults: with the faults off, the mount differs from the model"
		rfs_ok "$faults: $((after - before)) injected; every failure ENOMEM/EIO/ENOSPC and changed nothing, the mount agrees with the model after"
	done
done
rfs_umount
rfs_mount
"$FAULTOPS" verify "$D" "$STATE" || rfs_fail "after a remount, the store differs from the model"
rfs_umount
rfs_ok "clean unmount (exit 0), and after a remount every key as the model says"
rfs_done
