#!/bin/bash
#
# run_bench_fs.sh - the side-by-side small-file benchmark: regionfs against
# tmpfs and (when given) libfuse's passthrough_hp, in one interleaved run.
#
#   tests/bench/run_bench_fs.sh [-n VALUES] [-s SIZE,...] [-t THREADS,...]
#                               [-r REPS] [-d READDIRS] [BUILDDIR]
#
#   -n VALUES   keys per run, in one flat directory (default 10000)
#   -s SIZES    value sizes in bytes (default 1024,65536)
#   -t THREADS  thread counts (default 1,2,4)
#   -r REPS     runs per (size, threads, case); the median is kept (default 3)
#   -d READDIRS full listings per thread in the readdir phase (default 1)
#   BUILDDIR    the meson build directory (default ./build); use a release
#               build (meson setup --buildtype=release) for figures
#
# Environment:
#   PASSTHROUGH_HP  path of libfuse's example/passthrough_hp (built outside
#                   the repository, e.g. from Debian's fuse3 source
#                   package); when set, it is a third case, passing through
#                   a directory on a private tmpfs, with its default options
#                   (default cache mode, multi-threaded); it keeps a file
#                   descriptor per key, so VALUES must stay 256 below the
#                   hard limit of open files (ulimit -Hn)
#   REGIONFS, BENCH_FS  override the daemon and the benchmark program
#   REGIONFS_BASE   path of another regionfs daemon (e.g. built from main
#                   before a change): a case "base", run interleaved like
#                   the others, so ratio_<phase>_base_t<N> is the change's
#                   speedup measured in one session
#   RFS_KEEP=1      keep the temporary directory (per-run logs, results)
#
# Example (about 3 minutes on 2 vCPUs):
#   meson setup build --buildtype=release && ninja -C build
#   PASSTHROUGH_HP=/path/to/passthrough_hp tests/bench/run_bench_fs.sh -n 2000
#
# Every run gets a fresh mount: a new tmpfs; a new regionfs database and
# daemon (mounted with tests/common/harness.sh, region "bench" with room
# for every value); a new tmpfs under a new passthrough_hp. Runs are
# interleaved: for each repetition, for each size, for each thread count,
# every case in turn, so slow phases of the machine hit every case alike.
# bench_fs runs the phases (create, read, warm, rewrite = rewrite+readback,
# stat, readdir, unlink; see bench_fs.c) on each and prints ops/s.
#
# Output: per size, a table of the median ops/s of each phase and case
# (readdir: entries/s), then one line per phase, case and thread count:
#   ratio_<phase>_<case>_t<N> RATIO size=<SIZE>
# where RATIO is regionfs's median ÷ the case's median (>1: regionfs is
# faster), and for the read-only case
#   ratio_ro_<phase>_<case>_t<N> RATIO size=<SIZE>
# where RATIO is regionfs-ro's median ÷ the case's. Absolute figures are
# noise on a shared machine; the ratios of one run are what to compare.
#
# The case regionfs-ro is a read-only mount (-o ro) of a database that a
# read-write mount filled (bench_fs -p create, not timed): only the phases
# read, warm, stat and readdir, with zero-request opens (fs/ops.c: the
# kernel sends no OPEN, FLUSH or RELEASE; a warm read is served by the
# kernel alone).
#
# The rest of issue 9's benchmark is tests/bench/run_bench_writes.sh:
# durable and default writes against raw SQLite single-row commits (FULL,
# NORMAL) in the same run, and ls -f / ls -l of 1,000,000 keys with the
# daemon's peak RSS.
#
# Needs root (tmpfs mounts). Every mount is unmounted and every daemon
# stopped on success, failure and INT/TERM/HUP (the harness's trap).

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
nvalues=10000 sizes=1024,65536 threads=1,2,4 reps=3 readdirs=1
while getopts "n:s:t:r:d:h" opt; do
	case $opt in
	n) nvalues=$OPTARG ;;
	s) sizes=$OPTARG ;;
	t) threads=$OPTARG ;;
	r) reps=$OPTARG ;;
	d) readdirs=$OPTARG ;;
	*)
		sed -n '3,53p' "$0" | sed 's/^# \{0,1\}//' >&2
		exit 2
		;;
	esac
done
shift $((OPTIND - 1))
build=${1:-build}
export REGIONFS=${REGIONFS:-$build/fs/regionfs}
BENCH_FS=${BENCH_FS:-$build/tests/bench/bench_fs}

# shellcheck source=tests/common/harness.sh
. "$here/../common/harness.sh"

