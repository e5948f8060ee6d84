package pyast

import (
	"os"
	"path/filepath"
	"testing"
)

// TestUnparseCorpus compares parse+unparse with CPython 3.11 on every .py
// file under $SWERL_PYAST_CORPUS (e.g. CPython's own Lib directory); it is
// skipped when the variable is unset.
func TestUnparseCorpus(t *testing.T) {
	dir := os.Getenv("SWERL_PYAST_CORPUS")
	if dir == "" {
		t.Skip("SWERL_PYAST_CORPUS not set")
	}
	var srcs []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && filepath.Ext(p) == ".py" {
			if b, err := os.ReadFile(p); err == nil && len(b) < 1<<20 {
				srcs = append(srcs, string(b))
			}
		}
		return nil
	})
	checkUnparse(t, srcs)
}
