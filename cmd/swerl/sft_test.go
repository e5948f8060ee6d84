package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"swerl/sinks/checkpoint"
)

func TestSFTCommand(t *testing.T) {
	dir := t.TempDir()
	model, out := tinyModel(t, dir), filepath.Join(dir, "out")
	var so, se bytes.Buffer
	pairs := filepath.Join(dir, "pairs.jsonl")
	os.WriteFile(pairs, []byte(`{"id":"a","prompt":"say hi","answer":"hello"}`+"\n"+`{"prompt":"say bye","answer":"bye","system":"s"}`+"\n"), 0o644)
	args := []string{"sft", "--model", model, "--pairs", pairs, "--out", out, "--steps", "3", "--batch", "2", "--max-seq", "64", "--metrics-addr", ""}
	if code := runMain(context.Background(), args, &so, &se); code != 0 {
		t.Fatalf("sft exit %d: %s", code, se.String())
	}
	st, _ := checkpoint.Open(checkpoint.Config{Dir: out})
	if v, err := st.LatestGood(); err != nil || v.Version != 3 || v.Samples != 2 || v.Loss <= 0 {
		t.Fatalf("latest %+v, %v", v, err)
	}
	os.WriteFile(pairs, []byte(`{"prompt":"x","answer":"y"}`+"\n"+`{"prompt": 3}`+"\n"), 0o644)
	se.Reset()
	args[6] = filepath.Join(dir, "out2")
	if code := runMain(context.Background(), args, &so, &se); code != 1 || !strings.Contains(se.String(), "pairs.jsonl:2") {
		t.Errorf("bad line: exit %d: %s", code, se.String())
	}
}

// FuzzLoadPairs: any file gives examples or an error naming file:line.
func FuzzLoadPairs(f *testing.F) {
	for _, s := range []string{`{"prompt":"a","answer":"b"}` + "\n", "\n\n", `{"prompt":1}`, "{", `{"prompt":"a","answer":""}`} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "p.jsonl")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		exs, err := loadPairs(p)
		if err != nil && !strings.Contains(err.Error(), p+":") {
			t.Fatalf("error without file:line: %v", err)
		}
		for _, e := range exs {
			if e.Prompt == "" || e.Answer == "" || e.ID == "" {
				t.Fatalf("bad example %+v", e)
			}
		}
	})
}
