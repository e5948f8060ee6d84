#!/usr/bin/env bash
# cuda-ptx.sh compiles gpu/cuda/kernels.cu to PTX for sm_80 and sm_90
# (gpu/cuda/kernels_sm80.ptx, kernels_sm90.ptx), which the package embeds.
# Needs nvcc on PATH: eval "$(scripts/cuda-env.sh)" first.
set -euo pipefail
cd "$(dirname "$0")/.."
host=${NVCC_CCBIN:-$(command -v g++-12 || command -v g++)}
for sm in 80 90; do
	nvcc -ccbin "$host" -allow-unsupported-compiler ${SWERL_CUDA_ROOT:+-I"$SWERL_CUDA_ROOT/usr/include"} -std=c++17 -O3 -ptx \
		-arch=compute_$sm -o gpu/cuda/kernels_sm$sm.ptx gpu/cuda/kernels.cu
done
