package learner

import (
	"context"
	"strings"
	"testing"

	"swerl/gpu"
)

// A step whose update makes a weight non-finite (a learning rate of 1e300
// is +Inf in float32) fails loudly, naming the tensor, and publishes
// nothing: the index ends at the version before it, with full weights and
// with LoRA adapters alike.
func TestNonFiniteStepIsNotPublished(t *testing.T) {
	for _, lora := range []bool{false, true} {
		out := t.TempDir()
		cfg := Config{Out: out, Model: initModel(t), BatchGroups: 2, MaxStaleness: -1,
			Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64, LR: 1e300, GradClip: -1}}
		if lora {
			cfg.LoRA = gpu.LoRAConfig{Rank: 2, Targets: []string{"q_proj", "v_proj"}, Seed: 1}
		}
		l := newLearner(t, cfg)
		_, err := l.Run(context.Background(), &SliceSource{Samples: syntheticSamples(4, 4, -1, "t")}, 0)
		if err == nil || !strings.Contains(err.Error(), "NaN or infinite") || !strings.Contains(err.Error(), "not published") {
			t.Fatalf("lora %v: Run: %v; want a step that fails naming the non-finite tensor", lora, err)
		}
		_, rows := publishedVersions(t, out)
		if len(rows) != 1 || rows[0].Version != 0 {
			t.Fatalf("lora %v: published %d versions, want v0 only: %+v", lora, len(rows), rows)
		}
	}
}
