#!/usr/bin/env bash
# cuda-env.sh fetches Debian's non-free CUDA 11.8 headers, stub libraries,
# cuBLAS and nvcc into a cache outside the checkout, using a PRIVATE apt
# configuration (the system's sources and state are never touched), and
# prints export lines for a shell to eval:
#
#	eval "$(scripts/cuda-env.sh)"
#
# Cache: $SWERL_CUDA_CACHE (default ~/.cache/swerl-cuda). Re-runs reuse it.
set -euo pipefail
cache=${SWERL_CUDA_CACHE:-$HOME/.cache/swerl-cuda}
root=$cache/root
mkdir -p "$cache"
if [ ! -f "$cache/.done" ]; then
	apt=$cache/apt
	mkdir -p "$apt/lists/partial" "$apt/cache/archives/partial" "$apt/etc/preferences.d" "$apt/etc/sources.list.d" "$apt/debs"
	cat >"$apt/etc/sources.list" <<SRC
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian bookworm main contrib non-free
SRC
	opts=(-o "Dir::Etc::SourceList=$apt/etc/sources.list"
		-o "Dir::Etc::SourceParts=$apt/etc/sources.list.d"
		-o "Dir::Etc::Preferences=$apt/etc/preferences"
		-o "Dir::Etc::PreferencesParts=$apt/etc/preferences.d"
		-o "Dir::State::Lists=$apt/lists"
		-o "Dir::State::status=$apt/status"
		-o "Dir::Cache=$apt/cache"
		-o "APT::Architecture=amd64"
		-o "Debug::NoLocking=1")
	: >"$apt/status"
	apt-get "${opts[@]}" -qq update >&2
	# Only what the build needs: headers and the libcuda stub
	# (nvidia-cuda-dev), nvcc and its front end cicc with libdevice
	# (nvidia-cuda-toolkit, libnvvm4). cuBLAS is not linked: the backend
	# dlopens the device machine's own libcublas at run time.
	pkgs=(nvidia-cuda-dev nvidia-cuda-toolkit libnvvm4)
	want=()
	for p in "${pkgs[@]}"; do
		if apt-cache "${opts[@]}" show "$p" >/dev/null 2>&1; then want+=("$p"); fi
	done
	(cd "$apt/debs" && apt-get "${opts[@]}" -qq download "${want[@]}" >&2)
	mkdir -p "$root"
	for d in "$apt/debs"/*.deb; do dpkg-deb -x "$d" "$root"; done
	# Drop what no build step reads: static libraries and documentation.
	rm -rf "$root"/usr/lib/x86_64-linux-gnu/*_static*.a "$root"/usr/share/doc "$root"/usr/share/man
	rm -f "$apt"/debs/*.deb
	# nvcc reads nvcc.profile beside its binary (a link to /etc on Debian):
	# point it at the cache instead of the system.
	tk=$root/usr/lib/nvidia-cuda-toolkit
	rm -f "$tk/bin/nvcc.profile"
	cat >"$tk/bin/nvcc.profile" <<PROF
NVVMIR_LIBRARY_DIR = $tk/libdevice
PATH += $tk/bin:
INCLUDES += -I$root/usr/include
LIBRARIES =+ \$(_SPACE_) -L$root/usr/lib/x86_64-linux-gnu/stubs -L$root/usr/lib/x86_64-linux-gnu
PROF
	# Only nvcc goes on PATH: its bin folder also holds gcc/g++ wrappers
	# that would shadow the system compiler cgo uses.
	mkdir -p "$cache/bin"
	printf '#!/bin/sh\nexec "%s" "$@"\n' "$tk/bin/nvcc" >"$cache/bin/nvcc"
	chmod +x "$cache/bin/nvcc"
	touch "$cache/.done"
fi
inc=$root/usr/include
lib=$root/usr/lib/x86_64-linux-gnu
echo "export SWERL_CUDA_ROOT='$root'"
echo "export CGO_CFLAGS='-I$inc'"
echo "export CGO_LDFLAGS='-L$lib -L$lib/stubs -Wl,-rpath-link,$lib -Wl,-rpath-link,$lib/stubs'"
echo "export PATH='$cache/bin':\"\$PATH\""
