#!/bin/sh
# install-config.sh SRC DIR - meson install script: installs SRC as
# DIR/regions.ini only if no regions.ini is there yet, so that "meson
# install" never overwrites an operator's configuration. Honours DESTDIR
# (a staged install, such as a package build, always gets the file).
set -eu
src=$1
dir=${DESTDIR:-}$2
if [ -n "${MESON_INSTALL_DRY_RUN:-}" ]; then
	exit 0
fi
if [ -e "$dir/regions.ini" ]; then
	echo "Keeping existing $dir/regions.ini"
	exit 0
fi
mkdir -p "$dir"
install -m 0644 "$src" "$dir/regions.ini"
echo "Installing $src to $dir/regions.ini"
