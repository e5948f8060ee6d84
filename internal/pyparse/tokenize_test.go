package pyparse

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
)

// TestTokensAgreeWithTokenize compares Tokenize(src, true) with Python's
// tokenize module (the oracle) on the texts remove_comments_and_docstrings
// reads: unparsed modules and the vectors' raw files. Kind, text and both
// positions must agree, except the text of NEWLINE (tokenize gives "" at
// the end of the input) and the positions of the DEDENT and ENDMARKER
// tokens that close the input, which the algorithm does not read.
func TestTokensAgreeWithTokenize(t *testing.T) {
	py := python311(t)
	srcs := vectorSources(t)
	for _, s := range append(append([]string(nil), vectorSources(t)...), unparseCorpus...) {
		if m, err := Parse(s); err == nil {
			if u, err := Unparse(m); err == nil {
				srcs = append(srcs, u)
			}
		}
	}
	const prog = `
import io, json, sys, tokenize
out = []
for s in json.load(sys.stdin):
    try:
        out.append([[t.type, t.string, t.start, t.end] for t in tokenize.generate_tokens(io.StringIO(s).readline)])
    except Exception:
        out.append(None)
json.dump(out, sys.stdout)
`
	in, _ := json.Marshal(srcs)
	cmd := exec.Command(py, "-c", prog)
	cmd.Stdin = strings.NewReader(string(in))
	b, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	var want [][][]any
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	// Python's token type numbers.
	pyType := map[Kind]float64{ENDMARKER: 0, NAME: 1, NUMBER: 2, STRING: 3, NEWLINE: 4, INDENT: 5, DEDENT: 6, OP: 54, COMMENT: 61, NL: 62}
	bad := 0
	for i, s := range srcs {
		if want[i] == nil {
			continue
		}
		got, err := Tokenize(s, true)
		if err != nil {
			t.Errorf("source %d: %v", i, err)
			bad++
			continue
		}
		ok := len(got) == len(want[i])
		for j := 0; ok && j < len(got); j++ {
			g, w := got[j], want[i][j]
			pos := func(p Pos) string { return fmt.Sprintf("[%d,%d]", p.Line, p.Col) }
			wpos := func(v any) string { a := v.([]any); return fmt.Sprintf("[%v,%v]", a[0], a[1]) }
			closing := g.Kind == DEDENT || g.Kind == ENDMARKER
			if pyType[g.Kind] != w[0].(float64) ||
				(g.Kind != NEWLINE && g.Text != w[1].(string)) ||
				(!closing && (pos(g.Start) != wpos(w[2]) || pos(g.End) != wpos(w[3]))) {
				ok = false
				if bad < 5 {
					t.Errorf("source %d token %d: ours %v %q %v-%v, tokenize %v", i, j, g.Kind, g.Text, g.Start, g.End, w)
				}
			}
		}
		if !ok {
			bad++
			if len(got) != len(want[i]) && bad < 5 {
				t.Errorf("source %d: %d tokens, tokenize %d", i, len(got), len(want[i]))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d sources tokenize differently", bad, len(srcs))
	}
}
