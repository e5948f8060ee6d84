package modeldir

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/peft"
)

// An adapter directory loads as its base with the adapter merged, with a
// base path relative to the adapter or absolute; a base that is not a
// model directory is an error naming the adapter config.
func TestLoadAdapter(t *testing.T) {
	root := t.TempDir()
	base := filepath.Join(root, "base")
	if _, err := Init(base, "tiny", 3); err != nil {
		t.Fatal(err)
	}
	cfg, _ := BuiltinConfig("tiny")
	lo, err := gpu.NewLoRA(cfg, gpu.LoRAConfig{Rank: 2, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, ten := range lo.Tensors() {
		for i := range ten.Data {
			ten.Data[i] = 0.01 * float32(i%7-3)
		}
	}
	bm, _ := gpu.NewModel(cfg, 3)
	want, _ := lo.Merged(bm)
	flat := func(m *gpu.Model) []float32 {
		var w []float32
		for _, x := range m.Tensors() {
			w = append(w, x.Data...)
		}
		return w
	}
	for _, baseRef := range []string{base, "../base"} {
		ad := filepath.Join(root, "adapter")
		if err := peft.Write(ad, peft.FromLoRA(lo, baseRef)); err != nil {
			t.Fatal(err)
		}
		if !IsAdapter(ad) || IsAdapter(base) {
			t.Fatal("IsAdapter is wrong")
		}
		p, err := Open(ad, nil)
		if err != nil {
			t.Fatalf("base %q: %v", baseRef, err)
		}
		if p.Dir != ad || p.Version != -1 || p.Tokenizer == nil {
			t.Errorf("policy %+v", p)
		}
		if !slices.Equal(flat(p.Model), flat(want)) {
			t.Errorf("base %q: loaded weights are not the base with the adapter merged", baseRef)
		}
	}
	ad := filepath.Join(root, "orphan")
	if err := peft.Write(ad, peft.FromLoRA(lo, "Qwen/Qwen2.5-0.5B")); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ad); err == nil || !strings.Contains(err.Error(), "adapter_config.json") || !strings.Contains(err.Error(), "Qwen/Qwen2.5-0.5B") {
		t.Errorf("adapter on a hub name: %v", err)
	}
	os.Remove(filepath.Join(ad, peft.WeightsFile))
	if _, err := Load(ad); err == nil {
		t.Error("adapter without weights loaded")
	}
}

// Weights that would make every logit NaN are refused by Load, naming the
// tensor: a NaN in a model directory, and an adapter whose finite values
// overflow float32 once merged.
func TestLoadRefusesNonFiniteWeights(t *testing.T) {
	root := t.TempDir()
	base := filepath.Join(root, "base")
	if _, err := Init(base, "tiny", 3); err != nil {
		t.Fatal(err)
	}
	p, err := Load(base)
	if err != nil {
		t.Fatal(err)
	}
	ts := p.Model.Tensors()
	ts[1].Data[2] = float32(math.NaN())
	nan := filepath.Join(root, "nan")
	if _, err := WriteCheckpoint(nan, base, p.Model, false); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(nan); err == nil || !strings.Contains(err.Error(), ts[1].Name) || !strings.Contains(err.Error(), nan) {
		t.Errorf("NaN weight: %v", err)
	}
	lo, err := gpu.NewLoRA(p.Model.Config, gpu.LoRAConfig{Rank: 4, Targets: []string{"v_proj"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range lo.Tensors() {
		for i := range x.Data {
			x.Data[i] = 3e38
		}
	}
	ad := filepath.Join(root, "adapter")
	if err := peft.Write(ad, peft.FromLoRA(lo, base)); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(ad); err == nil || !strings.Contains(err.Error(), "model.layers.0.self_attn.v_proj.weight") {
		t.Errorf("overflowing adapter: %v", err)
	}
}
