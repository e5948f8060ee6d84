package pyast

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"sort"
	"testing"
)

// vectorSources collects every distinct file text (originals and patched)
// of the Agentless Mini vectors: real flask modules and synthetic files.
func vectorSources(t *testing.T) []string {
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
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	for sc.Scan() {
		var v struct {
			Files    map[string]string `json:"files"`
			NewFiles map[string]string `json:"new_files"`
		}
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		for _, m := range []map[string]string{v.Files, v.NewFiles} {
			for _, s := range m {
				seen[s] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// TestUnparseVectorFiles compares parse+unparse with CPython 3.11 on every
// file text of the vectors.
func TestUnparseVectorFiles(t *testing.T) { checkUnparse(t, vectorSources(t)) }

const stripScript = `
import ast, io, json, sys, tokenize
def remove_comments_and_docstrings(source):
    io_obj = io.StringIO(source)
    out = ""
    prev_toktype = tokenize.INDENT
    last_lineno = -1
    last_col = 0
    for tok in tokenize.generate_tokens(io_obj.readline):
        token_type = tok[0]
        token_string = tok[1]
        start_line, start_col = tok[2]
        end_line, end_col = tok[3]
        if start_line > last_lineno:
            last_col = 0
        if start_col > last_col:
            out += " " * (start_col - last_col)
        if token_type == tokenize.COMMENT:
            pass
        elif token_type == tokenize.STRING:
            if prev_toktype != tokenize.INDENT:
                if prev_toktype != tokenize.NEWLINE:
                    if start_col > 0:
                        out += token_string
        else:
            out += token_string
        prev_toktype = token_type
        last_col = end_col
        last_lineno = end_line
    out = "\n".join(l for l in out.splitlines() if l.strip())
    return out
res = []
for s in json.load(sys.stdin):
    try:
        res.append(remove_comments_and_docstrings(s))
    except Exception:
        res.append(None)
print(json.dumps(res))
`

// TestStripAgainstTokenize compares RemoveCommentsAndDocstrings with the
// reference function on CPython's tokenize, on raw files and on their
// unparsed forms (what normalize_patch feeds it).
func TestStripAgainstTokenize(t *testing.T) {
	srcs := vectorSources(t)
	for _, s := range srcs {
		if m, err := Parse(s); err == nil {
			if u, err := Unparse(m); err == nil {
				srcs = append(srcs, u)
			}
		}
	}
	srcs = append(srcs, snippets...)
	want := pythonOracle(t, stripScript, srcs)
	bad := 0
	for i, s := range srcs {
		got, err := RemoveCommentsAndDocstrings(s)
		if want[i] == nil {
			continue // tokenize raised; the normalizer then keeps docstrings
		}
		if err != nil {
			t.Errorf("source %d: %v", i, err)
			bad++
		} else if got != *want[i] {
			t.Errorf("source %d differs\n got: %q\nwant: %q", i, got, *want[i])
			bad++
		}
		if bad > 10 {
			t.Fatal("too many differences")
		}
	}
}
