#!/bin/bash
#
# test_inject.sh - injected failures inside the daemon (faultinj.so,
# LD_PRELOADed; see faultinj.c): allocations of the daemon's own code
# (m=), SQLite's allocations (s=), SQLite's file reads and writes (i=)
# and a full disk under SQLite (f=), one kind at a time and then all at
# once. Under each, faultops does random writes, reads, renames, unlinks,
# listings and stats on 16 keys: every failure must be ENOMEM, EIO or
# ENOSPC. Under m= (nothing fails below the daemon's own code) every
# failure must also change nothing and every success exactly what it
# says (faultops' model), and with the faults off every key reads back as
# the model says. Under SQLite's faults a change whose COMMIT reported an
# error may be in the file all the same, so there, with the faults off,
# the mount must agree byte for byte with the store (no stale value in
# the cache, no key the kernel hides or shows wrongly). The daemon must
# stay up throughout, unmount cleanly, and after a remount still agree
# with the store.
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

# made LETTERS: failures made so far of those kinds (e.g. "msif")
made()
{
	local n=0 k v
	for k in $(echo "$1" | grep -o .); do
		v=$(tail -c +65 "$CTL" | tr -d '\0' | sed -n "s/.* $k=\([0-9]*\).*/\1/p")
		n=$((n + ${v:-0}))
	done
	echo "$n"
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
		m=25) [ "$(tail -c +65 "$CTL" | sed -n 's/.*active=\([01]\).*/\1/p')" = 1 ] || {
			echo "# $faults: skipped (malloc belongs to the sanitizer)"
			continue
		} ;;
		esac
		# the model is exact for the daemon's own allocations; under
		# SQLite a change whose COMMIT failed may be in the file all
		# the same, so there the errnos are checked during the run
		# and the mount against the store after it
		lenient=1
		[ "$faults" = m=25 ] && lenient=
		kinds=$(echo "$faults" | grep -o '[msif]=' | tr -d '=\n')
		before=$(made "$kinds")
		set_faults "$faults"
		out=$(FAULTOPS_LENIENT=$lenient FAULTOPS_TRACE=1 FAULTOPS_MAXSIZE=20000 \
			"$FAULTOPS" run "$D" "$STATE" $seed 200 ENOMEM,EIO,ENOSPC 2>&1)
		rc=$?
		set_faults ""
		echo "$out"
		rfs_alive
		[ "$rc" = 0 ] || rfs_fail "$faults: $(echo "$out" | grep -v '^#')"
		after=$(made "$kinds")
		[ "$after" -gt "$before" ] || rfs_fail "$faults: no fault was injected"
		if [ -z "$lenient" ]; then
			"$FAULTOPS" verify "$D" "$STATE" ||
				rfs_fail "$faults: with the faults off, the mount differs from the model"
			what="every failure ENOMEM/EIO/ENOSPC and changed nothing, the mount agrees with the model after"
		else
			"$FAULTOPS" compare "$D" "$RFS_DB" main ||
				rfs_fail "$faults: with the faults off, the mount differs from the store"
			what="every failure ENOMEM/EIO/ENOSPC, the mount agrees with the store after"
		fi
		rfs_ok "$faults: $((after - before)) injected; $what"
	done
done
"$FAULTOPS" compare "$D" "$RFS_DB" main || rfs_fail "the mount differs from the store"
rfs_umount
rfs_mount
"$FAULTOPS" compare "$D" "$RFS_DB" main || rfs_fail "after a remount, the mount differs from the store"
head -c 5000 /dev/urandom >"$RFS_TMP/v"
cp "$RFS_TMP/v" "$RFS_MNT/other/after" && cmp -s "$RFS_TMP/v" "$RFS_MNT/other/after" ||
	rfs_fail "a write after the faults"
rfs_umount
rfs_ok "clean unmount (exit 0); after a remount the mount agrees with the store and works"
rfs_done
