#!/usr/bin/env bash
# shellcheck disable=SC2015,SC2016,SC2317 # "a && ok || fail" is meant; sh -c bodies; trap functions
# test_deb.sh - builds the Debian package, installs it on this machine, and
# uses it as an operator would; then removes it again. Run by .ci/run as
#   bash tests/package/test_deb.sh
# as root on Debian 12 (it installs its build-depends, lintian and
# bash-completion with apt-get; those stay installed). Takes 1-3 minutes.
#
# Checks: dpkg-buildpackage -b -uc -us builds it (in a copy of the tree, so
# the work tree stays clean); lintian reports no error; apt-get installs it;
# /usr/bin/regionfs runs, the man pages, units, example config (a conffile)
# and completion are in place; the installed units pass systemd-analyze
# verify and their exposure score stays under 5; the fstab example line
# mounts through mount.fuse3 (mount -T), so does mount -t fuse.regionfs
# with a relative database path, and findmnt shows fuse.regionfs with the
# absolute database path; a write reads back, also after a remount;
# the completion completes -o keys. Every mount is unmounted, also on
# failure, and the package is purged at the end.
#
# Prints "ok N - ..." / "FAIL N - ..." lines and ends with
# "package: N passed, N failed[, N skipped]". Exit 0 when all passed (or
# when skipped: not root, or not a Debian system), 1 otherwise.
set -u
export LC_ALL=C DEBIAN_FRONTEND=noninteractive
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
n=0 fails=0
ok() { n=$((n + 1)); echo "ok $n - $*"; }
fail() { n=$((n + 1)); fails=$((fails + 1)); echo "FAIL $n - $*"; }
check() { # check DESCRIPTION COMMAND...
	local what=$1
	shift
	if "$@"; then ok "$what"; else fail "$what"; fi
}
finish() {
	echo "# ${SECONDS}s in all"
	echo "package: $((n - fails)) passed, $fails failed"
	[ "$fails" = 0 ]
	exit
}
skip() {
	echo "package: skipped: $*"
	echo "package: 0 passed, 0 failed, 1 skipped"
	exit 0
}

[ "$(id -u)" = 0 ] || skip "needs root"
command -v apt-get >/dev/null && command -v dpkg >/dev/null ||
	skip "not a Debian system"
[ -c /dev/fuse ] || skip "no /dev/fuse"
if [ "$(dpkg-query -W -f '${db:Status-Status}' regionfs 2>/dev/null)" = installed ]; then
	echo "test_deb.sh: the regionfs package is already installed; not touching it" >&2
	exit 1
fi
if [ -e /etc/regionfs ]; then
	echo "test_deb.sh: /etc/regionfs exists; not touching an existing configuration" >&2
	exit 1
fi

