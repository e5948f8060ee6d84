#!/usr/bin/env bash
# build.sh compiles the standalone attention files of this folder. With a
# full CUDA toolkit (nvcc beside ptxas and fatbinary, e.g. /usr/local/cuda
# on a GPU machine) it builds the programs flash_simt and flash_wmma into
# OUTDIR (default: this folder's build/); with only the front end that
# scripts/cuda-env.sh fetches (no ptxas: the dev box and CI) it compiles
# each file to PTX in OUTDIR, which parses the host code and compiles every
# kernel, and prints which it did.
#
#	bash bench/gpu/kernels/build.sh [OUTDIR]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/build}
mkdir -p "$out"
if ! command -v nvcc >/dev/null; then
	eval "$("$here/../../../scripts/cuda-env.sh")"
fi
nvcc_dir=$(dirname "$(readlink -f "$(command -v nvcc)")")
flags=(-O3 -std=c++17 ${SWERL_CUDA_ROOT:+-I"$SWERL_CUDA_ROOT/usr/include"})
if [ -n "${SWERL_CUDA_ROOT:-}" ]; then
	host=${NVCC_CCBIN:-$(command -v g++-12 || command -v g++)}
	flags+=(-ccbin "$host" -allow-unsupported-compiler)
fi
for f in attention_flash_simt attention_flash_wmma; do
	if [ -x "$nvcc_dir/ptxas" ] || command -v ptxas >/dev/null; then
		nvcc "${flags[@]}" -gencode arch=compute_80,code="[sm_80,compute_80]" -gencode arch=compute_90,code=sm_90 -o "$out/${f#attention_}" "$here/$f.cu"
		echo "build.sh: built $out/${f#attention_}"
	else
		nvcc "${flags[@]}" -arch=compute_80 -ptx -o "$out/$f.ptx" "$here/$f.cu"
		echo "build.sh: no ptxas beside $nvcc_dir/nvcc: compiled $f.cu to PTX only ($out/$f.ptx)"
	fi
done
