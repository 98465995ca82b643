# shellcheck shell=bash
#
# harness.sh - the end-to-end harness moved to tests/common/harness.sh,
# shared with the consistency, bench and contrib tests. This forwarder
# keeps scripts written against the old path working while other branches
# land.
# NEEDSWORK: remove once no script sources tests/integration/harness.sh.

# shellcheck source=../common/harness.sh
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"
