// Package gpu is the learner's compute: a Llama-family decoder (Llama 3,
// Qwen2/2.5 with q/k/v bias, SmolLM, TinyLlama), the small Backend
// interface of ops it runs on, batched KV-cache sampling (BatchSampler:
// many sequences per forward pass, continuous batching, batch-invariant
// results), the GRPO and SFT objectives and the AdamW optimizer, over
// every weight or over LoRA adapters on a frozen base (NewLoRATrainer: no
// gradient or optimizer state for the base; samplers serve LoRA.Merged).
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
// # Performance
//
// The CPU backend's benchmarks (matmul against the measured FMA peak,
// training tokens/s, sampling with and without the KV cache, batched
// sampling, bytes per parameter while training) and their results are in
// bench/gpu/README.md; the CUDA backend's in bench/gpu/results.
package gpu
