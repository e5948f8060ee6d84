package agentless

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"swerl/internal/testenv"
	"swerl/transforms/rollout"
)

const baseUtil = `import os


def greet(name):
    return "Hello, " + name


def shout(name):
    return greet(name).upper()
`

// goldAnswer, noiseAnswer, badSyntax and prose are the repair answers the
// fake server mixes: the gold edit is the majority.
const (
	goldAnswer  = "I will fix it.\n```python\n### pkg/util.py\n<<<<<<< SEARCH\n    return \"Hello, \" + name\n=======\n    return f\"Hello, {name}!\"\n>>>>>>> REPLACE\n```\n"
	goldAnswer2 = "<think>quote style differs</think>\n```python\n### pkg/util.py\n<<<<<<< SEARCH\n    return \"Hello, \" + name\n=======\n    # exclaim\n    return f'Hello, {name}!'\n>>>>>>> REPLACE\n```\n"
	noiseAnswer = "```python\n### pkg/util.py\n<<<<<<< SEARCH\n    return greet(name).upper()\n=======\n    return greet(name).lower()\n>>>>>>> REPLACE\n```\n"
	badSyntax   = "```python\n### pkg/util.py\n<<<<<<< SEARCH\n    return \"Hello, \" + name\n=======\n    return = name\n>>>>>>> REPLACE\n```\n"
	prose       = "I am not sure what to change."
)

// fakeOpenAI is an OpenAI-compatible chat server on loopback: it answers
// localization with the gold file (plus a made-up one) and repair with a
// fixed mix of answers, one choice each.
func fakeOpenAI(t *testing.T) string {
	t.Helper()
	return testenv.ChatServer(t, func(prompt string, n int) ([]string, int) {
		if strings.Contains(prompt, "### Repository Structure ###") {
			return []string{"```\nnot/there.py\npkg/util.py\n```"}, 0
		}
		var texts []string
		mix := []string{goldAnswer, noiseAnswer, prose, goldAnswer2, badSyntax, goldAnswer}
		for i := range n {
			texts = append(texts, mix[i%len(mix)])
		}
		return texts, 0
	})
}

// TestSolveThroughHTTP runs every stage against the loopback server: the
// vote must pick the gold edit (3 of 6 samples normalize to it, quote
// style and comment notwithstanding), the prose and syntax-error answers
// are dropped with their reasons, and the prediction applies with real
// git at the base tree and gives the gold file.
func TestSolveThroughHTTP(t *testing.T) {
	pol, err := rollout.Open(fakeOpenAI(t) + "?retries=0")
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	in := Instance{ID: "demo__demo-1", Problem: "greet should exclaim", Files: map[string]string{
		"pkg/util.py":        baseUtil,
		"pkg/__init__.py":    "",
		"tests/test_util.py": "def test_greet():\n    pass\n",
	}}
	out, err := Solve(context.Background(), pol, in, Options{LocalizeSamples: 2, RepairSamples: 6, Model: "fake"})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Localized) != 1 || out.Localized[0] != "pkg/util.py" {
		t.Fatalf("localized %v, want [pkg/util.py]", out.Localized)
	}
	if len(out.Candidates) != 6 {
		t.Fatalf("%d candidates, want 6", len(out.Candidates))
	}
	wantDropped := map[int]string{2: DropNoEdit, 4: DropSyntax}
	for i, c := range out.Candidates {
		if c.Dropped != wantDropped[i] {
			t.Errorf("candidate %d dropped %q, want %q", i, c.Dropped, wantDropped[i])
		}
	}
	if c := out.Candidates[0]; !c.Chosen || c.Votes != 3 {
		t.Errorf("candidate 0: chosen %v with %d votes; want chosen with 3", c.Chosen, c.Votes)
	}
	if out.Candidates[3].Normalized != out.Candidates[0].Normalized {
		t.Errorf("comment and quote style should normalize away:\n%q\n%q", out.Candidates[3].Normalized, out.Candidates[0].Normalized)
	}
	if out.Prediction.ModelPatch == "" || out.Prediction.ModelPatch != out.Candidates[0].ModelPatch {
		t.Fatalf("prediction %q is not the gold candidate's patch", out.Prediction.ModelPatch)
	}

	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed: cannot check that the patch applies")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pkg/util.py"), []byte(baseUtil), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "p.diff"), []byte(out.Prediction.ModelPatch), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("git", "apply", "p.diff")
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git apply: %v\n%s\npatch:\n%s", err, b, out.Prediction.ModelPatch)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "pkg/util.py"))
	want := strings.Replace(baseUtil, `return "Hello, " + name`, `return f"Hello, {name}!"`, 1)
	if string(got) != want {
		t.Errorf("patched file:\n%s\nwant:\n%s", got, want)
	}
}
