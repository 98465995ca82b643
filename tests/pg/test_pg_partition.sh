#!/bin/bash
#
# test_pg_partition.sh - coherence = strict across a network partition.
#
# The server listens on one end of a veth pair (besides its Unix socket);
# mount p runs in a network namespace holding the other end and reaches
# the server over TCP; mount a uses the Unix socket. Region s is strict
# (-o lease=2s,lease_renew=300ms on both).
#
#   - p caches a value; the veth link goes down (a partition: packets are
#     dropped, no reset, as with a cable pulled);
#   - a's strict close() of a new value returns (after p's lease ran
#     out: bounded);
#   - p, cut off, never serves the old value: a read there gives an error
#     (EIO, once its connection times out) or the new value, never the
#     old one;
#   - the link comes back: p renews its lease and reads the new value.
#
# Skips (77) without `ip netns`, nsenter, or the PostgreSQL server.
# No timed assertion: waits poll with generous deadlines.

# shellcheck disable=SC2154 # rfs_stat sets the variables it is given
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

RFS_STORE=pg
deadline_ms=$(( ${CONS_FEED_BOUND_MS:-1000} * 10 ))
[ "$deadline_ms" -ge 60000 ] || deadline_ms=60000

command -v ip >/dev/null && command -v nsenter >/dev/null ||
	rfs_skip "no ip or nsenter"
rfs_init
NS=rfsp$$
VA=rfsa$$ VB=rfsb$$
NET=10.211.$(( $$ % 250 + 1 ))
ns_cleanup()
{
	ip link del "$VA" 2>/dev/null
	ip netns del "$NS" 2>/dev/null
}
trap 'rc=$?; ns_cleanup; (exit $rc); rfs_cleanup' EXIT
ip netns add "$NS" 2>/dev/null || rfs_skip "ip netns add failed (no network namespaces here)"
ip link add "$VA" type veth peer name "$VB" &&
	ip link set "$VB" netns "$NS" &&
	ip addr add "$NET.1/24" dev "$VA" &&
	ip link set "$VA" up &&
	ip netns exec "$NS" ip addr add "$NET.2/24" dev "$VB" &&
	ip netns exec "$NS" ip link set "$VB" up &&
	ip netns exec "$NS" ip link set lo up ||
	rfs_skip "cannot make a veth pair into a namespace"

cat >"$RFS_INI" <<'EOF2'
[s]
max_entries = 100
coherence = strict
EOF2

# the server listens on the veth address too, and lets p's subnet in
echo "host all all $NET.0/24 trust" >>"$RFS_PG_DIR/data/pg_hba.conf"
rfs_pg_as "$RFS_PG_BIN/pg_ctl" -D "$RFS_PG_DIR/data" -m fast -w -t 60 \
	-l "$RFS_PG_DIR/server.log" \
	-o "-c listen_addresses='$NET.1' -c unix_socket_directories='$RFS_PG_SOCK' -c max_connections=200" \
	restart >/dev/null || rfs_fail "restart the server on $NET.1"

now_ms() { date +%s%3N; }

wait_stat()
{
	local t0 v
	t0=$(now_ms)
	while :; do
		rfs_stat v "$RFS_TMP/$1/.regionfs/stats" "$2"
		[ "$v" -ge "$3" ] && break
		[ $(( $(now_ms) - t0 )) -lt "$deadline_ms" ] ||
			rfs_fail "$4: $2 of $1 is $v, not >= $3 after $deadline_ms ms"
		sleep 0.05
	done
	echo "# $4: $2 of $1 = $v after $(( $(now_ms) - t0 )) ms"
}

rfs_mount_as a -o lease=2s -o lease_renew=300ms
# p: the same daemon in the namespace (nsenter enters the network
# namespace only, so the mount is seen here), over TCP
cat >"$RFS_TMP/in-ns" <<EOF2
#!/bin/sh
exec nsenter --net=/run/netns/$NS -- "$RFS_BIN" "\$@"
EOF2
chmod +x "$RFS_TMP/in-ns"
bin=$RFS_BIN db=$RFS_DB
RFS_BIN=$RFS_TMP/in-ns RFS_DB="host=$NET.1 user=$RFS_PG_USER dbname=rfs"
rfs_mount_as p -o lease=2s -o lease_renew=300ms
RFS_BIN=$bin RFS_DB=$db
A=$RFS_TMP/a/s P=$RFS_TMP/p/s
wait_stat a store_lease_live 1 "lease"
wait_stat p store_lease_live 1 "lease"

echo v1 >"$A/k" || rfs_fail "write v1 on a"
[ "$(cat "$P/k")" = v1 ] || rfs_fail "p reads '$(cat "$P/k")' after a's close(), not v1"
rfs_ok "p (over TCP from its namespace) reads a's strict write at once"

ip link set "$VA" down || rfs_fail "link down"
t0=$(now_ms)
echo v2 >"$A/k" || rfs_fail "strict write on a during the partition"
echo "# strict close() on a with p cut off: $(( $(now_ms) - t0 )) ms (p's lease: 2 s)"
t0=$(now_ms)
got=$(timeout 120 cat "$P/k" 2>&1)
echo "# p's read during the partition: '$got' after $(( $(now_ms) - t0 )) ms"
[ "$got" != v1 ] || rfs_fail "p served the old value during the partition"
case $got in
v2 | *"Input/output error"* | *"No such file"*) ;;
*) rfs_fail "p's read during the partition: '$got'" ;;
esac
rfs_ok "partitioned: a's strict close() returned, p serves no stale value"

ip link set "$VA" up || rfs_fail "link up"
t0=$(now_ms)
until [ "$(cat "$P/k" 2>/dev/null)" = v2 ]; do
	[ $(( $(now_ms) - t0 )) -lt "$deadline_ms" ] || rfs_fail "p does not read v2 after the partition healed"
	sleep 0.1
done
echo "# p reads v2 $(( $(now_ms) - t0 )) ms after the link came back"
wait_stat p store_lease_live 1 "lease after the partition"
rfs_stat lapses "$RFS_TMP/p/.regionfs/stats" store_lease_lapses
echo "# p's lease lapses: $lapses"
rfs_ok "healed: p renews its lease and reads the new value"

rfs_umount p
rfs_umount a
rfs_done
