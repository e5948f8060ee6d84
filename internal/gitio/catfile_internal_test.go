package gitio

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"swerl/internal/gitio/gittest"
)

// TestCatFileProcessDeath: when git dies, callers waiting for answers and
// later callers get an error (never ErrMissing, never a hang), and Close
// returns.
func TestCatFileProcessDeath(t *testing.T) {
	r := gittest.New(t)
	c := r.Commit("a", map[string]string{"f": "x\n"})
	repo, err := Open(context.Background(), r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := NewCatFile(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cf.Get(c + ":f"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if _, errs := cf.GetMany([]string{c + ":f", c}); errs[0] != nil {
					return
				}
			}
		}()
	}
	cf.cmd.Process.Kill()
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("callers still waiting 20 s after git died")
	}
	_, err = cf.Get(c + ":f")
	if err == nil || errors.Is(err, ErrMissing) {
		t.Errorf("after git died: %v, want a process error", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- cf.Close() }()
	select {
	case <-closed:
	case <-time.After(20 * time.Second):
		t.Fatal("Close hangs after git died")
	}
}

// TestTreeCacheStaysBounded: however many trees go through it, the cache
// holds about its bound, and the newest entry is kept.
func TestTreeCacheStaysBounded(t *testing.T) {
	const max = 64 << 10
	tc := NewTreeCache(max)
	var last string
	for i := range 5000 {
		id := fmt.Sprintf("%040x", i)
		es := []TreeEntry{{Mode: "100644", Name: fmt.Sprint("file", i), Hash: id}}
		tc.put("repo", fmt.Sprintf("c%039x", i), id, es)
		if tc.bytes > max {
			t.Fatalf("after %d puts: %d bytes, bound %d", i+1, tc.bytes, max)
		}
		last = id
	}
	if _, ok := tc.tree("repo", last); !ok {
		t.Error("the newest tree was evicted")
	}
	if _, ok := tc.tree("other", last); ok {
		t.Error("a tree served for another repository")
	}
}
