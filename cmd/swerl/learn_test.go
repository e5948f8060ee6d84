package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/sinks/parquetio"
)

func TestLearnOffline(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	out := filepath.Join(dir, "out")
	var so, se bytes.Buffer
	if code := runMain(context.Background(), []string{"model", "init", "--out", model}, &so, &se); code != 0 {
		t.Fatalf("model init: %s", se.String())
	}
	var samples []schemas.Sample
	for g := range 3 {
		for i := range 2 {
			samples = append(samples, schemas.Sample{
				Rollout: schemas.Rollout{SchemaVersion: 1, ID: fmt.Sprintf("g%d/%d", g, i), GroupID: fmt.Sprintf("g%d", g), GroupSize: 2, Index: i,
					PolicyVersion: 0, Prompt: "fix the bug", Completion: strings.Repeat("x", 3+i), FinishReason: "stop"},
				Reward: float64(i), Advantage: float64(2*i - 1), GroupComplete: true,
			})
		}
	}
	// One sample too long for --max-seq: skipped and counted, not fatal.
	samples[5].Completion = strings.Repeat("long ", 100)
	file := filepath.Join(dir, "samples.parquet")
	if err := parquetio.WriteFile(file, samples); err != nil {
		t.Fatal(err)
	}
	args := []string{"learn", "--model", model, "--samples", file, "--out", out, "--batch-groups", "1",
		"--max-staleness", "-1", "--max-seq", "128", "--metrics-addr", "", "--lr", "1e-3"}
	se.Reset()
	if code := runMain(context.Background(), args, &so, &se); code != 0 {
		t.Fatalf("learn exit %d: %s", code, se.String())
	}
	if !strings.Contains(se.String(), "trained 3 steps") || !strings.Contains(se.String(), "1 skipped") {
		t.Errorf("summary: %s", se.String())
	}
	st, err := checkpoint.Open(checkpoint.Config{Dir: out})
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.LatestGood()
	if err != nil || v.Version != 3 || v.Step != 3 {
		t.Fatalf("latest %+v, %v", v, err)
	}
	// Again without --resume: refused. With it: one more step.
	se.Reset()
	if code := runMain(context.Background(), args, &so, &se); code != 1 || !strings.Contains(se.String(), "--resume") {
		t.Errorf("rerun without --resume: exit %d: %s", code, se.String())
	}
	se.Reset()
	args = append(args[:1], append([]string{"--resume", "--steps", "1"}, args[3:]...)...)
	if code := runMain(context.Background(), args, &so, &se); code != 0 {
		t.Fatalf("resume exit %d: %s", code, se.String())
	}
	if v, err := st.LatestGood(); err != nil || v.Version != 4 || v.Step != 4 {
		t.Fatalf("after resume latest %+v, %v", v, err)
	}
	// The output root serves as a model: swerl model info reads v4.
	so.Reset()
	if code := runMain(context.Background(), []string{"model", "info", out}, &so, &se); code != 0 || !strings.Contains(so.String(), `"version": 4`) {
		t.Errorf("model info of the output root: %s %s", so.String(), se.String())
	}
	if code := runMain(context.Background(), []string{"learn", "--model", model}, &so, &se); code != 2 {
		t.Errorf("learn without --samples: exit %d, want 2", code)
	}
}
