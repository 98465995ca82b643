# shellcheck shell=bash
#
# pg.sh - a throwaway PostgreSQL cluster for the tests: initdb and pg_ctl
# of Debian's postgresql-15 (or PG_BINDIR), data and Unix socket in a
# temporary directory, no TCP listener, trust authentication for the
# cluster's owner only, fsync and the other durability settings left at
# their defaults. Started and stopped by the tests themselves; nothing
# stays running, whatever happens.
#
# Two ways to use it:
#   source pg.sh; rfs_pg_start     (a harness script: call rfs_pg_stop
#                                   from its EXIT trap; harness.sh does
#                                   that for RFS_STORE=pg)
#   bash pg.sh run CMD [ARGS...]   (a C test: starts a cluster, runs CMD
#                                   with RFS_PG_CONNINFO set, stops the
#                                   cluster on any exit, returns CMD's
#                                   status)
# Skips (exit 77) when the PostgreSQL server binaries are missing.
#
# Sets RFS_PG_CONNINFO (a libpq keyword string for database "rfs"),
# RFS_PG_DIR (the temporary directory), RFS_PG_SOCK (the socket
# directory) and RFS_PG_USER (the cluster's owner, who runs psql).
# As root the cluster runs as the user postgres (runuser); otherwise as
# the calling user.

RFS_PG_DIR=
RFS_PG_CONNINFO=
RFS_PG_SOCK=
RFS_PG_USER=

rfs_pg_bindir()
{
	local d

	for d in "${PG_BINDIR:-}" /usr/lib/postgresql/15/bin \
		/usr/lib/postgresql/*/bin; do
		[ -n "$d" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] &&
			{ echo "$d"; return 0; }
	done
	return 1
}

# Runs a command as the cluster's owner.
rfs_pg_as()
{
	if [ "$(id -u)" = 0 ]; then
		runuser -u "$RFS_PG_USER" -- "$@"
	else
		"$@"
	fi
}

# rfs_pg_psql SQL: runs SQL on the test database, quietly, stopping at
# the first error; prints unaligned, tuples only.
rfs_pg_psql()
{
	rfs_pg_as psql -X -q -A -t -v ON_ERROR_STOP=1 \
		-h "$RFS_PG_SOCK" -U "$RFS_PG_USER" -d rfs -c "$1"
}

rfs_pg_start()
{
	local bin log

	bin=$(rfs_pg_bindir) || { echo "SKIP: no PostgreSQL server binaries (postgresql-15)"; exit 77; }
	RFS_PG_USER=$(id -un)
	if [ "$(id -u)" = 0 ]; then
		id postgres >/dev/null 2>&1 ||
			{ echo "SKIP: no user postgres to run the cluster"; exit 77; }
		RFS_PG_USER=postgres
	fi
	RFS_PG_DIR=$(mktemp -d /tmp/rfs-pg.XXXXXX) || { echo "FAIL: mktemp" >&2; exit 1; }
	chmod 0755 "$RFS_PG_DIR"
	RFS_PG_SOCK=$RFS_PG_DIR/sock
	mkdir -p "$RFS_PG_SOCK" "$RFS_PG_DIR/data"
	chown "$RFS_PG_USER" "$RFS_PG_SOCK" "$RFS_PG_DIR/data"
	log=$RFS_PG_DIR/server.log
	touch "$log" && chown "$RFS_PG_USER" "$log"
	rfs_pg_as "$bin/initdb" -N -A trust -U "$RFS_PG_USER" -E UTF8 \
		--locale=C -D "$RFS_PG_DIR/data" >"$RFS_PG_DIR/initdb.log" 2>&1 ||
		{ cat "$RFS_PG_DIR/initdb.log" >&2; echo "FAIL: initdb" >&2; exit 1; }
	# the socket only; a few more connections than the default for
	# several mounts, each with a writer, readers and a listener
	rfs_pg_as "$bin/pg_ctl" -D "$RFS_PG_DIR/data" -l "$log" -w -t 60 \
		-o "-c listen_addresses='' -c unix_socket_directories='$RFS_PG_SOCK' -c max_connections=200" \
		start >/dev/null ||
		{ cat "$log" >&2; echo "FAIL: pg_ctl start" >&2; exit 1; }
	RFS_PG_BIN=$bin
	rfs_pg_as "$bin/createdb" -h "$RFS_PG_SOCK" -U "$RFS_PG_USER" rfs ||
		{ echo "FAIL: createdb" >&2; exit 1; }
	RFS_PG_CONNINFO="host=$RFS_PG_SOCK user=$RFS_PG_USER dbname=rfs"
	export RFS_PG_CONNINFO RFS_PG_DIR RFS_PG_SOCK RFS_PG_USER
}

# rfs_pg_restart: stops and starts the server (fast mode), same data.
rfs_pg_restart()
{
	rfs_pg_as "$RFS_PG_BIN/pg_ctl" -D "$RFS_PG_DIR/data" -m fast -w -t 60 \
		-l "$RFS_PG_DIR/server.log" \
		-o "-c listen_addresses='' -c unix_socket_directories='$RFS_PG_SOCK' -c max_connections=200" \
		restart >/dev/null
}

# Stops the server (fast, then immediate) and removes the directory.
# Safe to call twice, and when nothing was started.
rfs_pg_stop()
{
	[ -n "$RFS_PG_DIR" ] || return 0
	if [ -f "$RFS_PG_DIR/data/postmaster.pid" ]; then
		rfs_pg_as "$RFS_PG_BIN/pg_ctl" -D "$RFS_PG_DIR/data" -m fast \
			-w -t 30 stop >/dev/null 2>&1 ||
			rfs_pg_as "$RFS_PG_BIN/pg_ctl" -D "$RFS_PG_DIR/data" \
				-m immediate -w -t 30 stop >/dev/null 2>&1
	fi
	if [ "${RFS_KEEP:-0}" = 1 ]; then
		echo "kept $RFS_PG_DIR" >&2
	else
		rm -rf "$RFS_PG_DIR"
	fi
	RFS_PG_DIR=
}

if [ "${BASH_SOURCE[0]}" = "$0" ] && [ "${1:-}" = run ]; then
	shift
	trap 'rc=$?; rfs_pg_stop; exit $rc' EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	rfs_pg_start
	"$@"
	exit $?
fi
