package gitio_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"sync"
	"testing"

	"swerl/internal/gitio"
	"swerl/internal/gitio/gittest"
)

// TestCachedDiffTreesMatchesGit diffs every pair of commits of a random
// history of nested directories, twice through one tree cache (the second
// time mostly from the cache) and once without, against `git diff --raw`.
func TestCachedDiffTreesMatchesGit(t *testing.T) {
	r := gittest.New(t)
	rng := rand.New(rand.NewSource(3))
	paths := []string{"a.go", "x/a.go", "x/y/b.go", "x/y/z/c.go", "w/d.go", "w/e/f.go", "x/y/g.go"}
	var commits []string
	for i := range 8 {
		files := map[string]string{}
		for _, p := range paths {
			if rng.Intn(3) == 0 {
				files[p] = fmt.Sprintf("%s v%d\n", p, i)
			}
		}
		if i > 0 && rng.Intn(2) == 0 {
			r.Git("rm", "-q", "--ignore-unmatch", paths[rng.Intn(len(paths))])
		}
		commits = append(commits, r.Commit(fmt.Sprint("c", i), files))
	}
	repo := open(t, r)
	cached, err := gitio.NewCatFile(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	defer cached.Close()
	cached.UseTrees(gitio.NewTreeCache(1 << 20))
	plain, err := gitio.NewCatFile(context.Background(), repo)
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	for round := range 2 {
		for _, a := range commits {
			for _, b := range commits {
				want := r.Git("diff", "--raw", "--no-renames", "--no-abbrev", a, b)
				for name, cf := range map[string]*gitio.CatFile{"cached": cached, "plain": plain} {
					got, err := cf.DiffTrees(a, b)
					if err != nil {
						t.Fatal(err)
					}
					if raw := rawDiff(got); raw != want {
						t.Fatalf("round %d, %s, %s..%s:\n%s\ngit diff --raw:\n%s", round, name, a[:7], b[:7], raw, want)
					}
				}
			}
		}
	}
}

// TestLookupAndReadDir resolves paths through the cache as git does.
func TestLookupAndReadDir(t *testing.T) {
	r := gittest.New(t)
	c := r.Commit("a", map[string]string{"top.go": "t\n", "x/a.go": "a\n", "x/y/b.go": "b\n"})
	cf, err := gitio.NewCatFile(context.Background(), open(t, r))
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	cf.UseTrees(gitio.NewTreeCache(1 << 20))
	for range 2 { // the second time from the cache
		for _, p := range []string{"top.go", "x/a.go", "x/y/b.go", "x", "x/y"} {
			e, err := cf.Lookup(c, p)
			if want := r.Git("rev-parse", c+":"+p); err != nil || e.Hash != want {
				t.Errorf("Lookup %s = %+v, %v; want %s", p, e, err, want)
			}
		}
		if e, err := cf.Lookup(c, ""); err != nil || e.Hash != r.Git("rev-parse", c+"^{tree}") || !e.IsTree() {
			t.Errorf("Lookup root = %+v, %v", e, err)
		}
		for _, p := range []string{"nope.go", "x/nope.go", "top.go/inside", "x/y/b.go/z"} {
			if _, err := cf.Lookup(c, p); !errors.Is(err, gitio.ErrMissing) {
				t.Errorf("Lookup %s: err %v, want ErrMissing", p, err)
			}
		}
		for _, d := range []string{".", "x", "x/y"} {
			es, err := cf.ReadDir(c, d)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range es {
				got = append(got, e.Name+" "+e.Hash)
			}
			var want []string
			for _, l := range strings.Split(r.Git("ls-tree", c+":"+strings.TrimPrefix(d, ".")), "\n") {
				f := strings.Fields(l) // mode type hash\tname
				want = append(want, f[3]+" "+f[2])
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Errorf("ReadDir %s = %v, want %v", d, got, want)
			}
		}
		if _, err := cf.ReadDir(c, "top.go"); !errors.Is(err, gitio.ErrMissing) {
			t.Errorf("ReadDir of a file: %v", err)
		}
	}
	if _, err := cf.Lookup(strings.Repeat("ab", 20), "x"); !errors.Is(err, gitio.ErrMissing) {
		t.Errorf("Lookup in a missing commit: %v", err)
	}
}

// TestTreeCacheIsPerRepository: a tree one repository has cached is not
// served for another that lacks it.
func TestTreeCacheIsPerRepository(t *testing.T) {
	a, b := gittest.New(t), gittest.New(t)
	ca := a.Commit("a", map[string]string{"x/f": "only in a\n"})
	b.Commit("b", map[string]string{"g": "b\n"})
	cache := gitio.NewTreeCache(1 << 20)
	var cfs []*gitio.CatFile
	for _, r := range []*gittest.Repo{a, b} {
		cf, err := gitio.NewCatFile(context.Background(), open(t, r))
		if err != nil {
			t.Fatal(err)
		}
		defer cf.Close()
		cf.UseTrees(cache)
		cfs = append(cfs, cf)
	}
	if _, err := cfs[0].ReadDir(ca, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := cfs[1].ReadDir(ca, "x"); !errors.Is(err, gitio.ErrMissing) {
		t.Errorf("b read a's commit through the shared cache: %v", err)
	}
}

// TestCatFileConcurrentCallers: many goroutines share one CatFile, their
// requests interleaved on one pipe; every answer reaches its caller.
func TestCatFileConcurrentCallers(t *testing.T) {
	r := gittest.New(t)
	files := map[string]string{}
	for i := range 40 {
		files[fmt.Sprintf("d%d/f%d", i%5, i)] = strings.Repeat(fmt.Sprintf("content %d\n", i), 1+i*50)
	}
	c := r.Commit("a", files)
	var names []string
	for p := range files {
		names = append(names, p)
	}
	cf, err := gitio.NewCatFile(context.Background(), open(t, r))
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(g)))
			for range 100 {
				var revs, want []string
				for range 1 + rng.Intn(6) {
					p := names[rng.Intn(len(names))]
					if rng.Intn(5) == 0 {
						revs, want = append(revs, c+":"+p+".missing"), append(want, "")
						continue
					}
					revs, want = append(revs, c+":"+p), append(want, files[p])
				}
				objs, es := cf.GetMany(revs)
				for i := range revs {
					switch {
					case want[i] == "" && !errors.Is(es[i], gitio.ErrMissing):
						errs <- fmt.Errorf("%s: err %v, want ErrMissing", revs[i], es[i])
						return
					case want[i] != "" && (es[i] != nil || string(objs[i].Data) != want[i]):
						errs <- fmt.Errorf("%s: wrong answer (err %v)", revs[i], es[i])
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestTreeCacheFollowsMovingRefs: a commit's root tree is remembered by id
// only; HEAD read through the cache after a new commit is the new tree.
func TestTreeCacheFollowsMovingRefs(t *testing.T) {
	r := gittest.New(t)
	r.Commit("a", map[string]string{"f": "1\n"})
	cf, err := gitio.NewCatFile(context.Background(), open(t, r))
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	cf.UseTrees(gitio.NewTreeCache(1 << 20))
	if _, err := cf.ReadDir("HEAD", ""); err != nil {
		t.Fatal(err)
	}
	r.Commit("b", map[string]string{"g": "2\n"})
	es, err := cf.ReadDir("HEAD", "")
	if err != nil {
		t.Fatal(err)
	}
	if len(es) != 2 {
		t.Errorf("HEAD after a new commit lists %d entries, want 2 (a stale root)", len(es))
	}
}

// TestEntryKinds: ReadDir's entries say which are files, as git's modes
// do, for a plain file, an executable, a symlink, a submodule and a
// directory.
func TestEntryKinds(t *testing.T) {
	r := gittest.New(t)
	r.Commit("a", map[string]string{"plain.go": "p\n", "run.sh": "#!/bin/sh\n", "d/in.go": "i\n"})
	r.Git("update-index", "--chmod=+x", "run.sh")
	r.Git("update-index", "--add", "--cacheinfo", "120000,"+r.Git("rev-parse", "HEAD:plain.go")+",link")
	r.Git("update-index", "--add", "--cacheinfo", "160000,"+r.Git("rev-parse", "HEAD")+",sub")
	r.Git("commit", "-q", "-m", "kinds")
	c := r.Git("rev-parse", "HEAD")
	cf, err := gitio.NewCatFile(context.Background(), open(t, r))
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	es, err := cf.ReadDir(c, ".")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		mode           string
		file, tree, gl bool
	}{
		"plain.go": {gitio.ModeFile, true, false, false},
		"run.sh":   {gitio.ModeExecutable, true, false, false},
		"link":     {gitio.ModeSymlink, false, false, false},
		"sub":      {gitio.ModeGitlink, false, false, true},
		"d":        {gitio.ModeTree, false, true, false},
	}
	if len(es) != len(want) {
		t.Fatalf("ReadDir = %+v, want %d entries", es, len(want))
	}
	for _, e := range es {
		w, ok := want[e.Name]
		if !ok || e.Mode != w.mode || e.IsFile() != w.file || e.IsTree() != w.tree || gitio.IsGitlink(e.Mode) != w.gl {
			t.Errorf("%s: mode %s file %v tree %v gitlink %v; want %+v", e.Name, e.Mode, e.IsFile(), e.IsTree(), gitio.IsGitlink(e.Mode), w)
		}
	}
	if !gitio.IsTreeMode("040000") || gitio.IsTreeMode(gitio.ModeFile) {
		t.Error("IsTreeMode does not take a Change's padded tree mode")
	}
}
