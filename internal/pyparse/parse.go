package pyparse

import "fmt"

var keywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true, "async": true,
	"await": true, "break": true, "class": true, "continue": true, "def": true, "del": true, "elif": true,
	"else": true, "except": true, "finally": true, "for": true, "from": true, "global": true, "if": true,
	"import": true, "in": true, "is": true, "lambda": true, "nonlocal": true, "not": true, "or": true,
	"pass": true, "raise": true, "return": true, "try": true, "while": true, "with": true, "yield": true,
}

// exKind is what an expression is, as far as the checks of assignment and
// deletion targets need to know.
type exKind int

const (
	exOther exKind = iota
	exName
	exAttr
	exSub
	exStarred
	exTuple
	exList
	exCall
	exYield
	exGenexp
)

type ex struct {
	k    exKind
	elts []*ex // tuple and list items, the starred item
	par  bool  // in parentheses
}

type parser struct {
	toks []Token
	p    int
}

// Check reports whether src is a Python 3.11 module that ast.parse
// accepts, and the first syntax error if not.
func Check(src string) (err error) {
	toks, err := Tokenize(src, false)
	if err != nil {
		return err
	}
	ps := &parser{toks: toks}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*Error)
			if !ok {
				panic(r)
			}
			err = e
		}
	}()
	for !ps.at(ENDMARKER, "") {
		ps.statement()
	}
	return nil
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

func (ps *parser) statement() {
	t := ps.tok()
	if t.Kind == NAME {
		switch t.Text {
		case "if":
			ps.ifStmt()
			return
		case "while":
			ps.next()
			ps.namedExpr()
			ps.block()
			if ps.accept("else") {
				ps.block()
			}
			return
		case "for":
			ps.forStmt()
			return
		case "try":
			ps.tryStmt()
			return
		case "with":
			ps.withStmt()
			return
		case "def":
			ps.funcDef()
			return
		case "class":
			ps.classDef()
			return
		case "async":
			ps.next()
			switch {
			case ps.kw("def"):
				ps.funcDef()
			case ps.kw("for"):
				ps.forStmt()
			case ps.kw("with"):
				ps.withStmt()
			default:
				ps.fail("invalid syntax")
			}
			return
		case "match":
			if ps.try(ps.matchStmt) {
				return
			}
		}
	}
	if ps.op("@") {
		for ps.accept("@") {
			ps.namedExpr()
			ps.expectNewline()
		}
		switch {
		case ps.kw("def"):
			ps.funcDef()
		case ps.kw("class"):
			ps.classDef()
		case ps.accept("async"):
			if !ps.kw("def") {
				ps.fail("invalid syntax")
			}
			ps.funcDef()
		default:
			ps.fail("invalid syntax")
		}
		return
	}
	ps.simpleStmts()
}

func (ps *parser) expectNewline() {
	if !ps.acceptKind(NEWLINE, "") {
		ps.fail("invalid syntax")
	}
}

func (ps *parser) simpleStmts() {
	for {
		ps.simpleStmt()
		if !ps.accept(";") || ps.at(NEWLINE, "") {
			break
		}
	}
	ps.expectNewline()
}

// block is ':' and a suite.
func (ps *parser) block() {
	ps.expect(":")
	if ps.acceptKind(NEWLINE, "") {
		if !ps.acceptKind(INDENT, "") {
			ps.fail("expected an indented block")
		}
		for !ps.acceptKind(DEDENT, "") {
			ps.statement()
		}
		return
	}
	ps.simpleStmts()
}

func (ps *parser) ifStmt() {
	ps.next()
	ps.namedExpr()
	ps.block()
	for ps.accept("elif") {
		ps.namedExpr()
		ps.block()
	}
	if ps.accept("else") {
		ps.block()
	}
}

func (ps *parser) forStmt() {
	ps.expect("for")
	ps.targetList()
	ps.expect("in")
	ps.starExpressions()
	ps.block()
	if ps.accept("else") {
		ps.block()
	}
}

