# shellcheck shell=bash
# halfwriter.sh - drives the halfwriter helper from an end-to-end test.
# Source it after harness.sh, once rfs_init has run:
#
#   hw_setup SIZE     two random halves of SIZE bytes each in $W ($RFS_TMP/work):
#                     a1, a2, and full (a1 then a2); sets hw to the helper
#   hw_start FILE     runs halfwriter on FILE in the background: it opens FILE,
#                     writes a1 and says "half"; returns once it has said so
#   hw_finish [LINE]  tells it to go on (write a2, close); sets HWLINE to what
#                     it said then ("closed 0", or the errno of its close);
#                     with LINE, fails the test unless HWLINE is LINE
#
# It talks through two FIFOs held open on fds 7 (its stdin) and 8 (its
# stdout); not a coproc: bash forgets a coproc's fds and pid the moment it
# exits.

hw_setup()
{
	rfs_helper hw halfwriter
	W=$RFS_TMP/work
	mkdir -p "$W"
	head -c "$1" /dev/urandom >"$W/a1"
	head -c "$1" /dev/urandom >"$W/a2"
	cat "$W/a1" "$W/a2" >"$W/full"
}

hw_start()
{
	local line

	rm -f "$RFS_TMP/hw.in" "$RFS_TMP/hw.out"
	mkfifo "$RFS_TMP/hw.in" "$RFS_TMP/hw.out" || rfs_fail "mkfifo"
	# shellcheck disable=SC2154 # hw is set by rfs_helper (printf -v)
	"$hw" "$1" "$W/a1" "$W/a2" <"$RFS_TMP/hw.in" >"$RFS_TMP/hw.out" &
	HWPID=$!
	RFS_CHILDREN="$RFS_CHILDREN $HWPID"
	exec 7>"$RFS_TMP/hw.in" 8<"$RFS_TMP/hw.out"
	read -r -u 8 line && [ "$line" = half ] || rfs_fail "halfwriter: '$line'"
}

hw_finish()
{
	echo go >&7
	HWLINE=
	read -r -u 8 HWLINE
	exec 7>&- 8<&-
	wait "$HWPID"
	if [ $# -gt 0 ] && [ "$HWLINE" != "$1" ]; then
		rfs_fail "halfwriter: '$HWLINE', expected '$1'"
	fi
}
