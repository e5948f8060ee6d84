package pyast

import (
	"errors"
	"sort"
	"strings"
)

// Operator precedences of CPython 3.11's ast._Precedence.
const (
	pNamedExpr = iota + 1
	pTuple
	pYield
	pTest
	pOr
	pAnd
	pNot
	pCmp
	pExpr
	pBXor
	pBAnd
	pShift
	pArith
	pTerm
	pFactor
	pPower
	pAwait
	pAtom
)

const pBOr = pExpr

func nextPrec(p int) int {
	if p >= pAtom {
		return p
	}
	return p + 1
}

var binopPrec = map[string]int{"+": pArith, "-": pArith, "*": pTerm, "@": pTerm, "/": pTerm, "%": pTerm, "<<": pShift, ">>": pShift, "|": pBOr, "^": pBXor, "&": pBAnd, "//": pTerm, "**": pPower}

var (
	singleQuotes = []string{"'", "\""}
	multiQuotes  = []string{"\"\"\"", "'''"}
	allQuotes    = []string{"'", "\"", "\"\"\"", "'''"}
)

// infStr stands for an infinite float, as ast.unparse writes it.
const infStr = "1e309"

type unparser struct {
	out              strings.Builder
	indent           int
	prec             map[*Node]int
	avoidBackslashes bool
	inTryStar        bool
}

// errUnparse is raised (as a panic inside the unparser) for trees
// ast.unparse rejects.
type errUnparse struct{ msg string }

// Unparse prints a tree as CPython 3.11's ast.unparse does.
func Unparse(n *Node) (s string, err error) {
	u := &unparser{prec: map[*Node]int{}}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(errUnparse)
			if !ok {
				panic(r)
			}
			err = errors.New(e.msg)
		}
	}()
	u.traverse(n)
	return u.out.String(), nil
}

func (u *unparser) write(s ...string) {
	for _, x := range s {
		u.out.WriteString(x)
	}
}

func (u *unparser) fill(text string) {
	if u.out.Len() > 0 {
		u.write("\n")
	}
	u.write(strings.Repeat("    ", u.indent), text)
}

func (u *unparser) maybeNewline() {
	if u.out.Len() > 0 {
		u.write("\n")
	}
}

func (u *unparser) block(body func()) {
	u.write(":")
	u.indent++
	body()
	u.indent--
}

func (u *unparser) delimitIf(start, end string, cond bool, body func()) {
	if cond {
		u.write(start)
	}
	body()
	if cond {
		u.write(end)
	}
}

func (u *unparser) getPrec(n *Node) int {
	if p, ok := u.prec[n]; ok {
		return p
	}
	return pTest
}

func (u *unparser) setPrec(p int, ns ...*Node) {
	for _, n := range ns {
		if n != nil {
			u.prec[n] = p
		}
	}
}

func (u *unparser) requireParens(p int, n *Node, body func()) {
	u.delimitIf("(", ")", u.getPrec(n) > p, body)
}

func (u *unparser) traverseAll(ns []*Node) {
	for _, n := range ns {
		u.traverse(n)
	}
}

func (u *unparser) interleave(sep string, ns []*Node) {
	for i, n := range ns {
		if i > 0 {
			u.write(sep)
		}
		u.traverse(n)
	}
}

func docstringOf(n *Node) *Node {
	if len(n.Body) < 1 {
		return nil
	}
	b := n.Body[0]
	if b.Kind != "Expr" || b.Value.Kind != "Constant" || b.Value.Const.Kind != CStr {
		return nil
	}
	return b.Value
}

func (u *unparser) docstringAndBody(n *Node) {
	if d := docstringOf(n); d != nil {
		u.fill("")
		if d.Const.U {
			u.write("u")
		}
		u.writeStrAvoidingBackslashes(d.Const.Str, multiQuotes)
		u.traverseAll(n.Body[1:])
	} else {
		u.traverseAll(n.Body)
	}
}

func isPyPrintable(r rune) bool { return isPrintable(r) }

