package pyparse

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Unparse is CPython 3.11's ast.unparse: source text for a tree, with its
// rules for parentheses (by precedence), string quoting (repr, and the
// f-string and docstring quote choices), blank lines before definitions
// and 4-space indentation. It fails where ast.unparse raises (a backslash
// needed inside an f-string expression).
func Unparse(n *Node) (s string, err error) {
	u := &unparser{prec: map[*Node]int{}}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(unparseError)
			if !ok {
				panic(r)
			}
			s, err = "", e
		}
	}()
	u.traverse(n)
	return u.sb.String(), nil
}

type unparseError string

func (e unparseError) Error() string { return string(e) }

// Operator precedences, as _Precedence in Lib/ast.py.
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

func nextPrec(p int) int { return min(p+1, pAtom) }

var binopPrec = map[string]int{"+": pArith, "-": pArith, "*": pTerm, "@": pTerm, "/": pTerm, "%": pTerm, "//": pTerm,
	"<<": pShift, ">>": pShift, "|": pBOr, "^": pBXor, "&": pBAnd, "**": pPower}

type unparser struct {
	sb               strings.Builder
	indent           int
	prec             map[*Node]int
	avoidBackslashes bool
}

func (u *unparser) write(s ...string) {
	for _, x := range s {
		u.sb.WriteString(x)
	}
}

func (u *unparser) maybeNewline() {
	if u.sb.Len() > 0 {
		u.write("\n")
	}
}

func (u *unparser) fill(text string) {
	u.maybeNewline()
	u.write(strings.Repeat("    ", u.indent), text)
}

func (u *unparser) block(f func()) {
	u.write(":")
	u.indent++
	f()
	u.indent--
}

func (u *unparser) setPrec(p int, ns ...*Node) {
	for _, n := range ns {
		if n != nil {
			u.prec[n] = p
		}
	}
}

func (u *unparser) getPrec(n *Node) int {
	if p, ok := u.prec[n]; ok {
		return p
	}
	return pTest
}

func (u *unparser) delimIf(open, close string, cond bool, f func()) {
	if cond {
		u.write(open)
	}
	f()
	if cond {
		u.write(close)
	}
}

func (u *unparser) requireParens(p int, n *Node, f func()) {
	u.delimIf("(", ")", u.getPrec(n) > p, f)
}

