#!/bin/bash
#
# test_memlimit.sh - open files pin values outside max_bytes. Before, any
# local user could open many distinct large keys and keep them open: each
# held its value after the cache evicted it, and the daemon's memory grew
# without bound (1,000 readers of 1 MB keys in a 64M region: 1 GB RSS).
# With -o max_memory the values in memory (cached or pinned) plus write
# buffers stay under the limit: an open that would load a value past it
# fails with ENOMEM, counted in memory_refusals; closing files gives the
# room back. The figures (RSS before and after) are printed.

# shellcheck source=harness.sh disable=SC2154 # rfs_stat uses printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
cat >>"$RFS_INI" <<'EOF2'

[mem]
max_bytes = 2M
max_value_size = 2M
stripes = 1
EOF2
M=$RFS_MNT
ST=$M/.regionfs/stats
N=40
LIMIT=$((16 << 20))

rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$RFS_PID/status"; }

rfs_mount -o max_memory=16M
head -c 1048576 /dev/urandom >"$RFS_TMP/v"
for ((i = 0; i < N; i++)); do
	cp "$RFS_TMP/v" "$M/mem/k$i" || rfs_fail "write mem/k$i"
done
rss0=$(rss_kb)
fds=()
refused=0
exec {errfd}>&2 # exec's 2> below stays in force: keep stderr to restore it
for ((i = 0; i < N; i++)); do
	if exec {fd}<"$M/mem/k$i" 2>"$RFS_TMP/err"; then
		fds+=("$fd")
	else
		grep -q "Cannot allocate memory" "$RFS_TMP/err" ||
			rfs_fail "open mem/k$i: $(cat "$RFS_TMP/err")"
		refused=$((refused + 1))
	fi
done
exec 2>&"$errfd" {errfd}>&-
rss1=$(rss_kb)
echo "# RSS ${rss0} kB -> ${rss1} kB with ${#fds[@]} of $N held open"
[ "$refused" -gt 0 ] || rfs_fail "all $N opens succeeded: nothing bounds pinned values"
rfs_stat used "$ST" memory_values_bytes
rfs_stat lim "$ST" memory_limit_bytes
rfs_stat nref "$ST" memory_refusals
echo "# $N opens of distinct 1 MiB keys held open (region max_bytes 2M," \
	"max_memory 16M): ${#fds[@]} held, $refused refused;" \
	"memory_values_bytes $used"
[ "$lim" = "$LIMIT" ] || rfs_fail "memory_limit_bytes is $lim"
[ "$used" -le "$LIMIT" ] || rfs_fail "memory_values_bytes $used is over the limit"
[ "$nref" -ge "$refused" ] || rfs_fail "memory_refusals is $nref, $refused refused"
rfs_ok "opens past max_memory fail with ENOMEM; values in memory stay under it"

for fd in "${fds[@]}"; do
	exec {fd}<&-
done
# The room comes back once the kernel's RELEASEs have dropped the files'
# references: close() does not wait for them. The values of entries the
# cache evicted are freed by the refused admit itself, which frees the
# retired entries no reader can see before it refuses (tests/unit/
# test_handle.c); before, they waited for the readers' grace period at a
# stripe's next lock hold or the background sweep (every 100 ms), which
# this test polled for. So the poll is only for the RELEASEs: until the
# load of one more value succeeds (bounded: 10 s).
load_one() { cmp -s "$M/mem/k$((N - 1))" "$RFS_TMP/v"; }
rfs_poll_until "room for one more value after closing" load_one
cmp "$M/mem/k$((N - 1))" "$RFS_TMP/v" || rfs_fail "mem/k$((N - 1)) after closing"
rfs_ok "after the files are closed the room is back"
rfs_umount

# the same bound from regions.ini's [defaults], live on reload; -o wins
sed -i 's/^\[defaults\]$/[defaults]\nmax_memory = 8M/' "$RFS_INI"
rfs_mount
rfs_stat lim "$ST" memory_limit_bytes
[ "$lim" = $((8 << 20)) ] || rfs_fail "[defaults] max_memory 8M: memory_limit_bytes is $lim"
sed -i 's/^max_memory = 8M$/max_memory = 24M/' "$RFS_INI"
kill -HUP "$RFS_PID"
limit_is() { rfs_stat lim "$ST" memory_limit_bytes && [ "$lim" = "$1" ]; }
rfs_wait_for limit_is $((24 << 20)) ||
	rfs_fail "after a reload to 24M: memory_limit_bytes is $lim"
sed -i 's/^\[main\]$/[main]\nmax_memory = 1G/' "$RFS_INI"
kill -HUP "$RFS_PID"
rfs_wait_for grep -q "set it in \[defaults\]" "$M/.regionfs/config" ||
	rfs_fail "max_memory in a region is not refused: $(cat "$M/.regionfs/config")"
rfs_stat lim "$ST" memory_limit_bytes
[ "$lim" = $((24 << 20)) ] || rfs_fail "a refused reload changed memory_limit_bytes to $lim"
rfs_umount
sed -i '/^max_memory = 1G$/d' "$RFS_INI"
rfs_mount -o max_memory=16M
rfs_stat lim "$ST" memory_limit_bytes
[ "$lim" = "$LIMIT" ] || rfs_fail "-o max_memory=16M over the file's: memory_limit_bytes is $lim"
rfs_umount
rfs_ok "[defaults] max_memory sets the bound and reloads live; one in a region is refused; -o max_memory wins"
rfs_done
