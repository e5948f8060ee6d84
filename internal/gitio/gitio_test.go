package gitio_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"swerl/internal/gitio"
	"swerl/internal/gitio/gittest"
)

func open(t *testing.T, r *gittest.Repo) *gitio.Repo {
	t.Helper()
	repo, err := gitio.Open(context.Background(), r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	return repo
}

func TestNameFromURL(t *testing.T) {
	for url, want := range map[string]string{
		"https://github.com/golang/go.git":  "golang/go",
		"https://github.com/golang/go":      "golang/go",
		"git@github.com:apache/beam.git":    "apache/beam",
		"ssh://git@example.com:22/a/b.git/": "a/b",
		"/srv/mirrors/owner/name.git":       "owner/name",
		"https://example.com":               "",
		"":                                  "",
		"file:///tmp/x":                     "tmp/x",
		"https://gitlab.com/group/sub/proj": "sub/proj",
	} {
		if got := gitio.NameFromURL(url); got != want {
			t.Errorf("NameFromURL(%q) = %q, want %q", url, got, want)
		}
	}
}

func TestOpenNamesRepository(t *testing.T) {
	r := gittest.New(t)
	r.Commit("init", map[string]string{"a.txt": "a\n"})
	if got := open(t, r).Name; got != filepath.Base(r.Dir) {
		t.Errorf("name without remote = %q, want the directory name %q", got, filepath.Base(r.Dir))
	}
	r.Git("remote", "add", "origin", "https://github.com/acme/widgets.git")
	if got := open(t, r).Name; got != "acme/widgets" {
		t.Errorf("name = %q, want acme/widgets", got)
	}
	if _, err := gitio.Open(context.Background(), t.TempDir()); err == nil || !strings.Contains(err.Error(), "not a git repository") {
		t.Errorf("Open(non-repo) error = %v", err)
	}
}

// TestLogMatchesGit compares the streamed first-parent history with what
// `git log --name-status` and `git rev-parse` report, one commit at a time.
func TestLogMatchesGit(t *testing.T) {
	r := gittest.New(t)
	r.Commit("root", map[string]string{"a.go": "package a\n", "docs/README.md": "hi\n"})
	r.Commit("second\n\nwith a body\nof two lines", map[string]string{"a.go": "package a\n\nvar X = 1\n", "b/c.go": "package b\n"})
	r.Git("checkout", "-q", "-b", "feature")
	r.Commit("feature work", map[string]string{"b/c.go": "package b\n\nfunc F() {}\n", "weird name\t.txt": "x\n"})
	r.Git("checkout", "-q", "main")
	r.Commit("main moves", map[string]string{"docs/README.md!": ""})
	r.MergePR(7, "feature", "Add F")
	ctx := context.Background()
	lr, err := gitio.Log(ctx, open(t, r), "", true)
	if err != nil {
		t.Fatal(err)
	}
	var got []*gitio.Commit
	for {
		c, ok := lr.Next()
		if !ok {
			break
		}
		got = append(got, c)
	}
	if err := lr.Close(); err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(r.Git("rev-list", "--first-parent", "HEAD"))
	if len(got) != len(want) {
		t.Fatalf("got %d commits, want %d", len(got), len(want))
	}
	for i, c := range got {
		if c.Hash != want[i] {
			t.Fatalf("commit %d = %s, want %s", i, c.Hash, want[i])
		}
		if ps := r.Git("rev-parse", c.Hash+"^@"); strings.Join(strings.Fields(ps), " ") != strings.Join(c.Parents, " ") {
			t.Errorf("%s parents %v, git says %q", c.Hash, c.Parents, ps)
		}
		if msg := r.Git("log", "-1", "--format=%B", c.Hash); strings.TrimSpace(c.Message) != msg {
			t.Errorf("%s message %q, git says %q", c.Hash, c.Message, msg)
		}
		if len(c.Parents) > 1 {
			if len(c.Changes) != 0 {
				t.Errorf("merge %s has changes %v", c.Hash, c.Changes)
			}
			continue
		}
		ns := r.Git("-c", "core.quotePath=false", "show", "--format=", "--name-status", "--no-renames", c.Hash)
		var lines []string
		for _, ch := range c.Changes {
			lines = append(lines, string(ch.Status)+"\t"+ch.Path)
		}
		if strings.Join(lines, "\n") != ns {
			t.Errorf("%s changes\n%s\ngit says\n%s", c.Hash, strings.Join(lines, "\n"), ns)
		}
	}
}

func TestCatFileAndDiffTrees(t *testing.T) {
	r := gittest.New(t)
	a := r.Commit("a", map[string]string{"x/a.go": "package x\n", "x/y/b.go": "b\n", "keep": "k\n", "d": "file\n"})
	r.Git("rm", "-q", "d")
	b := r.Commit("b", map[string]string{"x/y/b.go": "b2\n", "x/y/z/new.go": "n\n", "keep2": "k2\n", "d/inside": "now a dir\n", "x/a.go!": ""})
	ctx := context.Background()
	cf, err := gitio.NewCatFile(ctx, open(t, r))
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	got, err := cf.DiffTrees(a, b)
	if err != nil {
		t.Fatal(err)
	}
	want := r.Git("diff", "--raw", "--no-renames", "--no-abbrev", a, b)
	if raw := rawDiff(got); raw != want {
		t.Errorf("DiffTrees\n%s\ngit diff --raw\n%s", raw, want)
	}
	blob, err := cf.Get(b + ":x/y/b.go")
	if err != nil || string(blob.Data) != "b2\n" || blob.Type != "blob" {
		t.Fatalf("Get = %+v, %v", blob, err)
	}
	if _, err := cf.Get(b + ":no/such/file"); !errors.Is(err, gitio.ErrMissing) {
		t.Errorf("missing path: err = %v, want ErrMissing", err)
	}
	if _, err := cf.Get(strings.Repeat("ab", 20)); !errors.Is(err, gitio.ErrMissing) {
		t.Errorf("missing object: err = %v, want ErrMissing", err)
	}
	// A pipelined batch answers each request in order, misses included.
	revs := []string{b + ":x/y/b.go", "no-such-rev", "bad\nrev", a + ":keep", b + ":x/y/z/new.go"}
	objs, errs := cf.GetMany(revs)
	for i, want := range []string{"b2\n", "", "", "k\n", "n\n"} {
		if want == "" {
			if !errors.Is(errs[i], gitio.ErrMissing) {
				t.Errorf("GetMany %q: err %v, want ErrMissing", revs[i], errs[i])
			}
		} else if errs[i] != nil || string(objs[i].Data) != want {
			t.Errorf("GetMany %q = %v, %v; want %q", revs[i], objs[i], errs[i], want)
		}
	}
	// The process is still usable after misses.
	if d, err := cf.Blob(blob.Hash); err != nil || string(d) != "b2\n" {
		t.Errorf("Blob after misses = %q, %v", d, err)
	}
}

func TestCatFileMissingLooseObject(t *testing.T) {
	r := gittest.New(t)
	r.Commit("a", map[string]string{"f": "secret content\n"})
	h := r.Git("rev-parse", "HEAD:f")
	if err := os.Remove(filepath.Join(r.Dir, ".git", "objects", h[:2], h[2:])); err != nil {
		t.Fatal(err)
	}
	cf, err := gitio.NewCatFile(context.Background(), open(t, r))
	if err != nil {
		t.Fatal(err)
	}
	defer cf.Close()
	if _, err := cf.Blob(h); !errors.Is(err, gitio.ErrMissing) || !strings.Contains(err.Error(), h) {
		t.Errorf("err = %v, want ErrMissing naming %s", err, h)
	}
}

// TestMergeBaseMatchesGit builds a random history of branches and merges
// (criss-cross merges included) and compares every pair's merge base with
// `git merge-base --all`.
func TestMergeBaseMatchesGit(t *testing.T) {
	r := gittest.New(t)
	rng := rand.New(rand.NewSource(1))
	r.Commit("root", map[string]string{"f0": "0\n"})
	branches := []string{"main"}
	var commits []string
	for i := 0; i < 40; i++ {
		switch op := rng.Intn(4); {
		case op == 0 && len(branches) < 5:
			name := fmt.Sprintf("b%d", i)
			r.Git("checkout", "-q", "-b", name, branches[rng.Intn(len(branches))])
			branches = append(branches, name)
		case op == 1 && len(branches) > 1:
			other := branches[rng.Intn(len(branches))]
			cur := r.Git("rev-parse", "--abbrev-ref", "HEAD")
			if other != cur {
				r.Git("merge", "-q", "--no-ff", "-m", "merge "+other, other)
				commits = append(commits, r.Git("rev-parse", "HEAD"))
			}
		default:
			r.Git("checkout", "-q", branches[rng.Intn(len(branches))])
			commits = append(commits, r.Commit(fmt.Sprintf("c%d", i), map[string]string{fmt.Sprintf("f%d", i): "x\n"}))
		}
	}
	for _, b := range branches[1:] {
		r.Git("checkout", "-q", "main")
		r.Git("merge", "-q", "--no-ff", "-m", "final "+b, b)
	}
	g, err := gitio.ReadGraph(context.Background(), open(t, r), "")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(r.Git("rev-list", "HEAD"))); g.Len() != n {
		t.Fatalf("graph has %d commits, rev-list %d", g.Len(), n)
	}
	checked := 0
	for i := 0; i < len(commits); i++ {
		for j := i + 1; j < len(commits); j += 3 {
			a, b := commits[i], commits[j]
			got, ok := g.MergeBase(a, b)
			all := strings.Fields(r.Git("merge-base", "--all", a, b))
			if !ok {
				t.Fatalf("MergeBase(%s, %s) found none; git: %v", a, b, all)
			}
			if !contains(all, got) {
				t.Fatalf("MergeBase(%s, %s) = %s, git merge-base --all says %v", a, b, got, all)
			}
			checked++
		}
	}
	if checked < 50 {
		t.Fatalf("only %d pairs checked", checked)
	}
}