[ -x "$BENCH_FS" ] || rfs_fail "$BENCH_FS is not built"
[ "$(id -u)" -eq 0 ] || rfs_skip "needs root (tmpfs mounts)"
cases="tmpfs regionfs regionfs-ro"
if [ -n "${PASSTHROUGH_HP:-}" ]; then
	[ -x "$PASSTHROUGH_HP" ] || rfs_fail "PASSTHROUGH_HP=$PASSTHROUGH_HP is not executable"
	cases="$cases passthrough_hp"
	# passthrough_hp keeps one open file per inode it knows: every key
	ulimit -n "$(ulimit -Hn)" 2>/dev/null
	lim=$(ulimit -n)
	[ "$lim" = unlimited ] || [ "$nvalues" -le $((lim - 256)) ] ||
		rfs_fail "passthrough_hp holds a file descriptor per key: -n $nvalues needs ulimit -n above $((nvalues + 256)) (it is $lim)"
fi
if [ -n "${REGIONFS_BASE:-}" ]; then
	[ -x "$REGIONFS_BASE" ] || rfs_fail "REGIONFS_BASE=$REGIONFS_BASE is not executable"
	cases="$cases base"
fi
rfs_init
results=$RFS_TMP/results

# mount_tmpfs DIR: a private tmpfs (no size limit beyond the kernel's).
mount_tmpfs()
{
	mkdir -p "$1" || rfs_fail "mkdir $1"
	mount -t tmpfs -o mode=0755 tmpfs "$1" || rfs_fail "mount -t tmpfs $1"
}

umount_tmpfs()
{
	umount "$1" || rfs_fail "umount $1"
}

# bench DIR SIZE THREADS CASE REP: one bench_fs run, appended to $results
# ($phases, when set: only those phases, bench_fs -p).
bench()
{
	local out

	out=$RFS_TMP/run.out
	rfs_run "$BENCH_FS" -n "$nvalues" -s "$2" -t "$3" -r "$readdirs" \
		${phases:+-p "$phases"} "$1" >"$out" 2>&1 ||
		{ cat "$out" >&2; rfs_fail "bench_fs failed on $4 (size $2, $3 threads)"; }
	awk -v s="$2" -v t="$3" -v c="$4" -v r="$5" \
		'$1 == "rate" { print s, t, c, r, $2, $3 }' "$out" >>"$results"
}

run_tmpfs()
{
	mount_tmpfs "$RFS_TMP/tmpfs"
	bench "$RFS_TMP/tmpfs" "$@" tmpfs "$rep"
	umount_tmpfs "$RFS_TMP/tmpfs"
}

run_base()
{
	local mine=$RFS_BIN rc

	RFS_BIN=$REGIONFS_BASE
	run_regionfs "$@" base
	rc=$?
	RFS_BIN=$mine
	return $rc
}

# run_regionfs SIZE THREADS [CASE]: CASE names the result (run_base).
run_regionfs()
{
	local mib=$(((nvalues * $1 * 2 >> 20) + 64))

	rm -f "$RFS_DB" "$RFS_DB-wal" "$RFS_DB-shm"
	cat >"$RFS_INI" <<-INI
		; the benchmark's region: room for every value, so rereads are hits
		[bench]
		max_entries = $((nvalues * 2 + 1000))
		max_bytes = ${mib}M
	INI
	rfs_mount
	bench "$RFS_MNT/bench" "$1" "$2" "${3:-regionfs}" "$rep"
	rfs_umount
}

# The read phases on a read-only mount (-o ro: zero-request opens,
# fs/ops.c), of keys a read-write mount of the same database created.
run_regionfs-ro()
{
	local mib=$(((nvalues * $1 * 2 >> 20) + 64)) phases

	rm -f "$RFS_DB" "$RFS_DB-wal" "$RFS_DB-shm"
	cat >"$RFS_INI" <<-INI
		[bench]
		max_entries = $((nvalues * 2 + 1000))
		max_bytes = ${mib}M
	INI
	rfs_mount
	phases=create
	rfs_run "$BENCH_FS" -n "$nvalues" -s "$1" -t "$2" -p create \
		"$RFS_MNT/bench" >"$RFS_TMP/run.out" 2>&1 ||
		{ cat "$RFS_TMP/run.out" >&2; rfs_fail "bench_fs could not fill regionfs-ro"; }
	rfs_umount
	rfs_mount -o ro
	phases=read,warm,stat,readdir
	bench "$RFS_MNT/bench" "$1" "$2" regionfs-ro "$rep"
	rfs_umount
}

