#!/bin/bash
#
# test_monitoring.sh - the contrib/monitoring tools against a live mount.
#
# Mounts a private regionfs (tests/common/harness.sh), makes some
# traffic (hits, misses, size evictions, an outside write through the
# change feed), then checks:
#   - regionfs-textfile.sh: writes a file promtool accepts, 0644, by rename
#     (the old inode is replaced, never rewritten: a reader holding it
#     still reads the complete old file), leaves no temporary file, adds
#     -l labels to every sample, refuses paths that are not a regionfs
#     mount with a clear message and keeps the old file, gives up on a hung
#     daemon (SIGSTOPped) after -t seconds, and reports a dead mount;
#   - node_exporter (if installed) serves the exported file with no scrape
#     error, and the alert's file regex matches its file label;
#   - regionfs-alerts.yml: promtool check rules and test rules;
#   - the alert rules, their tests and grafana-dashboard.json use only
#     metrics and labels the live metrics.prom has (check-metric-names.py,
#     which also parses every dashboard query with promtool);
#   - the systemd units pass systemd-analyze verify, and the script is
#     clean under shellcheck (each only if the tool is installed).
#
# Tools that may be missing are skipped with a "skip" line; promtool is
# required (Debian package prometheus; CI installs it). Run by meson test
# (suite contrib) with REGIONFS set, or by hand:
#   REGIONFS=build/fs/regionfs bash contrib/monitoring/test_monitoring.sh

# shellcheck disable=SC2119 # rfs_mount: no daemon options here
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=../../tests/common/harness.sh
. "$HERE/../../tests/common/harness.sh"

TEXTFILE=$HERE/regionfs-textfile.sh
ALERTS=$HERE/regionfs-alerts.yml
CHECK=$HERE/check-metric-names.py

rfs_skip_check()
{
	echo "skip - $*"
}

