#!/usr/bin/env bash
# cuda-device-run.sh runs the CUDA test binary and the benchmarks on a GPU
# machine. Build here first (scripts/ci-cuda.sh leaves gpu/cuda/cuda.test),
# copy cuda.test and this script into a folder, and on the GPU machine run
#
#	bash DIR/cuda-device-run.sh DIR OUTDIR
#
# The binary links only libc and the driver's libcuda.so.1; cuBLAS is
# dlopened, so LD_LIBRARY_PATH must name a folder with the machine's own
# libcublas.so.N (found below when unset).
set -uo pipefail
dir=${1:-.}
out=${2:-.}
if [ -z "${SWERL_CUBLAS_DIR:-}" ]; then
	f=$(ls /usr/local/cuda/lib64/libcublas.so.* 2>/dev/null | head -1)
	[ -n "$f" ] || f=$(find / -xdev -name 'libcublas.so.*' 2>/dev/null | head -1)
	SWERL_CUBLAS_DIR=$(dirname "$f")
fi
export LD_LIBRARY_PATH=$SWERL_CUBLAS_DIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv | tee "$out/gpu.txt"
echo "cublas from $SWERL_CUBLAS_DIR"
cd "$dir"
REQUIRE_GPU=1 ./cuda.test -test.v -test.count=1 ${TEST_RUN:+-test.run "$TEST_RUN"} >"$out/test.log" 2>&1
rc=$?
grep -E '^(=== RUN|--- FAIL|FAIL|ok|PASS)|device ' "$out/test.log" | grep -v '=== RUN' | tail -40
echo "tests rc=$rc"
if [ "${BENCH:-1}" = 1 ]; then
	./cuda.test -test.run '^$' -test.bench "${BENCH_RE:-.}" -test.benchtime "${BENCH_TIME:-3x}" 2>&1 | tee "$out/bench.log"
fi
exit $rc
