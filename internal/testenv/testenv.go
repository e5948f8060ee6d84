// Package testenv locates what swerl's tests read from outside the package
// under test: the repository root, the shared conformance data beside it, and
// the outside tools installed by scripts/install-test-deps.sh.
//
// A missing tool fails the test when CI is set (CI must never skip silently)
// and skips it, with the command that installs it, otherwise.
package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RepoRoot returns the directory holding go.mod, walking up from the working
// directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// SharedDir returns ../shared beside the repository (or $SWERL_SHARED). It
// fails the test when the directory is missing: the conformance data is part
// of the project's contract.
func SharedDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("SWERL_SHARED")
	if dir == "" {
		dir = filepath.Join(RepoRoot(t), "..", "shared")
	}
	if _, err := os.Stat(filepath.Join(dir, "conformance")); err != nil {
		t.Fatalf("testenv: shared conformance data not found at %s (set SWERL_SHARED): %v", dir, err)
	}
	return dir
}

// Missing fails (under CI) or skips the test because an outside tool is not
// installed.
func Missing(t testing.TB, what, install string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("testenv: %s is not installed; CI must install it: %s", what, install)
	}
	t.Skipf("testenv: %s is not installed; to run this test: %s", what, install)
}

// NodeModules returns .tools/npm/node_modules after checking that the npm
// package pkg is installed there and node is on PATH.
func NodeModules(t testing.TB, pkg string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		Missing(t, "node", "apt-get install -y nodejs")
	}
	dir := filepath.Join(RepoRoot(t), ".tools", "npm", "node_modules")
	if _, err := os.Stat(filepath.Join(dir, pkg, "package.json")); err != nil {
		Missing(t, "npm package "+pkg, "scripts/install-test-deps.sh")
	}
	return dir
}

// Tool returns the path of an executable on PATH, or fails/skips.
func Tool(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name, install)
	}
	return p
}
