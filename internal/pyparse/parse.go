package pyparse

import (
	"fmt"

	"golang.org/x/text/unicode/norm"
)

var keywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true, "async": true,
	"await": true, "break": true, "class": true, "continue": true, "def": true, "del": true, "elif": true,
	"else": true, "except": true, "finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true, "not": true, "or": true,
	"pass": true, "raise": true, "return": true, "try": true, "while": true, "with": true, "yield": true,
}

type parser struct {
	toks []Token
	p    int
}

// Check reports whether src is a Python 3.11 module that ast.parse
// accepts, and the first syntax error if not.
func Check(src string) error {
	_, err := Parse(src)
	return err
}

// Parse is ast.parse: the Module of src, or the first syntax error.
func Parse(src string) (mod *Node, err error) {
	toks, err := Tokenize(src, false)
	if err != nil {
		return nil, err
	}
	for i := range toks {
		// Identifiers are NFKC-normalized, as CPython's parser does.
		if t := &toks[i]; t.Kind == NAME && !isASCII(t.Text) {
			t.Text = norm.NFKC.String(t.Text)
		}
	}
	ps := &parser{toks: toks}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*Error)
			if !ok {
				panic(r)
			}
			err = e
			mod = nil
		}
	}()
	mod = &Node{T: "Module"}
	for !ps.at(ENDMARKER, "") {
		mod.Body = append(mod.Body, ps.statement()...)
	}
	return mod, nil
}

func (ps *parser) tok() *Token { return &ps.toks[ps.p] }

func (ps *parser) fail(f string, a ...any) {
	panic(&Error{ps.tok().Start, fmt.Sprintf(f, a...)})
}

func (ps *parser) at(k Kind, text string) bool {
	t := ps.tok()
	return t.Kind == k && (text == "" || t.Text == text)
}

func (ps *parser) op(text string) bool { return ps.at(OP, text) }
func (ps *parser) kw(text string) bool { return ps.at(NAME, text) }
func (ps *parser) next() *Token        { t := ps.tok(); ps.p++; return t }
func (ps *parser) accept(text string) bool {
	return ps.acceptKind(OP, text) || ps.acceptKind(NAME, text)
}

func (ps *parser) acceptKind(k Kind, text string) bool {
	if ps.at(k, text) {
		ps.p++
		return true
	}
	return false
}

func (ps *parser) expect(text string) {
	if !ps.accept(text) {
		ps.fail("invalid syntax: expected %q", text)
	}
}

func (ps *parser) name() string {
	t := ps.tok()
	if t.Kind != NAME || keywords[t.Text] {
		ps.fail("invalid syntax: expected a name")
	}
	ps.p++
	return t.Text
}

func (ps *parser) isName() bool {
	t := ps.tok()
	return t.Kind == NAME && !keywords[t.Text]
}

// try runs f and reports whether it parsed; on failure the position is
// restored (the PEG parser's backtracking, for soft keywords).
func (ps *parser) try(f func()) (ok bool) {
	save := ps.p
	defer func() {
		if r := recover(); r != nil {
			if _, isErr := r.(*Error); !isErr {
				panic(r)
			}
			ps.p = save
			ok = false
		}
	}()
	f()
	return true
}

func (ps *parser) statement() []*Node {
	t := ps.tok()
	if t.Kind == NAME {
		switch t.Text {
		case "if":
			return []*Node{ps.ifStmt()}
		case "while":
			ps.next()
			n := &Node{T: "While", A: ps.namedExpr()}
			n.Body = ps.block()
			if ps.accept("else") {
				n.Else = ps.block()
			}
			return []*Node{n}
		case "for":
			return []*Node{ps.forStmt("For")}
		case "try":
			return []*Node{ps.tryStmt()}
		case "with":
			return []*Node{ps.withStmt("With")}
		case "def":
			return []*Node{ps.funcDef("FunctionDef", nil)}
		case "class":
			return []*Node{ps.classDef(nil)}
		case "async":
			ps.next()
			switch {
			case ps.kw("def"):
				return []*Node{ps.funcDef("AsyncFunctionDef", nil)}
			case ps.kw("for"):
				return []*Node{ps.forStmt("AsyncFor")}
			case ps.kw("with"):
				return []*Node{ps.withStmt("AsyncWith")}
			}
			ps.fail("invalid syntax")
		case "match":
			var m *Node
			if ps.try(func() { m = ps.matchStmt() }) {
				return []*Node{m}
			}
		}
	}
	if ps.op("@") {
		var decos []*Node
		for ps.accept("@") {
			decos = append(decos, ps.namedExpr())
			ps.expectNewline()
		}
		switch {
		case ps.kw("def"):
			return []*Node{ps.funcDef("FunctionDef", decos)}
		case ps.kw("class"):
			return []*Node{ps.classDef(decos)}
		case ps.accept("async"):
			if !ps.kw("def") {
				ps.fail("invalid syntax")
			}
			return []*Node{ps.funcDef("AsyncFunctionDef", decos)}
		}
		ps.fail("invalid syntax")
	}
	return ps.simpleStmts()
}

