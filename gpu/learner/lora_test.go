package learner

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/modeldir"
	"swerl/gpu/peft"
	"swerl/gpu/policy"
	"swerl/sinks/checkpoint"
)

func loraWeights(a *gpu.LoRA) []float32 {
	var w []float32
	for _, t := range a.Tensors() {
		w = append(w, t.Data...)
	}
	return w
}

// A LoRA run publishes PEFT adapters: version 0 is the zero adapter, every
// version's files are hashed in the index, the adapter names the base by
// absolute path, the base never changes, and modeldir.Load of a version
// is the base with that version's adapters merged.
func TestLoRAPublishesAdapters(t *testing.T) {
	model := initModel(t)
	out := t.TempDir()
	l := newLearner(t, Config{Out: out, Model: model, BatchGroups: 2, MaxStaleness: -1,
		LoRA:  gpu.LoRAConfig{Rank: 2, Targets: []string{"q_proj", "v_proj", "down_proj"}, Seed: 1},
		Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64, LR: 1e-2}})
	base := weights(l.Model())
	if _, err := l.Run(context.Background(), &SliceSource{Samples: syntheticSamples(4, 4, -1, "t")}, 0); err != nil {
		t.Fatal(err)
	}
	if l.Version() != 2 {
		t.Fatalf("published up to v%d, want v2", l.Version())
	}
	if !slices.Equal(weights(l.Model()), base) {
		t.Fatal("LoRA training changed the base weights")
	}
	st, rows := publishedVersions(t, out)
	absModel, _ := filepath.Abs(model)
	for _, row := range rows {
		dir := st.Path(row.Version)
		var names []string
		for _, f := range row.Files {
			names = append(names, f.Path)
		}
		want := []string{peft.ConfigFile, peft.WeightsFile, "trainer_state/optimizer.safetensors"}
		if !slices.Equal(names, want) {
			t.Errorf("v%d files %v, want %v", row.Version, names, want)
		}
		if err := st.Verify(row); err != nil {
			t.Errorf("v%d: %v", row.Version, err)
		}
		a, err := peft.ReadFor(dir, l.Model().Config)
		if err != nil {
			t.Fatal(err)
		}
		if a.Config.BaseModelNameOrPath != absModel || a.Config.R != 2 || a.Config.LoraAlpha != 32 {
			t.Errorf("v%d config %+v", row.Version, a.Config)
		}
		lo, _ := a.LoRA(l.Model().Config)
		mp, err := modeldir.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		merged, _ := lo.Merged(l.Model())
		if !slices.Equal(weights(mp.Model), weights(merged)) {
			t.Errorf("modeldir.Load(v%d) is not the base with its adapters merged", row.Version)
		}
		if row.Version == 0 && !slices.Equal(weights(mp.Model), base) {
			t.Error("version 0 is not the base")
		}
		if row.Version == 2 && !slices.Equal(loraWeights(lo), loraWeights(l.LoRA())) {
			t.Error("v2 holds other adapters than the learner's")
		}
	}
	// The in-process policy serves the output root: the newest adapter,
	// merged.
	pol, err := policy.Open(out, policy.Options{MaxSeq: 64, MaxTokens: 4, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	if pol.Version() != 2 {
		t.Errorf("policy serves v%d, want v2", pol.Version())
	}
}

// Resuming a LoRA run continues exactly (2+2 steps equal 4), with the
// adapters' AdamW moments; a resume asking for another rank is refused.
func TestLoRAResumeContinuesExactly(t *testing.T) {
	model := initModel(t)
	cfg := func(out string, resume bool) Config {
		return Config{Out: out, Model: model, Resume: resume, BatchGroups: 2, MaxStaleness: -1,
			LoRA: gpu.LoRAConfig{Rank: 4, Seed: 3}, Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64, LR: 1e-2}}
	}
	a, b2, outB := straightAndResumed(t, cfg)
	wa := loraWeights(a.LoRA())
	sameParams(t, "adapter parameter", wa, loraWeights(b2.LoRA()))
	if slices.Equal(wa, loraWeights(newLearner(t, cfg(t.TempDir(), false)).LoRA())) {
		t.Fatal("the adapters did not train")
	}
	bad := cfg(outB, true)
	bad.LoRA.Rank = 8
	bad.Backend, bad.Log = cpu.New(), quiet()
	if _, err := New(context.Background(), bad); err == nil {
		t.Error("resuming a rank-4 run with rank 8 was accepted")
	}
}

// A LoRA phase after a full fine-tuning phase in the same output root
// (swerl run's warm start) takes the newest full checkpoint as its base,
// and that base keeps its files however few checkpoints are kept.
func TestLoRAAfterFullFineTuning(t *testing.T) {
	model := initModel(t)
	out := t.TempDir()
	full := newLearner(t, Config{Out: out, Model: model, BatchGroups: 2, MaxStaleness: -1, Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64, LR: 1e-3}})
	if _, err := full.Run(context.Background(), &SliceSource{Samples: syntheticSamples(2, 4, -1, "t")}, 0); err != nil {
		t.Fatal(err)
	}
	if full.Version() != 1 {
		t.Fatalf("full phase at v%d, want v1", full.Version())
	}
	l := newLearner(t, Config{Out: out, Resume: true, BatchGroups: 1, MaxStaleness: -1, KeepCheckpoints: 2,
		LoRA: gpu.LoRAConfig{Rank: 2}, Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64, LR: 1e-2}})
	if !slices.Equal(weights(l.Model()), weights(full.Model())) {
		t.Fatal("the LoRA phase's base is not the full phase's last version")
	}
	// New groups: a resumed learner skips groups it has trained (g0, g1).
	more := syntheticSamples(4, 4, -1, "t")
	for i := range more {
		more[i].GroupID, more[i].ID = "lora-"+more[i].GroupID, "lora-"+more[i].ID
	}
	if _, err := l.Run(context.Background(), &SliceSource{Samples: more}, 0); err != nil {
		t.Fatal(err)
	}
	if l.Version() != 5 {
		t.Fatalf("LoRA phase at v%d, want v5", l.Version())
	}
	st, _ := checkpoint.Open(checkpoint.Config{Dir: out, ReadOnly: true})
	base := st.Path(1)
	if _, err := os.Stat(filepath.Join(base, "config.json")); err != nil {
		t.Fatalf("the base v1 was pruned: %v", err)
	}
	if _, err := os.Stat(st.Path(3)); err == nil {
		t.Error("v3 was kept: --keep-checkpoints 2 should have pruned it")
	}
	a, err := peft.Read(st.Path(5))
	if err != nil {
		t.Fatal(err)
	}
	if a.Config.BaseModelNameOrPath != base {
		t.Errorf("v5's base is %s, want %s", a.Config.BaseModelNameOrPath, base)
	}
	// Full fine-tuning can continue from the merged adapters.
	f2 := newLearner(t, Config{Out: out, Resume: true, BatchGroups: 1, MaxStaleness: -1, Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64, LR: 1e-3}})
	last := syntheticSamples(1, 4, -1, "t")
	for i := range last {
		last[i].GroupID, last[i].ID = "full-"+last[i].GroupID, "full-"+last[i].ID
	}
	if _, err := f2.Run(context.Background(), &SliceSource{Samples: last}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(st.Path(6), "config.json")); err != nil {
		t.Errorf("full fine-tuning after LoRA did not publish a model directory: %v", err)
	}
}
