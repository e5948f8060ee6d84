#!/usr/bin/env bash
# cuda-ptx.sh compiles gpu/cuda/kernels.cu to PTX for compute_80
# (gpu/cuda/kernels.ptx), which the package embeds; the driver JIT-compiles
# it for the card at load, sm_90 included. gpu/cuda's go:generate line runs
# it. Needs nvcc on PATH: eval "$(scripts/cuda-env.sh)" first.
set -euo pipefail
cd "$(dirname "$0")/.."
host=${NVCC_CCBIN:-$(command -v g++-12 || command -v g++)}
nvcc -ccbin "$host" -allow-unsupported-compiler ${SWERL_CUDA_ROOT:+-I"$SWERL_CUDA_ROOT/usr/include"} -std=c++17 -O3 -ptx \
	-arch=compute_80 -o gpu/cuda/kernels.ptx gpu/cuda/kernels.cu
