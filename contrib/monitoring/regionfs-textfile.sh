#!/usr/bin/env bash
#
# regionfs-textfile.sh - export a regionfs mount's metrics to the
# node_exporter textfile collector.
#
# Copies MNT/.regionfs/metrics.prom into the collector's directory the safe
# way: the metrics are read into a temporary file in that same directory
# (named without the .prom suffix, so node_exporter never reads it), checked,
# made world-readable and renamed over the target file. rename() within one
# directory is atomic: a scrape sees the previous complete file or the new
# complete one, never half of one.
#
# It refuses to run against anything but a live regionfs mount: the path must
# be the mount point of a file system of type fuse.regionfs in
# /proc/self/mountinfo. On any error it prints "regionfs-textfile: ..." on
# stderr, exits non-zero and leaves the previous output file untouched; the
# age of that file (node_exporter's node_textfile_mtime_seconds) is what the
# RegionfsMetricsStale alert watches.
#
# Every read of the mount runs under timeout(1), so a hung daemon makes the
# run fail after TIMEOUT seconds instead of piling up stuck runs.
#
# Run it from regionfs-textfile.timer (every 15 s), or from cron.

set -u
set -o pipefail
export LC_ALL=C

PROG=regionfs-textfile
MNT=/mnt/regionfs
DIR=/var/lib/prometheus/node-exporter
NAME=regionfs.prom
TIMEOUT=10
LABELS=()
TMP=

