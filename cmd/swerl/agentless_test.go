package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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
