package pyparse

import "testing"

// FuzzParse: no input makes the tokenizer, the parser or the unparser
// panic, and what Unparse prints parses again (as ast.unparse's output
// does).
func FuzzParse(f *testing.F) {
	for _, s := range snippetCorpus {
		f.Add(s)
	}
	for _, s := range unparseCorpus {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if _, err := Tokenize(src, true); err != nil {
			_ = err.Error()
		}
		m, err := Parse(src)
		if err != nil {
			return
		}
		out, err := Unparse(m)
		if err != nil {
			return
		}
		if _, err := Parse(out); err != nil {
			t.Fatalf("unparse output does not parse: %v\nsource:\n%s\nunparsed:\n%s", err, src, out)
		}
	})
}
