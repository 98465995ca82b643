#!/bin/bash
#
# test_dbro.sh - a database the daemon may not write (mode 0400 for a
# daemon without CAP_DAC_OVERRIDE, as under a service user). Before, it
# mounted read-write and every write then failed with EROFS. Now the
# daemon refuses to start, saying why and what to do; with -o ro it mounts
# read-only: reads work, writes fail with EROFS (the kernel's answer on a
# read-only mount), store_read_only is 1.
#
# We are root, who may write any file: the daemon runs through setpriv
# with CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped from its bounding
# set, so file modes apply to it (the files stay root's own).

# shellcheck source=harness.sh disable=SC2154 # rfs_stat uses printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

command -v setpriv >/dev/null || rfs_skip "setpriv (util-linux) is missing"
rfs_init
M=$RFS_MNT

rfs_mount
echo one >"$M/main/k1" || rfs_fail "write main/k1"
rfs_umount

real_bin=$RFS_BIN
RFS_BIN=$RFS_TMP/regionfs-nodac
cat >"$RFS_BIN" <<EOF2
#!/bin/sh
exec setpriv --bounding-set -dac_override,-dac_read_search "$real_bin" "\$@"
EOF2
chmod +x "$RFS_BIN"
chmod 0400 "$RFS_DB"

# without -o ro: refused before mounting (it would daemonize after it)
rc=0
out=$(timeout 30 "$RFS_BIN" -o "config=$RFS_INI" "$RFS_DB" "$M" 2>&1) || rc=$?
if rfs_is_mounted; then
	fusermount3 -u "$M"
	rfs_fail "a read-only database was mounted read-write"
fi
[ "$rc" -ne 0 ] || rfs_fail "the daemon exited 0 on a read-only database"
case $out in
*"Read-only file system"*"-o ro"*) ;;
*) rfs_fail "no clear message for a read-only database: $out" ;;
esac
rfs_ok "a read-only database is refused at start with a hint at -o ro ($out)"

rfs_mount -o ro
[ "$(cat "$M/main/k1")" = one ] || rfs_fail "cat main/k1 on -o ro"
[ "$(ls "$M/main")" = k1 ] || rfs_fail "ls main on -o ro"
rfs_expect_err "Read-only file system" sh -c "echo two >'$M/main/k1'"
rfs_expect_err "Read-only file system" rm "$M/main/k1"
rfs_stat v "$M/.regionfs/stats" store_read_only
[ "$v" = 1 ] || rfs_fail "store_read_only is $v"
rfs_umount
[ "$(stat -c %a "$RFS_DB")" = 400 ] || rfs_fail "the database mode changed"
rfs_ok "-o ro serves a read-only database: reads work, writes get EROFS"
rfs_done
