package agentless

import (
	"errors"
	"fmt"
	"strings"

	"swerl/internal/difflib"
	"swerl/internal/gitdiff"
	"swerl/internal/pyparse"
	"swerl/internal/unidiff"
)

// ErrNormalizeRaises is returned where Agentless Mini's normalize_patch
// raises (is_just_new_function's ast.parse of a text that is not Python
// 3); a checker writes null.
var ErrNormalizeRaises = errors.New("agentless: normalize_patch raises")

// ErrNormalizeUnsupported is returned for input this normalizer cannot
// follow (kept for callers that count it; nothing returns it today).
var ErrNormalizeUnsupported = errors.New("agentless: normalize_patch is not supported here")

// NormalizePatch is utils/data.py normalize_patch: for each edited file
// in order, both texts go through ast.parse/ast.unparse (left as they are
// when that fails), comments and docstrings are removed (kept on both
// sides when either result does not parse), and the two are diffed as
// `git diff` prints it; a change that only adds functions keeps just its
// '-' and '+' lines. The per-file results are concatenated.
func NormalizePatch(patch string, files, newFiles map[string]string, edited []string) (string, error) {
	if unidiff.PyStrip(patch) == "" {
		return "", nil
	}
	var out strings.Builder
	for _, f := range edited {
		oldText, ok1 := files[f]
		newText, ok2 := newFiles[f]
		if !ok1 || !ok2 {
			return "", fmt.Errorf("edited file %q lacks its original or new text", f)
		}
		old, new := normalizeCode(oldText), normalizeCode(newText)
		rold, errOld := removeCommentsAndDocstrings(old)
		if errOld == nil {
			errOld = pyparse.Check(rold)
		}
		var rnew string
		var errNew error
		if errOld == nil {
			rnew, errNew = removeCommentsAndDocstrings(new)
			if errNew == nil {
				errNew = pyparse.Check(rnew)
			}
		}
		if errOld != nil || errNew != nil {
			rold, rnew = old, new
		}
		diff := gitdiff.File(f, rold, rnew)
		just, err := isJustNewFunction(rold, rnew)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrNormalizeRaises, f, err)
		}
		if just {
			var keep []string
			for _, l := range difflib.SplitLines(diff, false) {
				if strings.HasPrefix(l, "-") || strings.HasPrefix(l, "+") {
					keep = append(keep, l)
				}
			}
			diff = strings.Join(keep, "\n")
		}
		out.WriteString(diff)
	}
	return out.String(), nil
}

// normalizeCode is ast.unparse(ast.parse(code)), or code when either
// fails.
func normalizeCode(code string) string {
	m, err := pyparse.Parse(code)
	if err != nil {
		return code
	}
	s, err := pyparse.Unparse(m)
	if err != nil {
		return code
	}
	return s
}

// removeCommentsAndDocstrings is remove_comments_and_docstrings: the
// source rebuilt from its tokens, without comments and without string
// tokens that follow an INDENT or a NEWLINE or start a line, and without
// blank lines.
func removeCommentsAndDocstrings(src string) (string, error) {
	toks, err := pyparse.Tokenize(src, true)
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	prev := pyparse.INDENT
	lastLine, lastCol := -1, 0
	for _, t := range toks {
		if t.Start.Line > lastLine {
			lastCol = 0
		}
		if t.Start.Col > lastCol {
			sb.WriteString(strings.Repeat(" ", t.Start.Col-lastCol))
		}
		switch t.Kind {
		case pyparse.COMMENT:
		case pyparse.STRING:
			if prev != pyparse.INDENT && prev != pyparse.NEWLINE && t.Start.Col > 0 {
				sb.WriteString(t.Text)
			}
		default:
			sb.WriteString(t.Text)
		}
		prev = t.Kind
		lastCol = t.End.Col
		lastLine = t.End.Line
	}
	var keep []string
	for _, l := range difflib.SplitLines(sb.String(), false) {
		if unidiff.PyStrip(l) != "" {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n"), nil
}

// getFunctions is get_functions: the unparsed text of every function not
// inside a class, by bare name, and of every method directly in a class
// body, by "Class.name"; a later definition of a name replaces an earlier
// one.
func getFunctions(tree *pyparse.Node) (map[string]string, error) {
	fns := map[string]string{}
	var err error
	unparse := func(n *pyparse.Node) string {
		s, e := pyparse.Unparse(n)
		if e != nil && err == nil {
			err = e
		}
		return s
	}
	// FunctionVisitor: functions with no ClassDef among their ancestors.
	var visitFns func(n *pyparse.Node, inClass bool)
	visitFns = func(n *pyparse.Node, inClass bool) {
		if n == nil {
			return
		}
		isFn := n.T == "FunctionDef" || n.T == "AsyncFunctionDef"
		if isFn && !inClass {
			fns[n.Op] = unparse(n)
		}
		inClass = inClass || n.T == "ClassDef"
		eachChild(n, func(c *pyparse.Node) { visitFns(c, inClass) })
	}
	visitFns(tree, false)
	// ClassVisitor: the methods of every class, wherever it is.
	var visitClasses func(n *pyparse.Node)
	visitClasses = func(n *pyparse.Node) {
		if n == nil {
			return
		}
		if n.T == "ClassDef" {
			for _, b := range n.Body {
				if b.T == "FunctionDef" || b.T == "AsyncFunctionDef" {
					fns[n.Op+"."+b.Op] = unparse(b)
				}
			}
		}
		eachChild(n, visitClasses)
	}
	visitClasses(tree)
	return fns, err
}

// eachChild calls f on every child node of n, in field order.
func eachChild(n *pyparse.Node, f func(*pyparse.Node)) {
	for _, c := range []*pyparse.Node{n.A, n.B, n.C} {
		if c != nil {
			f(c)
		}
	}
	for _, l := range [][]*pyparse.Node{n.L, n.L2, n.L3, n.Body, n.Else, n.Final, n.Handlers} {
		for _, c := range l {
			if c != nil {
				f(c)
			}
		}
	}
}

// isJustNewFunction is is_just_new_function: the new code only adds
// functions (no function removed or changed; module-level code is not
// compared). It fails where ast.parse raises.
func isJustNewFunction(code1, code2 string) (bool, error) {
	t1, err := pyparse.Parse(code1)
	if err != nil {
		return false, err
	}
	t2, err := pyparse.Parse(code2)
	if err != nil {
		return false, err
	}
	f1, err := getFunctions(t1)
	if err != nil {
		return false, err
	}
	f2, err := getFunctions(t2)
	if err != nil {
		return false, err
	}
	for k := range f1 {
		if _, ok := f2[k]; !ok {
			return false, nil
		}
	}
	for k, v := range f1 {
		if f2[k] != v {
			return false, nil
		}
	}
	return len(f2) > len(f1), nil
}