// rawDiff formats changes as `git diff --raw --no-abbrev` prints them.
func rawDiff(changes []gitio.Change) string {
	var lines []string
	for _, ch := range changes {
		lines = append(lines, fmt.Sprintf(":%s %s %s %s %c\t%s", ch.OldMode, ch.NewMode, ch.OldHash, ch.NewHash, ch.Status, ch.Path))
	}
	return strings.Join(lines, "\n")
}

func contains(xs []string, x string) bool {
	sort.Strings(xs)
	i := sort.SearchStrings(xs, x)
	return i < len(xs) && xs[i] == x
}

func TestLogParserErrors(t *testing.T) {
	h := strings.Repeat("a", 40)
	for name, in := range map[string]string{
		"not a commit":   "hello\x00",
		"bad hash":       "commit xyz\x00\x00a\x00b\x00c\x00m\x00",
		"truncated head": "commit " + h + "\x00\x00a\x00",
		"bad raw":        "commit " + h + "\x00\x00a\x00b\x00c\x00m\x00\n:100644 zz\x00p\x00",
		"raw no path":    "commit " + h + "\x00\x00a\x00b\x00c\x00m\x00\n:100644 100644 " + h + " " + h + " M\x00",
		"bad parent":     "commit " + h + "\x00nothex\x00a\x00b\x00c\x00m\x00",
	} {
		p := gitio.NewLogParser(strings.NewReader(in))
		for {
			if _, ok := p.Next(); !ok {
				break
			}
		}
		if p.Err() == nil || !strings.Contains(p.Err().Error(), "byte ") {
			t.Errorf("%s: err = %v, want a positioned error", name, p.Err())
		}
	}
}

