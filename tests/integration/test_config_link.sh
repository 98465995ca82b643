#!/bin/bash
#
# test_config_link.sh - regions.ini reached through a symlink. Before, the
# path was resolved with realpath() once at start: after the link was
# re-pointed (a Kubernetes ConfigMap swaps its ..data link, a deploy
# swaps a `current` link), SIGHUP logged success but read the old file,
# and the watch never fired. Now the path is kept as given, opened anew at
# every load (made absolute against the working directory, links left
# alone), and watched in the link's directory and in the directory of
# the file it resolves to, so each of these reloads the new content:
# SIGHUP after re-pointing the link, the ConfigMap-style swap with no
# signal, and an edit of the target file itself.

# shellcheck source=harness.sh disable=SC2154 # rfs_stat uses printf -v
. "$(dirname "${BASH_SOURCE[0]}")/../common/harness.sh"

rfs_init
M=$RFS_MNT
C=$RFS_TMP/conf
mkdir -p "$C/..2026_01" "$C/..2026_02" "$C/v"
cp "$RFS_INI" "$C/v/one.ini"
{ cat "$RFS_INI"; printf '\n[two]\n'; } >"$C/v/two.ini"
ln -s v/one.ini "$C/regions.ini"
cd "$RFS_TMP" || rfs_fail "cd $RFS_TMP"
RFS_INI=conf/regions.ini # relative, as an operator may type it

# wait_region NAME: NAME appears at the root within 10 s.
wait_region()
{
	local i
	for ((i = 0; i < 200; i++)); do
		[ -d "$M/$1" ] && return 0
		sleep 0.05
	done
	rfs_fail "region $1 did not appear (config: $(tr '\n' ' ' <"$M/.regionfs/config"))"
}

rfs_mount
rfs_stat v "$M/.regionfs/config" path
[ "$v" = "$C/regions.ini" ] || rfs_fail ".regionfs/config path is '$v', not the link"
[ ! -e "$M/two" ] || rfs_fail "region two before any change"

ln -s v/two.ini "$C/regions.ini.new" && mv -T "$C/regions.ini.new" "$C/regions.ini" ||
	rfs_fail "re-point the link"
kill -HUP "$RFS_PID"
wait_region two
rfs_ok "re-pointed link + SIGHUP: the new target is loaded"

# a ConfigMap: regions.ini -> ..data/regions.ini, ..data -> ..2026_01
{ cat "$C/v/two.ini"; printf '\n[three]\n'; } >"$C/..2026_01/regions.ini"
{ cat "$C/v/two.ini"; printf '\n[three]\n[four]\n'; } >"$C/..2026_02/regions.ini"
ln -s ..2026_01 "$C/..data"
ln -s ..data/regions.ini "$C/regions.ini.new" && mv -T "$C/regions.ini.new" "$C/regions.ini" ||
	rfs_fail "point regions.ini at ..data"
wait_region three
rfs_ok "the link re-pointed, no signal: the watch reloads"
ln -s ..2026_02 "$C/..data_tmp" && mv -T "$C/..data_tmp" "$C/..data" ||
	rfs_fail "swap ..data"
wait_region four
rfs_ok "a ConfigMap-style ..data swap, no signal: the watch reloads"

{ cat "$C/..2026_02/regions.ini"; printf '\n[five]\n'; } >"$C/..2026_02/tmp.ini"
mv "$C/..2026_02/tmp.ini" "$C/..2026_02/regions.ini"
wait_region five
rfs_ok "the target file itself replaced: the watch on its directory reloads"
rfs_umount
rfs_done
