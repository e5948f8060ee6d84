package difflib

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"

	"swerl/internal/testenv"
)

// pyScript answers, for each case, what CPython's difflib says; the cases are
// generated here at random and Python's answers are the golden data.
const pyScript = `
import difflib, json, sys
out = []
for c in json.load(sys.stdin):
    if c["kind"] == "lines":
        a, b = c["a"].splitlines(), c["b"].splitlines()
    else:
        a, b = c["a"], c["b"]
    sm = difflib.SequenceMatcher(None, a, b, autojunk=c["autojunk"])
    r = {
        "blocks": [list(m) for m in sm.get_matching_blocks()],
        "opcodes": [list(o) for o in sm.get_opcodes()],
        "groups": [[list(o) for o in g] for g in sm.get_grouped_opcodes(3)],
        "ratio": sm.ratio(),
        "split": c["a"].splitlines(),
        "splitkeep": c["a"].splitlines(True),
    }
    if c["kind"] == "lines":
        r["unified"] = list(difflib.unified_diff(a, b, fromfile="old", tofile="new", lineterm="", n=3))
    out.append(r)
json.dump(out, sys.stdout)
`

type pyCase struct {
	Kind     string `json:"kind"`
	A        string `json:"a"`
	B        string `json:"b"`
	Autojunk bool   `json:"autojunk"`
}

type pyAnswer struct {
	Blocks    [][3]int  `json:"blocks"`
	OpCodes   [][]any   `json:"opcodes"`
	Groups    [][][]any `json:"groups"`
	Ratio     float64   `json:"ratio"`
	Split     []string  `json:"split"`
	SplitKeep []string  `json:"splitkeep"`
	Unified   []string  `json:"unified"`
}

// randomText draws lines from a small vocabulary so that lines repeat (and,
// past 200 lines, become popular for autojunk), with all of Python's line
// boundaries and some non-ASCII text.
func randomText(r *rand.Rand, nlines int) string {
	vocab := []string{"", "x = 1", "return x", "    pass", "def f():", "# é ü", "日本語", "}", "{", "a\tb", "\u0085mid", "tail\u2028"}
	ends := []string{"\n", "\n", "\n", "\n", "\r\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\u0085", "\u2028", "\u2029"}
	var sb strings.Builder
	for i := 0; i < nlines; i++ {
		sb.WriteString(vocab[r.Intn(len(vocab))])
		if r.Intn(20) == 0 {
			sb.WriteString(fmt.Sprint(r.Intn(1000)))
		}
		if i < nlines-1 || r.Intn(2) == 0 {
			sb.WriteString(ends[r.Intn(len(ends))])
		}
	}
	return sb.String()
}

