#!/usr/bin/env bash
# test_man.sh REGIONFS REGIONFS.8 REGIONS.INI.5 - checks the built man pages.
#
# 1. Both render without a warning (groff -ww, man --warnings).
# 2. Every option that "REGIONFS --help" prints (regionfs's own and the
#    libfuse options it passes on) appears in regionfs(8).
# 3. Every regions.ini setting appears in regions.ini(5). The settings come
#    from the program, not from a list kept here: the "name value" lines of
#    "--check-config" on a one-region file, and the "(valid: ...)" list of
#    the unknown-key error. Both are documented output (doc/config.md).
# Prints one "ok"/"FAIL" line per check; exit 0 only if all pass.
set -u
export LC_ALL=C
RFS=$1 MAN8=$2 MAN5=$3
fails=0 n=0
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

ok() { n=$((n + 1)); echo "ok $n - $*"; }
fail() { n=$((n + 1)); fails=$((fails + 1)); echo "FAIL $n - $*"; }

# Plain text of a page: wide lines, no hyphenation, no formatting.
render() { groff -man -Tascii -rLL=400n -rHY=0 -P-cbou "$1" 2>/dev/null; }

for page in "$MAN8" "$MAN5"; do
	w=$(groff -ww -z -man "$page" 2>&1)
	[ -z "$w" ] && ok "groff -ww: $(basename "$page")" ||
		fail "groff -ww $(basename "$page"): $w"
	if command -v man >/dev/null; then
		w=$(MANWIDTH=80 man --warnings -l "$page" 2>&1 >/dev/null)
		[ -z "$w" ] && ok "man --warnings -l: $(basename "$page")" ||
			fail "man --warnings -l $(basename "$page"): $w"
	fi
done
render "$MAN8" >"$TMP/8.txt"
render "$MAN5" >"$TMP/5.txt"
[ -s "$TMP/8.txt" ] && [ -s "$TMP/5.txt" ] || fail "pages render to text"

# 2. Options: each help line that starts with an option; "-o a=N,b=N"
#    gives a and b, "-x, --long" gives both.
"$RFS" --help >"$TMP/help" 2>&1
opts=$(sed -n 's/^ \{2,\}\(-[^ ].*\)$/\1/p' "$TMP/help" |
	sed 's/   .*//' |
	grep -oE -- '--[a-z][a-z-]*|-o [a-z_]+(=[^ ,]*)?(,[a-z_]+(=[^ ,]*)?)*|(^|[ ,])-[a-zA-Z]\b' |
	sed -E 's/^[ ,]//; s/^-o //; s/=[^,]*//g' | tr ',' '\n' | sort -u)
[ "$(echo "$opts" | grep -c .)" -ge 10 ] ||
	fail "found only $(echo "$opts" | grep -c .) options in --help (parser out of date?)"
for o in $opts; do
	case $o in
	-*) grep -qE -- "(^|[^a-z-])$o([^a-z-]|\$)" "$TMP/8.txt" ;;
	*) grep -qE -- "(^|[^a-z_])$o([^a-z_]|\$)" "$TMP/8.txt" ;;
	esac && ok "regionfs(8) has option $o" ||
		fail "regionfs(8) lacks option '$o' (from regionfs --help)"
done

# 3. Settings.
printf '[r]\n' >"$TMP/one.ini"
keys=$("$RFS" --check-config "$TMP/one.ini" 2>/dev/null | awk '$1 != "name" {print $1}')
printf '[r]\nno_such_key = 1\n' >"$TMP/bad.ini"
valid=$("$RFS" --check-config "$TMP/bad.ini" 2>&1 |
	sed -n 's/.*(valid: \(.*\)).*/\1/p' | tr -d ' .' | tr ',' '\n')
keys=$(printf '%s\n%s\n' "$keys" "$valid" | grep . | sort -u)
[ "$(echo "$keys" | grep -c .)" -ge 8 ] ||
	fail "found only $(echo "$keys" | grep -c .) settings (--check-config output changed?)"
# only the SETTINGS section counts (not the example at the end)
sed -n '/^SETTINGS/,/^[A-Z]/p' "$TMP/5.txt" >"$TMP/settings.txt"
for k in $keys; do
	grep -qE "^ +$k = " "$TMP/settings.txt" &&
		ok "regions.ini(5) documents setting $k" ||
		fail "regions.ini(5) SETTINGS lacks '$k = ...'"
done

echo "man pages: $((n - fails)) passed, $fails failed"
[ "$fails" = 0 ]
