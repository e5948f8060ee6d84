package pyast

import (
	"errors"
	"testing"
)

// FuzzParse feeds arbitrary text to the parser: it must return a tree or
// a *SyntaxError, never panic; a tree must unparse, and the unparsed text
// must parse again and print the same (ast.unparse output is a fixed
// point).
func FuzzParse(f *testing.F) {
	for _, s := range snippets {
		f.Add(s)
	}
	f.Add("f'{a!r:{b}}'\n")
	f.Add("match x:\n    case {1: _}:\n        pass\n")
	f.Add("x = '''\n")
	f.Add("(\n")
	f.Fuzz(func(t *testing.T, src string) {
		mod, err := Parse(src)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) {
				t.Fatalf("error is not a SyntaxError: %v", err)
			}
			return
		}
		out, err := Unparse(mod)
		if err != nil {
			return // e.g. a backslash CPython also cannot keep out of an f-string field
		}
		mod2, err := Parse(out)
		if err != nil {
			t.Fatalf("unparse output does not parse: %v\nsource: %q\nunparsed: %q", err, src, out)
		}
		out2, err := Unparse(mod2)
		if err != nil || out2 != out {
			t.Fatalf("unparse is not a fixed point\nsource: %q\nfirst:  %q\nsecond: %q (%v)", src, out, out2, err)
		}
	})
}

// FuzzRemoveCommentsAndDocstrings: never panics on any text.
func FuzzRemoveCommentsAndDocstrings(f *testing.F) {
	for _, s := range snippets {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		_, _ = RemoveCommentsAndDocstrings(src)
	})
}
