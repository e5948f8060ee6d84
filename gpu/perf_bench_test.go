package gpu_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
)

// benchConfig is a ~20M-parameter Llama: 6 layers of width 512, 8 query
// and 4 key/value heads, SwiGLU width 1408, an untied 4096-token vocabulary.
func benchConfig() gpu.Config {
	return gpu.Config{
		ModelType:             "llama",
		HiddenSize:            512,
		IntermediateSize:      1408,
		NumHiddenLayers:       6,
		NumAttentionHeads:     8,
		NumKeyValueHeads:      4,
		VocabSize:             4096,
		MaxPositionEmbeddings: 2048,
		RMSNormEps:            1e-5,
		RopeTheta:             10000,
	}
}

func benchBatch(B, T, V int, seed uint64) []gpu.Sequence {
	r := rand.New(rand.NewPCG(seed, 1))
	batch := make([]gpu.Sequence, B)
	for i := range batch {
		toks := make([]int32, T)
		for j := range toks {
			toks[j] = int32(r.IntN(V))
		}
		batch[i] = gpu.Sequence{Prompt: toks[:T/4], Completion: toks[T/4:], Advantage: 1}
	}
	return batch
}

// BenchmarkTrainStep measures forward+backward+AdamW of the ~20M model on
// B×T tokens per step (SFT objective: every completion token carries a
// loss, like GRPO's), in tokens per second.
func BenchmarkTrainStep(b *testing.B) {
	params, workers := timeSteps(b, benchConfig(), 4, 256, (*gpu.Trainer).SFTStep)
	b.ReportMetric(float64(params)/1e6, "Mparams")
	b.ReportMetric(float64(workers), "workers")
}

// BenchmarkTrainStepTiny is BenchmarkTrainStep for the built-in tiny
// model (width 64, heads of 16 channels) at the batch swerl run's learner
// takes (8 sequences of up to 1024 tokens, GRPO steps): attention, not
// the matrix products, is most of its step.
func BenchmarkTrainStepTiny(b *testing.B) {
	cfg := gpu.TinyConfig()
	cfg.MaxPositionEmbeddings = 4096
	timeSteps(b, cfg, 8, 1024, (*gpu.Trainer).Step)
}

// timeSteps times step on a model of cfg trained on the CPU backend over
// batches of B sequences of T tokens, after one untimed step (which sizes
// lazily allocated state), and reports tokens/s; it returns the model's
// parameter count and the backend's worker count.
func timeSteps(b *testing.B, cfg gpu.Config, B, T int, step func(*gpu.Trainer, []gpu.Sequence) (gpu.Metrics, error)) (params, workers int) {
	m, err := gpu.NewModel(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	be := cpu.New()
	defer be.Close()
	tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: B, MaxSeq: T, LR: 1e-4})
	if err != nil {
		b.Fatal(err)
	}
	batch := benchBatch(B, T, cfg.VocabSize, 2)
	if _, err := step(tr, batch); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := step(tr, batch); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(B*T)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
	return m.NumParams(), be.Workers()
}

// BenchmarkSample measures decoding tokens/s of the ~20M model after a
// 64-token prompt, with the KV cache and with NoCache (the whole prefix
// recomputed for every token).
func BenchmarkSample(b *testing.B) {
	const prompt, gen = 64, 64
	cfg := benchConfig()
	m, err := gpu.NewModel(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	p := benchBatch(1, prompt, cfg.VocabSize, 3)[0]
	toks := append(append([]int32(nil), p.Prompt...), p.Completion...)
	for _, noCache := range []bool{false, true} {
		b.Run(fmt.Sprintf("cache=%v", !noCache), func(b *testing.B) {
			be := cpu.New()
			defer be.Close()
			s, err := gpu.NewSampler(m, be, prompt+gen)
			if err != nil {
				b.Fatal(err)
			}
			s.NoCache = noCache
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				c, err := s.Sample(toks, gpu.SamplingParams{Temperature: 1, Seed: 1, MaxTokens: gen})
				if err != nil || len(c.Tokens) != gen {
					b.Fatalf("%d tokens, %v", len(c.Tokens), err)
				}
			}
			b.ReportMetric(float64(gen)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
		})
	}
}

// allocCounter records the size of every buffer a Trainer allocates.
type allocCounter struct {
	*cpu.Backend[float32]
	sizes []int
}

func (a *allocCounter) Alloc(n int) (gpu.Buf, error) {
	a.sizes = append(a.sizes, n)
	return a.Backend.Alloc(n)
}

// BenchmarkTrainMemory reports the live heap after a training step of the
// ~20M model, in bytes per parameter, with its breakdown: parameters,
// gradients and AdamW moments (4 bytes each per parameter), activations,
// and what is left (RoPE tables, matmul packing buffers, batch buffers).
func BenchmarkTrainMemory(b *testing.B) {
	const B, T = 4, 256
	cfg := benchConfig()
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		m, err := gpu.NewModel(cfg, 1)
		if err != nil {
			b.Fatal(err)
		}
		be := &allocCounter{Backend: cpu.New()}
		tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: B, MaxSeq: T, LR: 1e-4})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tr.SFTStep(benchBatch(B, T, cfg.VocabSize, 2)); err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		P := float64(m.NumParams())
		total := float64(after.HeapAlloc) - float64(before.HeapAlloc)
		// Allocations: grads, m, v (P each), then the RoPE tables and the
		// activation arena; the largest non-P one is the activations.
		var acts, otherAlloc float64
		for _, n := range be.sizes {
			switch {
			case n == m.NumParams():
			case float64(n) > acts:
				otherAlloc += acts
				acts = float64(n)
			default:
				otherAlloc += float64(n)
			}
		}
		b.ReportMetric(total/P, "bytes/param")
		b.ReportMetric(4*acts/P, "acts_bytes/param")
		b.ReportMetric((total-16*P-4*acts)/P, "other_bytes/param")
		b.ReportMetric(P/1e6, "Mparams")
		runtime.KeepAlive(tr)
		runtime.KeepAlive(m)
		be.Close()
	}
}
