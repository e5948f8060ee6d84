package agentless

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"swerl/internal/testenv"
	"swerl/sinks/parquetio"
	"swerl/transforms/agentless"
)

const baseUtil = "import os\n\n\ndef greet(name):\n    return \"Hello, \" + name\n"

const (
	gold  = "```python\n### pkg/util.py\n<<<<<<< SEARCH\n    return \"Hello, \" + name\n=======\n    return \"Hello, \" + name + \"!\"\n>>>>>>> REPLACE\n```"
	noise = "```python\n### pkg/util.py\n<<<<<<< SEARCH\nimport os\n=======\nimport sys\n>>>>>>> REPLACE\n```"
)

// serveLoopback is an OpenAI-compatible peer on 127.0.0.1 that answers
// localization with the gold file and repair with gold, noise, prose,
// gold for the n choices asked.
func serveLoopback(t *testing.T) string {
	t.Helper()
	return testenv.ChatServer(t, func(prompt string, n int) ([]string, int) {
		if isLocalize(prompt) {
			return []string{"```\npkg/util.py\n```"}, 0
		}
		var texts []string
		mix := []string{gold, noise, "no idea", gold}
		for i := range n {
			texts = append(texts, mix[i%len(mix)])
		}
		return texts, 0
	})
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// TestRunEndToEnd runs rows from a real clone through the loopback server:
// every good row's prediction is the majority (gold) patch and applies at
// base_commit; a malformed row is named in failed.jsonl; every candidate
// is in candidates.parquet.
func TestRunEndToEnd(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	repo := t.TempDir()
	git(t, repo, "init", "-q")
	os.MkdirAll(filepath.Join(repo, "pkg"), 0o755)
	os.MkdirAll(filepath.Join(repo, "tests"), 0o755)
	os.WriteFile(filepath.Join(repo, "pkg/util.py"), []byte(baseUtil), 0o644)
	os.WriteFile(filepath.Join(repo, "tests/test_util.py"), []byte("def test():\n    pass\n"), 0o644)
	os.WriteFile(filepath.Join(repo, "README.md"), []byte("demo\n"), 0o644)
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-qm", "base")
	base := git(t, repo, "rev-parse", "HEAD")

	const n = 8
	var rows bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&rows, `{"instance_id":"demo__demo-%d","repo":"demo/demo","base_commit":"%s","patch":"x","problem_statement":"greet should exclaim"}`+"\n", i, base)
	}
	rows.WriteString("{not json\n")
	dir := t.TempDir()
	in := filepath.Join(dir, "rows.jsonl")
	os.WriteFile(in, rows.Bytes(), 0o644)
	out := filepath.Join(dir, "out")
	var progress bytes.Buffer
	sum, err := Run(context.Background(), Config{Instances: in, Repo: repo, Policy: serveLoopback(t), Out: out, Concurrency: 2,
		Progress: &progress, Solve: agentless.Options{RepairSamples: 4, Model: "fake"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", sum)
	if sum.Instances != n || sum.Resolved != n || sum.BadRows != 1 {
		t.Fatalf("summary %+v: want %d instances all with a patch and 1 bad row", sum, n)
	}
	if got := strings.Count(progress.String(), "\n"); got != n {
		t.Errorf("%d progress lines, want %d", got, n)
	}
	// summary.json is the summary Run returns, its wall time included.
	var onDisk Summary
	if b, err := os.ReadFile(filepath.Join(out, summaryFile)); err != nil {
		t.Fatal(err)
	} else if err := json.Unmarshal(b, &onDisk); err != nil {
		t.Fatal(err)
	}
	if onDisk.Wall <= 0 || onDisk.Wall != sum.Wall || onDisk.PerMinute != sum.PerMinute || onDisk.Instances != sum.Instances {
		t.Errorf("summary.json has wall %v, %.2f instances/min, %d instances; Run returned %v, %.2f, %d",
			onDisk.Wall, onDisk.PerMinute, onDisk.Instances, sum.Wall, sum.PerMinute, sum.Instances)
	}
	b, err := os.ReadFile(filepath.Join(out, "predictions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != n {
		t.Fatalf("%d predictions, want %d", len(lines), n)
	}
	for _, l := range lines {
		var p agentless.Prediction
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(p.ModelPatch, `+    return "Hello, " + name + "!"`) || strings.Contains(p.ModelPatch, "import sys") {
			t.Errorf("%s: prediction is not the gold patch:\n%s", p.InstanceID, p.ModelPatch)
		}
		pf := filepath.Join(dir, p.InstanceID+".diff")
		os.WriteFile(pf, []byte(p.ModelPatch), 0o644)
		git(t, repo, "apply", "--check", pf)
	}
	if fb, err := os.ReadFile(filepath.Join(out, "failed.jsonl")); err != nil || !strings.Contains(string(fb), "rows.jsonl:9") {
		t.Errorf("failed.jsonl does not name the bad row: %q %v", fb, err)
	}
	ib, err := os.ReadFile(filepath.Join(out, "instances.jsonl"))
	if err != nil || strings.Count(string(ib), `"localized_files":["pkg/util.py"]`) != n {
		t.Errorf("instances.jsonl does not list the localized file for every instance: %v\n%s", err, ib)
	}
	cands, err := parquetio.ReadFile[agentless.Candidate](filepath.Join(out, "candidates.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(cands) != 4*n {
		t.Errorf("%d candidates, want %d", len(cands), 4*n)
	}
	chosen, dropped := 0, 0
	for _, c := range cands {
		if c.Chosen {
			chosen++
			if c.Votes != 2 {
				t.Errorf("%s: chosen with %d votes, want 2", c.InstanceID, c.Votes)
			}
		}
		if c.Dropped != "" {
			dropped++
		}
	}
	if chosen != n || dropped != n {
		t.Errorf("%d chosen and %d dropped candidates, want %d each", chosen, dropped, n)
	}
}

// TestRunWithTests: a test command only the noise edit passes makes the
// noise candidate win although the gold one has more votes.
func TestRunWithTests(t *testing.T) {
	for _, tool := range []string{"git", "tar", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool + " not installed")
		}
	}
	repo := t.TempDir()
	git(t, repo, "init", "-q")
	os.MkdirAll(filepath.Join(repo, "pkg"), 0o755)
	os.WriteFile(filepath.Join(repo, "pkg/util.py"), []byte(baseUtil), 0o644)
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-qm", "base")
	base := git(t, repo, "rev-parse", "HEAD")
	dir := t.TempDir()
	in := filepath.Join(dir, "rows.jsonl")
	os.WriteFile(in, []byte(fmt.Sprintf(`{"instance_id":"demo__demo-1","repo":"demo/demo","base_commit":"%s","patch":"x","problem_statement":"p"}`+"\n", base)), 0o644)
	out := filepath.Join(dir, "out")
	if _, err := Run(context.Background(), Config{Instances: in, Repo: repo, Policy: serveLoopback(t), Out: out,
		TestCommand: "grep -q 'import sys' pkg/util.py", Solve: agentless.Options{RepairSamples: 4}}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(out, "predictions.jsonl"))
	if !strings.Contains(string(b), "+import sys") {
		t.Errorf("prediction is not the only candidate passing the tests: %s", b)
	}
}

// gitRepo is a clone with pkg/util.py at its one commit, which it returns.
func gitRepo(t *testing.T) (repo, base string) {
	repo = t.TempDir()
	git(t, repo, "init", "-q")
	os.MkdirAll(filepath.Join(repo, "pkg"), 0o755)
	os.WriteFile(filepath.Join(repo, "pkg/util.py"), []byte(baseUtil), 0o644)
	git(t, repo, "add", ".")
	git(t, repo, "commit", "-qm", "base")
	return repo, git(t, repo, "rev-parse", "HEAD")
}

// writeRows writes n rows demo__demo-1… at base and returns the file.
func writeRows(t *testing.T, n int, base string) string {
	var rows bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&rows, `{"instance_id":"demo__demo-%d","repo":"demo/demo","base_commit":"%s","patch":"x","problem_statement":"greet should exclaim"}`+"\n", i, base)
	}
	in := filepath.Join(t.TempDir(), "rows.jsonl")
	if err := os.WriteFile(in, rows.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return in
}

func isLocalize(prompt string) bool { return strings.Contains(prompt, "### Repository Structure ###") }

// TestRunConcurrency: policy requests of different instances and samples
// are in flight together, up to Concurrency and never more. The server
// holds each request until Concurrency are in flight at once (or a
// deadline passes, which the peak then shows).
func TestRunConcurrency(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	const conc = 3
	repo, base := gitRepo(t)
	var mu sync.Mutex
	inflight, peak := 0, 0
	full := make(chan struct{})
	url := testenv.ChatServer(t, func(prompt string, n int) ([]string, int) {
		mu.Lock()
		inflight++
		peak = max(peak, inflight)
		if inflight == conc {
			select {
			case <-full:
			default:
				close(full)
			}
		}
		mu.Unlock()
		select {
		case <-full:
		case <-time.After(10 * time.Second):
		}
		mu.Lock()
		inflight--
		mu.Unlock()
		if isLocalize(prompt) {
			return []string{"pkg/util.py"}, 0
		}
		return slices.Repeat([]string{gold}, n), 0
	})
	out := filepath.Join(t.TempDir(), "out")
	sum, err := Run(context.Background(), Config{Instances: writeRows(t, 4, base), Repo: repo, Policy: url, Out: out, Concurrency: conc,
		Solve: agentless.Options{LocalizeSamples: 2, RepairSamples: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if peak != conc {
		t.Errorf("peak %d policy requests in flight, want %d", peak, conc)
	}
	if sum.Resolved != 4 {
		t.Errorf("%d of 4 instances with a patch", sum.Resolved)
	}
}

// TestRunBatchesAndBadAnswers: with RepairBatch 1 each repair sample is
// its own request (sample indexes and seeds kept); an instance whose
// policy request fails is named in failed.jsonl with an empty prediction;
// malformed localization answers and answers that are no edit are
// counted, by reason, and nothing panics.
func TestRunBatchesAndBadAnswers(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	repo, base := gitRepo(t)
	var mu sync.Mutex
	repairs := 0
	junk := []string{"", "<<<<<<< SEARCH\n=======\n>>>>>>> REPLACE", "```python\n### pkg/util.py\n<<<<<<< SEARCH\ndef greet(name):\n=======\ndef greet(name:\n>>>>>>> REPLACE\n```", "\x00\xff"}
	url := testenv.ChatServer(t, func(prompt string, n int) ([]string, int) {
		if strings.Contains(prompt, "demo-3 fails") {
			return nil, http.StatusUnprocessableEntity // not retried
		}
		if isLocalize(prompt) {
			if strings.Contains(prompt, "demo-2 lost") {
				return []string{"```\nno/such.py\n```"}, 0
			}
			return []string{"```\npkg/util.py\n```"}, 0
		}
		mu.Lock()
		defer mu.Unlock()
		repairs++
		if n != 1 {
			return nil, http.StatusBadRequest
		}
		return []string{append(junk, gold, gold)[repairs%6]}, 0
	})
	var rows bytes.Buffer
	for i, p := range []string{"greet should exclaim", "demo-2 lost", "demo-3 fails", "greet should exclaim"} {
		fmt.Fprintf(&rows, `{"instance_id":"demo__demo-%d","repo":"demo/demo","base_commit":"%s","patch":"x","problem_statement":%q}`+"\n", i+1, base, p)
	}
	fmt.Fprintf(&rows, `{"instance_id":"demo__demo-1","repo":"demo/demo","base_commit":"%s","patch":"x","problem_statement":"again"}`+"\n", base)
	dir := t.TempDir()
	in := filepath.Join(dir, "rows.jsonl")
	os.WriteFile(in, rows.Bytes(), 0o644)
	out := filepath.Join(dir, "out")
	sum, err := Run(context.Background(), Config{Instances: in, Repo: repo, Policy: url, Out: out, RepairBatch: 1,
		Solve: agentless.Options{RepairSamples: 6}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", sum)
	if sum.Instances != 4 || sum.Failed != 1 || sum.BadRows != 1 || sum.MalformedLocalizations != 1 || sum.Candidates != 12 {
		t.Errorf("summary %+v: want 4 instances, 1 failed, 1 bad row (the repeated id), 1 malformed localization, 12 candidates", sum)
	}
	if repairs != 12 {
		t.Errorf("%d repair requests, want 12 (one a sample)", repairs)
	}
	if sum.Dropped == 0 || sum.DroppedBy[agentless.DropNoEdit] == 0 {
		t.Errorf("dropped candidates not counted by reason: %+v", sum.DroppedBy)
	}
	fb, _ := os.ReadFile(filepath.Join(out, "failed.jsonl"))
	if !strings.Contains(string(fb), "demo__demo-3") || !strings.Contains(string(fb), "repeats an earlier row") {
		t.Errorf("failed.jsonl does not name the failed instance and the repeated row:\n%s", fb)
	}
	pb, _ := os.ReadFile(filepath.Join(out, "predictions.jsonl"))
	lines := strings.Split(strings.TrimSpace(string(pb)), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d predictions, want 4", len(lines))
	}
	for i, l := range lines {
		var p agentless.Prediction
		json.Unmarshal([]byte(l), &p)
		if want := fmt.Sprintf("demo__demo-%d", i+1); p.InstanceID != want {
			t.Errorf("prediction %d is %s, want %s (input order)", i, p.InstanceID, want)
		}
		if gotPatch, want := p.ModelPatch != "", i == 0 || i == 3; gotPatch != want {
			t.Errorf("%s: patch %q", p.InstanceID, p.ModelPatch)
		}
	}
	cands, err := parquetio.ReadFile[agentless.Candidate](filepath.Join(out, "candidates.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cands {
		if c.Sample != i%6 {
			t.Errorf("candidate %d: %s sample %d, want %d", i, c.InstanceID, c.Sample, i%6)
		}
	}
}
