#!/bin/bash
#
# test_dbowner.sh - a database file pre-created by another user (in a
# world-writable directory, anyone can), or writable by group or others.
# Before, it was used silently, and its -wal and -shm got its mode 0666.
# Now the daemon refuses it at start, saying why; a file of its own with
# mode 0600 (or 0644) is used, and -wal/-shm get that mode.

# shellcheck source=harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
M=$RFS_MNT

# refused: the daemon must exit non-zero before mounting (without -f it
# would daemonize after the mount)
expect_refused()
{
	local out rc=0

	out=$(timeout 30 "$RFS_BIN" -o "config=$RFS_INI" "$RFS_DB" "$M" 2>&1) ||
		rc=$?
	if rfs_is_mounted; then
		fusermount3 -u "$M"
		rfs_fail "$1: mounted"
	fi
	[ "$rc" -ne 0 ] || rfs_fail "$1: the daemon exited 0"
	case $out in
	*"Operation not permitted"*"chmod 0600"*) ;;
	*) rfs_fail "$1: no clear message: $out" ;;
	esac
	rfs_ok "$1: refused ($out)"
}

: >"$RFS_DB"
chown 65534:65534 "$RFS_DB"
chmod 0666 "$RFS_DB"
expect_refused "a database owned by another user, mode 0666"
chown 0:0 "$RFS_DB"
expect_refused "a database of ours with mode 0666"
chmod 0620 "$RFS_DB"
expect_refused "a database of ours with mode 0620"
chmod 0644 "$RFS_DB"
rfs_mount
echo one >"$M/main/k1" || rfs_fail "write main/k1"
for f in "$RFS_DB-wal" "$RFS_DB-shm"; do
	[ "$(stat -c %a "$f")" = 644 ] || rfs_fail "$f has mode $(stat -c %a "$f")"
done
rfs_umount
rfs_ok "a database of ours with mode 0644 is used; -wal and -shm get 0644"
rfs_done