func (u *unparser) traverseList(ns []*Node) {
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

// itemsView writes a tuple's items: a lone item gets a trailing comma.
func (u *unparser) itemsView(ns []*Node) {
	if len(ns) == 1 {
		u.traverse(ns[0])
		u.write(",")
		return
	}
	u.interleave(", ", ns)
}

func docstring(n *Node) *Node {
	if len(n.Body) == 0 {
		return nil
	}
	b := n.Body[0]
	if b.T == "Expr" && b.A.T == "Constant" && b.A.Const.Kind == "str" {
		return b.A
	}
	return nil
}

func (u *unparser) docstringAndBody(n *Node) {
	if d := docstring(n); d != nil {
		u.fill("")
		if d.Const.U {
			u.write("u")
		}
		u.writeStrAvoidingBackslashes(d.Const.S, multiQuotes)
		u.traverseList(n.Body[1:])
		return
	}
	u.traverseList(n.Body)
}

func (u *unparser) traverse(n *Node) {
	switch n.T {
	case "Module":
		u.docstringAndBody(n)
	case "Expr":
		u.fill("")
		u.setPrec(pYield, n.A)
		u.traverse(n.A)
	case "NamedExpr":
		u.requireParens(pNamedExpr, n, func() {
			u.setPrec(pAtom, n.A, n.B)
			u.traverse(n.A)
			u.write(" := ")
			u.traverse(n.B)
		})
	case "Import":
		u.fill("import ")
		u.interleave(", ", n.L)
	case "ImportFrom":
		u.fill("from ")
		u.write(strings.Repeat(".", n.N), n.Op, " import ")
		u.interleave(", ", n.L)
	case "alias":
		u.write(n.Op)
		if n.As != "" {
			u.write(" as ", n.As)
		}
	case "Assign":
		u.fill("")
		for _, t := range n.L {
			u.setPrec(pTuple, t)
			u.traverse(t)
			u.write(" = ")
		}
		u.traverse(n.A)
	case "AugAssign":
		u.fill("")
		u.traverse(n.A)
		u.write(" ", n.Op, "= ")
		u.traverse(n.B)
	case "AnnAssign":
		u.fill("")
		u.delimIf("(", ")", n.N == 0 && n.A.T == "Name", func() { u.traverse(n.A) })
		u.write(": ")
		u.traverse(n.B)
		if n.C != nil {
			u.write(" = ")
			u.traverse(n.C)
		}
	case "Return":
		u.fill("return")
		if n.A != nil {
			u.write(" ")
			u.traverse(n.A)
		}
	case "Pass":
		u.fill("pass")
	case "Break":
		u.fill("break")
	case "Continue":
		u.fill("continue")
	case "Delete":
		u.fill("del ")
		u.interleave(", ", n.L)
	case "Assert":
		u.fill("assert ")
		u.traverse(n.A)
		if n.B != nil {
			u.write(", ")
			u.traverse(n.B)
		}
	case "Global", "Nonlocal":
		u.fill(strings.ToLower(n.T) + " ")
		u.write(strings.Join(n.Names, ", "))
	case "Await":
		u.requireParens(pAwait, n, func() {
			u.write("await")
			if n.A != nil {
				u.write(" ")
				u.setPrec(pAtom, n.A)
				u.traverse(n.A)
			}
		})
	case "Yield", "YieldFrom":
		u.requireParens(pYield, n, func() {
			if n.T == "Yield" {
				u.write("yield")
			} else {
				u.write("yield from")
			}
			if n.A != nil {
				u.write(" ")
				u.setPrec(pAtom, n.A)
				u.traverse(n.A)
			}
		})
	case "Raise":
		u.fill("raise")
		if n.A == nil {
			return
		}
		u.write(" ")
		u.traverse(n.A)
		if n.B != nil {
			u.write(" from ")
			u.traverse(n.B)
		}
	case "Try", "TryStar":
		u.fill("try")
		u.block(func() { u.traverseList(n.Body) })
		for _, h := range n.Handlers {
			u.fill("except")
			if n.T == "TryStar" {
				u.write("*")
			}
			if h.A != nil {
				u.write(" ")
				u.traverse(h.A)
			}
			if h.Op != "" {
				u.write(" as ", h.Op)
			}
			u.block(func() { u.traverseList(h.Body) })
		}
		if len(n.Else) > 0 {
			u.fill("else")
			u.block(func() { u.traverseList(n.Else) })
		}
		if len(n.Final) > 0 {
			u.fill("finally")
			u.block(func() { u.traverseList(n.Final) })
		}
	case "ClassDef":
		u.maybeNewline()
		for _, d := range n.L3 {
			u.fill("@")
			u.traverse(d)
		}
		u.fill("class " + n.Op)
		u.delimIf("(", ")", len(n.L) > 0 || len(n.L2) > 0, func() {
			u.interleave(", ", append(append([]*Node(nil), n.L...), n.L2...))
		})
		u.block(func() { u.docstringAndBody(n) })
	case "FunctionDef", "AsyncFunctionDef":
		u.maybeNewline()
		for _, d := range n.L3 {
			u.fill("@")
			u.traverse(d)
		}
		kw := "def"
		if n.T == "AsyncFunctionDef" {
			kw = "async def"
		}
		u.fill(kw + " " + n.Op)
		u.write("(")
		u.traverse(n.A)
		u.write(")")
		if n.B != nil {
			u.write(" -> ")
			u.traverse(n.B)
		}
		u.block(func() { u.docstringAndBody(n) })
	case "For", "AsyncFor":
		if n.T == "For" {
			u.fill("for ")
		} else {
			u.fill("async for ")
		}
		u.setPrec(pTuple, n.A)
		u.traverse(n.A)
		u.write(" in ")
		u.traverse(n.B)
		u.block(func() { u.traverseList(n.Body) })
		if len(n.Else) > 0 {
			u.fill("else")
			u.block(func() { u.traverseList(n.Else) })
		}
	case "If":
		u.fill("if ")
		u.traverse(n.A)
		u.block(func() { u.traverseList(n.Body) })
		for len(n.Else) == 1 && n.Else[0].T == "If" {
			n = n.Else[0]
			u.fill("elif ")
			u.traverse(n.A)
			u.block(func() { u.traverseList(n.Body) })
		}
		if len(n.Else) > 0 {
			u.fill("else")
			u.block(func() { u.traverseList(n.Else) })
		}
	case "While":
		u.fill("while ")
		u.traverse(n.A)
		u.block(func() { u.traverseList(n.Body) })
		if len(n.Else) > 0 {
			u.fill("else")
			u.block(func() { u.traverseList(n.Else) })
		}
	case "With", "AsyncWith":
		if n.T == "With" {
			u.fill("with ")
		} else {
			u.fill("async with ")
		}
		u.interleave(", ", n.L)
		u.block(func() { u.traverseList(n.Body) })
	case "withitem":
		u.traverse(n.A)
		if n.B != nil {
			u.write(" as ")
			u.traverse(n.B)
		}
	case "JoinedStr":
		u.joinedStr(n)
	case "FormattedValue":
		u.formattedValue(n)
	case "Name":
		u.write(n.Op)
	case "Constant":
		u.constant(n.Const)
	case "List":
		u.write("[")
		u.interleave(", ", n.L)
		u.write("]")
	case "ListComp", "GeneratorExp", "SetComp":
		open, close := map[string][2]string{"ListComp": {"[", "]"}, "GeneratorExp": {"(", ")"}, "SetComp": {"{", "}"}}[n.T][0], map[string]string{"ListComp": "]", "GeneratorExp": ")", "SetComp": "}"}[n.T]
		u.write(open)
		u.traverse(n.A)
		u.traverseList(n.L2)
		u.write(close)
	case "DictComp":
		u.write("{")
		u.traverse(n.A)
		u.write(": ")
		u.traverse(n.B)
		u.traverseList(n.L2)
		u.write("}")
	case "comprehension":
		if n.N == 1 {
			u.write(" async for ")
		} else {
			u.write(" for ")
		}
		u.setPrec(pTuple, n.A)
		u.traverse(n.A)
		u.write(" in ")
		u.setPrec(nextPrec(pTest), n.B)
		u.setPrec(nextPrec(pTest), n.L...)
		u.traverse(n.B)
		for _, c := range n.L {
			u.write(" if ")
			u.traverse(c)
		}
	case "IfExp":
		u.requireParens(pTest, n, func() {
			u.setPrec(nextPrec(pTest), n.B, n.A)
			u.traverse(n.B)
			u.write(" if ")
			u.traverse(n.A)
			u.write(" else ")
			u.setPrec(pTest, n.C)
			u.traverse(n.C)
		})
	case "Set":
		if len(n.L) > 0 {
			u.write("{")
			u.interleave(", ", n.L)
			u.write("}")
		} else {
			u.write("{*()}")
		}
	case "Dict":
		u.write("{")
		for i := range n.L {
			if i > 0 {
				u.write(", ")
			}
			if n.L[i] == nil {
				u.write("**")
				u.setPrec(pExpr, n.L2[i])
				u.traverse(n.L2[i])
			} else {
				u.traverse(n.L[i])
				u.write(": ")
				u.traverse(n.L2[i])
			}
		}
		u.write("}")
	case "Tuple":
		u.delimIf("(", ")", len(n.L) == 0 || u.getPrec(n) > pTuple, func() { u.itemsView(n.L) })
	case "UnaryOp":
		p := pFactor
		if n.Op == "not" {
			p = pNot
		}
		u.requireParens(p, n, func() {
			u.write(n.Op)
			if p != pFactor {
				u.write(" ")
			}
			u.setPrec(p, n.A)
			u.traverse(n.A)
		})
	case "BinOp":
		p := binopPrec[n.Op]
		u.requireParens(p, n, func() {
			l, r := p, nextPrec(p)
			if n.Op == "**" {
				l, r = nextPrec(p), p
			}
			u.setPrec(l, n.A)
			u.traverse(n.A)
			u.write(" ", n.Op, " ")
			u.setPrec(r, n.B)
			u.traverse(n.B)
		})
	case "Compare":
		u.requireParens(pCmp, n, func() {
			u.setPrec(nextPrec(pCmp), n.A)
			u.setPrec(nextPrec(pCmp), n.L...)
			u.traverse(n.A)
			for i, o := range n.Names {
				u.write(" ", o, " ")
				u.traverse(n.L[i])
			}
		})
	case "BoolOp":
		p := pAnd
		if n.Op == "or" {
			p = pOr
		}
		u.requireParens(p, n, func() {
			for i, v := range n.L {
				if i > 0 {
					u.write(" ", n.Op, " ")
				}
				p = nextPrec(p)
				u.setPrec(p, v)
				u.traverse(v)
			}
		})
	case "Attribute":
		u.setPrec(pAtom, n.A)
		u.traverse(n.A)
		if n.A.T == "Constant" && (n.A.Const.Kind == "int" || n.A.Const.Kind == "True" || n.A.Const.Kind == "False") {
			u.write(" ")
		}
		u.write(".", n.Op)
	case "Call":
		u.setPrec(pAtom, n.A)
		u.traverse(n.A)
		u.write("(")
		u.interleave(", ", append(append([]*Node(nil), n.L...), n.L2...))
		u.write(")")
	case "Subscript":
		u.setPrec(pAtom, n.A)
		u.traverse(n.A)
		u.write("[")
		if n.B.T == "Tuple" && len(n.B.L) > 0 {
			u.itemsView(n.B.L)
		} else {
			u.traverse(n.B)
		}
		u.write("]")
	case "Starred":
		u.write("*")
		u.setPrec(pExpr, n.A)
		u.traverse(n.A)
	case "Slice":
		if n.A != nil {
			u.traverse(n.A)
		}
		u.write(":")
		if n.B != nil {
			u.traverse(n.B)
		}
		if n.C != nil {
			u.write(":")
			u.traverse(n.C)
		}
	case "arg":
		u.write(n.Op)
		if n.A != nil {
			u.write(": ")
			u.traverse(n.A)
		}
	case "arguments":
		u.arguments(n)
	case "keyword":
		if n.Op == "" {
			u.write("**")
		} else {
			u.write(n.Op, "=")
		}
		u.traverse(n.A)
	case "Lambda":
		u.requireParens(pTest, n, func() {
			u.write("lambda")
			if a := u.buffered(func() { u.traverse(n.A) }); a != "" {
				u.write(" ", a)
			}
			u.write(": ")
			u.setPrec(pTest, n.B)
			u.traverse(n.B)
		})
	case "Match":
		u.fill("match ")
		u.traverse(n.A)
		u.block(func() { u.traverseList(n.L) })
	case "match_case":
		u.fill("case ")
		u.traverse(n.A)
		if n.B != nil {
			u.write(" if ")
			u.traverse(n.B)
		}
		u.block(func() { u.traverseList(n.Body) })
	case "MatchValue":
		u.traverse(n.A)
	case "MatchSingleton":
		u.write(n.Const.Kind)
	case "MatchSequence":
		u.write("[")
		u.interleave(", ", n.L)
		u.write("]")
	case "MatchStar":
		name := n.Op
		if name == "" {
			name = "_"
		}
		u.write("*", name)
	case "MatchMapping":
		u.write("{")
		for i := range n.L {
			if i > 0 {
				u.write(", ")
			}
			u.traverse(n.L[i])
			u.write(": ")
			u.traverse(n.L2[i])
		}
		if n.Op != "" {
			if len(n.L) > 0 {
				u.write(", ")
			}
			u.write("**", n.Op)
		}
		u.write("}")
	case "MatchClass":
		u.setPrec(pAtom, n.A)
		u.traverse(n.A)
		u.write("(")
		first := true
		for _, p := range n.L {
			if !first {
				u.write(", ")
			}
			first = false
			u.traverse(p)
		}
		for i, a := range n.Names {
			if !first {
				u.write(", ")
			}
			first = false
			u.write(a, "=")
			u.traverse(n.L2[i])
		}
		u.write(")")
	case "MatchAs":
		switch {
		case n.Op == "" && n.A == nil:
			u.write("_")
		case n.A == nil:
			u.write(n.Op)
		default:
			u.requireParens(pTest, n, func() {
				u.setPrec(pBOr, n.A)
				u.traverse(n.A)
				u.write(" as ", n.Op)
			})
		}
	case "MatchOr":
		u.requireParens(pBOr, n, func() {
			u.setPrec(nextPrec(pBOr), n.L...)
			u.interleave(" | ", n.L)
		})
	default:
		panic(unparseError("pyparse: cannot unparse " + n.T))
	}
}

func (u *unparser) arguments(n *Node) {
	first := true
	sep := func() {
		if first {
			first = false
		} else {
			u.write(", ")
		}
	}
	nd := len(n.L) - len(n.L2)
	for i, a := range n.L {
		sep()
		u.traverse(a)
		if i >= nd {
			u.write("=")
			u.traverse(n.L2[i-nd])
		}
		if i+1 == n.N {
			u.write(", /")
		}
	}
	if n.A != nil || len(n.L3) > 0 {
		sep()
		u.write("*")
		if n.A != nil {
			u.write(n.A.Op)
			if n.A.A != nil {
				u.write(": ")
				u.traverse(n.A.A)
			}
		}
	}
	for i, a := range n.L3 {
		u.write(", ")
		u.traverse(a)
		if d := n.Else[i]; d != nil {
			u.write("=")
			u.traverse(d)
		}
	}
	if n.B != nil {
		sep()
		u.write("**", n.B.Op)
		if n.B.A != nil {
			u.write(": ")
			u.traverse(n.B.A)
		}
	}
}

func (u *unparser) constant(c *Const) {
	switch c.Kind {
	case "Ellipsis":
		u.write("...")
	case "None", "True", "False":
		u.write(c.Kind)
	case "str":
		if c.U {
			u.write("u")
		}
		if u.avoidBackslashes {
			u.writeStrAvoidingBackslashes(c.S, allQuotes)
		} else {
			u.write(reprStr(c.S))
		}
	case "bytes":
		u.write(reprBytes(c.S))
	case "int":
		u.write(intRepr(c.Num))
	case "float":
		f := parseFloat(c.Num)
		u.write(strings.ReplaceAll(floatRepr(f, true), "inf", "1e309"))
	case "complex":
		f := parseFloat(c.Num[:len(c.Num)-1])
		u.write(strings.ReplaceAll(floatRepr(f, false)+"j", "inf", "1e309"))
	}
}

func parseFloat(s string) float64 {
	f, _ := strconv.ParseFloat(strings.ReplaceAll(s, "_", ""), 64)
	return f
}

func intRepr(lit string) string {
	var z big.Int
	l := strings.ToLower(strings.ReplaceAll(lit, "_", ""))
	base := 10
	switch {
	case strings.HasPrefix(l, "0x"):
		base, l = 16, l[2:]
	case strings.HasPrefix(l, "0o"):
		base, l = 8, l[2:]
	case strings.HasPrefix(l, "0b"):
		base, l = 2, l[2:]
	}
	if _, ok := z.SetString(l, base); !ok {
		return lit
	}
	return z.String()
}

// floatRepr is repr(float) (addDot) or the repr of a complex's part.
func floatRepr(f float64, addDot bool) string {
	if math.IsInf(f, 0) {
		if f < 0 {
			return "-inf"
		}
		return "inf"
	}
	if math.IsNaN(f) {
		return "nan"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64)
	neg := strings.HasPrefix(e, "-")
	e = strings.TrimPrefix(e, "-")
	mant, exps, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(exps)
	digits := strings.Replace(mant, ".", "", 1)
	var out string
	decpt := exp + 1
	if f == 0 {
		decpt = 1
	}
	if decpt > -4 && decpt <= 16 {
		switch {
		case decpt <= 0:
			out = "0." + strings.Repeat("0", -decpt) + digits
		case decpt >= len(digits):
			out = digits + strings.Repeat("0", decpt-len(digits))
			if addDot {
				out += ".0"
			}
		default:
			out = digits[:decpt] + "." + digits[decpt:]
		}
	} else {
		out = digits[:1]
		if len(digits) > 1 {
			out += "." + digits[1:]
		}
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		out += fmt.Sprintf("e%s%02d", sign, exp)
	}
	if neg {
		out = "-" + out
	}
	return out
}

// reprStr is Python's repr of a str.
func reprStr(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var sb strings.Builder
	sb.WriteByte(q)
	for i := 0; i < len(s); {
		r, n := decodeRune(s[i:])
		i += n
		switch {
		case r == rune(q) || r == '\\':
			sb.WriteByte('\\')
			sb.WriteRune(r)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&sb, `\x%02x`, r)
		case r < 0x7f:
			sb.WriteRune(r)
		case r >= 0xD800 && r <= 0xDFFF:
			sb.WriteString(unicodeEscape(r))
		case unicode.IsPrint(r):
			sb.WriteRune(r)
		default:
			sb.WriteString(unicodeEscape(r))
		}
	}
	sb.WriteByte(q)
	return sb.String()
}

