package xdiff

import (
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBlobID checks git's well-known ids of the empty blob and of "hello\n".
func TestBlobID(t *testing.T) {
	if got := BlobID(""); got != "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391" {
		t.Errorf("empty blob: %s", got)
	}
	if got := BlobID("hello\n"); got != "ce013625030ba8dba906f756967f9e9ca394464a" {
		t.Errorf("hello blob: %s", got)
	}
}

// gitHunks runs real git on two texts and returns its output from the first
// hunk header on.
func gitHunks(t *testing.T, dir, a, b string) string {
	t.Helper()
	pa, pb := filepath.Join(dir, "a.py"), filepath.Join(dir, "b.py")
	if err := os.WriteFile(pa, []byte(a), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pb, []byte(b), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "-c", "diff.indentHeuristic=true", "diff", "--no-index", "--no-color", "--no-ext-diff", pa, pb)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			t.Fatalf("git diff: %v", err)
		}
	}
	s := string(out)
	if i := strings.Index(s, "\n@@ "); i >= 0 {
		return s[i+1:]
	}
	return ""
}

// TestAgainstGit compares the hunks with real git's on random edits of
// Python-like text built from few distinct lines, so that alignments are
// ambiguous and the sliding heuristics matter.
func TestAgainstGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	pool := []string{"", "def f(x):", "    return x", "    if x:", "        pass", "class A:", "    def g(self):", "        return 1", "x = 1", "# c", "\tt = 2", "_y = 3"}
	r := rand.New(rand.NewSource(1))
	gen := func(n int) []string {
		ls := make([]string, n)
		for i := range ls {
			ls[i] = pool[r.Intn(len(pool))]
		}
		return ls
	}
	iters := 300
	if testing.Short() {
		iters = 60
	}
	for it := 0; it < iters; it++ {
		a := gen(r.Intn(60))
		b := append([]string(nil), a...)
		for e := r.Intn(6); e >= 0; e-- {
			if len(b) == 0 {
				b = gen(3)
				continue
			}
			p := r.Intn(len(b))
			switch r.Intn(3) {
			case 0:
				b = append(b[:p], b[min(len(b), p+1+r.Intn(4)):]...)
			case 1:
				b = append(b[:p], append(gen(1+r.Intn(5)), b[p:]...)...)
			default:
				b[p] = pool[r.Intn(len(pool))]
			}
		}
		at := strings.Join(a, "\n")
		bt := strings.Join(b, "\n")
		if r.Intn(2) == 0 && at != "" {
			at += "\n"
		}
		if r.Intn(2) == 0 && bt != "" {
			bt += "\n"
		}
		want := gitHunks(t, dir, at, bt)
		var sb strings.Builder
		Unified(&sb, at, bt)
		if sb.String() != want {
			t.Fatalf("case %d differs\nold:\n%q\nnew:\n%q\ngit:\n%s\nours:\n%s", it, at, bt, want, sb.String())
		}
	}
}

// TestAgainstGitLarge compares whole files of thousands of lines with many
// scattered edits, so that the edit cost passes xdiff's heuristic
// thresholds (256) and its cut-offs are taken.
func TestAgainstGitLarge(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	r := rand.New(rand.NewSource(7))
	for it := 0; it < 12; it++ {
		n := 1500 + r.Intn(1500)
		distinct := 5 + r.Intn(400)
		a := make([]string, n)
		for i := range a {
			a[i] = fmt.Sprintf("    line_%d = %d", r.Intn(distinct), r.Intn(3))
		}
		b := append([]string(nil), a...)
		for e := 0; e < 200+r.Intn(600); e++ {
			p := r.Intn(len(b))
			switch r.Intn(3) {
			case 0:
				b = append(b[:p], b[min(len(b), p+1+r.Intn(8)):]...)
			case 1:
				b = append(b[:p], append([]string{fmt.Sprintf("new_%d", r.Intn(50)), ""}, b[p:]...)...)
			default:
				b[p] = fmt.Sprintf("    line_%d = %d", r.Intn(distinct), 9)
			}
			if len(b) == 0 {
				b = []string{"x"}
			}
		}
		at, bt := strings.Join(a, "\n")+"\n", strings.Join(b, "\n")+"\n"
		want := gitHunks(t, dir, at, bt)
		var sb strings.Builder
		Unified(&sb, at, bt)
		if sb.String() != want {
			t.Fatalf("large case %d (%d lines, %d distinct) differs from git", it, n, distinct)
		}
	}
}
