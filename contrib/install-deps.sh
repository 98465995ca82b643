#!/usr/bin/env bash
# Installs what regionfs needs to build, run and test on Debian 12 (as root).
set -euo pipefail
if [ "$(id -u)" != 0 ]; then
	echo "install-deps.sh: run as root (sudo $0)" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends \
	ca-certificates gcc libc6-dev pkg-config meson ninja-build \
	libfuse3-dev fuse3 libsqlite3-dev sqlite3 libinih-dev libcmocka-dev scdoc \
	libpq-dev postgresql-15 \
	xz-utils "$@"