// mutate edits some lines of s so that a and b share most of their content.
func mutate(r *rand.Rand, s string) string {
	lines := SplitLines(s, true)
	var out []string
	for _, l := range lines {
		switch r.Intn(10) {
		case 0:
			continue
		case 1:
			out = append(out, "inserted "+fmt.Sprint(r.Intn(5))+"\n", l)
		case 2:
			out = append(out, strings.ToUpper(l))
		default:
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

func pythonCases(r *rand.Rand) []pyCase {
	var cases []pyCase
	for i := 0; i < 60; i++ {
		n := 1 + r.Intn(40)
		if i%6 == 0 {
			n = 200 + r.Intn(200) // autojunk territory
		}
		a := randomText(r, n)
		b := mutate(r, a)
		if i%2 == 0 {
			a, b = b, a
		}
		cases = append(cases, pyCase{"lines", a, b, true})
		if i%3 == 0 {
			cases = append(cases, pyCase{"lines", a, b, false})
		}
		if len(a) < 3000 && len(b) < 3000 {
			cases = append(cases, pyCase{"chars", a, b, false}, pyCase{"chars", a, b, true})
		}
	}
	// Short strings over a tiny alphabet: many ties in find_longest_match.
	for i := 0; i < 200; i++ {
		ab := func() string {
			n := r.Intn(12)
			var sb strings.Builder
			for j := 0; j < n; j++ {
				sb.WriteByte("ab\n"[r.Intn(3)])
			}
			return sb.String()
		}
		cases = append(cases, pyCase{"chars", ab(), ab(), false}, pyCase{"lines", ab(), ab(), true})
	}
	// Long character sequences with popular characters (autojunk on runes).
	for i := 0; i < 6; i++ {
		a := randomText(r, 60)
		cases = append(cases, pyCase{"chars", a, mutate(r, a), true})
	}
	cases = append(cases, pyCase{"chars", "baaaa", "aaba", false}, pyCase{"chars", "aaba", "baaaa", false}, pyCase{"chars", "", "", false})
	return cases
}

func opTuple(o OpCode) []any {
	return []any{o.Name(), float64(o.I1), float64(o.I2), float64(o.J1), float64(o.J2)}
}

func TestAgainstPythonDifflib(t *testing.T) {
	py := testenv.Tool(t, "python3", "apt-get install -y python3")
	r := rand.New(rand.NewSource(1))
	cases := pythonCases(r)
	in, err := json.Marshal(cases)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", pyScript)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3: %v\n%s", err, stderr.String())
	}
	var answers []pyAnswer
	if err := json.Unmarshal(out, &answers); err != nil {
		t.Fatal(err)
	}
	if len(answers) != len(cases) {
		t.Fatalf("%d answers for %d cases", len(answers), len(cases))
	}
	for i, c := range cases {
		want := answers[i]
		var m *Matcher
		var a, b []string
		if c.Kind == "lines" {
			a, b = SplitLines(c.A, false), SplitLines(c.B, false)
			m = NewLines(a, b, c.Autojunk)
		} else {
			m = NewRunes(c.A, c.B, c.Autojunk)
		}
		name := fmt.Sprintf("case %d (%s, autojunk=%v, %q vs %q)", i, c.Kind, c.Autojunk, trunc(c.A), trunc(c.B))
		var blocks [][3]int
		for _, x := range m.MatchingBlocks() {
			blocks = append(blocks, [3]int{x.I, x.J, x.Size})
		}
		if !reflect.DeepEqual(blocks, want.Blocks) {
			t.Errorf("%s: matching blocks\n got %v\nwant %v", name, blocks, want.Blocks)
			continue
		}
		var ops [][]any
		for _, o := range m.OpCodes() {
			ops = append(ops, opTuple(o))
		}
		if len(ops) != len(want.OpCodes) || (len(ops) > 0 && !reflect.DeepEqual(ops, want.OpCodes)) {
			t.Errorf("%s: opcodes\n got %v\nwant %v", name, ops, want.OpCodes)
		}
		var groups [][][]any
		for _, g := range m.GroupedOpCodes(3) {
			var gg [][]any
			for _, o := range g {
				gg = append(gg, opTuple(o))
			}
			groups = append(groups, gg)
		}
		if len(groups) != len(want.Groups) || (len(groups) > 0 && !reflect.DeepEqual(groups, want.Groups)) {
			t.Errorf("%s: grouped opcodes\n got %v\nwant %v", name, groups, want.Groups)
		}
		if got := m.Ratio(); got != want.Ratio {
			t.Errorf("%s: ratio %v, want %v", name, got, want.Ratio)
		}
		if got := SplitLines(c.A, false); !slices.Equal(got, want.Split) {
			t.Errorf("%s: splitlines %q, want %q", name, got, want.Split)
		}
		if got := SplitLines(c.A, true); !slices.Equal(got, want.SplitKeep) {
			t.Errorf("%s: splitlines(True) %q, want %q", name, got, want.SplitKeep)
		}
		if c.Kind == "lines" && c.Autojunk {
			if got := UnifiedDiff(a, b, "old", "new", 3, ""); !slices.Equal(got, want.Unified) {
				t.Errorf("%s: unified diff\n got %q\nwant %q", name, got, want.Unified)
			}
		}
	}
}

func trunc(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
