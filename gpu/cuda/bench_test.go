//go:build cuda

package cuda_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/cuda"
)

// printProfile writes the per-op time table of SWERL_CUDA_PROFILE=1 runs.
func printProfile(b *testing.B, g *cuda.Backend) {
	if g == nil {
		return
	}
	if p := g.Profile(); p != "" {
		fmt.Fprintf(os.Stderr, "%s: time per op (synchronized):\n%s", b.Name(), p)
	}
	if p := g.KernelProfile(b.N); p != "" {
		fmt.Fprintf(os.Stderr, "%s: GPU time per kernel (events), %s", b.Name(), p)
	}
}

// config05B is Qwen2.5-0.5B's shape (494M parameters, tied embeddings).
func config05B() gpu.Config {
	return gpu.Config{
		ModelType: "qwen2", HiddenSize: 896, IntermediateSize: 4864, NumHiddenLayers: 24,
		NumAttentionHeads: 14, NumKeyValueHeads: 2, VocabSize: 151936, MaxPositionEmbeddings: 32768,
		RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, AttentionBias: true,
	}
}

// peakTFLOPS is the card's dense bf16 peak used for MFU: SWERL_PEAK_TFLOPS,
// default 989 (H100 SXM5, NVIDIA's datasheet, dense).
func peakTFLOPS() float64 {
	if v, err := strconv.ParseFloat(os.Getenv("SWERL_PEAK_TFLOPS"), 64); err == nil && v > 0 {
		return v
	}
	return 989
}

func benchBatch(B, T int, V int) []gpu.Sequence {
	batch := make([]gpu.Sequence, B)
	for i := range batch {
		p, c := make([]int32, T/4), make([]int32, T-T/4)
		for j := range p {
			p[j] = int32((i*7919 + j*104729) % V)
		}
		for j := range c {
			c[j] = int32((i*31 + j*7927) % V)
		}
		batch[i] = gpu.Sequence{Prompt: p, Completion: c, Advantage: float64(i%3) - 1}
	}
	return batch
}

// BenchmarkTrainStep times one GRPO step (forward, backward, AdamW) of the
// 0.5B model and reports tokens/s, model TFLOP/s and MFU against
// peakTFLOPS. FLOPs per token: 6·params + 12·layers·(NH·HS)·T (PaLM's
// convention, attention counted unmasked).
func BenchmarkTrainStep(b *testing.B) {
	cfg := config05B()
	m, err := gpu.NewModel(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	type run struct {
		dev, mm, attn string // attn "X+act32+eager": X with SWERL_CUDA_ACT=f32, SWERL_CUDA_ZERO=now; "+nofuse": SWERL_CUDA_FUSE=0
		B, T          int
	}
	runs := []run{
		// The defaults: mma attention, bf16 activations, lazy zeroing.
		{"cuda", "bf16", "", 8, 512}, {"cuda", "bf16", "", 4, 2048},
		// Double-buffered attention tiles and dq's early zero take (opt-in).
		{"cuda", "bf16", "pipe", 8, 512}, {"cuda", "bf16", "pipe", 4, 2048},
		{"cuda", "bf16", "cublas", 8, 512}, {"cuda", "bf16", "cublas", 4, 2048},
		{"cuda", "bf16", "mma+act32+eager", 8, 512}, {"cuda", "bf16", "mma+act32+eager", 4, 2048},
		{"cuda", "bf16", "mma+nofuse", 8, 512}, {"cuda", "bf16", "mma+nofuse", 4, 2048},
		{"cuda", "tf32", "", 8, 512}, {"cuda", "f32", "", 8, 512}, {"cpu", "f32", "", 1, 64},
	}
	for _, r := range runs {
		name := fmt.Sprintf("%s/%s/B=%d,T=%d", r.dev, r.mm, r.B, r.T)
		if r.attn != "" {
			name = fmt.Sprintf("%s/%s-%s/B=%d,T=%d", r.dev, r.mm, r.attn, r.B, r.T)
		}
		attn, flags, _ := strings.Cut(r.attn, "+")
		b.Run(name, func(b *testing.B) {
			var be gpu.Backend
			var g *cuda.Backend
			for _, f := range strings.Split(flags, "+") {
				switch f {
				case "act32":
					b.Setenv("SWERL_CUDA_ACT", "f32")
				case "eager":
					b.Setenv("SWERL_CUDA_ZERO", "now")
				case "nofuse":
					b.Setenv("SWERL_CUDA_FUSE", "0")
				}
			}
			if r.dev == "cuda" {
				g = open(b)
				if err := g.SetMatmul(r.mm); err != nil {
					b.Fatal(err)
				}
				if attn != "" {
					if err := g.SetAttention(attn); err != nil {
						b.Fatal(err)
					}
				}
				be = g
			} else {
				c := cpu.New()
				defer c.Close()
				be = c
			}
			tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: r.B, MaxSeq: r.T, LR: 1e-6})
			if err != nil {
				b.Fatal(err)
			}
			batch := benchBatch(r.B, r.T, cfg.VocabSize)
			if _, err := tr.Step(batch); err != nil { // warm-up: activations, cuBLAS heuristics
				b.Fatal(err)
			}
			b.ResetTimer()
			if g != nil {
				g.ResetProfile()
			}
			for b.Loop() {
				if _, err := tr.Step(batch); err != nil {
					b.Fatal(err)
				}
			}
			printProfile(b, g)
			sec := b.Elapsed().Seconds() / float64(b.N)
			tokens := float64(r.B * r.T)
			flops := tokens * (6*float64(m.NumParams()) + 12*float64(cfg.NumHiddenLayers*cfg.HiddenSize*r.T))
			b.ReportMetric(tokens/sec, "tokens/s")
			b.ReportMetric(flops/sec/1e12, "TFLOP/s")
			b.ReportMetric(flops/sec/1e12/peakTFLOPS(), "MFU")
		})
	}
}