func unicodeEscape(r rune) string {
	switch {
	case r <= 0xff:
		return fmt.Sprintf(`\x%02x`, r)
	case r <= 0xffff:
		return fmt.Sprintf(`\u%04x`, r)
	}
	return fmt.Sprintf(`\U%08x`, r)
}

// reprBytes is Python's repr of bytes.
func reprBytes(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var sb strings.Builder
	sb.WriteString("b")
	sb.WriteByte(q)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q || c == '\\':
			sb.WriteByte('\\')
			sb.WriteByte(c)
		case c == '\t':
			sb.WriteString(`\t`)
		case c == '\n':
			sb.WriteString(`\n`)
		case c == '\r':
			sb.WriteString(`\r`)
		case c < 0x20 || c >= 0x7f:
			fmt.Fprintf(&sb, `\x%02x`, c)
		default:
			sb.WriteByte(c)
		}
	}
	sb.WriteByte(q)
	return sb.String()
}

var (
	allQuotes   = []string{"'", "\"", `"""`, `'''`}
	multiQuotes = []string{`"""`, `'''`}
)

// strLiteralHelper is _Unparser._str_literal_helper.
func strLiteralHelper(s string, quotes []string, escapeSpecialWS bool) (string, []string) {
	var sb strings.Builder
	for i := 0; i < len(s); {
		r, n := decodeRune(s[i:])
		i += n
		switch {
		case !escapeSpecialWS && (r == '\n' || r == '\t'):
			sb.WriteRune(r)
		case r == '\\':
			sb.WriteString(`\\`)
		case r == '\t':
			sb.WriteString(`\t`)
		case r == '\n':
			sb.WriteString(`\n`)
		case r == '\r':
			sb.WriteString(`\r`)
		case r == ' ' || (unicode.IsPrint(r) && !(r >= 0xD800 && r <= 0xDFFF)):
			sb.WriteRune(r)
		default:
			sb.WriteString(unicodeEscape(r))
		}
	}
	esc := sb.String()
	possible := quotes
	if strings.Contains(esc, "\n") {
		var p []string
		for _, q := range possible {
			if len(q) == 3 {
				p = append(p, q)
			}
		}
		possible = p
	}
	var p []string
	for _, q := range possible {
		if !strings.Contains(esc, q) {
			p = append(p, q)
		}
	}
	possible = p
	if len(possible) == 0 {
		r := reprStr(s)
		quote := string(r[0])
		for _, q := range quotes {
			if strings.Contains(q, string(r[0])) {
				quote = q
				break
			}
		}
		return r[1 : len(r)-1], []string{quote}
	}
	if esc != "" {
		last, _ := utf8.DecodeLastRuneInString(esc)
		// stable sort: quotes whose character is not the last one first
		var a, b []string
		for _, q := range possible {
			if rune(q[0]) == last {
				b = append(b, q)
			} else {
				a = append(a, q)
			}
		}
		possible = append(a, b...)
		if rune(possible[0][0]) == last {
			esc = esc[:len(esc)-1] + "\\" + esc[len(esc)-1:]
		}
	}
	return esc, possible
}

