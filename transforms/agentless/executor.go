package agentless

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// Executor runs an instance's tests with a candidate patch applied, for
// test-based reranking; without one the vote alone decides.
type Executor interface {
	// Failures returns how many of the instance's tests fail with patch
	// applied at commit.
	Failures(ctx context.Context, commit, patch string) (int, error)
}

// LocalExecutor runs Command (through sh -c) in a fresh checkout of
// Repo's commit with the patch applied; a non-zero exit counts as one
// failure. Timeout bounds one run (default 10 minutes).
type LocalExecutor struct {
	Repo    string
	Command string
	Timeout time.Duration
}

// Failures implements Executor.
func (e LocalExecutor) Failures(ctx context.Context, commit, patch string) (int, error) {
	dir, err := os.MkdirTemp("", "swerl-agentless-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	archive := exec.CommandContext(ctx, "git", "-C", e.Repo, "archive", "--format=tar", commit)
	tar := exec.CommandContext(ctx, "tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return 0, err
	}
	tar.Stdin = pipe
	// One buffer each: exec copies each command's stderr on its own
	// goroutine, and a bytes.Buffer is not safe for two writers.
	var errb, tarErr bytes.Buffer
	archive.Stderr, tar.Stderr = &errb, &tarErr
	if err := tar.Start(); err != nil {
		return 0, err
	}
	if err := archive.Run(); err != nil {
		tar.Wait()
		return 0, fmt.Errorf("git archive %s: %v: %s", commit, err, errb.String())
	}
	if err := tar.Wait(); err != nil {
		return 0, fmt.Errorf("tar: %v: %s", err, tarErr.String())
	}
	if patch != "" {
		pf := filepath.Join(dir, ".swerl.patch")
		if err := os.WriteFile(pf, []byte(patch), 0o644); err != nil {
			return 0, err
		}
		ap := exec.CommandContext(ctx, "git", "apply", "--whitespace=nowarn", ".swerl.patch")
		ap.Dir = dir
		if out, err := ap.CombinedOutput(); err != nil {
			return 0, fmt.Errorf("git apply: %v: %s", err, out)
		}
		os.Remove(pf)
	}
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Minute
	}
	tctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(tctx, "sh", "-c", e.Command)
	cmd.Dir = dir
	if err := cmd.Run(); err != nil {
		if _, ok := err.(*exec.ExitError); ok {
			return 1, nil
		}
		return 0, err
	}
	return 0, nil
}

// RerankWithTests is rerank.py's regression filter followed by the
// vote: among candidates with a non-empty normalized patch, only those
// with the fewest test failures vote. failures[i] belongs to
// normalized[i]. It returns the chosen index, or -1.
func RerankWithTests(normalized []string, failures []int) int {
	best := -1
	for i, n := range normalized {
		if pyStrip(n) != "" && (best == -1 || failures[i] < best) {
			best = failures[i]
		}
	}
	kept := make([]string, len(normalized))
	for i, n := range normalized {
		if pyStrip(n) != "" && failures[i] == best {
			kept[i] = n
		}
	}
	return MajorityVote(kept)
}
