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
// embedded; the driver JIT-compiles the PTX for the card at load. Matrix
// products go through cuBLAS (cublasGemmEx),
// loaded with dlopen at run time so that the binary asks for no particular
// libcublas.so.N and runs against the machine's CUDA 12 or 13 libraries.
//
// Precision: buffers, master weights and AdamW state are float32. Matrix
// products are exact float32 by default (which the gputest suite's
// tolerances need); SWERL_CUDA_MATMUL=bf16 (or SetMatmul) multiplies the
// linear layers on bf16 tensor cores with float32 accumulation, tf32
// likewise. In bf16 the Trainer's weights are read from a bf16 copy that
// AdamW writes as it updates them (gpu.BF16Weights) and an input shared
// by consecutive products (q, k, v; gate, up) is converted once. Weights
// nothing writes, a LoRA Trainer's frozen base and a BatchSampler's
// weights, are held in bf16 only (gpu.FrozenWeights, UploadFrozen: 2
// bytes a parameter instead of 4, and no conversion at each product),
// with their norm weights and biases in float32; only the products'
// weight operands and the embedding lookup read such a buffer, and every
// other op refuses it. In the bf16 mode (gpu.BF16Activations;
// SWERL_CUDA_ACT=f32 turns it off) the activations only products read
// (the normed inputs of the projections and the LM head, the SwiGLU
// output; in decoding, the BatchSampler's ln, swi and lastLn) are held in
// bf16 as well: rmsnorm and swiglu write them rounded as the conversion
// before each product would, so results are the same and those
// conversions go (3 of a layer's 4 in decoding). Two more are bf16 with
// fusion: the paired gate and up product's output, which cuBLAS writes
// rounded once from its float32 sum and only SwiGLU reads (a rounding
// the float32 path does not make, as autocast makes it), and, for the
// mma attention, q, k and v, which rope_qkv writes rounded as the
// attention's tile loads would round them (the same results), and the
// down projection's input gradient, which only the paired SwiGLU's
// backward reads (rounded once, like the paired product's output). Other
// activations stay float32.
//
// Fusion (the default; SWERL_CUDA_FUSE=0 turns it off):
// gpu.ResidualNorm's add and norm of a residual are one kernel
// (add_rmsnorm_fwd), once a layer in training and twice in decoding, and
// decoding adds the q, k and v biases in rope_kv_rows
// (gpu.RaggedKVBias) instead of a bias_fill before each product. The
// MLP's gate and up projections are one product of 2I columns into a
// [N, 2I] buffer, gate and up side by side in each row
// (gpu.PairedSwiGLU), which the SwiGLU kernels read through GluRows; the
// backward pass makes both weights' gradients and the input's in one
// product each. The attention's q, k and v projections are likewise one
// product (gpu.PackedQKV: the arena keeps their weights and biases side
// by side), whose rows rope_qkv splits into q, k (rotated) and v, and
// into which it merges their gradients for the backward products.
//
// Zeroing: backward ops accumulate, so the model zeroes each gradient
// buffer before its first use. Zero only records the range (zero.go;
// SWERL_CUDA_ZERO=now zeroes at once instead), and the next op that
// touches it either zeroes it first or, when it writes the range whole
// (a backward product's dinp, SwiGLU's and the log-prob's backward),
// starts from zero instead of adding: beta 0, no read of the zeros.
//
// Attention: in the bf16 mode training runs flash_mma.cuh
// (SWERL_CUDA_ATTN=mma, gpu.FlashAttention), FlashAttention-2's layout
// on mma.sync: scores, probabilities, dP and dS stay in registers in the
// PTX ISA's fragment layouts, so the softmax needs no shared memory, and
// a log-sum-exp per row replaces the [B,NH,T,T] matrices (forward, dq,
// and dk/dv for heads up to 64 channels; larger heads take the WMMA
// kernel flash_tc_dkv for dk/dv). testdata/mmaemu runs those kernels on
// a CPU emulator of the fragment layouts in the ordinary go test. =pipe
// (opt-in, not yet timed on a card) double-buffers the forward's and
// dq's K and V tiles with cp.async, so the next tile's copies run during
// this one's products, and lets dq take its pending zero before dk's and
// dv's are settled. In f32 and tf32 the default is =cublas, the exact
// float32 path the tests compare the others against: batched products
// over every (batch, head) in one call each and a softmax kernel over
// the [B,NH,T,T] probabilities. Other attention variants (SIMT and WMMA
// flash kernels, per-head strided products) are standalone files in
// bench/gpu/kernels with what they measured. Decoding many sequences
// uses gpu.RaggedAttention (RoPE, the KV cache write and attention for
// every row of a step in one launch each; attention with one block per row and kv head for GQA heads,
// attn_rows.cuh, so a group's query heads read its keys and values
// once), and greedy steps pick on the device (gpu.GreedyPicker: two
// numbers a row leave the GPU instead of the vocabulary's logits).
//
// SWERL_CUDA_PROFILE=kernels times every kernel, cuBLAS call (named by
// shape, with its TFLOP/s) and memory operation on the GPU's clock with
// CUDA events, without synchronizing between ops; KernelProfile prints
// the table and the GPU's busy share of the wall clock (=1 times each op
// synchronized instead).
//
// What the backend measures on GPU machines (the test suite's results,
// the benchmarks side by side with earlier binaries, MFU, memory) is in
// bench/gpu/results/README.md with the raw logs; scripts/cuda-device-run.sh
// runs the suite and the benchmarks there.
package cuda
