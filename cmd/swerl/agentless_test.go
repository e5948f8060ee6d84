package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"swerl/internal/gitio/gittest"
	"testing"
)

// TestAgentlessCheck runs the check subcommand on vote and apply lines
// whose results are known from the Agentless Mini reference, and checks
// one output line per input line, in order.
func TestAgentlessCheck(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.jsonl")
	out := filepath.Join(dir, "out.jsonl")
	lines := `{"id":"v1","kind":"vote","candidates_normalized":["","+B","+A","+A","+B","+C"]}
{"id":"v2","kind":"vote","candidates_normalized":[""," \n"]}
{"id":"a1","kind":"apply","files":{"s.py":"a = 1\n"},"edits":"` + "```python\\n### s.py\\n<<<<<<< SEARCH\\na = 1\\n=======\\na = 2\\n>>>>>>> REPLACE\\n```" + `"}
`
	if err := os.WriteFile(in, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if code := runMain(context.Background(), []string{"agentless", "check", "--in", in, "--out", out}, &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var got []map[string]any
	for _, l := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		got = append(got, m)
	}
	if len(got) != 3 {
		t.Fatalf("got %d lines, want 3", len(got))
	}
	if got[0]["id"] != "v1" || got[0]["result"] != float64(1) {
		t.Errorf("v1: %v (want index 1: B is seen first among the tied)", got[0])
	}
	if got[1]["id"] != "v2" || got[1]["result"] != nil {
		t.Errorf("v2: %v (want null)", got[1])
	}
	res, _ := got[2]["result"].(map[string]any)
	// The blob ids and hunk are what real git prints for this edit.
	want := "diff --git a/s.py b/s.py\nindex 1337a53..e7cabca 100644\n--- a/s.py\n+++ b/s.py\n@@ -1 +1 @@\n-a = 1\n+a = 2\n"
	if res == nil || res["model_patch"] != want {
		t.Errorf("a1: %v\nwant model_patch %q", got[2], want)
	}

	// A malformed line gets a null result naming it, and a non-zero exit.
	if err := os.WriteFile(in, []byte("{\"id\":\"x\",\"kind\":\"bogus\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := runMain(context.Background(), []string{"agentless", "check", "--in", in, "--out", out}, &bytes.Buffer{}, &stderr); code != 1 {
		t.Fatalf("bogus kind: exit %d, want 1", code)
	}
	if !bytes.Contains(stderr.Bytes(), []byte("bogus")) {
		t.Errorf("stderr does not name the bad kind: %s", stderr.String())
	}
}

// TestAgentlessThroughServe runs `swerl agentless` against `swerl serve`
// with the built-in tiny model on loopback: whatever the model answers,
// every row gets exactly one prediction line, nothing panics, and the
// run's summary accounts for every instance.
func TestAgentlessThroughServe(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	addr, _, stop := serveModel(t)
	defer stop()
	g := gittest.New(t)
	repo, gitRun := g.Dir, g.Git
	if err := os.WriteFile(filepath.Join(repo, "util.py"), []byte("def f():\n    return 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gitRun("add", ".")
	gitRun("commit", "-qm", "base")
	base := gitRun("rev-parse", "HEAD")
	dir := t.TempDir()
	rows := filepath.Join(dir, "rows.jsonl")
	var b strings.Builder
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(&b, `{"instance_id":"demo__demo-%d","repo":"demo/demo","base_commit":"%s","patch":"x","problem_statement":"f should return 2"}`+"\n", i, base)
	}
	if err := os.WriteFile(rows, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	var stdout, stderr bytes.Buffer
	code := runMain(context.Background(), []string{"agentless", "--instances", rows, "--repo", repo, "--policy", "http://" + addr + "/v1",
		"--out", out, "--localize-samples", "2", "--repair-samples", "2", "--max-tokens", "16"}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	t.Logf("%s", stdout.String())
	pb, err := os.ReadFile(filepath.Join(out, "predictions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(pb), "\n"); n != 3 {
		t.Fatalf("%d prediction lines, want 3:\n%s", n, pb)
	}
	// The tiny model names no file of the tree: each of the 3x2
	// localization answers is counted as malformed and the instance ends
	// with an empty prediction.
	if !strings.Contains(stdout.String(), "3 instances") || !strings.Contains(stdout.String(), "6 malformed localization answers") {
		t.Errorf("summary does not account for 3 instances and 6 malformed answers: %s", stdout.String())
	}
	if _, err := os.Stat(filepath.Join(out, "candidates.parquet")); err != nil {
		t.Error(err)
	}
}
