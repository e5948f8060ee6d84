#!/usr/bin/env bash
# ci-cuda.sh is the CUDA leg of CI, on a machine without a GPU: fetch
# Debian's CUDA 11.8 headers, stubs and nvcc (scripts/cuda-env.sh, cached),
# vet the cuda-tagged packages, compile the kernels to PTX and check that
# the committed PTX is what the .cu source gives, then build the cuda test
# binary (gpu/cuda/cuda.test) and the swerl binary with --device cuda, and
# compile the standalone attention variants of bench/gpu/kernels to PTX.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
eval "$(scripts/cuda-env.sh)"
echo "ci-cuda: toolchain ready after $((SECONDS - start))s" >&2
go vet -tags cuda ./gpu/... ./cmd/...
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp gpu/cuda/kernels.ptx "$tmp"/
(cd gpu/cuda && go generate -tags cuda .)
if ! cmp -s "$tmp/kernels.ptx" gpu/cuda/kernels.ptx; then
	echo "ci-cuda: gpu/cuda/kernels.ptx is stale: run go generate -tags cuda ./gpu/cuda and commit it" >&2
	exit 1
fi
go test -tags cuda -c -o gpu/cuda/cuda.test ./gpu/cuda
go build -tags cuda -o "$tmp/swerl" ./cmd/swerl
bash bench/gpu/kernels/build.sh "$tmp/kernels" >/dev/null
echo "ci-cuda: done in $((SECONDS - start))s" >&2
