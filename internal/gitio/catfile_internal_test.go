package gitio

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
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

// TestPairEntriesMergesAsMapsPair checks the tree-order merge against
// pairing by name through maps, on random trees whose names share
// prefixes and differ around '/' ('-' and '.' sort before it, '0' after),
// with files and directories of the same name.
func TestPairEntriesMergesAsMapsPair(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	names := []string{"a", "a-b", "a.c", "a0", "ab", "a/", "b", "foo", "foo-bar", "foo.go", "foo0", "z"}
	modes := []string{"100644", "100755", "40000", "120000", "160000"}
	tree := func() []TreeEntry {
		var es []TreeEntry
		seen := map[string]bool{}
		for range rng.IntN(10) {
			e := TreeEntry{Name: strings.TrimSuffix(names[rng.IntN(len(names))], "/"), Mode: modes[rng.IntN(len(modes))], Hash: fmt.Sprint(rng.IntN(3))}
			k := e.Name
			if e.IsTree() {
				k += "/"
			}
			if !seen[k] {
				seen[k] = true
				es = append(es, e)
			}
		}
		sort.Slice(es, func(i, j int) bool { return compareEntries(es[i], es[j]) < 0 })
		return es
	}
	collect := func(pair func(a, b []TreeEntry, fn func(x, y TreeEntry)), a, b []TreeEntry) []string {
		var out []string
		pair(a, b, func(x, y TreeEntry) { out = append(out, fmt.Sprintf("%v|%v", x, y)) })
		sort.Strings(out)
		return out
	}
	for i := range 5000 {
		a, b := tree(), tree()
		if !inTreeOrder(a) || !inTreeOrder(b) {
			t.Fatalf("case %d: sorted trees not in tree order: %v %v", i, a, b)
		}
		want := collect(pairByName, a, b)
		if got := collect(pairEntries, a, b); !slices.Equal(got, want) {
			t.Fatalf("case %d: %v vs %v: merge %q, maps %q", i, a, b, got, want)
		}
		// Out of order: the fallback pairs the same.
		rng.Shuffle(len(a), func(i, j int) { a[i], a[j] = a[j], a[i] })
		if got := collect(pairEntries, a, b); !slices.Equal(got, want) {
			t.Fatalf("case %d, shuffled: %q, want %q", i, got, want)
		}
	}
	// Git's order: "foo-bar" and "foo.go" sort between file "foo" and
	// directory "foo" (as "foo/"); "foo0" after both.
	es := []TreeEntry{{Name: "foo", Mode: "100644"}, {Name: "foo-bar", Mode: "100644"}, {Name: "foo.go", Mode: "100644"}, {Name: "foo", Mode: "40000"}, {Name: "foo0", Mode: "100644"}}
	if !inTreeOrder(es) {
		t.Errorf("%v is git's order", es)
	}
	if inTreeOrder([]TreeEntry{es[0], es[3], es[1]}) {
		t.Error("directory foo before foo-bar accepted as tree order")
	}
}
