#!/bin/bash
#
# run_bench_writes.sh - the rest of issue 9's benchmark, beside
# run_bench_fs.sh: writes through the mount against raw SQLite commits,
# and listing a big region against tmpfs, in one run.
#
#   tests/bench/run_bench_writes.sh [-n WRITES] [-s SIZE] [-t THREADS,...]
#                                   [-r REPS] [-l LSKEYS] [BUILDDIR]
#
#   -n WRITES   new keys written per run (default 2000)
#   -s SIZE     value size in bytes (default 1024)
#   -t THREADS  writer thread counts (default 1,4)
#   -r REPS     runs per case; medians are kept (default 3)
#   -l LSKEYS   keys for the listing part (default 1000000; 0 skips it)
#   BUILDDIR    the meson build directory (default ./build); use a release
#               build (meson setup --buildtype=release) for figures
## Environment: REGIONFS, BENCH_WRITES override the daemon and the program;
# REGIONFS_BASE (another daemon build, e.g. from before a change) adds
# cases base_durable and base_default, run interleaved with the others,
# and ratio_durable_base_t<N> / ratio_default_base_t<N> (this build ÷ base).
#
# Writes: bench_writes creates WRITES new keys with THREADS threads on a
# fresh regionfs mount whose region has durable = true ("durable"), on one
# with the default settings ("default"), and as raw SQLite single-row
# commits into a fresh database beside the mount's (one connection per
# thread, WAL, synchronous=FULL: "raw_full", NORMAL: "raw_normal"), the
# cases interleaved per repetition. Prints the median rates and
#   ratio_durable_t<N> RATIO    regionfs durable ÷ raw_full
#   ratio_default_t<N> RATIO    regionfs default ÷ raw_normal
# (issue 9's targets: durable with 4 writers >= 2, with 1 writer >= 1).
# Both databases live in the same directory ($TMPDIR), so they pay for
# the same fsync; the script says which file system that is (on tmpfs an
# fsync costs nothing and FULL equals NORMAL).
#
# Listing: LSKEYS keys (values of 1 byte) are inserted into the database
# directly (the store is a supported interface, doc/schema.md), the
# daemon is mounted fresh, and `ls -f` then `ls -l` of the region are
# timed; the same on a fresh tmpfs with as many empty files. Prints
#   ls_f_<case>_s, ls_l_<case>_s   seconds (median)
#   ratio_ls_l_tmpfs RATIO         regionfs's ls -l time ÷ tmpfs's
#                                  (target: <= 2)
#   daemon_peak_rss_kib KIB        the daemon's VmHWM after its ls -l
#
# Needs root (tmpfs mounts). A program that prints figures, not a test.

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nwrites=2000 size=1024 threads=1,4 reps=3 lskeys=1000000
while getopts "n:s:t:r:l:h" opt; do
	case $opt in
	n) nwrites=$OPTARG ;;
	s) size=$OPTARG ;;
	t) threads=$OPTARG ;;
	r) reps=$OPTARG ;;
	l) lskeys=$OPTARG ;;
	*)
		sed -n '3,40p' "$0" | sed 's/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
build=${1:-build}
export REGIONFS=${REGIONFS:-$build/fs/regionfs}
BENCH_WRITES=${BENCH_WRITES:-$build/tests/bench/bench_writes}

# shellcheck source=tests/common/harness.sh
. "$here/../common/harness.sh"

[ -x "$BENCH_WRITES" ] || rfs_fail "$BENCH_WRITES is not built"
[ -z "${REGIONFS_BASE:-}" ] || [ -x "$REGIONFS_BASE" ] ||
	rfs_fail "REGIONFS_BASE=$REGIONFS_BASE is not executable"
[ "$(id -u)" -eq 0 ] || rfs_skip "needs root (tmpfs mounts)"
command -v sqlite3 >/dev/null || rfs_skip "the sqlite3 shell is missing"
rfs_init
results=$RFS_TMP/results
: >"$results"

# region INI_LINES...: the benchmark's region, room for every value.
region()
{
	{
		echo "[bench]"
		echo "max_entries = $((nwrites + lskeys + 1000))"
		echo "max_bytes = $(((nwrites * size * 2 >> 20) + 64))M"
		printf '%s\n' "$@"
	} >"$RFS_INI"
}

fresh_db()
{
	rm -f "$RFS_DB" "$RFS_DB-wal" "$RFS_DB-shm"
}

# record CASE THREADS OUTFILE
record()
{
	awk -v c="$1" -v t="$2" '$1 == "rate" { print c, t, $2 }' "$3" >>"$results"
}

write_regionfs() # CASE THREADS
{
	local out=$RFS_TMP/run.out mine=$RFS_BIN

	fresh_db
	case $1 in
	*durable) region "durable = true" ;;
	*) region ;;
	esac
	case $1 in base_*) RFS_BIN=$REGIONFS_BASE ;; esac
	rfs_mount
	RFS_BIN=$mine
	rfs_run "$BENCH_WRITES" fs "$RFS_MNT/bench" "$nwrites" "$2" "$size" \
		>"$out" 2>&1 || { cat "$out" >&2; rfs_fail "bench_writes on $1"; }
	rfs_umount
	record "$1" "$2" "$out"
}

write_raw() # full|normal THREADS
{
	local out=$RFS_TMP/run.out db=$RFS_TMP/raw.db

	rm -f "$db" "$db-wal" "$db-shm"
	rfs_run "$BENCH_WRITES" sqlite "$db" "$nwrites" "$2" "$size" "$1" \
		>"$out" 2>&1 || { cat "$out" >&2; rfs_fail "bench_writes sqlite $1"; }
	record "raw_$1" "$2" "$out"
}