// strLiteralHelper is _str_literal_helper: the escaped text and the quote
// types that can enclose it, best first.
func strLiteralHelper(s string, quoteTypes []string, escapeSpecialWhitespace bool) (string, []string) {
	var b strings.Builder
	eachRune(s, func(r rune) {
		if !escapeSpecialWhitespace && (r == '\n' || r == '\t') {
			b.WriteRune(r)
		} else if r == '\\' || !isPyPrintable(r) {
			b.WriteString(unicodeEscape(r))
		} else {
			b.WriteRune(r)
		}
	})
	escaped := b.String()
	possible := append([]string(nil), quoteTypes...)
	if strings.Contains(escaped, "\n") {
		var keep []string
		for _, q := range possible {
			if q == "\"\"\"" || q == "'''" {
				keep = append(keep, q)
			}
		}
		possible = keep
	}
	var keep []string
	for _, q := range possible {
		if !strings.Contains(escaped, q) {
			keep = append(keep, q)
		}
	}
	possible = keep
	if len(possible) == 0 {
		r := pyRepr(s)
		quote := string(r[0])
		for _, q := range quoteTypes {
			if strings.Contains(q, string(r[0])) {
				quote = q
				break
			}
		}
		return r[1 : len(r)-1], []string{quote}
	}
	if escaped != "" {
		last := escaped[len(escaped)-1]
		sort.SliceStable(possible, func(i, j int) bool {
			return possible[i][0] != last && possible[j][0] == last
		})
		if possible[0][0] == last {
			escaped = escaped[:len(escaped)-1] + "\\" + escaped[len(escaped)-1:]
		}
	}
	return escaped, possible
}

func (u *unparser) writeStrAvoidingBackslashes(s string, quoteTypes []string) {
	s, qs := strLiteralHelper(s, quoteTypes, false)
	u.write(qs[0], s, qs[0])
}

func (u *unparser) fail(msg string) { panic(errUnparse{msg}) }

// traverseAfter writes prefix and n when n is present (an optional part of
// a statement: an assert's message, a case's guard).
func (u *unparser) traverseAfter(prefix string, n *Node) {
	if n != nil {
		u.write(prefix)
		u.traverse(n)
	}
}

