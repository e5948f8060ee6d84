package rl

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"swerl/gpu/learner"
)

// TestWarmStartUntil: with SFTUntil the warm start stops at the first probe
// that reaches it. A first run that never reaches its target records the
// probes; training is deterministic, so a second run from the same model
// with the probe at step 30 as its target takes exactly 30 steps. Taken in
// chunks between probes, the warm start trains exactly as in one piece.
func TestWarmStartUntil(t *testing.T) {
	base, dir := testRun(t, 3)
	run := func(out string, until float64) (Summary, map[int]float64) {
		t.Helper()
		probes := map[int]float64{}
		cfg := base
		cfg.Learner.Out, cfg.SFTSteps, cfg.SFTLR, cfg.SFTUntil, cfg.Steps, cfg.BatchInstances = filepath.Join(dir, out), 40, 1e-2, until, 0, 1
		cfg.AfterSFTCheck = func(step int, p float64) { probes[step] = p }
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

// TestProbeSet: a format check reads at most n examples, spread over the
// whole warm start (not its first n), and all of them when there are n or
// fewer, as the built-in model's 12 tasks are.
func TestProbeSet(t *testing.T) {
	ex := make([]learner.Example, 10)
	for i := range ex {
		ex[i].ID = strconv.Itoa(i)
	}
	var ids []string
	for _, e := range probeSet(ex, 4) {
		ids = append(ids, e.ID)
	}
	if got := strings.Join(ids, ","); got != "0,2,5,7" {
		t.Fatalf("probe of 4 of 10: %s, want 0,2,5,7", got)
	}
	if got := probeSet(ex[:3], 4); len(got) != 3 || got[2].ID != "2" {
		t.Fatalf("probe of 4 of 3: %v, want all 3", got)
	}
}
