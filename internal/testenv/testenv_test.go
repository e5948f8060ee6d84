package testenv

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
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

// Eventually returns once the condition holds, however many checks that
// takes, and fails a test whose condition never holds.
func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, 10*time.Second, "the fifth check", func() bool { n++; return n == 5 })
	if n != 5 {
		t.Fatalf("checked %d times, want 5", n)
	}
	ft := &fatalT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(ft, 20*time.Millisecond, "never", func() bool { return false })
	}()
	<-done
	if !strings.Contains(ft.msg, "never: not after 20ms") {
		t.Errorf("failure message %q", ft.msg)
	}
}

// fatalT records Fatalf and ends the goroutine as testing.T does.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
