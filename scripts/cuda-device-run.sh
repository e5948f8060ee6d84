#!/usr/bin/env bash
# cuda-device-run.sh is the one prepared GPU run: the CUDA test suite, the
# benchmarks and a per-op profile, with their logs written to OUTDIR. Build
# here first (scripts/ci-cuda.sh leaves gpu/cuda/cuda.test), copy cuda.test
# and this script into a folder, and on the GPU machine run
#
#	bash DIR/cuda-device-run.sh DIR OUTDIR
#
# It takes about 4 minutes on an H100 or H200 (at most 8). Logs:
#   gpu.txt            the card, driver and clock
#   test.log           the suite (REQUIRE_GPU=1: a missing GPU fails)
#   bench.log          BenchmarkTrainStep (attention: cuBLAS over all heads,
#                      mma and pipe; side by side), BenchmarkSample,
#                      BenchmarkSampleBatch
#   bench-base.log     with base.test beside cuda.test (a build of the
#                      baseline), the same benchmarks (BASE_PAT narrows
#                      them) with it, then again with cuda.test
#                      (bench-again.log; AGAIN=0 skips it)
#   bench-7b.log       BenchmarkLoRAStep7B with checkpointing, mma attention
#                      at 4x2048 and 8x2048 (LORA7B=0 skips it)
#   profile.log        SWERL_CUDA_PROFILE=kernels: GPU time per kernel and
#                      cuBLAS shape (CUDA events, steady state after the
#                      warm-up) of bf16 steps at 8x512 with the defaults
#                      (mma attention, bf16 activations, lazy zeroing) and
#                      with pipe attention, and of batch-64 decoding
# TEST_RUN narrows the tests and TEST_SKIP (default Emulated) skips some;
# BENCH_PAT narrows the benchmarks (-test.bench: anchor the first level as
# ^BenchmarkX$),
# PROF_PAT and PROF_PAT2 the two profiled benchmarks; BENCH=0 skips the
# benchmarks and the profile.
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
# The emulator tests (TestMMAEmulated, ...) are CPU tests of the ordinary
# go test: they need g++ and testdata/, which the GPU machine lacks.
REQUIRE_GPU=1 timeout 240 ./cuda.test -test.v -test.count=1 -test.skip "${TEST_SKIP-Emulated}" ${TEST_RUN:+-test.run "$TEST_RUN"} >"$out/test.log" 2>&1
rc=$?
grep -E '^(--- FAIL|FAIL|ok|PASS)|^    --- FAIL|device ' "$out/test.log" | tail -40
echo "tests rc=$rc"
if [ "${BENCH:-1}" = 1 ]; then
	b() { timeout "$1" ./${BIN:-cuda.test} -test.run '^$' -test.bench "$2" -test.benchtime "${BENCH_TIME:-3x}"; }
	pat=${BENCH_PAT:-TrainStep/cuda|Sample/cuda|SampleBatch}
	b 240 "$pat" 2>&1 | tee "$out/bench.log"
	if [ -x base.test ]; then
		# The baseline binary beside this one, then this one again: each
		# ratio is measured side by side on one card.
		BIN=base.test b 240 "${BASE_PAT:-$pat}" 2>&1 | tee "$out/bench-base.log"
		[ "${AGAIN:-1}" = 1 ] && b 240 "${BASE_PAT:-$pat}" 2>&1 | tee "$out/bench-again.log"
	fi
	export SWERL_CUDA_PROFILE=kernels BENCH_TIME=2x
	b 100 "${PROF_PAT:-TrainStep/cuda/^bf16(-pipe)?$/B=8}" >"$out/profile.log" 2>&1
	b 60 "${PROF_PAT2:-SampleBatch/cuda/bf16/batch=64}" >>"$out/profile.log" 2>&1
	unset SWERL_CUDA_PROFILE
	grep -A14 'GPU time per kernel' "$out/profile.log"
fi
if [ "${LORA7B:-1}" = 1 ]; then
	# The 7B-shaped LoRA step's memory and speed at 4x2048 and 8x2048
	# (mma attention, checkpointing); the model's host arena takes 30 GB.
	timeout 200 ./${BIN:-cuda.test} -test.run '^$' -test.bench 'LoRAStep7B/mma/B=.,T=2048,ckpt' -test.benchtime 1x 2>&1 | tee "$out/bench-7b.log" | grep Benchmark
fi
exit $rc
