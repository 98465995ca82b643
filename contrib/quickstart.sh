#!/usr/bin/env bash
# Quick start on a fresh Debian 12 machine (as root): installs the packages
# regionfs needs, builds it, and mounts the default regions.ini.
#   MNT (default /mnt/regionfs)              where the cache is mounted
#   DB  (default /var/lib/regionfs/cache.db) the SQLite database
# Unmount with: fusermount3 -u /mnt/regionfs
set -euo pipefail
cd "$(dirname "$0")/.."
MNT=${MNT:-/mnt/regionfs}
DB=${DB:-/var/lib/regionfs/cache.db}

contrib/install-deps.sh >/dev/null
if [ -d build/meson-private ]; then
	meson setup --reconfigure build >/dev/null
else
	meson setup build >/dev/null
fi
ninja -C build >/dev/null
mkdir -p "$(dirname "$DB")" "$MNT"
if mountpoint -q "$MNT"; then
	echo "quickstart: $MNT is already mounted (fusermount3 -u $MNT first)" >&2
	exit 1
fi
build/fs/regionfs -o config="$PWD/regions.ini" "$DB" "$MNT"
echo "regionfs mounted at $MNT (database $DB, config $PWD/regions.ini)"
echo "try:     echo blue > $MNT/options/red; cat $MNT/options/red; cat $MNT/.regionfs/stats"
echo "unmount: fusermount3 -u $MNT"
