package unidiff

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"swerl/internal/testenv"
)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func numbered(prefix string, n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		sb.WriteString(prefix + " line " + strconv.Itoa(i) + "\n")
	}
	return sb.String()
}

// TestParseGitDiff parses what git itself writes for modified, added,
// deleted, renamed, binary and no-newline files, and checks the result
// against git's own numstat and name-status.
func TestParseGitDiff(t *testing.T) {
	testenv.Tool(t, "git", "apt-get install -y git")
	dir := t.TempDir()
	git(t, dir, "init", "-q")
	body := "def f():\n" + numbered("    x", 30) + "\ndef g():\n" + numbered("    y", 30)
	write(t, dir, "pkg/mod.py", body)
	write(t, dir, "gone.py", numbered("gone", 5))
	write(t, dir, "old name.py", numbered("same", 40))
	write(t, dir, "blob.bin", "\x00\x01\x02binary\x00")
	write(t, dir, "tail.txt", "a\nb\nc")
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-qm", "base")

	write(t, dir, "pkg/mod.py", strings.Replace(strings.Replace(body, "    x line 20\n", "    x line twenty\n", 1), "    y line 25\n", "", 1))
	if err := os.Remove(filepath.Join(dir, "gone.py")); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "new.py", "print('hi')\n")
	if err := os.Rename(filepath.Join(dir, "old name.py"), filepath.Join(dir, "new name.py")); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "blob.bin", "\x00\x01\x03binary\x00\xff")
	write(t, dir, "tail.txt", "a\nB\nc")
	git(t, dir, "add", "-A")
	diff := git(t, dir, "diff", "--cached", "-M", "HEAD")
	numstat := git(t, dir, "diff", "--cached", "-M", "--numstat", "HEAD")

	files, err := Parse(diff)
	if err != nil {
		t.Fatalf("Parse: %v\n%s", err, diff)
	}
	byPath := map[string]*File{}
	for _, f := range files {
		byPath[f.Path()] = f
	}
	for _, line := range strings.Split(strings.TrimSpace(numstat), "\n") {
		fields := strings.Split(line, "\t")
		added, removed, name := fields[0], fields[1], fields[2]
		if strings.Contains(name, "=>") { // "old name.py => new name.py"
			name = strings.TrimSpace(strings.SplitN(name, "=>", 2)[1])
		}
		f := byPath[name]
		if f == nil {
			t.Errorf("git reports %q, the parser has %v", name, keys(byPath))
			continue
		}
		if added == "-" {
			if !f.Binary {
				t.Errorf("%s: git says binary, parser does not", name)
			}
			continue
		}
		a, r := 0, 0
		for _, h := range f.Hunks {
			for _, l := range h.Lines {
				switch l.Type {
				case "+":
					a++
				case "-":
					r++
				}
			}
		}
		if strconv.Itoa(a) != added || strconv.Itoa(r) != removed {
			t.Errorf("%s: +%d -%d, git numstat +%s -%s", name, a, r, added, removed)
		}
	}
	if f := byPath["new name.py"]; f == nil || !f.IsRename() || f.Source != "a/old name.py" {
		t.Errorf("rename not detected: %+v", f)
	}
	if f := byPath["new.py"]; f == nil || f.Source != DevNull {
		t.Errorf("new file: %+v", f)
	}
	if f := byPath["gone.py"]; f == nil || f.Target != DevNull {
		t.Errorf("deleted file: %+v", f)
	}
	if f := byPath["pkg/mod.py"]; f == nil || len(f.Hunks) != 2 || f.Hunks[1].Section != "def g():" {
		t.Errorf("section text of the second hunk: %+v", f)
	}
	fl, err := FileLevel(diff)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := fl["blob.bin"]; ok {
		t.Errorf("binary file kept: %v", keys(fl))
	}
	if got := fl["old name.py"]; got != "rename from old name.py to new name.py" {
		t.Errorf("pure rename = %q", got)
	}
	if got := fl["tail.txt"]; !strings.Contains(got, "\\ No newline at end of file") {
		t.Errorf("no-newline marker dropped: %q", got)
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestFileLevel checks the reference's normalization on hand-written diffs;
// the expected texts follow unidiff's rendering rules (",1" always written,
// section text kept after one space, lines kept as they were).
func TestFileLevel(t *testing.T) {
	tests := []struct {
		name string
		diff string
		want map[string]string
		err  bool
	}{
		{
			name: "lengths of one are written",
			diff: "diff --git a/x.py b/x.py\n--- a/x.py\n+++ b/x.py\n@@ -3 +3 @@ def f():\n-a\n+b\n",
			want: map[string]string{"x.py": "@@ -3,1 +3,1 @@ def f():\n-a\n+b"},
		},
		{
			name: "plain ---/+++ headers and two hunks",
			diff: "--- a/y.py\n+++ b/y.py\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n@@ -10,0 +11,1 @@\n+d\n",
			want: map[string]string{"y.py": "@@ -1,2 +1,2 @@\n a\n-b\n+c\n@@ -10,0 +11,1 @@\n+d"},
		},
		{
			name: "new file takes the target path",
			diff: "diff --git a/n.py b/n.py\nnew file mode 100644\n--- /dev/null\n+++ b/n.py\n@@ -0,0 +1,2 @@\n+x\n+y\n",
			want: map[string]string{"n.py": "@@ -0,0 +1,2 @@\n+x\n+y"},
		},
		{
			name: "deleted file",
			diff: "diff --git a/d.py b/d.py\ndeleted file mode 100644\n--- a/d.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n",
			want: map[string]string{"d.py": "@@ -1,1 +0,0 @@\n-x"},
		},
		{
			name: "rename with a change",
			diff: "diff --git a/o.py b/p.py\nsimilarity index 90%\nrename from o.py\nrename to p.py\n--- a/o.py\n+++ b/p.py\n@@ -1 +1 @@\n-a\n+b\n",
			want: map[string]string{"o.py": "rename from o.py to p.py\n@@ -1,1 +1,1 @@\n-a\n+b"},
		},
		{
			name: "binary files are skipped",
			diff: "diff --git a/i.png b/i.png\nindex 1..2 100644\nBinary files a/i.png and b/i.png differ\ndiff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n@@ -1 +1 @@\n-a\n+b\n",
			want: map[string]string{"t.py": "@@ -1,1 +1,1 @@\n-a\n+b"},
		},
		{
			name: "no-newline marker kept",
			diff: "--- a/z\n+++ b/z\n@@ -1 +1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file\n",
			want: map[string]string{"z": "@@ -1,1 +1,1 @@\n-a\n\\ No newline at end of file\n+b\n\\ No newline at end of file"},
		},
		{
			name: "an empty line inside a hunk is context",
			diff: "--- a/e\n+++ b/e\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n",
			want: map[string]string{"e": "@@ -1,3 +1,3 @@\n a\n \n-b\n+c"},
		},
		{
			name: "the last diff for a path wins",
			diff: "diff --git a/w b/w\n--- a/w\n+++ b/w\n@@ -1 +1 @@\n-a\n+b\ndiff --git a/w b/w\n--- a/w\n+++ b/w\n@@ -1 +1 @@\n-a\n+c\n",
			want: map[string]string{"w": "@@ -1,1 +1,1 @@\n-a\n+c"},
		},
		{
			// unidiff keeps one file while the ---/+++ names repeat
			name: "repeated headers continue the same file",
			diff: "--- a/w\n+++ b/w\n@@ -1 +1 @@\n-a\n+b\n--- a/w\n+++ b/w\n@@ -5 +5 @@\n-a\n+c\n",
			want: map[string]string{"w": "@@ -1,1 +1,1 @@\n-a\n+b\n@@ -5,1 +5,1 @@\n-a\n+c"},
		},
		{name: "hunk longer than its header", diff: "--- a/l\n+++ b/l\n@@ -1 +1 @@\n-a\n-b\n+c\n", err: true},
		{name: "hunk shorter than its header", diff: "--- a/s\n+++ b/s\n@@ -1,3 +1,3 @@\n a\n", err: true},
		{name: "hunk without a file", diff: "@@ -1 +1 @@\n-a\n+b\n", err: true},
		{name: "target without source", diff: "+++ b/q\n@@ -1 +1 @@\n-a\n+b\n", err: true},
		{name: "garbage line inside a hunk", diff: "--- a/g\n+++ b/g\n@@ -1,2 +1,2 @@\n a\nGARBAGE\n", err: true},
		{name: "not a diff at all", diff: "hello world\n", want: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FileLevel(tt.diff)
			if tt.err {
				if err == nil || len(got) != 0 {
					t.Fatalf("want a parse error and no files, got %v, %v", got, err)
				}
				if _, ok := err.(*ParseError); !ok {
					t.Fatalf("error %T is not a *ParseError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s:\n got %q\nwant %q", k, got[k], v)
				}
			}
		})
	}
}

