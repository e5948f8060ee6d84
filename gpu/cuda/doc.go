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
// tolerances need); SWERL_CUDA_MATMUL=bf16 (or SetMatmul) converts the
// linear layers' operands to bf16 and multiplies them on tensor cores with
// float32 accumulation (a decoding sampler's weights are converted once,
// through gpu.PackedMatmul), tf32 likewise. bf16 storage of activations
// and of a frozen LoRA base is not done yet.
//
// Attention: training uses cuBLAS batched products over every (batch,
// head) in one call each and a softmax kernel over the [B,NH,T,T]
// probabilities (SWERL_CUDA_ATTN=cublas, the default); =flash selects the
// tiled kernels of gpu.FlashAttention, which keep only a log-sum-exp per
// row (the memory of long sequences) but run on SIMT float32 and are
// slower; =strided and =naive are the earlier paths, for comparison.
// Decoding many sequences uses gpu.RaggedAttention: RoPE, the KV cache
// write and attention for every row of a step in one launch each.
//
// Measured (H200, runs 2-4 in results/): a GRPO step of the 0.5B shape in
// bf16 takes 82.9 ms at B×T 8×512 (15.5% MFU, 49.4k tokens/s) and 212 ms
// at 4×2048 (13.6%); the 35% target is not met. Decoding with the
// BatchSampler: 198 tokens/s at batch 1, 2,763 at batch 64 (3,030 with
// bf16 weights); the 10,000 target is not met. A Qwen2.5-7B-shaped LoRA
// step with activation checkpointing (gpu.TrainConfig.Checkpoint) holds
// 54.6 GB at 4×2048.
//
// Measured runs on GPU machines (suite results, benchmark tables, MFU) are
// in results/README.md with their raw logs; scripts/cuda-device-run.sh runs
// the suite and the benchmarks there.
package cuda
