package reward

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"swerl/internal/difflib"
)

// referenceGitDiff is GitDiff written the plain way, from difflib's
// unified_diff port: its hunk lines, each line's own "\n" kept (lineterm
// ""), git's marker after a line without one.
func referenceGitDiff(old, new map[string]string) string {
	var paths []string
	for p := range new {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	var sb strings.Builder
	for _, p := range paths {
		oc, existed := old[p]
		nc := new[p]
		if existed && oc == nc {
			continue
		}
		a, b := gitQuote("a/"+p), gitQuote("b/"+p)
		fmt.Fprintf(&sb, "diff --git %s %s\n", a, b)
		from := a
		if !existed {
			sb.WriteString("new file mode 100644\n")
			if nc == "" {
				continue
			}
			from = "/dev/null"
		}
		lines := difflib.UnifiedDiff(difflib.SplitAfterNewline(oc), difflib.SplitAfterNewline(nc), from, b, 3, "")
		for i, l := range lines {
			switch {
			case i < 2 || strings.HasPrefix(l, "@@ "):
				sb.WriteString(l + "\n")
			case strings.HasSuffix(l, "\n"):
				sb.WriteString(l)
			default:
				sb.WriteString(l + "\n\\ No newline at end of file\n")
			}
		}
	}
	return sb.String()
}

// TestGitDiffMatchesReference: GitDiff (pooled matchers, shared line ends)
// writes the plain construction's bytes for edited versions of random
// files: several files a diff, new, unchanged and emptied ones, lines
// without a final newline, and in between runs of large files (whose
// pooled arrays the small ones then reuse).
func TestGitDiffMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	file := func(n, vocab int) []string {
		var out []string
		for range n {
			out = append(out, fmt.Sprintf("l%d\n", r.IntN(vocab)))
		}
		return out
	}
	edit := func(a []string) []string {
		b := slices.Clone(a)
		for range r.IntN(5) {
			i := r.IntN(len(b) + 1)
			switch r.IntN(3) {
			case 0:
				b = slices.Insert(b, i, fmt.Sprintf("new%d\n", r.IntN(5)))
			case 1:
				if i < len(b) {
					b = slices.Delete(b, i, i+1)
				}
			default:
				if i < len(b) {
					b[i] = fmt.Sprintf("chg%d\n", r.IntN(5))
				}
			}
		}
		return b
	}
	join := func(ls []string, cut bool) string {
		s := strings.Join(ls, "")
		if cut && strings.HasSuffix(s, "\n") {
			s = s[:len(s)-1]
		}
		return s
	}
	for iter := range 1500 {
		old, new := map[string]string{}, map[string]string{}
		for f := range 1 + r.IntN(4) {
			p := fmt.Sprintf("pkg/f%d.py", f)
			n := r.IntN(60)
			if iter%10 == 0 {
				n = 200 + r.IntN(3000)
			}
			a := file(n, 1+r.IntN(40))
			switch r.IntN(6) {
			case 0: // a new file
				new[p] = join(a, r.IntN(3) == 0)
			case 1: // unchanged
				old[p], new[p] = join(a, false), join(a, false)
			case 2: // emptied
				old[p], new[p] = join(a, false), ""
			default:
				old[p], new[p] = join(a, r.IntN(4) == 0), join(edit(a), r.IntN(4) == 0)
			}
		}
		if got, want := GitDiff(old, new), referenceGitDiff(old, new); got != want {
			t.Fatalf("iter %d: GitDiff\n%s\nwant\n%s", iter, got, want)
		}
	}
}

// FuzzGitDiffMatchesReference compares GitDiff with the plain construction
// on any two versions of one file (and the second as a new file).
func FuzzGitDiffMatchesReference(f *testing.F) {
	f.Add("a\nb\nc\n", "a\nB\nc\n")
	f.Add("x\ny", "x\ny\n")
	f.Add("same\nsame\nsame\n", "same\nsame\n")
	f.Add("", "new\n")
	f.Add("l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\n", "l1\nl2\nl3\nl9\nl5\nl6\nl7\nl8\nl10")
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, old := range []map[string]string{{"f.py": a}, {}} {
			new := map[string]string{"f.py": b}
			if got, want := GitDiff(old, new), referenceGitDiff(old, new); got != want {
				t.Fatalf("old %q new %q: GitDiff\n%s\nwant\n%s", a, b, got, want)
			}
		}
	})
}