func (ps *parser) expectNewline() {
	if !ps.acceptKind(NEWLINE, "") {
		ps.fail("invalid syntax")
	}
}

func (ps *parser) simpleStmts() []*Node {
	var out []*Node
	for {
		out = append(out, ps.simpleStmt())
		if !ps.accept(";") || ps.at(NEWLINE, "") {
			break
		}
	}
	ps.expectNewline()
	return out
}

// block is ':' and a suite.
func (ps *parser) block() []*Node {
	ps.expect(":")
	if ps.acceptKind(NEWLINE, "") {
		if !ps.acceptKind(INDENT, "") {
			ps.fail("expected an indented block")
		}
		var out []*Node
		for !ps.acceptKind(DEDENT, "") {
			out = append(out, ps.statement()...)
		}
		return out
	}
	return ps.simpleStmts()
}

func (ps *parser) ifStmt() *Node {
	ps.next() // if or elif
	n := &Node{T: "If", A: ps.namedExpr()}
	n.Body = ps.block()
	if ps.kw("elif") {
		n.Else = []*Node{ps.ifStmt()}
	} else if ps.accept("else") {
		n.Else = ps.block()
	}
	return n
}

func (ps *parser) forStmt(t string) *Node {
	ps.expect("for")
	n := &Node{T: t, A: ps.targetList()}
	ps.expect("in")
	n.B = ps.starExpressions()
	n.Body = ps.block()
	if ps.accept("else") {
		n.Else = ps.block()
	}
	return n
}

func (ps *parser) tryStmt() *Node {
	ps.next()
	n := &Node{T: "Try"}
	n.Body = ps.block()
	if ps.accept("finally") {
		n.Final = ps.block()
		return n
	}
	if !ps.kw("except") {
		ps.fail("expected 'except' or 'finally' block")
	}
	star := -1
	for ps.accept("except") {
		s := 0
		if ps.accept("*") {
			s = 1
			n.T = "TryStar"
		}
		if star >= 0 && s != star {
			ps.fail("cannot have both 'except' and 'except*' on the same 'try'")
		}
		star = s
		h := &Node{T: "ExceptHandler"}
		if !ps.op(":") {
			h.A = ps.expression()
			if ps.op(",") {
				ps.fail("multiple exception types must be parenthesized")
			}
			if ps.accept("as") {
				h.Op = ps.name()
			}
		} else if s == 1 {
			ps.fail("expected one or more exception types")
		}
		h.Body = ps.block()
		n.Handlers = append(n.Handlers, h)
	}
	if ps.accept("else") {
		n.Else = ps.block()
	}
	if ps.accept("finally") {
		n.Final = ps.block()
	}
	return n
}

func (ps *parser) withStmt(t string) *Node {
	ps.expect("with")
	n := &Node{T: t}
	if ps.op("(") && ps.try(func() {
		n.L = nil
		ps.next()
		for {
			n.L = append(n.L, ps.withItem())
			if !ps.accept(",") || ps.op(")") {
				break
			}
		}
		ps.expect(")")
		if !ps.op(":") {
			ps.fail("invalid syntax")
		}
	}) {
		n.Body = ps.block()
		return n
	}
	n.L = nil
	for {
		n.L = append(n.L, ps.withItem())
		if !ps.accept(",") {
			break
		}
	}
	n.Body = ps.block()
	return n
}

func (ps *parser) withItem() *Node {
	w := &Node{T: "withitem", A: ps.expression()}
	if ps.accept("as") {
		w.B = ps.starTarget()
		ps.checkTarget(w.B, "assign to")
	}
	return w
}

func (ps *parser) funcDef(t string, decos []*Node) *Node {
	ps.expect("def")
	n := &Node{T: t, Op: ps.name(), L3: decos}
	ps.expect("(")
	n.A = ps.params(")", true)
	ps.expect(")")
	if ps.accept("->") {
		n.B = ps.expression()
	}
	n.Body = ps.block()
	return n
}