TMP=$(mktemp -d /tmp/regionfs-deb.XXXXXX)
MNT=$TMP/mnt
installed=false
cleanup() {
	local m
	for m in "$MNT" "$MNT"2; do
		if grep -q " $m fuse" /proc/mounts; then
			fusermount3 -u "$m" 2>/dev/null || umount -l "$m"
		fi
	done
	wait_daemon_gone
	if $installed; then
		apt-get purge -y -q regionfs >/dev/null 2>&1 ||
			echo "test_deb.sh: apt-get purge regionfs failed" >&2
	fi
	rm -rf "$TMP"
}
# The daemons of this test are the regionfs processes with our $TMP in
# their command line; after an unmount they finish their commit and exit.
daemon_pids() { pgrep -f -- "regionfs .*$TMP/" || true; }
wait_daemon_gone() {
	local pids
	for _ in $(seq 100); do
		pids=$(daemon_pids)
		[ -z "$pids" ] && return 0
		sleep 0.1
	done
	echo "test_deb.sh: daemon(s) $pids still running; stopping them" >&2
	for p in $pids; do kill "$p" 2>/dev/null; done
	return 1
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# 1. Build-depends and tools.
# apt-get update only when the lists do not have them (CI's install step
# has just updated them).
deps() {
	apt-get build-dep -y -q "$ROOT" &&
		apt-get install -y -q --no-install-recommends dpkg-dev lintian \
			bash-completion file
}
if deps >"$TMP/apt.log" 2>&1 ||
	{ apt-get update -q && deps; } >>"$TMP/apt.log" 2>&1; then
	ok "build-depends installed (apt-get build-dep) (${SECONDS}s)"
else
	fail "apt-get build-dep / install (see below)"
	tail -20 "$TMP/apt.log"
	finish
fi

# 2. Build in a copy of the tree (tracked and untracked files, not ignored).
mkdir -p "$TMP/src/regionfs" "$MNT" "$MNT"2
(cd "$ROOT" && git ls-files -co --exclude-standard -z 2>/dev/null |
	tar --null -T - -cf -) | tar -xf - -C "$TMP/src/regionfs" 2>/dev/null ||
	cp -a "$ROOT/." "$TMP/src/regionfs/"
rm -rf "$TMP/src/regionfs/.git" "$TMP/src/regionfs"/build*
if (cd "$TMP/src/regionfs" && dpkg-buildpackage -b -uc -us) \
	>"$TMP/build.log" 2>&1; then
	ok "dpkg-buildpackage -b -uc -us (${SECONDS}s)"
else
	fail "dpkg-buildpackage -b -uc -us:"
	tail -30 "$TMP/build.log"
	finish
fi
DEB=$(ls "$TMP"/src/regionfs_*.deb)
CHANGES=$(ls "$TMP"/src/regionfs_*.changes)

# 3. lintian: no errors (warnings are shown, not fatal).
if lintian --fail-on error "$CHANGES" >"$TMP/lintian.log" 2>&1; then
	ok "lintian: no errors ($(grep -c '^W:' "$TMP/lintian.log") warnings) (${SECONDS}s)"
else
	fail "lintian reports errors:"
fi
grep -E '^[EW]:' "$TMP/lintian.log" | sed 's/^/    /'

# 4. Install.
if apt-get install -y -q "$DEB" >"$TMP/install.log" 2>&1; then
	installed=true
	ok "apt-get install ./$(basename "$DEB") (${SECONDS}s)"
else
	installed=true # a half-installed package is purged too
	fail "apt-get install:"
	tail -20 "$TMP/install.log"
	finish
fi
check "regionfs --version from /usr/bin" \
	sh -c '[ "$(command -v regionfs)" = /usr/bin/regionfs ] && regionfs --version | grep -q "^regionfs "'
for p in regionfs regions.ini regionfs-stat; do
	check "man page $p installed and renders cleanly" \
		sh -c "f=\$(man -w $p) && [ -z \"\$(man --warnings -l \"\$f\" 2>&1 >/dev/null)\" ]"
done
for f in /lib/systemd/system/regionfs.service /lib/systemd/system/regionfs@.service \
	/lib/systemd/system/regionfs-textfile.service /lib/systemd/system/regionfs-textfile.timer \
	/usr/bin/regionfs-stat /usr/libexec/regionfs/regionfs-textfile.sh \
	/usr/share/doc/regionfs/examples/regions.ini /usr/share/doc/regionfs/examples/fstab.example \
	/usr/share/regionfs/monitoring/regionfs-alerts.yml \
	/usr/share/bash-completion/completions/regionfs; do
	check "installed: $f" test -e "$f"
done
check "/etc/regionfs/regions.ini is a conffile" \
	sh -c 'dpkg-query -W -f "\${Conffiles}" regionfs | grep -q "/etc/regionfs/regions.ini "'
check "regionfs --check-config /etc/regionfs/regions.ini" \
	sh -c 'regionfs --check-config /etc/regionfs/regions.ini >/dev/null 2>&1'
if command -v systemd-analyze >/dev/null; then
	mkdir -p "$TMP/units"
	cp /lib/systemd/system/regionfs.service /lib/systemd/system/regionfs-textfile.* "$TMP/units/"
	cp /lib/systemd/system/regionfs@.service "$TMP/units/regionfs@mnt-cache.service"
	for u in "$TMP"/units/*; do
		out=$(systemd-analyze verify "$u" 2>&1)
		[ -z "$out" ] && ok "systemd-analyze verify $(basename "$u")" ||
			fail "systemd-analyze verify $(basename "$u"): $out"
	done
	for u in regionfs.service regionfs@mnt-cache.service; do
		score=$(cd "$TMP/units" && systemd-analyze security --offline=true "$u" 2>/dev/null |
			sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p')
		if [ -n "$score" ] && awk -v s="$score" 'BEGIN { exit !(s < 5) }'; then
			ok "systemd-analyze security $u: $score"
		else
			fail "systemd-analyze security $u: '$score' (expected < 5)"
		fi
	done
fi

# 5. Mount from the fstab example (mount -T: a private fstab), through
#    mount.fuse3, with the package's regions.ini.
sed -n 's|^/var/lib/regionfs/cache.db  */mnt/regionfs |'"$TMP"'/cache.db '"$MNT"' |p' \
	/usr/share/doc/regionfs/examples/fstab.example >"$TMP/fstab"
check "fstab example has no _netdev and has nosuid,nodev" \
	sh -c "grep -q nosuid,nodev '$TMP/fstab' && ! grep -q _netdev '$TMP/fstab'"
if mount -T "$TMP/fstab" "$MNT" 2>"$TMP/mount.err"; then
	ok "mount -T fstab $MNT (fuse.regionfs via mount.fuse3)"
else
	fail "mount from the fstab line: $(cat "$TMP/mount.err")"
	finish
fi
src_type=$(findmnt -n -o SOURCE,FSTYPE "$MNT")
check "findmnt: '$src_type' is '$TMP/cache.db fuse.regionfs'" \
	test "$src_type" = "$TMP/cache.db fuse.regionfs"
check "mount lists it as fuse.regionfs with the database path" \
	sh -c "mount | grep -qF '$TMP/cache.db on $MNT type fuse.regionfs (rw,nosuid,nodev'"
echo blue >"$MNT/options/red" 2>"$TMP/write.err"
check "write then read back options/red" \
	test "$(cat "$MNT/options/red" 2>&1)" = blue
check "umount $MNT" umount "$MNT"
wait_daemon_gone

# 6. mount -t fuse.regionfs with a relative database path: the source
#    recorded is absolute.
if (cd "$TMP" && mount -t fuse.regionfs -o config=/etc/regionfs/regions.ini,nosuid,nodev \
	cache.db "$MNT"2 2>"$TMP/mount.err"); then
	ok "mount -t fuse.regionfs cache.db (relative) $MNT""2"
	check "findmnt shows the absolute path for a relative source" \
		test "$(findmnt -n -o SOURCE "$MNT"2)" = "$TMP/cache.db"
	check "the value survived the remount" \
		test "$(cat "$MNT"2/options/red 2>&1)" = blue
	check "umount $MNT""2" umount "$MNT"2
	wait_daemon_gone
else
	fail "mount -t fuse.regionfs: $(cat "$TMP/mount.err")"
fi

# 7. bash completion of -o keys.
comp=$(bash -c '. /usr/share/bash-completion/bash_completion
	. /usr/share/bash-completion/completions/regionfs
	COMP_WORDS=(regionfs -o allow_other,con); COMP_CWORD=2
	COMP_LINE="regionfs -o allow_other,con"; COMP_POINT=${#COMP_LINE}
	_regionfs 2>/dev/null; echo "${COMPREPLY[*]}"' 2>&1)
check "bash completion: 'regionfs -o allow_other,con' -> '$comp'" \
	test "$comp" = "allow_other,config="
comp=$(bash -c '. /usr/share/bash-completion/bash_completion
	. /usr/share/bash-completion/completions/regionfs-stat
	COMP_WORDS=(regionfs-stat -r ""); COMP_CWORD=2
	COMP_LINE="regionfs-stat -r "; COMP_POINT=${#COMP_LINE}
	_regionfs_stat 2>/dev/null; echo "${COMPREPLY[*]}"' 2>&1)
check "bash completion: 'regionfs-stat -r ' -> '$comp' (regions.ini's regions)" \
	test "$comp" = "options sessions blobs"

# 8. Purge: nothing of the package stays.
if apt-get purge -y -q regionfs >"$TMP/purge.log" 2>&1; then
	installed=false
	ok "apt-get purge regionfs"
else
	fail "apt-get purge regionfs: $(tail -3 "$TMP/purge.log")"
fi
check "purged: no /usr/bin/regionfs, /etc/regionfs, units" \
	sh -c '! [ -e /usr/bin/regionfs ] && ! [ -e /etc/regionfs ] && ! [ -e /lib/systemd/system/regionfs.service ]'
finish
