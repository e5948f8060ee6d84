// Package gittest builds real git repositories for tests with the git CLI.
package gittest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// Repo is a repository in a test's temporary directory.
type Repo struct {
	T   testing.TB
	Dir string
	n   int // commit clock
}

// New initialises a repository on branch main with a fixed identity.
func New(t testing.TB) *Repo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	r := &Repo{T: t, Dir: t.TempDir()}
	r.Git("init", "-q", "-b", "main")
	r.Git("config", "user.name", "Test Author")
	r.Git("config", "user.email", "author@example.com")
	r.Git("config", "commit.gpgsign", "false")
	r.Git("config", "core.autocrlf", "false")
	return r
}

// Git runs git in the repository and returns its trimmed stdout; a failure
// fails the test.
func (r *Repo) Git(args ...string) string {
	r.T.Helper()
	out, err := r.GitErr(args...)
	if err != nil {
		r.T.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// GitErr runs git and returns its combined output and error.
func (r *Repo) GitErr(args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = r.Dir
	r.n++
	date := "@" + strconv.Itoa(1700000000+r.n*60) + " +0000"
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_DATE="+date, "GIT_COMMITTER_DATE="+date,
		"GIT_CONFIG_NOSYSTEM=1", "HOME="+r.Dir, "LC_ALL=C")
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Write writes files (path → content) into the work tree and stages them;
// an empty content with a path ending in "!" removes the file instead.
func (r *Repo) Write(files map[string]string) {
	r.T.Helper()
	for p, c := range files {
		if rm, ok := strings.CutSuffix(p, "!"); ok {
			r.Git("rm", "-q", "--", rm)
			continue
		}
		full := filepath.Join(r.Dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.T.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			r.T.Fatal(err)
		}
		r.Git("add", "--", p)
	}
}

// Commit writes files and commits them with message; it returns the commit.
func (r *Repo) Commit(message string, files map[string]string) string {
	r.T.Helper()
	r.Write(files)
	r.Git("commit", "-q", "--allow-empty", "-m", message)
	return r.Git("rev-parse", "HEAD")
}

// MergePR merges branch into main the way GitHub's merge button does
// ("Merge pull request #N from owner/branch", --no-ff) and returns the merge.
func (r *Repo) MergePR(n int, branch, title string) string {
	r.T.Helper()
	return r.MergePRInto(n, branch, "main", title)
}

// PR is one pull request from start to merge: it branches off main, commits
// files there with message, and merges the branch into main as pull request
// #n with title (MergePR); it returns the merge.
func (r *Repo) PR(n int, branch, message string, files map[string]string, title string) string {
	r.T.Helper()
	r.Git("checkout", "-q", "-b", branch, "main")
	r.Commit(message, files)
	return r.MergePR(n, branch, title)
}

// MergePRInto is MergePR into branch target (a maintenance branch).
func (r *Repo) MergePRInto(n int, branch, target, title string) string {
	r.T.Helper()
	r.Git("checkout", "-q", target)
	r.Git("merge", "-q", "--no-ff", "-m", "Merge pull request #"+strconv.Itoa(n)+" from someone/"+branch+"\n\n"+title, branch)
	return r.Git("rev-parse", "HEAD")
}

// RebasePR merges branch into target the way GitHub's "Rebase and merge"
// does: its commits are replayed onto target by one rebase (one committer,
// one commit time) and target moves to the last. It returns that commit.
func (r *Repo) RebasePR(branch, target string) string {
	r.T.Helper()
	r.Git("rebase", "-q", target, branch)
	r.Git("checkout", "-q", target)
	r.Git("merge", "-q", "--ff-only", branch)
	return r.Git("rev-parse", "HEAD")
}
