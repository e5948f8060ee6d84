package gitdiff

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"swerl/internal/testenv"
)

// vectorFiles reads the Python sources held by the Agentless conformance
// vectors: real files (pallets/flask) to diff.
func vectorFiles(t testing.TB) []string {
	t.Helper()
	f, err := os.Open("../../transforms/agentless/testdata/vectors.jsonl.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []string
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 1<<28)
	for sc.Scan() {
		var v struct{ Files map[string]string }
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		for _, s := range v.Files {
			if !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// mutate makes a random edit of text of the kinds that make diffs
// ambiguous: deleted and inserted runs, lines copied from elsewhere, blank
// lines, changed lines, and the final newline added or removed.
func mutate(r *rand.Rand, text string) string {
	lines := strings.SplitAfter(text, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	for range 1 + r.IntN(4) {
		n := len(lines)
		if n == 0 {
			lines = append(lines, "x = 1\n")
			continue
		}
		i := r.IntN(n)
		switch r.IntN(6) {
		case 0: // delete a run
			j := min(n, i+1+r.IntN(5))
			lines = append(lines[:i:i], lines[j:]...)
		case 1: // insert a copy of another run
			k := r.IntN(n)
			run := append([]string(nil), lines[k:min(n, k+1+r.IntN(6))]...)
			lines = append(lines[:i:i], append(run, lines[i:]...)...)
		case 2: // blank lines
			ins := []string{"\n"}
			if r.IntN(2) == 0 {
				ins = append(ins, "\n")
			}
			lines = append(lines[:i:i], append(ins, lines[i:]...)...)
		case 3: // change a line
			lines[i] = "    changed_" + fmt.Sprint(r.IntN(100)) + " = " + strings.TrimLeft(lines[i], " ")
		case 4: // a new indented block
			blk := []string{"def added_" + fmt.Sprint(r.IntN(9)) + "():\n", "    return None\n", "\n"}
			lines = append(lines[:i:i], append(blk, lines[i:]...)...)
		case 5: // the last newline
			l := lines[n-1]
			if strings.HasSuffix(l, "\n") {
				lines[n-1] = strings.TrimSuffix(l, "\n")
			} else {
				lines[n-1] = l + "\n"
			}
		}
	}
	return strings.Join(lines, "")
}

// gitDiff runs real git: the old texts committed to the index of a scratch
// repository, the new ones in the work tree, `git diff`.
func gitDiff(t *testing.T, old, new map[string]string) string {
	t.Helper()
	git := testenv.Tool(t, "git", "apt-get install -y git")
	dir := t.TempDir()
	run := func(args ...string) string {
		cmd := exec.Command(git, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "HOME="+dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null")
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return string(out)
	}
	write := func(files map[string]string) {
		for p, s := range files {
			fp := filepath.Join(dir, p)
			if err := os.MkdirAll(filepath.Dir(fp), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(fp, []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	run("init", "-q")
	write(old)
	run("add", ".")
	write(new)
	return run("diff", ".")
}

func TestAgainstGit(t *testing.T) {
	srcs := vectorFiles(t)
	r := rand.New(rand.NewPCG(1, 2))
	old, new := map[string]string{}, map[string]string{}
	var paths []string
	n := 300
	if testing.Short() {
		n = 60
	}
	for i := range n {
		src := srcs[r.IntN(len(srcs))]
		if r.IntN(5) == 0 { // small files too, where edits reach both ends
			ls := strings.SplitAfter(src, "\n")
			k := r.IntN(len(ls))
			src = strings.Join(ls[k:min(len(ls), k+1+r.IntN(12))], "")
		}
		p := fmt.Sprintf("d%d/f%03d.py", i%7, i)
		if i%50 == 7 {
			p = fmt.Sprintf("sp ace/f%03d é.py", i)
		}
		paths = append(paths, p)
		old[p] = src
		new[p] = mutate(r, src)
	}
	want := gitDiff(t, old, new)
	got := Files(paths, old, new)
	if got != want {
		wf, gf := strings.Split(want, "diff --git "), strings.Split(got, "diff --git ")
		for i := 0; i < min(len(wf), len(gf)); i++ {
			if wf[i] != gf[i] {
				t.Fatalf("first difference in file section %d:\n--- git:\n%s\n--- ours:\n%s", i, wf[i], gf[i])
			}
		}
		t.Fatalf("sections: git %d, ours %d", len(wf), len(gf))
	}
}

func TestEmptyAndEdges(t *testing.T) {
	cases := [][2]string{
		{"", "a\n"}, {"a\n", ""}, {"", "a"}, {"a", "a\n"}, {"a\nb", "a\nc"},
		{"x\n\n\ny\n", "x\n\n\n\ny\n"}, {"\tdef f():\n\t\treturn 1\n", "\tdef f():\n\t\treturn 2\n"},
		{strings.Repeat("_"+strings.Repeat("n", 100)+"\nq\nq\nq\nq\n", 3), strings.Repeat("_"+strings.Repeat("n", 100)+"\nq\nq\nq\nr\n", 3)},
	}
	old, new := map[string]string{}, map[string]string{}
	var paths []string
	for i, c := range cases {
		p := fmt.Sprintf("e%02d.py", i)
		paths = append(paths, p)
		old[p], new[p] = c[0], c[1]
	}
	if got, want := Files(paths, old, new), gitDiff(t, old, new); got != want {
		t.Fatalf("git:\n%s\nours:\n%s", want, got)
	}
}

func TestBlobID(t *testing.T) {
	// git hash-object of an empty file and of "hello\n".
	if got := BlobID(""); got != "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391" {
		t.Fatal(got)
	}
	if got := BlobID("hello\n"); got != "ce013625030ba8dba906f756967f9e9ca394464a" {
		t.Fatal(got)
	}
}

// TestHeavyEdits makes changes big enough for xdiff's cost heuristics
// (edit cost above 256) to cut the Myers search.
func TestHeavyEdits(t *testing.T) {
	srcs := vectorFiles(t)
	r := rand.New(rand.NewPCG(3, 4))
	old, new := map[string]string{}, map[string]string{}
	var paths []string
	for i := range 12 {
		src := srcs[r.IntN(len(srcs))]
		for len(src) < 40000 {
			src += srcs[r.IntN(len(srcs))]
		}
		ls := strings.SplitAfter(src, "\n")
		out := append([]string(nil), ls...)
		for range 150 {
			out = strings.SplitAfter(mutate(r, strings.Join(out, "")), "\n")
		}
		p := fmt.Sprintf("h%02d.py", i)
		paths = append(paths, p)
		old[p], new[p] = src, strings.Join(out, "")
	}
	if got, want := Files(paths, old, new), gitDiff(t, old, new); got != want {
		t.Fatalf("differs from git (%d vs %d bytes)", len(got), len(want))
	}
}
