#!/usr/bin/env bash
# ci-cuda.sh is the CUDA leg of CI, on a machine without a GPU: fetch
# Debian's CUDA 11.8 headers, stubs and nvcc (scripts/cuda-env.sh, cached),
# vet the cuda-tagged packages, compile the kernels to PTX and check that
# the committed PTX is what the .cu source gives, then build the cuda test
# binary (gpu/cuda/cuda.test) and the swerl binary with --device cuda.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
eval "$(scripts/cuda-env.sh)"
echo "ci-cuda: toolchain ready after $((SECONDS - start))s" >&2
go vet -tags cuda ./gpu/... ./cmd/...
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp gpu/cuda/kernels_sm80.ptx gpu/cuda/kernels_sm90.ptx "$tmp"/
scripts/cuda-ptx.sh
for sm in 80 90; do
	if ! cmp -s "$tmp/kernels_sm$sm.ptx" "gpu/cuda/kernels_sm$sm.ptx"; then
		echo "ci-cuda: gpu/cuda/kernels_sm$sm.ptx is stale: run scripts/cuda-ptx.sh and commit it" >&2
		exit 1
	fi
done
go test -tags cuda -c -o gpu/cuda/cuda.test ./gpu/cuda
go build -tags cuda -o "$tmp/swerl" ./cmd/swerl
echo "ci-cuda: done in $((SECONDS - start))s" >&2
