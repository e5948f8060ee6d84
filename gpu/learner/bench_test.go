package learner

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/modeldir"
	"swerl/schemas"
)

// BenchmarkLearnerStep times the learner's GRPO steps (train and publish)
// on samples that carry the sampler's tokens and log-probabilities, as
// the in-process policy and token-reporting engines produce them: 4
// groups of 4, 256 prompt and 256 completion tokens each, on the built-in
// model. It uses only API that predates the off-policy objectives, so
// bench/offpolicy/compare.sh runs it on an older revision side by side.
func BenchmarkLearnerStep(b *testing.B) {
	model := filepath.Join(b.TempDir(), "model")
	if _, err := modeldir.Init(model, "tiny", 1); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	var samples []schemas.Sample
	for g := range 4 {
		for i := range 4 {
			s := schemas.Sample{Rollout: schemas.Rollout{ID: fmt.Sprintf("g%d/%d", g, i), GroupID: fmt.Sprintf("g%d", g), GroupSize: 4, Index: i,
				PromptTokens: make([]int32, 256), CompletionTokens: make([]int32, 256), LogProbs: make([]float32, 256), FinishReason: "length"},
				Advantage: float64(i) - 1.5, GroupComplete: true}
			for k := range 256 {
				s.PromptTokens[k], s.CompletionTokens[k] = int32(r.IntN(256)), int32(r.IntN(256))
				s.LogProbs[k] = -float32(r.Float64() * 6)
			}
			samples = append(samples, s)
		}
	}
	be := cpu.New()
	defer be.Close()
	l, err := New(context.Background(), Config{Out: b.TempDir(), Model: model, BatchGroups: 4, MaxStaleness: -1, Backend: be,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 512, LR: 1e-5}})
	if err != nil {
		b.Fatal(err)
	}
	run := func() {
		for i := range samples {
			samples[i].GroupID = fmt.Sprintf("%s.%d", samples[i].GroupID, l.Version())
			samples[i].ID = fmt.Sprintf("%s/%d", samples[i].GroupID, i%4)
		}
		st, err := l.Run(context.Background(), &SliceSource{Samples: samples}, 0)
		if err != nil || st.Samples == 0 {
			b.Fatalf("trained %d samples: %v", st.Samples, err)
		}
	}
	run()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(b.N*len(samples)*256)/b.Elapsed().Seconds(), "tokens/s")
}
