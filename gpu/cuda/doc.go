//go:build cuda

// Package cuda is the NVIDIA GPU implementation of gpu.Backend, built only
// with the "cuda" build tag (go build -tags cuda): gorgonia.org/cu's package
// init calls cuInit and exits the process when no driver or GPU is present,
// so nothing in the default build imports this package.
//
// Design: every driver call runs on one goroutine locked to its OS thread
// (the CUDA context's thread); ops are closures sent to it, which check
// shapes on the caller's side and launch asynchronously on the legacy
// default stream. Errors are sticky (gpu.Backend's contract); failures of
// asynchronous kernels surface at the next Err, Download or SumSquares.
// Kernels are in kernels.cu, compiled to PTX for sm_80 and sm_90 by
// scripts/cuda-ptx.sh (nvcc from Debian's CUDA 11.8, see
// scripts/cuda-env.sh) and embedded; the driver JIT-compiles the PTX for
// the card at load. Matrix products go through cuBLAS (cublasGemmEx),
// loaded with dlopen at run time so that the binary asks for no particular
// libcublas.so.N and runs against the machine's CUDA 12 or 13 libraries.
//
// Precision: buffers, master weights and AdamW state are float32. Matrix
// products are exact float32 by default (which the gputest suite's
// tolerances need); SWERL_CUDA_MATMUL=bf16 (or SetMatmul) runs them on
// bf16 tensor cores with float32 accumulation (CUBLAS_COMPUTE_32F_FAST_16BF:
// operands rounded to bf16 inside cuBLAS), tf32 likewise. bf16 storage of
// weights and activations is not done yet.
//
// # Results
//
// Run 1, 2026-11-23, on the device machine: NVIDIA H100 80GB HBM3
// (driver 580.159.04, SM clock 1980 MHz, compute capability 9.0) and its
// 16-core Intel Xeon; binaries built here with cgo against Debian's CUDA
// 11.8 headers, run against the machine's CUDA 13 libraries. The raw logs
// are in results/run1-*.
//
// The gputest suite (every op forward and backward, 112 subtests) passed
// against the CPU reference, as did TestTrainerMatchesCPU (a GRPO step of a
// tiny model) and TestSamplerMatchesCPU (KV-cache sampling), in f32 matmul.
//
// Benchmarks (Qwen2.5-0.5B shape, 494M parameters; one GRPO step is
// forward, backward and AdamW; MFU against 989 TFLOP/s dense bf16):
//
//	BenchmarkTrainStep            B×T     ms/step   tokens/s   TFLOP/s   MFU
//	cuda, bf16 tensor cores       8×512     143      28,621     88.6     9.0%
//	cuda, tf32                    8×512     142      28,761     89.1     9.0%
//	cuda, f32                     8×512     369      11,097     34.4     3.5%
//	cpu (16 cores), f32           1×64    9,217       6.9      0.02      -
//
//	BenchmarkSample (64-token prompt, 64 generated, KV cache, greedy)
//	cuda                          51.6 tokens/s
//	cpu (16 cores)                 1.4 tokens/s
//
// The GPU step is 4,100x the CPU's tokens/s and decoding 36x, but the MFU
// target (35%) is not met. bf16 and tf32 products take the same time per
// step, so the step is not bound by the matrix products: the rest is the
// element-wise and attention kernels, one thread per element over float32
// buffers (SWERL_CUDA_PROFILE=1 prints the time per op), and decoding is
// bound by one kernel launch per op per token. The next steps are bf16
// storage of weights and activations, fused RMSNorm/SwiGLU/softmax
// kernels, a tiled (flash-style) attention kernel, and CUDA graphs for
// decode.
package cuda