now_ns() { date +%s%N; }

# time_ls CASE DIR: one ls -f and one ls -l of DIR, recorded in seconds.
time_ls()
{
	local t0 t1 t2 n

	t0=$(now_ns)
	n=$(ls -f "$2" | wc -l)
	t1=$(now_ns)
	ls -l "$2" >/dev/null || rfs_fail "ls -l $2"
	t2=$(now_ns)
	[ "$n" -ge "$lskeys" ] || rfs_fail "ls -f $2 listed $n names, not $lskeys"
	echo "ls_f $1 $(((t1 - t0) / 1000))" >>"$results.ls"
	echo "ls_l $1 $(((t2 - t1) / 1000))" >>"$results.ls"
}

ls_regionfs()
{
	fresh_db
	region
	rfs_mount # makes the schema
	rfs_umount
	sqlite3 "$RFS_DB" "WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL
		SELECT i + 1 FROM c WHERE i < $lskeys - 1)
		INSERT INTO kv(region, key, value)
		SELECT 'bench', printf('k%07d', i), x'61' FROM c;
		DELETE FROM changes;" || rfs_fail "inserting $lskeys rows"
	rfs_mount
	time_ls regionfs "$RFS_MNT/bench"
	echo "rss regionfs $(awk '$1 == "VmHWM:" { print $2 }' "/proc/$RFS_PID/status")" >>"$results.ls"
	rfs_umount
}

ls_tmpfs()
{
	local d=$RFS_TMP/tmpfs

	mkdir -p "$d"
	mount -t tmpfs -o mode=0755 tmpfs "$d" || rfs_fail "mount -t tmpfs $d"
	(cd "$d" && seq -f 'k%07g' 0 $((lskeys - 1)) | xargs touch) ||
		{ umount "$d"; rfs_fail "creating $lskeys files on tmpfs"; }
	time_ls tmpfs "$d"
	umount "$d" || rfs_fail "umount $d"
}

echo "run_bench_writes: $nwrites writes of $size bytes; threads $threads;" \
	"$reps runs each, medians; listing $lskeys keys"
echo "regionfs: $REGIONFS; databases in $(dirname "$RFS_DB")" \
	"($(df --output=fstype "$(dirname "$RFS_DB")" | tail -1))"
for ((rep = 1; rep <= reps; rep++)); do
	for t in ${threads//,/ }; do
		write_regionfs durable "$t"
		write_raw full "$t"
		write_regionfs default "$t"
		write_raw normal "$t"
		if [ -n "${REGIONFS_BASE:-}" ]; then
			write_regionfs base_durable "$t"
			write_regionfs base_default "$t"
		fi
	done
	if [ "$lskeys" -gt 0 ]; then
		ls_regionfs
		ls_tmpfs
	fi
	echo "run $rep of $reps done"
done

median_awk='
function median(key,   n, i, j, v, tmp) {
	n = cnt[key]
	for (i = 1; i <= n; i++)
		v[i] = val[key, i]
	for (i = 2; i <= n; i++)
		for (j = i; j > 1 && v[j - 1] > v[j]; j--) {
			tmp = v[j]; v[j] = v[j - 1]; v[j - 1] = tmp
		}
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}'
awk "$median_awk"'
{ key = $1 SUBSEP $2; val[key, ++cnt[key]] = $3; if (!($2 in st)) { st[$2] = 1; T[++nt] = $2 } }
END {
	printf "\n== new keys of the given size per second (median)\n"
	printf "%7s %12s %12s %12s %12s\n", "threads", "durable", "raw_full", "default", "raw_normal"
	for (i = 1; i <= nt; i++) {
		t = T[i]
		d = median("durable" SUBSEP t); f = median("raw_full" SUBSEP t)
		n = median("default" SUBSEP t); r = median("raw_normal" SUBSEP t)
		printf "%7d %12.0f %12.0f %12.0f %12.0f\n", t, d, f, n, r
		out = out sprintf("ratio_durable_t%d %.3f\nratio_default_t%d %.3f\n", t, d / f, t, n / r)
		if (cnt["base_durable" SUBSEP t]) {
			bd = median("base_durable" SUBSEP t); bn = median("base_default" SUBSEP t)
			printf "%7s %12.0f %12s %12.0f   (base)\n", "", bd, "", bn
			out = out sprintf("ratio_durable_base_t%d %.3f\nratio_default_base_t%d %.3f\n", t, d / bd, t, n / bn)
		}
	}
	printf "\n%s", out
}' "$results"
if [ "$lskeys" -gt 0 ]; then
	awk "$median_awk"'
	{ key = $1 SUBSEP $2; val[key, ++cnt[key]] = $3 }
	END {
		printf "\n== listing %d keys (median)\n", n
		for (k in cnt) {
			split(k, p, SUBSEP)
			if (p[1] != "rss")
				printf "%s_%s_s %.3f\n", p[1], p[2], median(k) / 1e6
		}
		printf "ratio_ls_l_tmpfs %.3f\n", median("ls_l" SUBSEP "regionfs") / median("ls_l" SUBSEP "tmpfs")
		printf "daemon_peak_rss_kib %d\n", median("rss" SUBSEP "regionfs")
	}' n="$lskeys" "$results.ls"
fi
rfs_done
