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
// Kernels are in kernels.cu, compiled by `go generate -tags cuda` (which
// runs scripts/cuda-ptx.sh: nvcc from Debian's CUDA 11.8, see
// scripts/cuda-env.sh) to one compute_80 PTX file, kernels.ptx, and
// embedded; the driver JIT-compiles the PTX for the card at load. Matrix products go through cuBLAS (cublasGemmEx),
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
// Measured runs on GPU machines (suite results, benchmark tables, MFU) are
// in results/README.md with their raw logs; scripts/cuda-device-run.sh runs
// the suite and the benchmarks there.
package cuda
