package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/modeldir"
	"swerl/gpu/peft"
	"swerl/internal/syncbuf"
)

// filledAdapter writes a rank-4 q,v adapter on model whose values are all
// v.
func filledAdapter(t *testing.T, model, dir string, v float32) string {
	t.Helper()
	cfg, err := modeldir.BuiltinConfig("tiny")
	if err != nil {
		t.Fatal(err)
	}
	lo, err := gpu.NewLoRA(cfg, gpu.LoRAConfig{Rank: 4, Alpha: 8, Targets: []string{"q_proj", "v_proj"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range lo.Tensors() {
		for i := range x.Data {
			x.Data[i] = v
		}
	}
	if err := peft.Write(dir, peft.FromLoRA(lo, model)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// swerl model merge of an adapter that makes the model produce NaN exits
// non-zero, names the tensor, and leaves no output folder: adapters of all
// 3e38 (B·A overflows float32 in the merge) and of all 5e18 (the merged
// weights, 2e38, are finite; the forward pass overflows). A sane adapter
// merges.
func TestMergeRefusesNonFiniteWeights(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t, dir)
	for _, tc := range []struct {
		v    float32
		want string
	}{
		{3e38, "model.layers.0.self_attn.q_proj.weight"},
		{5e18, "probe"},
	} {
		ad := filledAdapter(t, model, filepath.Join(dir, "adapter"), tc.v)
		out := filepath.Join(dir, "merged")
		var so bytes.Buffer
		se := new(syncbuf.Buffer)
		code := runMain(context.Background(), []string{"model", "merge", "--base", model, "--adapter", ad, "--out", out}, &so, se)
		if code == 0 || !strings.Contains(se.String(), tc.want) || !strings.Contains(se.String(), "nothing written") {
			t.Errorf("adapter of %g: exit %d, stderr %s; want an error naming %q", tc.v, code, se.String(), tc.want)
		}
		if _, err := os.Stat(out); !os.IsNotExist(err) {
			t.Errorf("adapter of %g: %s exists (%v)", tc.v, out, err)
			os.RemoveAll(out)
		}
	}
	ad := filledAdapter(t, model, filepath.Join(dir, "adapter"), 0.01)
	var so bytes.Buffer
	se := new(syncbuf.Buffer)
	if code := runMain(context.Background(), []string{"model", "merge", "--base", model, "--adapter", ad, "--out", filepath.Join(dir, "ok")}, &so, se); code != 0 {
		t.Fatalf("sane adapter: exit %d: %s", code, se.String())
	}
}
