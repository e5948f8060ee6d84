package agentless

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"swerl/internal/gitio/gittest"
	"testing"
)

// TestRerankWithTests: the fewest failures filter first, then the vote.
func TestRerankWithTests(t *testing.T) {
	norm := []string{"+A", "+A", "+B", "", "+A"}
	if got := RerankWithTests(norm, []int{1, 1, 0, 0, 1}); got != 2 {
		t.Errorf("got %d, want 2 (the only candidate passing every test)", got)
	}
	if got := RerankWithTests(norm, []int{0, 0, 0, 0, 0}); got != 0 {
		t.Errorf("got %d, want 0 (equal failures: the vote decides)", got)
	}
	if got := RerankWithTests([]string{"", " "}, []int{0, 0}); got != -1 {
		t.Errorf("got %d, want -1", got)
	}
}

// TestLocalExecutor runs a shell test in a checkout of a real repository
// with and without a patch that makes it pass.
func TestLocalExecutor(t *testing.T) {
	for _, tool := range []string{"git", "tar", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool + " not installed")
		}
	}
	g := gittest.New(t)
	repo, run := g.Dir, g.Git
	os.WriteFile(filepath.Join(repo, "s.py"), []byte("a = 1\n"), 0o644)
	run("add", ".")
	run("commit", "-qm", "base")
	base := run("rev-parse", "HEAD")[:40]
	ex := LocalExecutor{Repo: repo, Command: "grep -q 'a = 2' s.py"}
	if n, err := ex.Failures(context.Background(), base, ""); err != nil || n != 1 {
		t.Errorf("unpatched: %d failures, %v; want 1", n, err)
	}
	r := ApplyAnswer("```python\n### s.py\n<<<<<<< SEARCH\na = 1\n=======\na = 2\n>>>>>>> REPLACE\n```", map[string]string{"s.py": "a = 1"}, DefaultEngine().Parses)
	if n, err := ex.Failures(context.Background(), base, r.ModelPatch); err != nil || n != 0 {
		t.Errorf("patched: %d failures, %v; want 0", n, err)
	}
	if _, err := ex.Failures(context.Background(), base, "not a patch\n"); err == nil {
		t.Error("a patch that does not apply gave no error")
	}
}