// params reads a parameter list up to (not including) end, as an
// arguments node: L posonlyargs+args (N of them positional-only), L2
// their defaults (the last ones), A vararg, L3 kwonlyargs with Else their
// kw_defaults (nil where none), B kwarg.
func (ps *parser) params(end string, annotations bool) *Node {
	args := &Node{T: "arguments"}
	param := func() *Node {
		a := &Node{T: "arg", Op: ps.name()}
		if annotations && ps.accept(":") {
			a.A = ps.expression()
		}
		return a
	}
	seenDefault, seenStar, seenSlash := false, false, false
	for !ps.op(end) {
		switch {
		case ps.accept("/"):
			if seenSlash || seenStar {
				ps.fail("/ must be ahead of *")
			}
			if len(args.L) == 0 {
				ps.fail("at least one argument must precede /")
			}
			seenSlash = true
			args.N = len(args.L)
		case ps.accept("**"):
			args.B = param()
			ps.accept(",")
			if !ps.op(end) {
				ps.fail("arguments cannot follow var-keyword argument")
			}
			return args
		case ps.accept("*"):
			if seenStar {
				ps.fail("* argument may appear only once")
			}
			seenStar = true
			if !ps.op(",") {
				if ps.op(end) {
					ps.fail("named arguments must follow bare *")
				}
				a := &Node{T: "arg", Op: ps.name()}
				if annotations && ps.accept(":") {
					if ps.accept("*") {
						a.A = starred(ps.bitwiseOr())
					} else {
						a.A = ps.expression()
					}
				}
				args.A = a
			} else if ps.toks[ps.p+1].Text == end || ps.toks[ps.p+1].Text == "**" {
				ps.fail("named arguments must follow bare *")
			}
		default:
			a := param()
			var def *Node
			if ps.accept("=") {
				def = ps.expression()
				if !seenStar {
					seenDefault = true
				}
			} else if seenDefault && !seenStar {
				ps.fail("non-default argument follows default argument")
			}
			if seenStar {
				args.L3 = append(args.L3, a)
				args.Else = append(args.Else, def)
			} else {
				args.L = append(args.L, a)
				if def != nil {
					args.L2 = append(args.L2, def)
				}
			}
		}
		if !ps.accept(",") {
			break
		}
	}
	return args
}

func (ps *parser) classDef(decos []*Node) *Node {
	ps.expect("class")
	n := &Node{T: "ClassDef", Op: ps.name(), L3: decos}
	if ps.accept("(") {
		ps.callArgs(n, false)
	}
	n.Body = ps.block()
	return n
}

