package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// conformanceFiles are the copies under testdata/conformance.
var conformanceFiles = []string{
	"reward_search_replace.jsonl",
	"reward_unidiff.jsonl",
	"tokenizer/qwen2.json",
	"tokenizer/gpt2.json",
}

// TestConformanceCopies reads every copied conformance file and, where the
// shared originals sit beside the repository, checks the copies equal them
// byte for byte, so the copies cannot drift from the reference.
func TestConformanceCopies(t *testing.T) {
	t.Setenv("SWERL_SHARED", "")
	shared := filepath.Join(RepoRoot(t), "..", "shared", "conformance")
	for _, name := range conformanceFiles {
		got := ReadConformance(t, name)
		if len(got) == 0 {
			t.Errorf("%s: empty", name)
		}
		want, err := os.ReadFile(filepath.Join(shared, filepath.FromSlash(name)))
		if err != nil {
			t.Logf("%s: no shared original to compare (%v)", name, err)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: the copy in testdata differs from %s (refresh it with gzip -9 -n)", name, shared)
		}
	}
}

// TestConformanceOverride reads through SWERL_SHARED.
func TestConformanceOverride(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "conformance"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "conformance", "x.jsonl"), []byte("override\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SWERL_SHARED", dir)
	if got := string(ReadConformance(t, "x.jsonl")); got != "override\n" {
		t.Fatalf("read %q through SWERL_SHARED", got)
	}
}