func (u *unparser) traverse(n *Node) {
	switch n.Kind {
	case "Module":
		u.docstringAndBody(n)
	case "Expr":
		u.fill("")
		u.setPrec(pYield, n.Value)
		u.traverse(n.Value)
	case "NamedExpr":
		u.requireParens(pNamedExpr, n, func() {
			u.setPrec(pAtom, n.Target, n.Value)
			u.traverse(n.Target)
			u.write(" := ")
			u.traverse(n.Value)
		})
	case "Import":
		u.fill("import ")
		u.interleave(", ", n.Elts)
	case "ImportFrom":
		u.fill("from ")
		u.write(strings.Repeat(".", n.Level))
		u.write(n.Name)
		u.write(" import ")
		u.interleave(", ", n.Elts)
	case "alias":
		u.write(n.Name)
		if n.AsName != "" {
			u.write(" as " + n.AsName)
		}
	case "Assign":
		u.fill("")
		for _, t := range n.Targets {
			u.setPrec(pTuple, t)
			u.traverse(t)
			u.write(" = ")
		}
		u.traverse(n.Value)
	case "AugAssign":
		u.fill("")
		u.traverse(n.Target)
		u.write(" " + n.Op + "= ")
		u.traverse(n.Value)
	case "AnnAssign":
		u.fill("")
		u.delimitIf("(", ")", !n.Simple && n.Target.Kind == "Name", func() { u.traverse(n.Target) })
		u.write(": ")
		u.traverse(n.Annotation)
		u.traverseAfter(" = ", n.Value)
	case "Return":
		u.fill("return")
		u.traverseAfter(" ", n.Value)
	case "Pass":
		u.fill("pass")
	case "Break":
		u.fill("break")
	case "Continue":
		u.fill("continue")
	case "Delete":
		u.fill("del ")
		u.interleave(", ", n.Targets)
	case "Assert":
		u.fill("assert ")
		u.traverse(n.Test)
		u.traverseAfter(", ", n.Msg)
	case "Global", "Nonlocal":
		u.fill(strings.ToLower(n.Kind) + " ")
		u.write(strings.Join(n.Names, ", "))
	case "Await", "Yield":
		prec, word := pAwait, "await"
		if n.Kind == "Yield" {
			prec, word = pYield, "yield"
		}
		u.requireParens(prec, n, func() {
			u.write(word)
			if n.Value != nil {
				u.write(" ")
				u.setPrec(pAtom, n.Value)
				u.traverse(n.Value)
			}
		})
	case "YieldFrom":
		u.requireParens(pYield, n, func() {
			u.write("yield from ")
			u.setPrec(pAtom, n.Value)
			u.traverse(n.Value)
		})
	case "Raise":
		u.fill("raise")
		if n.Value == nil {
			return
		}
		u.write(" ")
		u.traverse(n.Value)
		u.traverseAfter(" from ", n.Cause)
	case "Try", "TryStar":
		prev := u.inTryStar
		u.inTryStar = n.Kind == "TryStar"
		u.fill("try")
		u.block(func() { u.traverseAll(n.Body) })
		u.traverseAll(n.Handlers)
		if len(n.OrElse) > 0 {
			u.fill("else")
			u.block(func() { u.traverseAll(n.OrElse) })
		}
		if len(n.FinalBody) > 0 {
			u.fill("finally")
			u.block(func() { u.traverseAll(n.FinalBody) })
		}
		u.inTryStar = prev
	case "ExceptHandler":
		if u.inTryStar {
			u.fill("except*")
		} else {
			u.fill("except")
		}
		u.traverseAfter(" ", n.Value)
		if n.Name != "" {
			u.write(" as ", n.Name)
		}
		u.block(func() { u.traverseAll(n.Body) })
	case "ClassDef":
		u.maybeNewline()
		for _, d := range n.Decorators {
			u.fill("@")
			u.traverse(d)
		}
		u.fill("class " + n.Name)
		u.delimitIf("(", ")", len(n.Bases) > 0 || len(n.Keywords) > 0, func() {
			u.interleave(", ", append(append([]*Node(nil), n.Bases...), n.Keywords...))
		})
		u.block(func() { u.docstringAndBody(n) })
	case "FunctionDef", "AsyncFunctionDef":
		u.maybeNewline()
		for _, d := range n.Decorators {
			u.fill("@")
			u.traverse(d)
		}
		def := "def "
		if n.Kind == "AsyncFunctionDef" {
			def = "async def "
		}
		u.fill(def + n.Name)
		u.write("(")
		u.arguments(n.Args)
		u.write(")")
		u.traverseAfter(" -> ", n.Returns)
		u.block(func() { u.docstringAndBody(n) })
	case "For", "AsyncFor":
		if n.Kind == "AsyncFor" {
			u.fill("async for ")
		} else {
			u.fill("for ")
		}
		u.setPrec(pTuple, n.Target)
		u.traverse(n.Target)
		u.write(" in ")
		u.traverse(n.Value)
		u.block(func() { u.traverseAll(n.Body) })
		if len(n.OrElse) > 0 {
			u.fill("else")
			u.block(func() { u.traverseAll(n.OrElse) })
		}
	case "If":
		u.fill("if ")
		u.traverse(n.Test)
		u.block(func() { u.traverseAll(n.Body) })
		for len(n.OrElse) == 1 && n.OrElse[0].Kind == "If" {
			n = n.OrElse[0]
			u.fill("elif ")
			u.traverse(n.Test)
			u.block(func() { u.traverseAll(n.Body) })
		}
		if len(n.OrElse) > 0 {
			u.fill("else")
			u.block(func() { u.traverseAll(n.OrElse) })
		}
	case "While":
		u.fill("while ")
		u.traverse(n.Test)
		u.block(func() { u.traverseAll(n.Body) })
		if len(n.OrElse) > 0 {
			u.fill("else")
			u.block(func() { u.traverseAll(n.OrElse) })
		}
	case "With", "AsyncWith":
		if n.Kind == "AsyncWith" {
			u.fill("async with ")
		} else {
			u.fill("with ")
		}
		u.interleave(", ", n.Items)
		u.block(func() { u.traverseAll(n.Body) })
	case "withitem":
		u.traverse(n.Value)
		u.traverseAfter(" as ", n.Target)
	case "JoinedStr":
		u.joinedStr(n)
	case "FormattedValue":
		u.formattedValue(n)
	case "Name":
		u.write(n.Name)
	case "Constant":
		u.constant(n)
	case "List":
		u.write("[")
		u.interleave(", ", n.Elts)
		u.write("]")
	case "ListComp", "GeneratorExp", "SetComp":
		o, c := map[string]string{"ListComp": "[", "GeneratorExp": "(", "SetComp": "{"}[n.Kind], map[string]string{"ListComp": "]", "GeneratorExp": ")", "SetComp": "}"}[n.Kind]
		u.write(o)
		u.traverse(n.Value)
		u.traverseAll(n.Generators)
		u.write(c)
	case "DictComp":
		u.write("{")
		u.traverse(n.Left)
		u.write(": ")
		u.traverse(n.Value)
		u.traverseAll(n.Generators)
		u.write("}")
	case "comprehension":
		if n.Async {
			u.write(" async for ")
		} else {
			u.write(" for ")
		}
		u.setPrec(pTuple, n.Target)
		u.traverse(n.Target)
		u.write(" in ")
		u.setPrec(nextPrec(pTest), n.Value)
		u.setPrec(nextPrec(pTest), n.Ifs...)
		u.traverse(n.Value)
		for _, c := range n.Ifs {
			u.write(" if ")
			u.traverse(c)
		}
	case "IfExp":
		u.requireParens(pTest, n, func() {
			u.setPrec(nextPrec(pTest), n.Body1, n.Test)
			u.traverse(n.Body1)
			u.write(" if ")
			u.traverse(n.Test)
			u.write(" else ")
			u.setPrec(pTest, n.OrElse1)
			u.traverse(n.OrElse1)
		})
	case "Set":
		if len(n.Elts) > 0 {
			u.write("{")
			u.interleave(", ", n.Elts)
			u.write("}")
		} else {
			u.write("{*()}")
		}
	case "Dict":
		u.write("{")
		for i := range n.Keys {
			if i > 0 {
				u.write(", ")
			}
			if n.Keys[i] == nil {
				u.write("**")
				u.setPrec(pExpr, n.Values[i])
				u.traverse(n.Values[i])
			} else {
				u.traverse(n.Keys[i])
				u.write(": ")
				u.traverse(n.Values[i])
			}
		}
		u.write("}")
	case "Tuple":
		u.delimitIf("(", ")", len(n.Elts) == 0 || u.getPrec(n) > pTuple, func() { u.itemsView(n.Elts) })
	case "UnaryOp":
		op := n.Op
		p := pFactor
		if op == "not" {
			p = pNot
		}
		u.requireParens(p, n, func() {
			u.write(op)
			if p != pFactor {
				u.write(" ")
			}
			u.setPrec(p, n.Value)
			u.traverse(n.Value)
		})
	case "BinOp":
		p := binopPrec[n.Op]
		u.requireParens(p, n, func() {
			lp, rp := p, nextPrec(p)
			if n.Op == "**" {
				lp, rp = nextPrec(p), p
			}
			u.setPrec(lp, n.Left)
			u.traverse(n.Left)
			u.write(" " + n.Op + " ")
			u.setPrec(rp, n.Right)
			u.traverse(n.Right)
		})
	case "Compare":
		u.requireParens(pCmp, n, func() {
			u.setPrec(nextPrec(pCmp), n.Left)
			u.setPrec(nextPrec(pCmp), n.Comparators...)
			u.traverse(n.Left)
			for i, o := range n.Ops {
				u.write(" " + o + " ")
				u.traverse(n.Comparators[i])
			}
		})
	case "BoolOp":
		p := pAnd
		if n.Op == "or" {
			p = pOr
		}
		u.requireParens(p, n, func() {
			for i, v := range n.Values {
				if i > 0 {
					u.write(" " + n.Op + " ")
				}
				p = nextPrec(p)
				u.setPrec(p, v)
				u.traverse(v)
			}
		})
	case "Attribute":
		u.setPrec(pAtom, n.Value)
		u.traverse(n.Value)
		if n.Value.Kind == "Constant" && (n.Value.Const.Kind == CInt || n.Value.Const.Kind == CTrue || n.Value.Const.Kind == CFalse) { // bool is an int
			u.write(" ")
		}
		u.write(".", n.Name)
	case "Call":
		u.setPrec(pAtom, n.Value)
		u.traverse(n.Value)
		u.write("(")
		u.interleave(", ", append(append([]*Node(nil), n.Elts...), n.Keywords...))
		u.write(")")
	case "Subscript":
		u.setPrec(pAtom, n.Value)
		u.traverse(n.Value)
		u.write("[")
		if n.Target.Kind == "Tuple" && len(n.Target.Elts) > 0 {
			u.itemsView(n.Target.Elts)
		} else {
			u.traverse(n.Target)
		}
		u.write("]")
	case "Starred":
		u.write("*")
		u.setPrec(pExpr, n.Value)
		u.traverse(n.Value)
	case "Slice":
		if n.Lower != nil {
			u.traverse(n.Lower)
		}
		u.write(":")
		if n.Upper != nil {
			u.traverse(n.Upper)
		}
		u.traverseAfter(":", n.Step)
	case "arg":
		u.write(n.Name)
		u.traverseAfter(": ", n.Annotation)
	case "keyword":
		if n.Name == "" {
			u.write("**")
		} else {
			u.write(n.Name, "=")
		}
		u.traverse(n.Value)
	case "Lambda":
		u.requireParens(pTest, n, func() {
			u.write("lambda")
			sub := &unparser{prec: u.prec, avoidBackslashes: u.avoidBackslashes}
			sub.arguments(n.Args)
			if sub.out.Len() > 0 {
				u.write(" ", sub.out.String())
			}
			u.write(": ")
			u.setPrec(pTest, n.Body1)
			u.traverse(n.Body1)
		})
	default:
		if !u.matchNode(n) {
			u.fail("cannot unparse " + n.Kind)
		}
	}
}

