# bash completion for regionfs(8): options, the keys of -o (config= completes
# files), --check-config FILE, then SOURCE (a file) and MOUNTPOINT (a
# directory); and regionfs-stat (below). Installed as
# .../bash-completion/completions/regionfs, with regionfs-stat a link to it.
# shellcheck disable=SC2207 # compgen output is words, the usual idiom
_regionfs()
{
	local cur prev words cword
	_init_completion -n = || return

	local okeys='config= uid= gid= allow_other allow_root default_permissions
		auto_unmount clone_fd max_threads= max_idle_threads= debug ro rw
		nosuid nodev noexec noatime'
	case $prev in
	--check-config)
		_filedir ini
		return
		;;
	-o)
		case $cur in
		*,config=* | config=*)
			local pre=${cur%config=*}config= i
			cur=${cur##*config=}
			_filedir ini
			for i in "${!COMPREPLY[@]}"; do
				COMPREPLY[i]=$pre${COMPREPLY[i]}
			done
			return
			;;
		esac
		local pre=
		[[ $cur == *,* ]] && pre=${cur%,*},
		compopt -o nospace
		COMPREPLY=($(compgen -P "$pre" -W "$okeys" -- "${cur##*,}"))
		return
		;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W '-o -f -d -s -h -V --help --version
			--check-config' -- "$cur"))
		return
	fi
	local i nargs=0
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-o | --check-config) ((i++)) ;;
		-*) ;;
		*) ((nargs++)) ;;
		esac
	done
	if ((nargs == 0)); then
		_filedir
	else
		_filedir -d
	fi
} && complete -F _regionfs regionfs

# regionfs-stat [-i SECONDS] [-c COUNT] [-r REGION]... [MOUNTPOINT]: -r
# completes the region names of the configuration ("name R" lines of
# regionfs --check-config; $REGIONFS_CONFIG, else /etc/regionfs/regions.ini).
_regionfs_stat()
{
	local cur prev words cword
	_init_completion || return

	case $prev in
	-r | --region)
		local names
		names=$(regionfs --check-config \
			"${REGIONFS_CONFIG:-/etc/regionfs/regions.ini}" 2>/dev/null |
			awk '$1 == "name" { print $2 }')
		COMPREPLY=($(compgen -W "$names" -- "$cur"))
		return
		;;
	-i | --interval | -c | --count)
		return
		;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W '-i -c -r -h --interval --count --region
			--help' -- "$cur"))
		return
	fi
	_filedir -d
} && complete -F _regionfs_stat regionfs-stat
