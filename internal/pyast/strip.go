package pyast

import (
	"strings"

	"swerl/internal/difflib"
)

// RemoveCommentsAndDocstrings is Agentless Mini's
// remove_comments_and_docstrings: it rebuilds source from its tokens
// (tokenize.generate_tokens) without comments and without string tokens
// that start a logical line (after an INDENT or NEWLINE token, or at
// column 0), then drops the lines that are only whitespace.
func RemoveCommentsAndDocstrings(source string) (string, error) {
	toks, err := Tokenize(source)
	if err != nil {
		return "", err
	}
	var out strings.Builder
	prev := INDENT
	lastLine, lastCol := -1, 0
	for _, t := range toks {
		if t.Start.Line > lastLine {
			lastCol = 0
		}
		if t.Start.Col > lastCol {
			out.WriteString(strings.Repeat(" ", t.Start.Col-lastCol))
		}
		switch t.Type {
		case COMMENT:
		case STRING:
			if prev != INDENT && prev != NEWLINE && t.Start.Col > 0 {
				out.WriteString(t.Str)
			}
		default:
			out.WriteString(t.Str)
		}
		prev = t.Type
		lastCol = t.End.Col
		lastLine = t.End.Line
	}
	var kept []string
	for _, l := range difflib.SplitLines(out.String(), false) {
		if strings.TrimFunc(l, isPySpaceRune) != "" {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "\n"), nil
}

func isPySpaceRune(r rune) bool {
	switch r {
	case ' ', '\t', '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x1f, 0x85, 0xa0, 0x1680, 0x2028, 0x2029, 0x202f, 0x205f, 0x3000:
		return true
	}
	return r >= 0x2000 && r <= 0x200a
}

// Functions is get_functions of Agentless Mini: every function not inside
// a class (nested ones included, later definitions replacing earlier ones
// of the same name), keyed by name, and every method directly in a class
// body, keyed "Class.method", each mapped to ast.unparse of its node.
func Functions(mod *Node) (map[string]string, error) {
	fns := map[string]string{}
	var err error
	put := func(k string, n *Node) {
		s, e := Unparse(n)
		if e != nil && err == nil {
			err = e
		}
		fns[k] = s
	}
	// FunctionVisitor: skips functions with a ClassDef among ancestors.
	var visitF func(n *Node, inClass bool)
	// ClassVisitor: every ClassDef, anywhere.
	var visitC func(n *Node)
	visitF = func(n *Node, inClass bool) {
		if n == nil {
			return
		}
		if (n.Kind == "FunctionDef" || n.Kind == "AsyncFunctionDef") && !inClass {
			put(n.Name, n)
		}
		if n.Kind == "ClassDef" {
			inClass = true
		}
		for _, c := range children(n) {
			visitF(c, inClass)
		}
	}
	visitC = func(n *Node) {
		if n == nil {
			return
		}
		if n.Kind == "ClassDef" {
			for _, b := range n.Body {
				if b.Kind == "FunctionDef" || b.Kind == "AsyncFunctionDef" {
					put(n.Name+"."+b.Name, b)
				}
			}
		}
		for _, c := range children(n) {
			visitC(c)
		}
	}
	visitF(mod, false)
	visitC(mod)
	return fns, err
}

// children lists a node's child nodes in ast field order (statements are
// what matters here: function definitions only occur as statements,
// lambdas being expressions).
func children(n *Node) []*Node {
	var out []*Node
	add := func(ns ...*Node) {
		for _, c := range ns {
			if c != nil {
				out = append(out, c)
			}
		}
	}
	add(n.Decorators...)
	add(n.Body...)
	for _, h := range n.Handlers {
		add(h)
	}
	add(n.OrElse...)
	add(n.FinalBody...)
	add(n.Items...) // match cases hold statements
	return out
}
