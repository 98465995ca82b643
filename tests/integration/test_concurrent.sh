#!/bin/bash
#
# test_concurrent.sh - concurrent readers and writers on the same keys
# (tests/integration/concurrent.c): no torn value, no stale read after a
# close() returned, the last commit wins. Run on a plain region and on a
# region with a ttl and few entries, where evictions and expiry interleave
# with the writes.

# shellcheck source=../common/harness.sh disable=SC2154 # rfs_stat/rfs_helper use printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
rfs_helper CONCURRENT concurrent
cat >>"$RFS_INI" <<'INI'

[churn]
max_entries = 2
stripes = 1
ttl = 1s
INI
rfs_mount
"$CONCURRENT" "$RFS_MNT/main" 4 2 3 120 || rfs_fail "concurrent on main"
rfs_ok "2 writers, 3 readers, 4 keys on main"
"$CONCURRENT" "$RFS_MNT/churn" 6 3 2 60 || rfs_fail "concurrent on churn"
rfs_ok "3 writers, 2 readers, 6 keys on a region of 2 entries"
rfs_umount
rfs_ok "clean unmount, daemon exited 0"
rfs_done