run_passthrough_hp()
{
	local src=$RFS_TMP/ptsrc mnt=$RFS_TMP/pt log=$RFS_TMP/pt.log i pid

	mount_tmpfs "$src"
	mkdir -p "$mnt"
	"$PASSTHROUGH_HP" --foreground "$src" "$mnt" </dev/null >>"$log" 2>&1 &
	pid=$!
	rfs_set_pid pt "$pid"
	for ((i = 0; i < 200; i++)); do
		rfs_is_mounted "$mnt" && break
		kill -0 "$pid" 2>/dev/null || rfs_fail "passthrough_hp exited before mounting"
		sleep 0.05
	done
	rfs_is_mounted "$mnt" || rfs_fail "passthrough_hp: $mnt not mounted after 10 s"
	bench "$mnt" "$@" passthrough_hp "$rep"
	rfs_umount pt
	umount_tmpfs "$src"
}

echo "run_bench_fs: $nvalues values; sizes $sizes; threads $threads;" \
	"$reps runs each, medians; cases: $cases"
echo "regionfs: $REGIONFS; bench_fs: $BENCH_FS${PASSTHROUGH_HP:+; passthrough_hp: $PASSTHROUGH_HP}${REGIONFS_BASE:+; base: $REGIONFS_BASE}"
for ((rep = 1; rep <= reps; rep++)); do
	for size in ${sizes//,/ }; do
		for t in ${threads//,/ }; do
			for c in $cases; do
				"run_$c" "$size" "$t"
			done
		done
	done
	echo "run $rep of $reps done"
done

# Medians and ratios.
awk -v cases="$cases" '
function median(key,   n, i, j, v, tmp) {
	n = cnt[key]
	for (i = 1; i <= n; i++)
		v[i] = val[key, i]
	for (i = 2; i <= n; i++)	# insertion sort: n is small
		for (j = i; j > 1 && v[j - 1] > v[j]; j--) {
			tmp = v[j]; v[j] = v[j - 1]; v[j - 1] = tmp
		}
	return n % 2 ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
}
{
	key = $1 SUBSEP $2 SUBSEP $3 SUBSEP $5
	val[key, ++cnt[key]] = $6
	if (!($1 in seen_s)) { seen_s[$1] = 1; S[++ns] = $1 }
	if (!($2 in seen_t)) { seen_t[$2] = 1; T[++nt] = $2 }
	if (!($5 in seen_p)) { seen_p[$5] = 1; P[++np] = $5 }
}
END {
	nc = split(cases, C, " ")
	for (s = 1; s <= ns; s++) {
		printf "\n== values of %d bytes: median ops/s (readdir: entries/s)\n", S[s]
		printf "%-8s %7s", "phase", "threads"
		for (c = 1; c <= nc; c++)
			printf " %15s", C[c]
		printf "\n"
		for (p = 1; p <= np; p++)
			for (t = 1; t <= nt; t++) {
				printf "%-8s %7d", P[p], T[t]
				for (c = 1; c <= nc; c++) {
					m[S[s], T[t], C[c], P[p]] = median(S[s] SUBSEP T[t] SUBSEP C[c] SUBSEP P[p])
					printf " %15.0f", m[S[s], T[t], C[c], P[p]]
				}
				printf "\n"
			}
	}
	for (s = 1; s <= ns; s++) {
		printf "\n== regionfs / case, values of %d bytes\n", S[s]
		for (c = 1; c <= nc; c++) {
			if (C[c] == "regionfs")
				continue
			for (p = 1; p <= np; p++)
				for (t = 1; t <= nt; t++)
					if (m[S[s], T[t], C[c], P[p]] > 0)
						printf "ratio_%s_%s_t%d %.3f size=%d\n", P[p], C[c], T[t],
						       m[S[s], T[t], "regionfs", P[p]] / m[S[s], T[t], C[c], P[p]], S[s]
		}
		printf "\n== regionfs-ro (read-only mount, zero-request opens) / case, values of %d bytes\n", S[s]
		for (c = 1; c <= nc; c++) {
			if (C[c] == "regionfs-ro")
				continue
			for (p = 1; p <= np; p++)
				for (t = 1; t <= nt; t++)
					if (m[S[s], T[t], "regionfs-ro", P[p]] > 0 && m[S[s], T[t], C[c], P[p]] > 0)
						printf "ratio_ro_%s_%s_t%d %.3f size=%d\n", P[p], C[c], T[t],
						       m[S[s], T[t], "regionfs-ro", P[p]] / m[S[s], T[t], C[c], P[p]], S[s]
		}
	}
}' "$results"
