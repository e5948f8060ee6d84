package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/parquetio"
)

// TestTrainAgainstServe is the learner issue's end-to-end check on
// loopback: `swerl serve` over a model directory, and `swerl train` with
// the OpenAI-compatible HTTP policy pointed at it. Every (instance,
// completion) becomes one sample carrying the server's tokens, per-token
// log-probabilities and weight version.
func TestTrainAgainstServe(t *testing.T) {
	dir := t.TempDir()
	addr, _, stop := serveModel(t, "--max-seq", "2048", "--metrics-addr", "")
	url := "http://" + addr + "/v1"

	const n, g = 3, 2
	set := traintest.New(t, dir, n, g, nil)
	out := filepath.Join(dir, "out")
	var te bytes.Buffer
	args := []string{"train", "--instances", set.InstancesPath, "--policy", url + "?token_ids=true", "--group-size", fmt.Sprint(g),
		"--max-tokens", "8", "--seed", "5", "--out", out, "--metrics-addr", ""}
	if code := runMain(context.Background(), args, &bytes.Buffer{}, &te); code != 0 {
		t.Fatalf("train exit %d:\n%s", code, te.String())
	}
	rows, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != n*g {
		dead, _ := parquetio.ReadDir[schemas.DeadLetter](filepath.Join(out, "deadletter"))
		for _, d := range dead {
			t.Logf("dead-letter: %s", d.Reason)
		}
		t.Fatalf("%d samples, want %d:\n%s", len(rows), n*g, te.String())
	}
	seen := map[string]bool{}
	for _, s := range rows {
		seen[s.InstanceID] = true
		if len(s.CompletionTokens) == 0 || len(s.CompletionTokens) > 8 || len(s.LogProbs) != len(s.CompletionTokens) || len(s.PromptTokens) == 0 {
			t.Fatalf("sample %s: %d completion tokens, %d log-probs, %d prompt tokens", s.ID, len(s.CompletionTokens), len(s.LogProbs), len(s.PromptTokens))
		}
		if s.PolicyVersion != -1 {
			t.Fatalf("sample %s: policy version %d, want the server's -1 (a model directory, no checkpoint index)", s.ID, s.PolicyVersion)
		}
		for _, lp := range s.LogProbs {
			if lp > 0 {
				t.Fatalf("sample %s: log-prob %v > 0", s.ID, lp)
			}
		}
	}
	if len(seen) != n {
		t.Fatalf("samples cover %d instances, want %d", len(seen), n)
	}
	stop()
}
