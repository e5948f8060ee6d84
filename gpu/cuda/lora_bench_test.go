//go:build cuda

package cuda_test

import (
	"fmt"
	"testing"

	"swerl/gpu"
)

// config7B is Qwen2.5-7B's shape (7.6B parameters, untied embeddings).
func config7B() gpu.Config {
	return gpu.Config{
		ModelType: "qwen2", HiddenSize: 3584, IntermediateSize: 18944, NumHiddenLayers: 28,
		NumAttentionHeads: 28, NumKeyValueHeads: 4, VocabSize: 152064, MaxPositionEmbeddings: 32768,
		RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: false, AttentionBias: true,
	}
}

// BenchmarkLoRAStep7B times one LoRA GRPO step (rank 16, every linear
// module) of a Qwen2.5-7B-shaped model (zero weights: the time and the
// memory do not depend on the values), with and without activation
// checkpointing (ckpt), with the mma flash attention, and reports
// tokens/s and the device memory in use after the step (the trainer
// allocates its buffers up front, so this is its peak, cuBLAS workspace
// aside) in GB.
func BenchmarkLoRAStep7B(b *testing.B) {
	cfg := config7B()
	m, err := gpu.NewZeroModel(cfg)
	if err != nil {
		b.Fatal(err)
	}
	for _, sh := range []struct {
		B, T int
		ckpt bool
		attn string
	}{{4, 2048, true, "mma"}, {8, 2048, true, "mma"}, {1, 2048, false, "mma"}, {4, 2048, false, "mma"}} {
		name := fmt.Sprintf("%s/B=%d,T=%d", sh.attn, sh.B, sh.T)
		if sh.ckpt {
			name += ",ckpt"
		}
		b.Run(name, func(b *testing.B) {
			g := open(b)
			if err := g.SetMatmul("bf16"); err != nil {
				b.Fatal(err)
			}
			if err := g.SetAttention(sh.attn); err != nil {
				b.Fatal(err)
			}
			a, err := gpu.NewLoRA(cfg, gpu.LoRAConfig{Rank: 16, Alpha: 32, Seed: 1})
			if err != nil {
				b.Fatal(err)
			}
			tr, err := gpu.NewLoRATrainer(m, a, g, gpu.TrainConfig{MaxBatch: sh.B, MaxSeq: sh.T, LR: 1e-5, Checkpoint: sh.ckpt})
			if err != nil {
				b.Fatal(err)
			}
			batch := benchBatch(sh.B, sh.T, cfg.VocabSize)
			if _, err := tr.Step(batch); err != nil {
				b.Fatal(err)
			}
			used, total, err := g.MemUsed()
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for b.Loop() {
				if _, err := tr.Step(batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(sh.B*sh.T)/(b.Elapsed().Seconds()/float64(b.N)), "tokens/s")
			b.ReportMetric(float64(used)/1e9, "GB-used")
			b.ReportMetric(float64(total)/1e9, "GB-card")
			b.ReportMetric(float64(used)/float64(m.NumParams()), "bytes/param")
		})
	}
}