func TestPyStrip(t *testing.T) {
	in := "\x1c\x1d\x1e\x1f\u00a0\u2028 x y\t\u3000\u0085\n"
	if got := PyStrip(in); got != "x y" {
		t.Errorf("PyStrip = %q", got)
	}
}

// FuzzParse: no input panics; accepted diffs keep the counts their hunk
// headers promise, and the normalization never fails on them.
func FuzzParse(f *testing.F) {
	f.Add("diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@ sec\n a\n-b\n+c\n\\ No newline at end of file\n\n")
	f.Add("diff --git a/o b/p\nrename from o\nrename to p\n")
	f.Add("diff --git a/i b/i\nBinary files a/i and b/i differ\n")
	f.Add("diff --git a/i b/i\nGIT binary patch\nliteral 0\n")
	f.Add("--- /dev/null\n+++ b/n\n@@ -0,0 +1 @@\n+x")
	f.Add("--- a\n+++ b\n@@ -0,0 +0,0 @@\n\\ x\n")
	f.Add("@@ -١ +١ @@\n")
	f.Add("--- \"a/q x\"\n+++ \"b/q x\"\n@@ -1 +1 @@\n-\r\n+\r\r\n")
	f.Fuzz(func(t *testing.T, s string) {
		files, err := Parse(s)
		if err != nil {
			if _, ok := err.(*ParseError); !ok {
				t.Fatalf("error %T", err)
			}
			return
		}
		for _, fl := range files {
			_ = fl.Path()
			for _, h := range fl.Hunks {
				src, tgt := 0, 0
				for _, l := range h.Lines {
					switch l.Type {
					case "-":
						src++
					case "+":
						tgt++
					case " ":
						src++
						tgt++
					}
				}
				sl, _ := count(h.SourceLength)
				tl, _ := count(h.TargetLength)
				if src != sl || tgt != tl {
					t.Fatalf("hunk %q: %d/%d lines for header %s/%s", h.String(), src, tgt, h.SourceLength, h.TargetLength)
				}
			}
		}
		if _, err := FileLevel(s); err != nil {
			t.Fatal(err)
		}
	})
}
