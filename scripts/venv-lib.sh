# venv-lib.sh is sourced by the scripts that install Python peers into a
# cached virtual environment (install-py-peers.sh, install-vllm.sh).
# shellcheck shell=bash

# venv_open NAME PREFIX REQ PIN... sets $cache, $req and $venv: the environment
# $cache/PREFIX-KEY, KEY a hash of the requirements file REQ and the pins.
# When that environment is complete it prints it and exits 0; otherwise it
# creates it (or resumes an interrupted install: pip skips what is there).
venv_open() {
	local name=$1 prefix=$2 key
	req=$3
	shift 3
	key=$( (grep -v '^#' "$req"; echo "$*") | sha256sum | cut -c1-12)
	cache="${SWERL_CACHE:-$HOME/.cache/swerl}"
	venv="$cache/$prefix-$key"
	if [ -f "$venv/.complete" ]; then
		echo "$name: cached"
		echo "$venv"
		exit 0
	fi
	echo "$name: creating $venv"
	mkdir -p "$cache"
	[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
}

# venv_done LINK marks $venv complete, points $cache/LINK at it and prints
# it (the last line, which the callers read).
venv_done() {
	touch "$venv/.complete"
	ln -sfn "$venv" "$cache/$1"
	echo "$venv"
}