// BenchmarkSample times greedy decoding with the KV cache: a 64-token
// prompt, then 64 generated tokens per op; reports generated tokens/s.
func BenchmarkSample(b *testing.B) {
	cfg := config05B()
	m, err := gpu.NewModel(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, dev := range []string{"cuda", "cpu"} {
		b.Run(dev, func(b *testing.B) {
			var be gpu.Backend
			var g *cuda.Backend
			if dev == "cuda" {
				g = open(b)
				be = g
			} else {
				c := cpu.New()
				defer c.Close()
				be = c
			}
			s, err := gpu.NewSampler(m, be, 256)
			if err != nil {
				b.Fatal(err)
			}
			prompt := benchBatch(1, 256, cfg.VocabSize)[0].Prompt
			n := 64
			if dev == "cpu" {
				n = 8
			}
			p := gpu.SamplingParams{MaxTokens: n}
			benchTokens(b, g, func() (int, error) {
				c, err := s.Sample(prompt, p)
				return len(c.Tokens), err
			})
		})
	}
}

// BenchmarkSampleBatch times the BatchSampler on the CUDA backend: batch
// distinct 64-token prompts, 64 generated tokens each, decoded together
// (one forward step for all sequences in flight); reports generated
// tokens/s. batch=1 is the same sampler with one sequence, so the ratio is
// the gain from batching alone; the bf16 variants multiply on bf16 tensor
// cores (SetMatmul), the others in exact float32.
func BenchmarkSampleBatch(b *testing.B) {
	cfg := config05B()
	m, err := gpu.NewModel(cfg, 1)
	if err != nil {
		b.Fatal(err)
	}
	for _, v := range []struct {
		mm     string
		n      int
		host   bool // greedy picks on the host (logits downloaded), as before gpu.GreedyPicker
		nofuse bool // SWERL_CUDA_FUSE=0
	}{{"f32", 1, false, false}, {"f32", 64, false, false}, {"bf16", 1, false, false}, {"bf16", 64, false, false},
		{"bf16", 64, true, false}, {"bf16", 64, false, true}} {
		n := v.n
		name := fmt.Sprintf("cuda/batch=%d", n)
		if v.mm != "f32" {
			name = fmt.Sprintf("cuda/%s/batch=%d", v.mm, n)
		}
		if v.host {
			name += "/hostpick"
		}
		if v.nofuse {
			name += "/nofuse"
		}
		b.Run(name, func(b *testing.B) {
			if v.nofuse {
				b.Setenv("SWERL_CUDA_FUSE", "0")
			}
			g := open(b)
			if err := g.SetMatmul(v.mm); err != nil {
				b.Fatal(err)
			}
			var be gpu.Backend = g
			if v.host {
				be = hostPick{g, g, g}
			}
			s, err := gpu.NewBatchSampler(m, be, 256, n)
			if err != nil {
				b.Fatal(err)
			}
			seqs := benchBatch(n, 256, cfg.VocabSize)
			prompts := make([][]int32, n)
			ps := make([]gpu.SamplingParams, n)
			for i := range prompts {
				prompts[i] = seqs[i].Prompt
				ps[i] = gpu.SamplingParams{MaxTokens: 64, Seed: uint64(i + 1)}
			}
			benchTokens(b, g, func() (int, error) {
				cs, err := s.SampleAll(prompts, ps)
				n := 0
				for _, c := range cs {
					n += len(c.Tokens)
				}
				return n, err
			})
		})
	}
}

// hostPick is the CUDA backend without gpu.GreedyPicker: the sampler
// downloads every row of logits and picks on the host.
type hostPick struct {
	gpu.Backend
	gpu.FrozenWeights
	gpu.RaggedAttention
}

// benchTokens runs sample once to warm up, then as the benchmark's loop,
// and reports the tokens it generated per second (with g's profile from
// after the warm-up when profiling is on; g may be nil).
func benchTokens(b *testing.B, g *cuda.Backend, sample func() (int, error)) {
	if _, err := sample(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	if g != nil {
		g.ResetProfile()
	}
	start := time.Now()
	gen := 0
	for b.Loop() {
		n, err := sample()
		if err != nil {
			b.Fatal(err)
		}
		gen += n
	}
	b.ReportMetric(float64(gen)/time.Since(start).Seconds(), "tokens/s")
	printProfile(b, g)
}