func (ps *parser) tryStmt() {
	ps.next()
	ps.block()
	if ps.accept("finally") {
		ps.block()
		return
	}
	if !ps.kw("except") {
		ps.fail("expected 'except' or 'finally' block")
	}
	star := -1
	for ps.accept("except") {
		s := 0
		if ps.accept("*") {
			s = 1
		}
		if star >= 0 && s != star {
			ps.fail("cannot have both 'except' and 'except*' on the same 'try'")
		}
		star = s
		if !ps.op(":") {
			e := ps.expression()
			if ps.op(",") {
				ps.next()
				ps.expressions()
				_ = e
				if !ps.op(":") || true {
					ps.fail("multiple exception types must be parenthesized")
				}
			}
			if ps.accept("as") {
				ps.name()
			}
		} else if s == 1 {
			ps.fail("expected one or more exception types")
		}
		ps.block()
	}
	if ps.accept("else") {
		ps.block()
	}
	if ps.accept("finally") {
		ps.block()
	}
}

func (ps *parser) withStmt() {
	ps.expect("with")
	if ps.op("(") && ps.try(func() {
		ps.next()
		for {
			ps.withItem()
			if !ps.accept(",") || ps.op(")") {
				break
			}
		}
		ps.expect(")")
		if !ps.op(":") {
			ps.fail("invalid syntax")
		}
	}) {
		ps.block()
		return
	}
	for {
		ps.withItem()
		if !ps.accept(",") {
			break
		}
	}
	ps.block()
}

func (ps *parser) withItem() {
	ps.expression()
	if ps.accept("as") {
		e := ps.starTarget()
		ps.checkTarget(e, "assign to")
	}
}

func (ps *parser) funcDef() {
	ps.expect("def")
	ps.name()
	ps.expect("(")
	ps.params(")", true)
	ps.expect(")")
	if ps.accept("->") {
		ps.expression()
	}
	ps.block()
}

// params reads a parameter list up to (not including) end.
func (ps *parser) params(end string, annotations bool) {
	param := func() {
		ps.name()
		if annotations && ps.accept(":") {
			ps.expression()
		}
	}
	seenDefault, seenStar, seenSlash := false, false, false
	for !ps.op(end) {
		switch {
		case ps.accept("/"):
			if seenSlash || seenStar {
				ps.fail("/ must be ahead of *")
			}
			if !seenDefault && ps.p >= 2 && ps.toks[ps.p-2].Text == "(" {
				ps.fail("at least one argument must precede /")
			}
			seenSlash = true
		case ps.accept("**"):
			param()
			ps.accept(",")
			if !ps.op(end) {
				ps.fail("arguments cannot follow var-keyword argument")
			}
			return
		case ps.accept("*"):
			if seenStar {
				ps.fail("* argument may appear only once")
			}
			seenStar = true
			if !ps.op(",") {
				if ps.op(end) {
					ps.fail("named arguments must follow bare *")
				}
				ps.name()
				if annotations && ps.accept(":") {
					if ps.accept("*") {
						ps.bitwiseOr()
					} else {
						ps.expression()
					}
				}
			} else if ps.toks[ps.p+1].Text == end || ps.toks[ps.p+1].Text == "**" {
				ps.fail("named arguments must follow bare *")
			}
		default:
			param()
			if ps.accept("=") {
				ps.expression()
				if !seenStar {
					seenDefault = true
				}
			} else if seenDefault && !seenStar {
				ps.fail("non-default argument follows default argument")
			}
		}
		if !ps.accept(",") {
			break
		}
	}
}

func (ps *parser) classDef() {
	ps.expect("class")
	ps.name()
	if ps.accept("(") {
		ps.callArgs(false)
	}
	ps.block()
}