func (ps *parser) simpleStmt() *Node {
	t := ps.tok()
	if t.Kind == NAME {
		switch t.Text {
		case "pass":
			ps.next()
			return nd("Pass")
		case "break":
			ps.next()
			return nd("Break")
		case "continue":
			ps.next()
			return nd("Continue")
		case "return":
			ps.next()
			n := nd("Return")
			if !ps.endOfSimple() {
				n.A = ps.starExpressions()
			}
			return n
		case "raise":
			ps.next()
			n := nd("Raise")
			if !ps.endOfSimple() {
				n.A = ps.expression()
				if ps.accept("from") {
					n.B = ps.expression()
				}
			}
			return n
		case "global", "nonlocal":
			ps.next()
			n := nd("Global")
			if t.Text == "nonlocal" {
				n.T = "Nonlocal"
			}
			for {
				n.Names = append(n.Names, ps.name())
				if !ps.accept(",") {
					break
				}
			}
			return n
		case "del":
			ps.next()
			n := nd("Delete")
			for {
				e := ps.delTarget()
				ps.checkTarget(e, "delete")
				n.L = append(n.L, e)
				if !ps.accept(",") || ps.endOfSimple() {
					break
				}
			}
			if !ps.endOfSimple() {
				ps.fail("invalid syntax")
			}
			return n
		case "assert":
			ps.next()
			n := &Node{T: "Assert", A: ps.expression()}
			if ps.accept(",") {
				n.B = ps.expression()
			}
			return n
		case "import":
			ps.next()
			n := nd("Import")
			for {
				a := &Node{T: "alias", Op: ps.dottedName()}
				if ps.accept("as") {
					a.As = ps.name()
				}
				n.L = append(n.L, a)
				if !ps.accept(",") {
					break
				}
			}
			return n
		case "from":
			ps.next()
			n := nd("ImportFrom")
			for ps.op(".") || ps.op("...") {
				n.N += len(ps.next().Text)
			}
			if n.N == 0 || !ps.kw("import") {
				n.Op = ps.dottedName()
			}
			ps.expect("import")
			if ps.accept("*") {
				n.L = []*Node{{T: "alias", Op: "*"}}
				return n
			}
			par := ps.accept("(")
			for {
				a := &Node{T: "alias", Op: ps.name()}
				if ps.accept("as") {
					a.As = ps.name()
				}
				n.L = append(n.L, a)
				if !ps.accept(",") {
					break
				}
				if par && ps.op(")") {
					break
				}
				if !par && ps.endOfSimple() {
					ps.fail("trailing comma not allowed without surrounding parentheses")
				}
			}
			if par {
				ps.expect(")")
			}
			return n
		}
	}
	// expression, assignment, annotated or augmented assignment
	var lhs *Node
	if ps.kw("yield") {
		lhs = ps.yieldExpr()
	} else {
		lhs = ps.starExpressions()
	}
	switch {
	case ps.op(":"):
		if lhs.T == "Tuple" && !lhs.par {
			ps.fail("only single target (not tuple) can be annotated")
		}
		if lhs.T == "List" || lhs.T == "Tuple" {
			ps.fail("only single target (not %s) can be annotated", map[string]string{"List": "list", "Tuple": "tuple"}[lhs.T])
		}
		if lhs.T != "Name" && lhs.T != "Attribute" && lhs.T != "Subscript" {
			ps.fail("illegal target for annotation")
		}
		ps.next()
		n := &Node{T: "AnnAssign", A: lhs, B: ps.expression()}
		if lhs.T == "Name" && !lhs.par {
			n.N = 1
		}
		if ps.accept("=") {
			n.C = ps.assignValue()
		}
		return n
	case ps.tok().Kind == OP && augOps[ps.tok().Text]:
		if lhs.T != "Name" && lhs.T != "Attribute" && lhs.T != "Subscript" {
			ps.fail("illegal expression for augmented assignment")
		}
		op := ps.next().Text
		return &Node{T: "AugAssign", A: lhs, Op: op[:len(op)-1], B: ps.assignValue()}
	case ps.op("="):
		n := nd("Assign")
		for ps.accept("=") {
			ps.checkTarget(lhs, "assign to")
			n.L = append(n.L, lhs)
			lhs = ps.assignValue()
		}
		n.A = lhs
		return n
	}
	if lhs.T == "Starred" {
		ps.fail("can't use starred expression here")
	}
	return &Node{T: "Expr", A: lhs}
}

var augOps = map[string]bool{"+=": true, "-=": true, "*=": true, "@=": true, "/=": true, "%=": true, "&=": true, "|=": true, "^=": true, "<<=": true, ">>=": true, "**=": true, "//=": true}

func (ps *parser) assignValue() *Node {
	if ps.kw("yield") {
		return ps.yieldExpr()
	}
	return ps.starExpressions()
}

func (ps *parser) endOfSimple() bool {
	return ps.at(NEWLINE, "") || ps.op(";") || ps.at(ENDMARKER, "")
}

func (ps *parser) dottedName() string {
	s := ps.name()
	for ps.accept(".") {
		s += "." + ps.name()
	}
	return s
}

// checkTarget fails unless e can be assigned to (or deleted).
func (ps *parser) checkTarget(e *Node, what string) {
	switch e.T {
	case "Name", "Attribute", "Subscript":
		return
	case "Starred":
		if what == "delete" {
			ps.fail("cannot delete starred")
		}
		ps.checkTarget(e.A, what)
		return
	case "Tuple", "List":
		for _, x := range e.L {
			ps.checkTarget(x, what)
		}
		return
	case "Call":
		ps.fail("cannot %s function call", what)
	case "Yield", "YieldFrom":
		ps.fail("cannot %s yield expression", what)
	}
	ps.fail("cannot %s expression", what)
}

func (ps *parser) delTarget() *Node { return ps.bitwiseOr() }

func (ps *parser) starTarget() *Node {
	if ps.accept("*") {
		return starred(ps.bitwiseOr())
	}
	return ps.bitwiseOr()
}

// targetList is a for statement's or comprehension's targets.
func (ps *parser) targetList() *Node {
	first := ps.starTarget()
	if !ps.op(",") {
		ps.checkTarget(first, "assign to")
		return first
	}
	t := tuple([]*Node{first})
	for ps.accept(",") {
		if ps.kw("in") || ps.op("=") {
			break
		}
		t.L = append(t.L, ps.starTarget())
	}
	ps.checkTarget(t, "assign to")
	return t
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}