func (u *unparser) itemsView(items []*Node) {
	if len(items) == 1 {
		u.traverse(items[0])
		u.write(",")
		return
	}
	u.interleave(", ", items)
}

func (u *unparser) arguments(a *Arguments) {
	first := true
	sep := func() {
		if first {
			first = false
		} else {
			u.write(", ")
		}
	}
	all := append(append([]*Node(nil), a.PosOnly...), a.Args...)
	nd := len(all) - len(a.Defaults)
	for i, arg := range all {
		sep()
		u.traverse(arg)
		if i >= nd {
			u.write("=")
			u.traverse(a.Defaults[i-nd])
		}
		if i+1 == len(a.PosOnly) {
			u.write(", /")
		}
	}
	if a.Vararg != nil || len(a.KwOnly) > 0 {
		sep()
		u.write("*")
		if a.Vararg != nil {
			u.write(a.Vararg.Name)
			if a.Vararg.Annotation != nil {
				u.write(": ")
				u.traverse(a.Vararg.Annotation)
			}
		}
	}
	for i, k := range a.KwOnly {
		u.write(", ")
		u.traverse(k)
		if a.KwDefaults[i] != nil {
			u.write("=")
			u.traverse(a.KwDefaults[i])
		}
	}
	if a.Kwarg != nil {
		sep()
		u.write("**" + a.Kwarg.Name)
		if a.Kwarg.Annotation != nil {
			u.write(": ")
			u.traverse(a.Kwarg.Annotation)
		}
	}
}

