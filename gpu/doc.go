// Package gpu is the learner's compute: a Llama-family decoder (Llama 3,
// Qwen2/2.5 with q/k/v bias, SmolLM, TinyLlama), the small Backend
// interface of ops it runs on, batched KV-cache sampling (BatchSampler:
// many sequences per forward pass, continuous batching, batch-invariant
// results), the GRPO and SFT objectives and the AdamW optimizer.
//
// The model is written in the shape of llm.c: model.go reads top to bottom
// (dimension legend, parameter and activation layout, one arena, forward,
// backward, update). The architecture (Config, an alias of arch.Config)
// and its tensor list live in gpu/arch, shared with the file layout of
// gpu/hf. There is no tensor library and no graph.
// Backends live in sub-packages: gpu/cpu (pure Go, the reference, always
// builds) and gpu/cuda (build tag cuda). gpu/gputest is the conformance
// suite every backend runs.
//
// # Behavior
//
// Parameters live in one host arena (float32, Hugging Face names and
// layouts, see Model.Tensors); a Trainer or Sampler binds a Model to a
// Backend. On a HostBacked backend the arena is used in place; otherwise it
// is uploaded, and Trainer.SyncHost copies trained weights back.
//
// # Determinism
//
// NewModel(cfg, seed) is a pure function of its arguments. The CPU backend
// splits work over a fixed number of workers with a fixed partition, and
// every reduction runs in a fixed order, so a training step or a sampled
// sequence with a fixed seed is bitwise identical from run to run on the
// same machine and worker count.
//
// # Performance (CPU backend)
//
// go test -run XXX -bench 'Matmul|TrainStep|Sample|TrainMemory' -benchtime 3x
// ./gpu/ ./gpu/cpu/ on the idle 2-core dev box (2026-11-23); the FMA peak
// is measured in the same run (cpu.PeakFLOPS, 110 GFLOP/s on 2 workers):
//
//	matmul N×C→OC           forward            backward
//	256×512→512             59.5 GFLOP/s 54%    63.1 GFLOP/s 57%
//	512×512→1536            81.8 GFLOP/s 74%    93.2 GFLOP/s 84%
//	64×768→768              27.8 GFLOP/s 25%    59.6 GFLOP/s 54%
//
//	~20M-parameter Llama (21.9M), B=4, T=256:
//	training step (forward, backward, AdamW)   830 tokens/s
//	sampling with the KV cache                 205 tokens/s
//	sampling without it (recompute)            14.6 tokens/s (14x slower)
//	live heap while training                   30.8 bytes/param: 16 for
//	    parameters, gradients and the two AdamW moments, 14.6 activations,
//	    0.2 other (RoPE tables, packing buffers)
//
// Batched sampling, go test -run XXX -bench SampleBatch -benchtime 2x
// -count 3 ./gpu/ (2026-11-26, the 2 cores shared with other sessions at
// load average ~25, so per CPU-second; wall tokens/s swung 2-3x run to
// run, and CPU-seconds themselves vary ~15% between sets of runs). Same
// ~20M model, 64 tokens generated after a 64-token prompt, prompt
// processing included; two sets of three runs:
//
//	batch 1                              133-149 tokens/cpu-s
//	batch 32, 32 prompts                 562-657 tokens/cpu-s (4.1-4.7x), 42-49 GFLOP/cpu-s
//	batch 32, 8 prompts x 4 (GRPO)       746-902 tokens/cpu-s (5.5-6.5x)
//	127 tokens after a 1-token prompt:   batch 1 143-163, batch 32 885-1110 tokens/cpu-s (6.0-6.9x)
//
// At batch 32 the linear layers run at 42-49 GFLOP per CPU-second, near
// the FMA peak of one worker (cpu.PeakFLOPS, ~55): with 32 prompts of 64
// tokens, half of those FLOPs are prompt processing, which batching
// cannot remove, and batch 1 decodes at the memory bandwidth (the weights
// read once a token), so ~4.5x is the ceiling of that case on this box.
//
// The small 64-row product is below the 40% target (too little work to
// amortize packing over two workers); the training shapes are above it.
package gpu
