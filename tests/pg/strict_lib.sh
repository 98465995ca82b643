# shellcheck shell=bash
#
# strict_lib.sh - helpers of the coherence = strict tests (sourced after
# harness.sh). The caller sets deadline_ms and may define fail (default:
# rfs_fail).

now_ms() { date +%s%3N; }

declare -F fail >/dev/null || fail() { rfs_fail "$@"; }

# wait_stat MOUNT LINE MIN WHAT: the global stats line LINE of mount MOUNT
# reaches MIN before the deadline; prints how long it took.
wait_stat()
{
	local t0 v
	t0=$(now_ms)
	while :; do
		rfs_stat v "$RFS_TMP/$1/.regionfs/stats" "$2"
		[ "$v" -ge "$3" ] && break
		[ $(( $(now_ms) - t0 )) -lt "$deadline_ms" ] ||
			fail "$4: $2 of $1 is $v, not >= $3 after $deadline_ms ms"
		sleep 0.05
	done
	echo "# $4: $2 of $1 = $v after $(( $(now_ms) - t0 )) ms"
}