func (u *unparser) constant(n *Node) {
	c := n.Const
	switch c.Kind {
	case CEllipsis:
		u.write("...")
		return
	case CNone:
		u.write("None")
	case CTrue:
		u.write("True")
	case CFalse:
		u.write("False")
	case CInt:
		u.write(c.Num)
	case CFloat, CComplex:
		s := strings.ReplaceAll(c.Num, "inf", infStr)
		s = strings.ReplaceAll(s, "nan", "("+infStr+"-"+infStr+")")
		u.write(s)
	case CBytes:
		u.write(bytesRepr(c.Str))
	case CStr:
		if c.U {
			u.write("u")
		}
		if u.avoidBackslashes {
			u.writeStrAvoidingBackslashes(c.Str, allQuotes)
		} else {
			u.write(pyRepr(c.Str))
		}
	}
}

func (u *unparser) joinedStr(n *Node) {
	u.write("f")
	if u.avoidBackslashes {
		sub := &unparser{prec: u.prec, avoidBackslashes: u.avoidBackslashes}
		sub.fstringInner(n)
		u.writeStrAvoidingBackslashes(sub.out.String(), allQuotes)
		return
	}
	quoteTypes := allQuotes
	var parts []string
	for _, v := range n.Values {
		sub := &unparser{prec: u.prec, avoidBackslashes: u.avoidBackslashes}
		sub.fstringInner(v)
		var s string
		s, quoteTypes = strLiteralHelper(sub.out.String(), quoteTypes, v.Kind == "Constant")
		parts = append(parts, s)
	}
	q := quoteTypes[0]
	u.write(q, strings.Join(parts, ""), q)
}

func (u *unparser) fstringInner(n *Node) {
	switch {
	case n.Kind == "JoinedStr":
		for _, v := range n.Values {
			u.fstringInner(v)
		}
	case n.Kind == "Constant" && n.Const.Kind == CStr:
		u.write(strings.ReplaceAll(strings.ReplaceAll(n.Const.Str, "{", "{{"), "}", "}}"))
	case n.Kind == "FormattedValue":
		u.formattedValue(n)
	default:
		u.fail("unexpected node inside JoinedStr")
	}
}

func (u *unparser) formattedValue(n *Node) {
	u.write("{")
	inner := &unparser{prec: map[*Node]int{}, avoidBackslashes: true}
	inner.setPrec(nextPrec(pTest), n.Value)
	inner.traverse(n.Value)
	expr := inner.out.String()
	if strings.Contains(expr, "\\") {
		u.fail("Unable to avoid backslash in f-string expression part")
	}
	if strings.HasPrefix(expr, "{") {
		u.write(" ")
	}
	u.write(expr)
	if n.Conversion != -1 {
		u.write("!" + string(rune(n.Conversion)))
	}
	if n.FormatSpec != nil {
		u.write(":")
		u.fstringInner(n.FormatSpec)
	}
	u.write("}")
}
