package rl

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"swerl/gpu/cpu"
	"swerl/gpu/modeldir"
	"swerl/transforms/advantage"
	"swerl/transforms/prompt"
	"swerl/transforms/scoring"
)

// TestWarmStartUntil: with SFTUntil the warm start stops at the first probe
// that reaches it. A first run that never reaches its target records the
// probes; training is deterministic, so a second run from the same model
// with the probe at step 30 as its target takes exactly 30 steps. Taken in
// chunks between probes, the warm start trains exactly as in one piece.
func TestWarmStartUntil(t *testing.T) {
	ins, pol := tasks(t, 3)
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	if _, err := modeldir.Init(model, "tiny", 1); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	run := func(out string, until float64) (Summary, map[int]float64) {
		t.Helper()
		probes := map[int]float64{}
		cfg := Config{Out: filepath.Join(dir, out), Train: ins, Model: model, Backend: cpu.New(), SFTSteps: 40, SFTBatch: 2, SFTLR: 1e-2, SFTUntil: until,
			Steps: 0, BatchInstances: 1, GroupSize: 2, LR: 1e-4, MaxSeq: 512, Prompt: prompt.Options{Compact: true},
			Rollouts: Local(pol, scoring.Spec{Prompt: prompt.Options{Compact: true}, GroupSize: 2, MaxTokens: 64, Temperature: 1, Seed: 7}, advantage.GRPO, 0, log), Seed: 7, Log: log,
			AfterSFTCheck: func(step int, p float64) { probes[step] = p }}
		sum, err := Run(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return sum, probes
	}
	sum, probes := run("all", 1)
	if sum.SFTSteps != 40 || len(probes) != 8 {
		t.Fatalf("target 1: %d warm-start steps, probes %v; want 40 steps probed every 5", sum.SFTSteps, probes)
	}
	if !(probes[30] > probes[25] && probes[40] > probes[30]) {
		t.Fatalf("answer probability does not rise with SFT: %v", probes)
	}
	sum, got := run("until", probes[30])
	if sum.SFTSteps != 30 || len(got) != 6 || got[30] != probes[30] {
		t.Fatalf("target %g: %d warm-start steps, probes %v; want 30 steps, probes as %v", probes[30], sum.SFTSteps, got, probes)
	}
	// Batches of 2 of the 3 examples, 5 steps a chunk: a chunk that began
	// at the first example again would train on another sequence.
	if sum, probes := run("once", 0); sum.SFTSteps != 40 || len(probes) != 0 {
		t.Fatalf("target 0: %d warm-start steps, probes %v", sum.SFTSteps, probes)
	}
	chunked, err := os.ReadFile(filepath.Join(dir, "all", "checkpoints", "v000040", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	once, err := os.ReadFile(filepath.Join(dir, "once", "checkpoints", "v000040", "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(chunked, once) {
		t.Fatal("the warm start taken in chunks of 5 steps ends with other weights than in one piece")
	}
}
