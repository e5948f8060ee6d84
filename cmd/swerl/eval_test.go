package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"swerl/pipelines/train/traintest"
	"swerl/transforms/prompt"
	"swerl/transforms/reward"
)

// TestEvalCommand: `swerl eval` answers each instance once with a file:
// policy (the first recorded completion: the oracle answer, or a malformed
// one for every fifth instance) and reports the rates the reward gives
// those answers, computed here from the inputs; the predictions file has
// one SWE-bench line per instance, with a patch exactly where the answer
// applied.
func TestEvalCommand(t *testing.T) {
	dir := t.TempDir()
	const n = 7
	set := traintest.New(t, dir, n, 3, nil)
	var wantCorrect, wantReward float64
	for _, in := range set.Instances {
		p, err := prompt.Build(&in, prompt.Options{})
		if err != nil {
			t.Fatal(err)
		}
		r := reward.SearchReplace(context.Background(), p.Files, in.OracleNewContent, set.Completions[in.ID][0])
		if r.Error == "" {
			wantCorrect++
		}
		wantReward += r.Reward
	}
	wantCorrect /= n
	wantReward /= n
	if wantCorrect == 0 || wantCorrect == 1 {
		t.Fatalf("fixture gives format-correct rate %v; want a mix", wantCorrect)
	}

	out := filepath.Join(dir, "eval", "preds.jsonl")
	var so, se bytes.Buffer
	args := []string{"eval", "--instances", set.InstancesPath, "--policy", "file:" + set.CompletionsPath, "--out", out, "--model-name", "m"}
	if code := runMain(context.Background(), args, &so, &se); code != 0 {
		t.Fatalf("exit %d\n%s", code, se.String())
	}
	var res struct {
		Instances     int     `json:"instances"`
		FormatCorrect float64 `json:"format_correct_rate"`
		MeanReward    float64 `json:"mean_reward"`
		ExactMatch    float64 `json:"exact_match_rate"`
	}
	if err := json.Unmarshal(so.Bytes(), &res); err != nil {
		t.Fatalf("stdout %q: %v", so.String(), err)
	}
	if res.Instances != n || res.FormatCorrect != wantCorrect || res.ExactMatch != wantCorrect || !near(res.MeanReward, wantReward) {
		t.Fatalf("result %+v; want %d instances, format-correct and exact %v, reward %v", res, n, wantCorrect, wantReward)
	}
	if !strings.Contains(se.String(), "swerl eval: 7/7 instances") || !strings.Contains(se.String(), out) {
		t.Fatalf("stderr lacks the progress or the summary:\n%s", se.String())
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lines := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var p struct {
			ID     string `json:"instance_id"`
			Model  string `json:"model_name_or_path"`
			Patch  string `json:"model_patch"`
			Format string `json:"format_error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		lines++
		if p.Model != "m" || (p.Format == "") != strings.HasPrefix(p.Patch, "diff --git ") {
			t.Fatalf("prediction %s: model %q, format error %q, patch %q", p.ID, p.Model, p.Format, p.Patch)
		}
	}
	if lines != n {
		t.Fatalf("%d prediction lines, want %d", lines, n)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Fatalf("temporary file left behind: %v", err)
	}
}

func TestEvalFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"eval", "--policy", "file:x"}, "--instances"},
		{[]string{"eval", "--instances", "x"}, "--model"},
		{[]string{"eval", "--instances", "x", "--model", "d", "--policy", "file:x"}, "--model"},
		{[]string{"eval", "--instances", "/nonexistent.jsonl", "--policy", "file:x"}, "/nonexistent.jsonl"},
	} {
		var so, se bytes.Buffer
		if code := runMain(context.Background(), tc.args, &so, &se); code == 0 || !strings.Contains(se.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want an error naming %q", tc.args, code, se.String(), tc.want)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }
