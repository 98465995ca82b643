#!/usr/bin/env bash
# Builds regionfs and runs every test: unit, stress and end-to-end on a real
# FUSE mount (those need root and /dev/fuse; without them they are skipped).
# Usage: tests/run-all.sh [BUILDDIR] [extra meson test args...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
# As root on Debian, install what the build and the tests need (promtool
# checks metrics.prom and the alert rules; the soak's writers are fio) if
# anything is missing.
need=0
for cmd in meson ninja promtool sqlite3 fusermount3 xz fio; do
	command -v "$cmd" >/dev/null 2>&1 || need=1
done
for pc in fuse3 sqlite3 inih cmocka; do
	pkg-config --exists "$pc" 2>/dev/null || need=1
done
if [ "$need" = 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
	contrib/install-deps.sh prometheus fio >/dev/null
fi
if [ -d "$build/meson-private" ]; then
	meson setup --reconfigure "$build" ${RFS_MESON_ARGS:-} >/dev/null
else
	meson setup "$build" ${RFS_MESON_ARGS:-}
fi
ninja -C "$build"
rc=0
# Every suite, the 60 s soak included (it runs alone: is_parallel false);
# RFS_SOAK=0 leaves the soak out of a quick run.
case " $* " in
*" --suite "*) ;;
*) if [ "${RFS_SOAK:-1}" = 0 ]; then set -- --no-suite soak "$@"; fi ;;
esac
meson test -C "$build" --print-errorlogs --num-processes 2 "$@" || rc=$?
# One closing line that any CI can read: "tests: N passed, N failed, N skipped".
python3 - "$build/meson-logs/testlog.json" <<'PY' || true
import json, sys
ok = fail = skip = 0
for line in open(sys.argv[1]):
    r = json.loads(line).get("result")
    if r in ("OK", "EXPECTEDFAIL"): ok += 1
    elif r == "SKIP": skip += 1
    else: fail += 1
print(f"tests: {ok} passed, {fail} failed, {skip} skipped")
PY
exit $rc
