#!/bin/bash
#
# test_failedcreate.sh - a new key whose close() fails. Before, creating
# the file committed an empty value at once, and when the writer's
# close() then failed (EFBIG past max_value_size, ENOSPC: test_diskfull.sh)
# the empty key stayed behind. Now a write handle that created its key
# and never got a commit through removes that empty row again at release
# (only if nobody changed it since); a key that existed keeps its value,
# and a file created and closed without writing stays (an empty key on
# purpose).

# shellcheck source=harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
rfs_mount
M=$RFS_MNT
rfs_expect_err "File too large" sh -c "head -c 2000 /dev/zero >'$M/tiny/new'"
[ ! -e "$M/tiny/new" ] || rfs_fail "the failed new key tiny/new was left behind"
[ -z "$(ls "$M/tiny")" ] || rfs_fail "tiny lists '$(ls "$M/tiny")'"
rfs_ok "a new key whose close() failed with EFBIG is not left behind"

echo old >"$M/tiny/old" || rfs_fail "write tiny/old"
rfs_expect_err "File too large" sh -c "head -c 2000 /dev/zero >>'$M/tiny/old'"
[ "$(cat "$M/tiny/old")" = old ] || rfs_fail "tiny/old lost its value"
: >"$M/tiny/empty" || rfs_fail "create tiny/empty"
[ -f "$M/tiny/empty" ] || rfs_fail "an empty key created on purpose is gone"
rfs_ok "an existing key keeps its value; an empty key made on purpose stays"
rfs_umount
rfs_done