func (u *unparser) writeStrAvoidingBackslashes(s string, quotes []string) {
	esc, qs := strLiteralHelper(s, quotes, false)
	u.write(qs[0], esc, qs[0])
}

func (u *unparser) fstringInner(n *Node) {
	switch n.T {
	case "JoinedStr":
		for _, v := range n.L {
			u.fstringInner(v)
		}
	case "Constant":
		u.write(strings.ReplaceAll(strings.ReplaceAll(n.Const.S, "{", "{{"), "}", "}}"))
	case "FormattedValue":
		u.formattedValue(n)
	default:
		panic(unparseError("unexpected node inside JoinedStr"))
	}
}

func (u *unparser) buffered(f func()) string {
	save := u.sb
	u.sb = strings.Builder{}
	f()
	out := u.sb.String()
	u.sb = save
	return out
}

func (u *unparser) joinedStr(n *Node) {
	u.write("f")
	if u.avoidBackslashes {
		s := u.buffered(func() { u.fstringInner(n) })
		u.writeStrAvoidingBackslashes(s, allQuotes)
		return
	}
	quotes := allQuotes
	var parts []string
	for _, v := range n.L {
		s := u.buffered(func() { u.fstringInner(v) })
		var p string
		p, quotes = strLiteralHelper(s, quotes, v.T == "Constant")
		parts = append(parts, p)
	}
	u.write(quotes[0], strings.Join(parts, ""), quotes[0])
}

func (u *unparser) formattedValue(n *Node) {
	inner := &unparser{prec: map[*Node]int{}, avoidBackslashes: true}
	inner.setPrec(nextPrec(pTest), n.A)
	inner.traverse(n.A)
	expr := inner.sb.String()
	u.write("{")
	if strings.Contains(expr, "\\") {
		panic(unparseError("Unable to avoid backslash in f-string expression part"))
	}
	if strings.HasPrefix(expr, "{") {
		u.write(" ")
	}
	u.write(expr)
	if n.N != -1 {
		u.write("!", string(rune(n.N)))
	}
	if n.B != nil {
		u.write(":")
		u.fstringInner(n.B)
	}
	u.write("}")
}
