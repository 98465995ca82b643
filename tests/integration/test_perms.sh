#!/bin/bash
#
# test_perms.sh - who may read a region. Before, every key was 0644 and
# every region directory 0755, so with the shipped allow_other and
# default_permissions every local user could read every key (the example
# `sessions` region included). Now regions.ini sets per region owner,
# group, mode (keys) and dir_mode (the directory), which the kernel
# enforces with default_permissions, and read_only (changes get EROFS);
# a reload applies them live. An unprivileged user (nobody, through
# setpriv) tries.

# shellcheck source=harness.sh disable=SC2154 # rfs_stat uses printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

command -v setpriv >/dev/null || rfs_skip "setpriv (util-linux) is missing"
command -v sqlite3 >/dev/null || rfs_fail "the sqlite3 shell is not installed"
rfs_init
chmod 0755 "$RFS_TMP" # nobody must reach the mount point
M=$RFS_MNT
write_ini()
{
	cat >"$RFS_INI" <<EOF2
[defaults]
stripes = 1

[pub]

[priv]
owner = root
group = root
mode = $1
dir_mode = $2

[ro]
read_only = true
EOF2
}
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

write_ini 0600 0700
rfs_mount -o allow_other,default_permissions
echo pub >"$M/pub/k" || rfs_fail "write pub/k"
echo secret >"$M/priv/k" || rfs_fail "write priv/k"
[ "$(stat -c '%a %u %g' "$M/priv/k")" = "600 0 0" ] ||
	rfs_fail "priv/k is $(stat -c '%a %u %g' "$M/priv/k")"
[ "$(stat -c '%a' "$M/priv")" = 700 ] || rfs_fail "priv is $(stat -c %a "$M/priv")"
[ "$(stat -c '%a' "$M/pub/k")" = 644 ] || rfs_fail "pub/k is $(stat -c %a "$M/pub/k")"
rfs_ok "owner, group, mode and dir_mode show in stat"

[ "$(as_nobody cat "$M/pub/k")" = pub ] || rfs_fail "nobody cannot read pub/k"
rfs_expect_err "Permission denied" as_nobody cat "$M/priv/k"
rfs_expect_err "Permission denied" as_nobody ls "$M/priv"
rfs_expect_err "Permission denied" as_nobody sh -c "echo x >'$M/pub/k'"
[ "$(cat "$M/pub/k")" = pub ] || rfs_fail "pub/k changed"
rfs_ok "with default_permissions, nobody reads pub but not priv, and writes neither"

sqlite3 -bail "$RFS_DB" ".timeout 10000" \
	"INSERT INTO kv(region, key, value) VALUES ('ro', 'k', CAST('fixed' AS BLOB))" ||
	rfs_fail "outside insert into ro"
[ "$(cat "$M/ro/k")" = fixed ] || rfs_fail "cat ro/k"
rfs_expect_err "Read-only file system" sh -c "echo x >'$M/ro/k'"
rfs_expect_err "Read-only file system" sh -c "echo x >'$M/ro/new'"
rfs_expect_err "Read-only file system" rm "$M/ro/k"
rfs_expect_err "Read-only file system" mv "$M/ro/k" "$M/ro/k2"
rfs_expect_err "Read-only file system" truncate -s 0 "$M/ro/k"
[ "$(cat "$M/ro/k")" = fixed ] || rfs_fail "ro/k changed"
rfs_ok "read_only: every change gets EROFS, even root's; reads work"

write_ini 0644 0755
kill -HUP "$RFS_PID"
for ((i = 0; i < 200; i++)); do
	rfs_stat gen "$M/.regionfs/config" generation
	[ "$gen" -ge 2 ] && break
	sleep 0.05
done
[ "$gen" -ge 2 ] || rfs_fail "the reload did not happen"
[ "$(as_nobody cat "$M/priv/k")" = secret ] ||
	rfs_fail "nobody cannot read priv/k after mode = 0644"
[ "$(stat -c '%a' "$M/priv")" = 755 ] || rfs_fail "priv is $(stat -c %a "$M/priv") after reload"
rfs_ok "a reload applies new modes at once"
rfs_umount
rfs_done