# Starts node_exporter on a free loopback port serving DIR; sets NE_URL.
start_node_exporter()
{
	local dir=$1 port i

	for _ in 1 2 3; do
		port=$(python3 -c 'import socket; s = socket.socket()
s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
		prometheus-node-exporter --collector.disable-defaults \
			--collector.textfile \
			--collector.textfile.directory="$dir" \
			--web.listen-address="127.0.0.1:$port" \
			>"$RFS_TMP/node_exporter.log" 2>&1 &
		NE_PID=$!
		RFS_CHILDREN="$RFS_CHILDREN $NE_PID"
		NE_URL=http://127.0.0.1:$port/metrics
		for ((i = 0; i < 100; i++)); do
			if fetch "$NE_URL" >/dev/null 2>&1; then
				return 0
			fi
			kill -0 "$NE_PID" 2>/dev/null || break
			sleep 0.05
		done
		kill "$NE_PID" 2>/dev/null
		wait "$NE_PID" 2>/dev/null
		# the port was taken between our probe and its bind: retry
	done
	rfs_fail "node_exporter did not start: $(tail -3 "$RFS_TMP/node_exporter.log")"
}

fetch()
{
	python3 -c 'import sys, urllib.request
sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' "$1"
}

command -v promtool >/dev/null ||
	rfs_fail "promtool not found (apt-get install prometheus)"

rfs_init
rfs_mount
M=$RFS_MNT
for i in 1 2 3 4 5 6; do
	echo "value $i" >"$M/main/k$i" || rfs_fail "write main/k$i"
	echo "value $i" >"$M/small/k$i" || rfs_fail "write small/k$i"
done
for _ in 1 2; do
	for i in 1 2 3 4 5 6; do
		cat "$M/main/k$i" "$M/small/k$i" >/dev/null || rfs_fail "read $i"
	done
done
# An outside writer: the change feed applies it.
sqlite3 "$RFS_DB" "PRAGMA busy_timeout = 5000;
	UPDATE kv SET value = CAST('outside' AS BLOB)
	WHERE region = 'main' AND key = 'k1';" >/dev/null ||
	rfs_fail "sqlite3 update"
n=0
for ((i = 0; i < 200; i++)); do
	rfs_stat n "$M/.regionfs/stats" feed_changes
	[ "$n" -ge 1 ] && break
	sleep 0.05
done
[ "$n" -ge 1 ] || rfs_fail "the change feed did not apply the outside write"
rfs_ok "traffic: reads, writes, evictions, an outside write"

# ---- regionfs-textfile.sh ---------------------------------------------------

OUT=$RFS_TMP/textfile
mkdir "$OUT"
"$TEXTFILE" -d "$OUT" "$M" || rfs_fail "regionfs-textfile.sh failed"
[ "$(ls -A "$OUT")" = regionfs.prom ] ||
	rfs_fail "textfile dir holds: $(ls -A "$OUT")"
[ "$(stat -c %a "$OUT/regionfs.prom")" = 644 ] ||
	rfs_fail "mode $(stat -c %a "$OUT/regionfs.prom"), want 644"
out=$(promtool check metrics <"$OUT/regionfs.prom" 2>&1) ||
	rfs_fail "promtool check metrics: $out"
[ -z "$out" ] || rfs_fail "promtool check metrics warns: $out"
grep -qx 'regionfs_cache_max_entries{region="small"} 4' "$OUT/regionfs.prom" ||
	rfs_fail "exported file lacks small's max_entries"
grep -q '^regionfs_feed_changes_total [1-9]' "$OUT/regionfs.prom" ||
	rfs_fail "exported file lacks the feed change"
[ "$(grep '^# TYPE' "$OUT/regionfs.prom")" = \
	"$(grep '^# TYPE' "$M/.regionfs/metrics.prom")" ] ||
	rfs_fail "exported families differ from metrics.prom"
rfs_ok "regionfs-textfile.sh writes a valid 0644 regionfs.prom, nothing else"

# Replaced by rename: a reader that opened the old file keeps reading the
# complete old file, and the new file is a new inode.
exec {old_fd}<"$OUT/regionfs.prom"
old_ino=$(stat -c %i "$OUT/regionfs.prom")
old_sum=$(md5sum <"$OUT/regionfs.prom")
cat "$M/main/k2" >/dev/null # change a counter
"$TEXTFILE" -d "$OUT" "$M" || rfs_fail "second run failed"
[ "$(stat -c %i "$OUT/regionfs.prom")" != "$old_ino" ] ||
	rfs_fail "regionfs.prom was rewritten in place, not replaced"
[ "$(md5sum <&"$old_fd")" = "$old_sum" ] ||
	rfs_fail "the old file changed under its reader"
exec {old_fd}<&-
[ "$(ls -A "$OUT")" = regionfs.prom ] || rfs_fail "temporary file left"
rfs_ok "regionfs.prom is replaced atomically by rename"

# Extra labels, for several mounts on one host.
"$TEXTFILE" -d "$OUT" -o other.prom -l mount=cache2 -l 'site=a "b" \ c' "$M" ||
	rfs_fail "run with -l failed"
out=$(promtool check metrics <"$OUT/other.prom" 2>&1) ||
	rfs_fail "promtool check metrics (labels): $out"
[ -z "$out" ] || rfs_fail "promtool check metrics warns (labels): $out"
bad=$(grep -v '^#' "$OUT/other.prom" |
	grep -Fv 'mount="cache2",site="a \"b\" \\ c"')
[ -z "$bad" ] || rfs_fail "samples without the -l labels: $bad"
grep -qF 'regionfs_evictions_total{mount="cache2",site="a \"b\" \\ c",region="small",cause="size"}' \
	"$OUT/other.prom" || rfs_fail "labels not merged into existing ones"
rm "$OUT/other.prom"
rfs_ok "-l adds escaped labels to every sample"

# Errors: clear message, exit 1, old file untouched, nothing left behind.
before=$(stat -c '%i %Y %s' "$OUT/regionfs.prom")
rfs_expect_err "is not a mount point" "$TEXTFILE" -d "$OUT" "$RFS_TMP"
rfs_expect_err "is a proc mount, not regionfs" "$TEXTFILE" -d "$OUT" /proc
rfs_expect_err "No such file or directory" "$TEXTFILE" -d "$OUT" "$RFS_TMP/nope"
rfs_expect_err "is not a directory" "$TEXTFILE" -d "$RFS_TMP/nope" "$M"
rfs_expect_err "must end in .prom" "$TEXTFILE" -d "$OUT" -o x.txt "$M"
rfs_expect_err "regionfs already uses the label 'region'" \
	"$TEXTFILE" -d "$OUT" -l region=x "$M"
rfs_expect_err "label 'a' given twice" "$TEXTFILE" -d "$OUT" -l a=1 -l a=2 "$M"
"$TEXTFILE" -d "$OUT" "$RFS_TMP" 2>/dev/null
[ $? -eq 1 ] || rfs_fail "a runtime error must exit 1"
"$TEXTFILE" -d "$OUT" -o x.txt "$M" 2>/dev/null
[ $? -eq 2 ] || rfs_fail "a usage error must exit 2"
[ "$(stat -c '%i %Y %s' "$OUT/regionfs.prom")" = "$before" ] ||
	rfs_fail "a failed run touched regionfs.prom"
[ "$(ls -A "$OUT")" = regionfs.prom ] || rfs_fail "failed runs left files"
rfs_ok "wrong paths and options: clear errors, old file kept"

# A hung daemon: the run gives up after -t seconds.
kill -STOP "$RFS_PID"
t0=$SECONDS
rfs_expect_err "timed out after 1s" "$TEXTFILE" -d "$OUT" -t 1 "$M"
kill -CONT "$RFS_PID"
[ $((SECONDS - t0)) -le 6 ] || rfs_fail "took $((SECONDS - t0)) s with -t 1"
[ "$(ls -A "$OUT")" = regionfs.prom ] || rfs_fail "timeout left files"
"$TEXTFILE" -d "$OUT" "$M" || rfs_fail "no recovery after SIGCONT"
rfs_ok "a stopped daemon makes the run fail after -t, then it recovers"

# ---- node_exporter -------------------------------------------------------------

if command -v prometheus-node-exporter >/dev/null; then
	start_node_exporter "$OUT"
	page=$(fetch "$NE_URL") || rfs_fail "fetch $NE_URL"
	grep -q '^node_textfile_scrape_error 0$' <<<"$page" ||
		rfs_fail "node_exporter: textfile scrape error"
	grep -q '^regionfs_build_info{version="' <<<"$page" ||
		rfs_fail "node_exporter does not serve regionfs_build_info"
	file=$(sed -n 's/^node_textfile_mtime_seconds{file="\(.*regionfs[^"]*\)"}.*/\1/p' \
		<<<"$page")
	[ -n "$file" ] || rfs_fail "no node_textfile_mtime_seconds for regionfs.prom"
	# the RegionfsMetricsStale selector, as Prometheus anchors it
	python3 -c 'import re, sys
sys.exit(not re.fullmatch(r"(.*/)?regionfs[^/]*\.prom", sys.argv[1]))' "$file" ||
		rfs_fail "the alert's file regex does not match '$file'"
	kill "$NE_PID"
	wait "$NE_PID" 2>/dev/null
	rfs_ok "node_exporter serves the file; the stale alert's regex matches"
else
	rfs_skip_check "prometheus-node-exporter not installed"
fi

# ---- rules and dashboard ------------------------------------------------------

out=$(promtool check rules "$ALERTS" 2>&1) || rfs_fail "promtool check rules: $out"
out=$(cd "$HERE" && promtool test rules regionfs-alerts.test.yml 2>&1) ||
	rfs_fail "promtool test rules: $out"
rfs_ok "promtool check rules and test rules pass"

python3 -m json.tool "$HERE/grafana-dashboard.json" >/dev/null ||
	rfs_fail "grafana-dashboard.json is not valid JSON"
out=$(python3 "$CHECK" --allow node_textfile_mtime_seconds \
	--target-label file --target-label mount "$OUT/regionfs.prom" \
	"$ALERTS" "$HERE/regionfs-alerts.test.yml" \
	"$HERE/grafana-dashboard.json" 2>&1) ||
	rfs_fail "check-metric-names: $out"
echo "# $out"
rfs_ok "rules, rule tests and dashboard use only live metric names"

# The checker itself must catch a wrong name (guards against a checker
# that passes everything).
sed 's/regionfs_cache_bytes{/regionfs_cache_byte{/' \
	"$HERE/grafana-dashboard.json" >"$RFS_TMP/bad.json"
out=$(python3 "$CHECK" "$OUT/regionfs.prom" "$RFS_TMP/bad.json" 2>&1) &&
	rfs_fail "check-metric-names accepted an unknown metric"
grep -q "unknown metric 'regionfs_cache_byte'" <<<"$out" ||
	rfs_fail "check-metric-names: $out"
rfs_ok "check-metric-names rejects an unknown metric"

# ---- units and lint -----------------------------------------------------------

if command -v systemd-analyze >/dev/null; then
	mkdir "$RFS_TMP/units"
	sed "s|/usr/local/bin/regionfs-textfile.sh|$TEXTFILE|" \
		"$HERE/regionfs-textfile.service" \
		>"$RFS_TMP/units/regionfs-textfile.service"
	cp "$HERE/regionfs-textfile.timer" "$RFS_TMP/units/"
	out=$(systemd-analyze verify "$RFS_TMP/units/regionfs-textfile.service" \
		"$RFS_TMP/units/regionfs-textfile.timer" 2>&1) ||
		rfs_fail "systemd-analyze verify: $out"
	[ -z "$out" ] || rfs_fail "systemd-analyze verify warns: $out"
	rfs_ok "systemd-analyze verify accepts the service and timer"
else
	rfs_skip_check "systemd-analyze not installed"
fi
if command -v shellcheck >/dev/null; then
	out=$(shellcheck "$TEXTFILE" 2>&1) || rfs_fail "shellcheck: $out"
	rfs_ok "shellcheck is clean"
else
	rfs_skip_check "shellcheck not installed"
fi

# ---- a dead mount ----------------------------------------------------------------

kill -KILL "$RFS_PID"
rfs_wait_daemon 10 || rfs_fail "the daemon survived SIGKILL"
rfs_expect_err "Transport endpoint is not connected" "$TEXTFILE" -d "$OUT" "$M"
[ "$(ls -A "$OUT")" = regionfs.prom ] || rfs_fail "dead mount left files"
rfs_ok "a dead mount is reported, the old file kept"

rfs_done