func (ps *parser) simpleStmt() {
	t := ps.tok()
	if t.Kind == NAME {
		switch t.Text {
		case "pass", "break", "continue":
			ps.next()
			return
		case "return":
			ps.next()
			if !ps.endOfSimple() {
				ps.starExpressions()
			}
			return
		case "raise":
			ps.next()
			if !ps.endOfSimple() {
				ps.expression()
				if ps.accept("from") {
					ps.expression()
				}
			}
			return
		case "global", "nonlocal":
			ps.next()
			for {
				ps.name()
				if !ps.accept(",") {
					break
				}
			}
			return
		case "del":
			ps.next()
			for {
				e := ps.delTarget()
				ps.checkTarget(e, "delete")
				if !ps.accept(",") || ps.endOfSimple() {
					break
				}
			}
			if !ps.endOfSimple() {
				ps.fail("invalid syntax")
			}
			return
		case "assert":
			ps.next()
			ps.expression()
			if ps.accept(",") {
				ps.expression()
			}
			return
		case "import":
			ps.next()
			for {
				ps.dottedName()
				if ps.accept("as") {
					ps.name()
				}
				if !ps.accept(",") {
					break
				}
			}
			return
		case "from":
			ps.next()
			dots := 0
			for ps.op(".") || ps.op("...") {
				dots++
				ps.next()
			}
			if dots == 0 || !ps.kw("import") {
				ps.dottedName()
			}
			ps.expect("import")
			if ps.accept("*") {
				return
			}
			par := ps.accept("(")
			for {
				ps.name()
				if ps.accept("as") {
					ps.name()
				}
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
			return
		}
	}
	// expression, assignment, annotated or augmented assignment
	var lhs *ex
	if ps.kw("yield") {
		lhs = ps.yieldExpr()
	} else {
		lhs = ps.starExpressions()
	}
	switch {
	case ps.op(":"):
		if lhs.k == exTuple && !lhs.par {
			ps.fail("only single target (not tuple) can be annotated")
		}
		if lhs.k == exList || lhs.k == exTuple {
			ps.fail("only single target (not %s) can be annotated", map[exKind]string{exList: "list", exTuple: "tuple"}[lhs.k])
		}
		if lhs.k != exName && lhs.k != exAttr && lhs.k != exSub {
			ps.fail("illegal target for annotation")
		}
		ps.next()
		ps.expression()
		if ps.accept("=") {
			ps.assignValue()
		}
	case ps.tok().Kind == OP && augOps[ps.tok().Text]:
		if lhs.k != exName && lhs.k != exAttr && lhs.k != exSub {
			ps.fail("illegal expression for augmented assignment")
		}
		ps.next()
		ps.assignValue()
	case ps.op("="):
		for ps.accept("=") {
			ps.checkTarget(lhs, "assign to")
			lhs = ps.assignValue()
		}
	default:
		if lhs.k == exStarred {
			ps.fail("can't use starred expression here")
		}
	}
}

var augOps = map[string]bool{"+=": true, "-=": true, "*=": true, "@=": true, "/=": true, "%=": true, "&=": true, "|=": true, "^=": true, "<<=": true, ">>=": true, "**=": true, "//=": true}

func (ps *parser) assignValue() *ex {
	if ps.kw("yield") {
		return ps.yieldExpr()
	}
	return ps.starExpressions()
}

func (ps *parser) endOfSimple() bool {
	return ps.at(NEWLINE, "") || ps.op(";") || ps.at(ENDMARKER, "")
}

func (ps *parser) dottedName() {
	ps.name()
	for ps.accept(".") {
		ps.name()
	}
}

// checkTarget fails unless e can be assigned to (or deleted).
func (ps *parser) checkTarget(e *ex, what string) {
	switch e.k {
	case exName, exAttr, exSub:
		return
	case exStarred:
		if what == "delete" {
			ps.fail("cannot delete starred")
		}
		ps.checkTarget(e.elts[0], what)
		return
	case exTuple, exList:
		for _, x := range e.elts {
			ps.checkTarget(x, what)
		}
		return
	case exCall:
		ps.fail("cannot %s function call", what)
	case exYield:
		ps.fail("cannot %s yield expression", what)
	}
	ps.fail("cannot %s expression", what)
}

func (ps *parser) delTarget() *ex { return ps.bitwiseOrTarget() }

func (ps *parser) starTarget() *ex {
	if ps.accept("*") {
		return &ex{k: exStarred, elts: []*ex{ps.bitwiseOrTarget()}}
	}
	return ps.bitwiseOrTarget()
}

func (ps *parser) bitwiseOrTarget() *ex { return ps.bitwiseOr() }

// targetList is a for statement's or comprehension's targets.
func (ps *parser) targetList() *ex {
	first := ps.starTarget()
	if !ps.op(",") {
		ps.checkTarget(first, "assign to")
		return first
	}
	t := &ex{k: exTuple, elts: []*ex{first}}
	for ps.accept(",") {
		if ps.kw("in") || ps.op("=") {
			break
		}
		t.elts = append(t.elts, ps.starTarget())
	}
	ps.checkTarget(t, "assign to")
	return t
}
