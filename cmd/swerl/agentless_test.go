package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestAgentlessCheck runs `swerl agentless check` on the conformance
// vectors with their expected fields removed and compares every result.
func TestAgentlessCheck(t *testing.T) {
	f, err := os.Open("../../transforms/agentless/testdata/vectors.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var full []map[string]any
	var in bytes.Buffer
	for _, l := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		full = append(full, m)
		stripped := map[string]any{}
		for k, v := range m {
			if !strings.HasPrefix(k, "expected") {
				stripped[k] = v
			}
		}
		b, _ := json.Marshal(stripped)
		in.Write(append(b, '\n'))
	}
	dir := t.TempDir()
	inPath, outPath := filepath.Join(dir, "in.jsonl"), filepath.Join(dir, "out", "res.jsonl")
	if err := os.WriteFile(inPath, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := runMain(context.Background(), []string{"agentless", "check", "--in", inPath, "--out", outPath}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	out, err := os.ReadFile(outPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(full) {
		t.Fatalf("%d lines out for %d in", len(lines), len(full))
	}
	for i, l := range lines {
		var got map[string]any
		if err := json.Unmarshal([]byte(l), &got); err != nil {
			t.Fatal(err)
		}
		v := full[i]
		var want any
		switch v["kind"] {
		case "vote":
			want = v["expected_index"]
		case "normalize":
			want = v["expected"]
		case "apply":
			want = map[string]any{"model_patch": v["expected"], "raw_model_patch": v["expected_raw_patch"],
				"edited_files": v["expected_edited_files"], "new_files": v["expected_new_files"]}
		}
		if got["id"] != v["id"] || got["kind"] != v["kind"] || !reflect.DeepEqual(got["result"], want) {
			t.Errorf("line %d (%v): result differs", i+1, v["id"])
		}
	}
	// Bad input names the line; a missing flag is a usage error.
	if err := os.WriteFile(inPath, []byte("{\"id\":\"x\",\"kind\":\"nope\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr.Reset()
	if code := runMain(context.Background(), []string{"agentless", "check", "--in", inPath, "--out", outPath}, &stdout, &stderr); code != 1 || !strings.Contains(stderr.String(), "line 1 (x)") {
		t.Errorf("bad kind: exit %d, %q", code, stderr.String())
	}
	if code := runMain(context.Background(), []string{"agentless", "check", "--in", inPath}, &stdout, &stderr); code != 2 {
		t.Errorf("no --out: exit %d", code)
	}
}
