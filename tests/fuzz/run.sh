#!/bin/bash
#
# run.sh - runs every fuzz target for SECONDS (default 60) on its seed
# corpus, with its dictionary. Needs a build configured with
# CC=clang meson setup BUILD -Dfuzz=true. New interesting inputs go to a
# scratch directory; a crash leaves crash-* files in the working directory
# and a non-zero exit: copy the input into tests/fuzz/corpus/NAME/ so the
# normal suite replays it from then on.
#
#   tests/fuzz/run.sh BUILD [SECONDS]
set -euo pipefail
build=${1:?usage: run.sh BUILD [SECONDS]}
secs=${2:-60}
src=$(cd "$(dirname "$0")" && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for corpus in "$src"/corpus/*/; do
	name=$(basename "$corpus")
	exe=$build/tests/fuzz/fuzz_$name
	[ -x "$exe" ] || { echo "missing $exe (-Dfuzz=true?)" >&2; exit 2; }
	mkdir -p "$scratch/$name"
	dict=()
	[ -f "$src/$name.dict" ] && dict=(-dict="$src/$name.dict")
	echo "== fuzz_$name for ${secs}s"
	"$exe" "${dict[@]}" -max_total_time="$secs" -timeout=10 \
		-rss_limit_mb=2048 "$scratch/$name" "$corpus"
done