func FuzzParseLog(f *testing.F) {
	h := strings.Repeat("a", 40)
	f.Add([]byte("commit " + h + "\x00" + h + "\x00Ann\x00a@b\x002024-01-01T00:00:00Z\x00subject\n\nbody\n\x00\n:100644 100644 " + h + " " + h + " M\x00path/x.go\x00"))
	f.Add([]byte("commit " + h + "\x00\x00A\x00e\x00d\x00m\x00commit " + h + "\x00\x00A\x00e\x00d\x00m\x00"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := gitio.NewLogParser(bytes.NewReader(data))
		for i := 0; ; i++ {
			c, ok := p.Next()
			if !ok {
				break
			}
			if c.Hash == "" || i > len(data) {
				t.Fatalf("commit %d without a hash or parser not advancing", i)
			}
			for _, ch := range c.Changes {
				if len(ch.OldHash) != len(ch.NewHash) && len(ch.OldHash)+len(ch.NewHash) != 104 {
					t.Fatalf("change %+v", ch)
				}
			}
		}
	})
}

func FuzzParseTree(f *testing.F) {
	f.Add([]byte("100644 a.go\x00" + strings.Repeat("\x01", 20) + "40000 dir\x00" + strings.Repeat("\x02", 20)))
	f.Add([]byte("100644 a"))
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := gitio.ParseTree(data, 20)
		if err != nil {
			return
		}
		n := 0
		for _, e := range es {
			n += len(e.Mode) + 1 + len(e.Name) + 1 + 20
			if len(e.Hash) != 40 {
				t.Fatalf("hash %q", e.Hash)
			}
		}
		if n != len(data) {
			t.Fatalf("entries cover %d of %d bytes", n, len(data))
		}
	})
}