usage()
{
	cat <<EOF
usage: $PROG [-d DIR] [-o NAME] [-l LABEL=VALUE]... [-t SECONDS] [MOUNTPOINT]

Copies MOUNTPOINT/.regionfs/metrics.prom atomically to DIR/NAME for the
node_exporter textfile collector.

  MOUNTPOINT       the regionfs mount (default: $MNT)
  -d DIR           textfile collector directory
                   (default: $DIR, Debian's prometheus-node-exporter default)
  -o NAME          output file name, must end in .prom (default: $NAME)
  -l LABEL=VALUE   add this label to every sample; repeatable. Needed when
                   one host has several mounts, for example
                   -o regionfs-sessions.prom -l mount=sessions
  -t SECONDS       give up reading the mount after this long (default: $TIMEOUT)
  -h               this help

Exit status: 0 on success, 1 on a runtime error (the previous output file is
kept), 2 on a usage error.
EOF
}

die()
{
	echo "$PROG: $*" >&2
	exit 1
}

usage_error()
{
	echo "$PROG: $*" >&2
	echo "try '$PROG -h'" >&2
	exit 2
}

cleanup()
{
	[ -z "$TMP" ] || rm -f -- "$TMP" "$TMP.l"
}

# Prints PATH escaped the way the kernel escapes /proc/self/mountinfo
# fields: space, tab, newline and backslash as \ooo octal.
mountinfo_escape()
{
	local s=$1
	s=${s//\\/\\134}
	s=${s// /\\040}
	s=${s//$'\t'/\\011}
	s=${s//$'\n'/\\012}
	printf '%s' "$s"
}

# Prints the file system type of the mount whose mount point is exactly $1
# (canonical), or nothing. With mounts stacked on one point the last line
# of mountinfo is the visible one.
mount_fstype()
{
	local want
	want=$(mountinfo_escape "$1")
	awk -v m="$want" '
		$5 == m {
			for (i = 7; i <= NF; i++)
				if ($i == "-") { t = $(i + 1); break }
		}
		END { if (t != "") print t }' /proc/self/mountinfo
}

check_label()
{
	local name=${1%%=*} l

	case $1 in
	*=*) ;;
	*) usage_error "-l '$1': expected LABEL=VALUE" ;;
	esac
	[[ $name =~ ^[a-zA-Z_][a-zA-Z0-9_]*$ ]] ||
		usage_error "-l '$1': '$name' is not a valid label name"
	case $name in
	__*) usage_error "-l '$1': label names starting with __ are reserved" ;;
	region | cause | origin | version)
		usage_error "-l '$1': regionfs already uses the label '$name'" ;;
	esac
	for l in "${LABELS[@]}"; do
		[ "${l%%=*}" != "$name" ] ||
			usage_error "-l '$1': label '$name' given twice"
	done
}

parse_args()
{
	local opt

	while getopts ':d:o:l:t:h' opt; do
		case $opt in
		d) DIR=$OPTARG ;;
		o) NAME=$OPTARG ;;
		l) check_label "$OPTARG"; LABELS+=("$OPTARG") ;;
		t) TIMEOUT=$OPTARG ;;
		h) usage; exit 0 ;;
		:) usage_error "option -$OPTARG needs a value" ;;
		*) usage_error "unknown option -$OPTARG" ;;
		esac
	done
	shift $((OPTIND - 1))
	[ $# -le 1 ] || usage_error "too many arguments"
	[ $# -eq 1 ] && MNT=$1
	case $NAME in
	*/*) usage_error "-o '$NAME': a file name, not a path" ;;
	.*) usage_error "-o '$NAME': must not start with '.'" ;;
	?*.prom) ;;
	*) usage_error "-o '$NAME': must end in .prom (node_exporter reads only *.prom)" ;;
	esac
	[[ $TIMEOUT =~ ^[1-9][0-9]*$ ]] ||
		usage_error "-t '$TIMEOUT': expected whole seconds > 0"
}

# Sets MNT to the canonical mount point and checks it is a regionfs mount.
check_mount()
{
	local canon err fstype

	if ! err=$(timeout -k 2 "$TIMEOUT" realpath -e -- "$MNT" 2>&1); then
		[ "$err" ] || err="timed out after ${TIMEOUT}s"
		die "cannot access $MNT: $err"
	fi
	canon=$err
	fstype=$(mount_fstype "$canon")
	[ -n "$fstype" ] ||
		die "$MNT is not a mount point (is regionfs mounted there?)"
	[ "$fstype" = fuse.regionfs ] ||
		die "$MNT is a $fstype mount, not regionfs (type fuse.regionfs)"
	MNT=$canon
}

# Reads the metrics into $TMP (one open: one consistent snapshot).
read_metrics()
{
	local src=$MNT/.regionfs/metrics.prom err

	if ! err=$(timeout -k 2 "$TIMEOUT" cat -- "$src" 2>&1 >"$TMP"); then
		[ "$err" ] || err="timed out after ${TIMEOUT}s"
		die "cannot read $src: $err"
	fi
	# A sanity check, not a parser: a complete file starts with our first
	# family, ends with a newline and has only comments and regionfs_
	# samples. It catches a truncated read or a wrong file.
	if ! awk 'NR == 1 && !/^# HELP regionfs_/ { bad = 1 }
		  !/^# (HELP|TYPE) regionfs_/ && !/^regionfs_[a-z0-9_]*[{ ]/ {
			bad = 1 }
		  /^regionfs_build_info[{ ]/ { info = 1 }
		  END { exit bad || !info }' "$TMP" ||
		[ -n "$(tail -c 1 -- "$TMP")" ]; then
		die "$src does not look like regionfs metrics (truncated read?)"
	fi
}

# Escapes a label value for the text exposition format.
label_escape()
{
	local v=$1
	v=${v//\\/\\\\}
	v=${v//\"/\\\"}
	v=${v//$'\n'/\\n}
	printf '%s' "$v"
}

# Adds the -l labels to every sample line of $TMP.
add_labels()
{
	local l extra='' sep=''

	[ ${#LABELS[@]} -gt 0 ] || return 0
	for l in "${LABELS[@]}"; do
		extra+="$sep${l%%=*}=\"$(label_escape "${l#*=}")\""
		sep=,
	done
	# ENVIRON, not -v: awk -v would interpret the backslashes again.
	RFS_EXTRA=$extra awk '
		BEGIN { x = ENVIRON["RFS_EXTRA"] }
		/^#/ { print; next }
		{
			i = index($0, "{"); j = index($0, " ")
			if (i > 0 && i < j)
				print substr($0, 1, i) x "," substr($0, i + 1)
			else
				print substr($0, 1, j - 1) "{" x "}" substr($0, j)
		}' "$TMP" >"$TMP.l" || die "cannot write $TMP.l"
	mv -f -- "$TMP.l" "$TMP" || die "cannot rename $TMP.l"
}

main()
{
	parse_args "$@"
	[ -d "$DIR" ] || die "$DIR is not a directory (textfile collector directory, -d)"
	[ -w "$DIR" ] || die "$DIR is not writable"
	check_mount
	trap cleanup EXIT
	trap 'exit 130' INT
	trap 'exit 143' TERM
	TMP=$(mktemp -- "$DIR/.$NAME.XXXXXX") || die "cannot create a file in $DIR"
	read_metrics
	add_labels
	# mktemp made it 0600; node_exporter usually runs as another user.
	chmod 0644 -- "$TMP" || die "chmod $TMP failed"
	mv -f -T -- "$TMP" "$DIR/$NAME" || die "cannot rename $TMP to $DIR/$NAME"
	TMP=
}

main "$@"
