package pyast

import (
	"fmt"
	"strings"
)

type parser struct {
	toks []Token
	p    int
}

// Parse parses Python 3.11 source as ast.parse does (comments and blank
// lines dropped). It returns a *SyntaxError for source CPython would
// reject, as far as this parser checks.
func Parse(source string) (mod *Node, err error) {
	all, err := Tokenize(source)
	if err != nil {
		return nil, err
	}
	ps := &parser{}
	for _, t := range all {
		if t.Type == COMMENT || t.Type == NL {
			continue
		}
		ps.toks = append(ps.toks, t)
	}
	defer func() {
		if r := recover(); r != nil {
			se, ok := r.(*SyntaxError)
			if !ok {
				panic(r)
			}
			mod, err = nil, se
		}
	}()
	mod = &Node{Kind: "Module"}
	for !ps.at(ENDMARKER, "") {
		mod.Body = append(mod.Body, ps.statement()...)
	}
	return mod, nil
}

func (ps *parser) tok() Token { return ps.toks[ps.p] }

func (ps *parser) fail(msg string, a ...any) {
	panic(&SyntaxError{ps.tok().Start, fmt.Sprintf(msg, a...)})
}

// at reports whether the current token has type t and, when s is not "",
// text s.
func (ps *parser) at(t TokType, s string) bool {
	tk := ps.tok()
	return tk.Type == t && (s == "" || tk.Str == s)
}

func (ps *parser) atOp(s string) bool { return ps.at(OP, s) }
func (ps *parser) atKw(s string) bool { return ps.at(NAME, s) }
func (ps *parser) next() Token        { t := ps.toks[ps.p]; ps.p++; return t }
func (ps *parser) peek(k int) Token {
	if ps.p+k < len(ps.toks) {
		return ps.toks[ps.p+k]
	}
	return ps.toks[len(ps.toks)-1]
}

func (ps *parser) accept(t TokType, s string) bool {
	if ps.at(t, s) {
		ps.p++
		return true
	}
	return false
}

func (ps *parser) expect(t TokType, s string) Token {
	if !ps.at(t, s) {
		want := s
		if want == "" {
			want = [...]string{"end", "name", "number", "string", "op", "newline", "nl", "comment", "indent", "dedent", "error"}[t]
		}
		ps.fail("expected %s, got %q", want, ps.tok().Str)
	}
	return ps.next()
}

var keywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true, "async": true, "await": true,
	"break": true, "class": true, "continue": true, "def": true, "del": true, "elif": true, "else": true, "except": true,
	"finally": true, "for": true, "from": true, "global": true, "if": true, "import": true, "in": true, "is": true,
	"lambda": true, "nonlocal": true, "not": true, "or": true, "pass": true, "raise": true, "return": true, "try": true,
	"while": true, "with": true, "yield": true,
}

func (ps *parser) name() string {
	t := ps.tok()
	if t.Type != NAME || keywords[t.Str] {
		ps.fail("expected a name, got %q", t.Str)
	}
	ps.p++
	return t.Str
}

func (ps *parser) block() []*Node {
	ps.expect(OP, ":")
	if ps.accept(NEWLINE, "") {
		ps.expect(INDENT, "")
		var body []*Node
		for !ps.accept(DEDENT, "") {
			body = append(body, ps.statement()...)
		}
		return body
	}
	return ps.simpleStmts()
}

func (ps *parser) statement() []*Node {
	t := ps.tok()
	if t.Type == INDENT {
		ps.fail("unexpected indent")
	}
	if t.Type == NAME {
		switch t.Str {
		case "def", "if", "class", "with", "for", "try", "while":
			return []*Node{ps.compound(nil)}
		case "async":
			if n := ps.peek(1); n.Type == NAME && (n.Str == "def" || n.Str == "with" || n.Str == "for") {
				return []*Node{ps.compound(nil)}
			}
		}
	}
	if t.Type == NAME && t.Str == "match" {
		if m := ps.tryMatch(); m != nil {
			return []*Node{m}
		}
	}
	if ps.atOp("@") {
		var decos []*Node
		for ps.accept(OP, "@") {
			decos = append(decos, ps.namedExpression())
			ps.expect(NEWLINE, "")
		}
		if !ps.atKw("def") && !ps.atKw("class") && !ps.atKw("async") {
			ps.fail("expected def or class after decorators")
		}
		return []*Node{ps.compound(decos)}
	}
	return ps.simpleStmts()
}

func (ps *parser) simpleStmts() []*Node {
	var out []*Node
	for {
		out = append(out, ps.simpleStmt())
		if !ps.accept(OP, ";") {
			break
		}
		if ps.at(NEWLINE, "") {
			break
		}
	}
	ps.expect(NEWLINE, "")
	return out
}

var augOps = map[string]string{"+=": "+", "-=": "-", "*=": "*", "@=": "@", "/=": "/", "%=": "%", "&=": "&", "|=": "|", "^=": "^", "<<=": "<<", ">>=": ">>", "**=": "**", "//=": "//"}

func (ps *parser) simpleStmt() *Node {
	t := ps.tok()
	if t.Type == NAME {
		switch t.Str {
		case "pass", "break", "continue":
			ps.p++
			return &Node{Kind: strings.ToUpper(t.Str[:1]) + t.Str[1:]}
		case "return":
			ps.p++
			n := &Node{Kind: "Return"}
			if !ps.at(NEWLINE, "") && !ps.atOp(";") {
				n.Value = ps.starExpressions()
			}
			return n
		case "import":
			ps.p++
			n := &Node{Kind: "Import"}
			for {
				a := &Node{Kind: "alias", Name: ps.dottedName()}
				if ps.accept(NAME, "as") {
					a.AsName = ps.name()
				}
				n.Elts = append(n.Elts, a)
				if !ps.accept(OP, ",") {
					break
				}
			}
			return n
		case "from":
			ps.p++
			n := &Node{Kind: "ImportFrom"}
			for {
				if ps.accept(OP, ".") {
					n.Level++
				} else if ps.accept(OP, "...") {
					n.Level += 3
				} else {
					break
				}
			}
			if !ps.atKw("import") {
				n.Name = ps.dottedName()
			}
			ps.expect(NAME, "import")
			if ps.accept(OP, "*") {
				n.Elts = []*Node{{Kind: "alias", Name: "*"}}
				return n
			}
			paren := ps.accept(OP, "(")
			for {
				a := &Node{Kind: "alias", Name: ps.name()}
				if ps.accept(NAME, "as") {
					a.AsName = ps.name()
				}
				n.Elts = append(n.Elts, a)
				if !ps.accept(OP, ",") {
					break
				}
				if paren && ps.atOp(")") {
					break
				}
			}
			if paren {
				ps.expect(OP, ")")
			}
			return n
		case "raise":
			ps.p++
			n := &Node{Kind: "Raise"}
			if !ps.at(NEWLINE, "") && !ps.atOp(";") {
				n.Value = ps.expression()
				if ps.accept(NAME, "from") {
					n.Cause = ps.expression()
				}
			}
			return n
		case "del":
			ps.p++
			n := &Node{Kind: "Delete"}
			for {
				n.Targets = append(n.Targets, ps.target())
				if !ps.accept(OP, ",") || ps.at(NEWLINE, "") || ps.atOp(";") {
					break
				}
			}
			return n
		case "assert":
			ps.p++
			n := &Node{Kind: "Assert", Test: ps.expression()}
			if ps.accept(OP, ",") {
				n.Msg = ps.expression()
			}
			return n
		case "global", "nonlocal":
			ps.p++
			n := &Node{Kind: strings.ToUpper(t.Str[:1]) + t.Str[1:]}
			for {
				n.Names = append(n.Names, ps.name())
				if !ps.accept(OP, ",") {
					break
				}
			}
			return n
		}
	}
	var first *Node
	if ps.atKw("yield") {
		first = ps.yieldExpr()
	} else {
		first = ps.starExpressions()
	}
	if ps.atOp("=") {
		n := &Node{Kind: "Assign", Targets: []*Node{first}}
		for ps.accept(OP, "=") {
			var v *Node
			if ps.atKw("yield") {
				v = ps.yieldExpr()
			} else {
				v = ps.starExpressions()
			}
			n.Targets = append(n.Targets, v)
		}
		n.Value = n.Targets[len(n.Targets)-1]
		n.Targets = n.Targets[:len(n.Targets)-1]
		for _, tg := range n.Targets {
			checkTarget(ps, tg)
		}
		return n
	}
	if op, ok := augOps[ps.tok().Str]; ok && ps.tok().Type == OP {
		ps.p++
		if first.Kind != "Name" && first.Kind != "Attribute" && first.Kind != "Subscript" {
			ps.fail("illegal expression for augmented assignment")
		}
		n := &Node{Kind: "AugAssign", Target: first, Op: op}
		if ps.atKw("yield") {
			n.Value = ps.yieldExpr()
		} else {
			n.Value = ps.starExpressions()
		}
		return n
	}
	if ps.atOp(":") {
		ps.p++
		if first.Kind != "Name" && first.Kind != "Attribute" && first.Kind != "Subscript" {
			ps.fail("illegal target for annotation")
		}
		n := &Node{Kind: "AnnAssign", Target: first, Annotation: ps.expression(), Simple: first.Kind == "Name" && !first.Paren}
		if ps.accept(OP, "=") {
			if ps.atKw("yield") {
				n.Value = ps.yieldExpr()
			} else {
				n.Value = ps.starExpressions()
			}
		}
		return n
	}
	return &Node{Kind: "Expr", Value: first}
}

// checkTarget rejects assignment targets CPython rejects.
func checkTarget(ps *parser, n *Node) {
	switch n.Kind {
	case "Name", "Attribute", "Subscript":
	case "Starred":
		checkTarget(ps, n.Value)
	case "Tuple", "List":
		for _, e := range n.Elts {
			checkTarget(ps, e)
		}
	default:
		ps.fail("cannot assign to %s", n.Kind)
	}
}

func (ps *parser) dottedName() string {
	s := ps.name()
	for ps.accept(OP, ".") {
		s += "." + ps.name()
	}
	return s
}

func (ps *parser) compound(decos []*Node) *Node {
	async := ps.accept(NAME, "async")
	t := ps.next()
	switch t.Str {
	case "def":
		n := &Node{Kind: "FunctionDef", Async: async, Decorators: decos, Name: ps.name()}
		if async {
			n.Kind = "AsyncFunctionDef"
		}
		ps.expect(OP, "(")
		n.Args = ps.parameters(")", true)
		ps.expect(OP, ")")
		if ps.accept(OP, "->") {
			n.Returns = ps.expression()
		}
		n.Body = ps.block()
		return n
	case "class":
		n := &Node{Kind: "ClassDef", Decorators: decos, Name: ps.name()}
		if ps.accept(OP, "(") {
			n.Bases, n.Keywords = ps.callArgs()
			ps.expect(OP, ")")
		}
		n.Body = ps.block()
		return n
	case "if":
		n := &Node{Kind: "If", Test: ps.namedExpression()}
		n.Body = ps.block()
		ps.elseChain(n)
		return n
	case "while":
		n := &Node{Kind: "While", Test: ps.namedExpression()}
		n.Body = ps.block()
		if ps.accept(NAME, "else") {
			n.OrElse = ps.block()
		}
		return n
	case "for":
		n := &Node{Kind: "For", Async: async}
		if async {
			n.Kind = "AsyncFor"
		}
		n.Target = ps.targetList()
		ps.expect(NAME, "in")
		n.Value = ps.starExpressions()
		n.Body = ps.block()
		if ps.accept(NAME, "else") {
			n.OrElse = ps.block()
		}
		return n
	case "with":
		n := &Node{Kind: "With", Async: async}
		if async {
			n.Kind = "AsyncWith"
		}
		save := ps.p
		ok := false
		if ps.atOp("(") {
			func() {
				defer func() {
					if r := recover(); r != nil {
						if _, isSE := r.(*SyntaxError); !isSE {
							panic(r)
						}
						ps.p = save
						n.Items = nil
					}
				}()
				ps.p++
				for {
					n.Items = append(n.Items, ps.withItem())
					if !ps.accept(OP, ",") || ps.atOp(")") {
						break
					}
				}
				ps.expect(OP, ")")
				if !ps.atOp(":") {
					ps.fail("not a parenthesized with")
				}
				ok = true
			}()
		}
		if !ok {
			ps.p = save
			n.Items = nil
			for {
				n.Items = append(n.Items, ps.withItem())
				if !ps.accept(OP, ",") {
					break
				}
			}
		}
		n.Body = ps.block()
		return n
	case "try":
		n := &Node{Kind: "Try"}
		n.Body = ps.block()
		for ps.atKw("except") {
			ps.p++
			h := &Node{Kind: "ExceptHandler"}
			if ps.accept(OP, "*") {
				n.Kind = "TryStar"
			}
			if !ps.atOp(":") {
				h.Value = ps.expression()
				if ps.atOp(",") {
					elts := []*Node{h.Value}
					for ps.accept(OP, ",") {
						elts = append(elts, ps.expression())
					}
					h.Value = &Node{Kind: "Tuple", Elts: elts}
				}
				if ps.accept(NAME, "as") {
					h.Name = ps.name()
				}
			}
			h.Body = ps.block()
			n.Handlers = append(n.Handlers, h)
		}
		if ps.accept(NAME, "else") {
			n.OrElse = ps.block()
		}
		if ps.accept(NAME, "finally") {
			n.FinalBody = ps.block()
		}
		if len(n.Handlers) == 0 && n.FinalBody == nil {
			ps.fail("expected except or finally")
		}
		return n
	}
	ps.p--
	ps.fail("invalid syntax")
	return nil
}

func (ps *parser) elseChain(n *Node) {
	if ps.accept(NAME, "elif") {
		e := &Node{Kind: "If", Test: ps.namedExpression()}
		e.Body = ps.block()
		ps.elseChain(e)
		n.OrElse = []*Node{e}
	} else if ps.accept(NAME, "else") {
		n.OrElse = ps.block()
	}
}

func (ps *parser) withItem() *Node {
	w := &Node{Kind: "withitem", Value: ps.expression()}
	if ps.accept(NAME, "as") {
		w.Target = ps.target()
	}
	return w
}

// parameters parses a def's (annotated) or a lambda's parameter list up
// to end.
func (ps *parser) parameters(end string, annotated bool) *Arguments {
	a := &Arguments{}
	seenStar, seenDefault := false, false
	param := func() *Node {
		n := &Node{Kind: "arg", Name: ps.name()}
		if annotated && ps.accept(OP, ":") {
			if ps.atOp("*") {
				ps.p++
				n.Annotation = &Node{Kind: "Starred", Value: ps.expression()}
			} else {
				n.Annotation = ps.expression()
			}
		}
		return n
	}
	for !ps.atOp(end) {
		switch {
		case ps.accept(OP, "/"):
			if seenStar || len(a.Args) == 0 || a.PosOnly != nil {
				ps.fail("invalid use of /")
			}
			a.PosOnly, a.Args = a.Args, nil
		case ps.accept(OP, "**"):
			a.Kwarg = param()
		case ps.accept(OP, "*"):
			if seenStar {
				ps.fail("* argument may appear only once")
			}
			seenStar = true
			if ps.at(NAME, "") {
				a.Vararg = param()
			}
		default:
			p := param()
			var d *Node
			if ps.accept(OP, "=") {
				d = ps.expression()
			}
			if seenStar {
				a.KwOnly = append(a.KwOnly, p)
				a.KwDefaults = append(a.KwDefaults, d)
			} else {
				if d != nil {
					seenDefault = true
					a.Defaults = append(a.Defaults, d)
				} else if seenDefault {
					ps.fail("non-default argument follows default argument")
				}
				a.Args = append(a.Args, p)
			}
		}
		if !ps.accept(OP, ",") {
			break
		}
		if a.Kwarg != nil && !ps.atOp(end) {
			ps.fail("arguments cannot follow var-keyword argument")
		}
	}
	return a
}

// callArgs parses call arguments up to ')' (not consumed).
func (ps *parser) callArgs() (args, kws []*Node) {
	for !ps.atOp(")") {
		switch {
		case ps.accept(OP, "*"):
			args = append(args, &Node{Kind: "Starred", Value: ps.expression()})
		case ps.accept(OP, "**"):
			kws = append(kws, &Node{Kind: "keyword", Value: ps.expression()})
		case ps.at(NAME, "") && ps.peek(1).Type == OP && ps.peek(1).Str == "=" && !keywords[ps.tok().Str]:
			name := ps.name()
			ps.p++
			kws = append(kws, &Node{Kind: "keyword", Name: name, Value: ps.expression()})
		default:
			e := ps.namedExpression()
			if ps.atKw("for") || ps.atKw("async") {
				e = &Node{Kind: "GeneratorExp", Value: e, Generators: ps.comprehension()}
			}
			args = append(args, e)
		}
		if !ps.accept(OP, ",") {
			break
		}
	}
	return args, kws
}

func (ps *parser) comprehension() []*Node {
	var gens []*Node
	for ps.atKw("for") || (ps.atKw("async") && ps.peek(1).Str == "for") {
		g := &Node{Kind: "comprehension", Async: ps.accept(NAME, "async")}
		ps.expect(NAME, "for")
		g.Target = ps.targetList()
		ps.expect(NAME, "in")
		g.Value = ps.disjunction()
		for ps.accept(NAME, "if") {
			g.Ifs = append(g.Ifs, ps.disjunction())
		}
		gens = append(gens, g)
	}
	return gens
}

// targetList parses for-loop and comprehension targets (no 'in').
func (ps *parser) targetList() *Node {
	first := ps.target()
	if !ps.atOp(",") {
		return first
	}
	elts := []*Node{first}
	for ps.accept(OP, ",") {
		if ps.atKw("in") || ps.atOp("=") {
			break
		}
		elts = append(elts, ps.target())
	}
	return &Node{Kind: "Tuple", Elts: elts}
}

func (ps *parser) target() *Node {
	if ps.accept(OP, "*") {
		return &Node{Kind: "Starred", Value: ps.target()}
	}
	n := ps.bitwiseOr()
	return n
}

func (ps *parser) yieldExpr() *Node {
	ps.expect(NAME, "yield")
	if ps.accept(NAME, "from") {
		return &Node{Kind: "YieldFrom", Value: ps.expression()}
	}
	n := &Node{Kind: "Yield"}
	if !ps.atOp(")") && !ps.at(NEWLINE, "") && !ps.atOp("=") && !ps.atOp(";") && !ps.atOp("]") && !ps.atOp("}") {
		n.Value = ps.starExpressions()
	}
	return n
}

// starExpressions: a tuple without parentheses when there is a comma.
func (ps *parser) starExpressions() *Node {
	first := ps.starExpression()
	if !ps.atOp(",") {
		return first
	}
	elts := []*Node{first}
	for ps.accept(OP, ",") {
		if ps.endOfExprList() {
			break
		}
		elts = append(elts, ps.starExpression())
	}
	return &Node{Kind: "Tuple", Elts: elts}
}

func (ps *parser) endOfExprList() bool {
	t := ps.tok()
	if t.Type == NEWLINE || t.Type == ENDMARKER {
		return true
	}
	if t.Type == OP {
		switch t.Str {
		case ")", "]", "}", "=", ":", ";":
			return true
		}
		if _, ok := augOps[t.Str]; ok {
			return true
		}
	}
	return t.Type == NAME && (t.Str == "in" || t.Str == "for" || t.Str == "async")
}

func (ps *parser) starExpression() *Node {
	if ps.accept(OP, "*") {
		return &Node{Kind: "Starred", Value: ps.bitwiseOr()}
	}
	return ps.namedExpression()
}

func (ps *parser) namedExpression() *Node {
	if ps.at(NAME, "") && ps.peek(1).Type == OP && ps.peek(1).Str == ":=" {
		t := &Node{Kind: "Name", Name: ps.name()}
		ps.p++
		return &Node{Kind: "NamedExpr", Target: t, Value: ps.expression()}
	}
	return ps.expression()
}

func (ps *parser) expression() *Node {
	if ps.atKw("lambda") {
		ps.p++
		n := &Node{Kind: "Lambda", Args: ps.parameters(":", false)}
		ps.expect(OP, ":")
		n.Body1 = ps.expression()
		return n
	}
	d := ps.disjunction()
	if ps.atKw("if") {
		ps.p++
		test := ps.disjunction()
		ps.expect(NAME, "else")
		return &Node{Kind: "IfExp", Body1: d, Test: test, OrElse1: ps.expression()}
	}
	return d
}

func (ps *parser) disjunction() *Node {
	n := ps.conjunction()
	if !ps.atKw("or") {
		return n
	}
	b := &Node{Kind: "BoolOp", Op: "or", Values: []*Node{n}}
	for ps.accept(NAME, "or") {
		b.Values = append(b.Values, ps.conjunction())
	}
	return b
}

func (ps *parser) conjunction() *Node {
	n := ps.inversion()
	if !ps.atKw("and") {
		return n
	}
	b := &Node{Kind: "BoolOp", Op: "and", Values: []*Node{n}}
	for ps.accept(NAME, "and") {
		b.Values = append(b.Values, ps.inversion())
	}
	return b
}

func (ps *parser) inversion() *Node {
	if ps.accept(NAME, "not") {
		return &Node{Kind: "UnaryOp", Op: "not", Value: ps.inversion()}
	}
	return ps.comparison()
}

func (ps *parser) compareOp() string {
	t := ps.tok()
	if t.Type == OP {
		switch t.Str {
		case "==", "!=", "<", "<=", ">", ">=":
			ps.p++
			return t.Str
		}
	}
	if t.Type == NAME {
		switch t.Str {
		case "in":
			ps.p++
			return "in"
		case "is":
			ps.p++
			if ps.accept(NAME, "not") {
				return "is not"
			}
			return "is"
		case "not":
			if ps.peek(1).Type == NAME && ps.peek(1).Str == "in" {
				ps.p += 2
				return "not in"
			}
		}
	}
	return ""
}

func (ps *parser) comparison() *Node {
	n := ps.bitwiseOr()
	var c *Node
	for {
		op := ps.compareOp()
		if op == "" {
			break
		}
		if c == nil {
			c = &Node{Kind: "Compare", Left: n}
		}
		c.Ops = append(c.Ops, op)
		c.Comparators = append(c.Comparators, ps.bitwiseOr())
	}
	if c != nil {
		return c
	}
	return n
}

func (ps *parser) binLevel(ops []string, sub func() *Node) *Node {
	n := sub()
	for {
		t := ps.tok()
		found := false
		if t.Type == OP {
			for _, o := range ops {
				if t.Str == o {
					found = true
				}
			}
		}
		if !found {
			return n
		}
		ps.p++
		n = &Node{Kind: "BinOp", Op: t.Str, Left: n, Right: sub()}
	}
}

func (ps *parser) bitwiseOr() *Node  { return ps.binLevel([]string{"|"}, ps.bitwiseXor) }
func (ps *parser) bitwiseXor() *Node { return ps.binLevel([]string{"^"}, ps.bitwiseAnd) }
func (ps *parser) bitwiseAnd() *Node { return ps.binLevel([]string{"&"}, ps.shiftExpr) }
func (ps *parser) shiftExpr() *Node  { return ps.binLevel([]string{"<<", ">>"}, ps.sum) }
func (ps *parser) sum() *Node        { return ps.binLevel([]string{"+", "-"}, ps.term) }
func (ps *parser) term() *Node {
	return ps.binLevel([]string{"*", "/", "//", "%", "@"}, ps.factor)
}

func (ps *parser) factor() *Node {
	t := ps.tok()
	if t.Type == OP && (t.Str == "+" || t.Str == "-" || t.Str == "~") {
		ps.p++
		return &Node{Kind: "UnaryOp", Op: t.Str, Value: ps.factor()}
	}
	return ps.power()
}

func (ps *parser) power() *Node {
	var n *Node
	if ps.atKw("await") {
		ps.p++
		n = &Node{Kind: "Await", Value: ps.primary()}
	} else {
		n = ps.primary()
	}
	if ps.accept(OP, "**") {
		return &Node{Kind: "BinOp", Op: "**", Left: n, Right: ps.factor()}
	}
	return n
}

func (ps *parser) primary() *Node {
	n := ps.atom()
	for {
		switch {
		case ps.accept(OP, "."):
			n = &Node{Kind: "Attribute", Value: n, Name: ps.name()}
		case ps.accept(OP, "("):
			c := &Node{Kind: "Call", Value: n}
			c.Elts, c.Keywords = ps.callArgs()
			ps.expect(OP, ")")
			n = c
		case ps.accept(OP, "["):
			n = &Node{Kind: "Subscript", Value: n, Target: ps.slices()}
			ps.expect(OP, "]")
		default:
			return n
		}
	}
}

func (ps *parser) slices() *Node {
	first := ps.slice()
	if !ps.atOp(",") {
		return first
	}
	elts := []*Node{first}
	for ps.accept(OP, ",") {
		if ps.atOp("]") {
			break
		}
		elts = append(elts, ps.slice())
	}
	return &Node{Kind: "Tuple", Elts: elts}
}

func (ps *parser) slice() *Node {
	if ps.atOp("*") {
		return ps.starExpression()
	}
	var lower *Node
	if !ps.atOp(":") {
		lower = ps.namedExpression()
		if !ps.atOp(":") {
			return lower
		}
	}
	ps.expect(OP, ":")
	s := &Node{Kind: "Slice", Lower: lower}
	if !ps.atOp(":") && !ps.atOp("]") && !ps.atOp(",") {
		s.Upper = ps.expression()
	}
	if ps.accept(OP, ":") {
		if !ps.atOp("]") && !ps.atOp(",") {
			s.Step = ps.expression()
		}
	}
	return s
}

func (ps *parser) atom() *Node {
	t := ps.tok()
	switch t.Type {
	case NAME:
		switch t.Str {
		case "None":
			ps.p++
			return &Node{Kind: "Constant", Const: &Const{Kind: CNone}}
		case "True":
			ps.p++
			return &Node{Kind: "Constant", Const: &Const{Kind: CTrue}}
		case "False":
			ps.p++
			return &Node{Kind: "Constant", Const: &Const{Kind: CFalse}}
		}
		return &Node{Kind: "Name", Name: ps.name()}
	case NUMBER:
		ps.p++
		c, err := parseNumber(t.Str)
		if err != nil {
			panic(&SyntaxError{t.Start, err.Error()})
		}
		return &Node{Kind: "Constant", Const: c}
	case STRING:
		var parts []Token
		for ps.at(STRING, "") {
			parts = append(parts, ps.next())
		}
		n, err := parseStrings(parts)
		if err != nil {
			panic(err)
		}
		return n
	case OP:
		switch t.Str {
		case "...":
			ps.p++
			return &Node{Kind: "Constant", Const: &Const{Kind: CEllipsis}}
		case "(":
			ps.p++
			if ps.accept(OP, ")") {
				return &Node{Kind: "Tuple", Paren: true}
			}
			if ps.atKw("yield") {
				n := ps.yieldExpr()
				ps.expect(OP, ")")
				n.Paren = true
				return n
			}
			first := ps.starExpression()
			if first.Kind != "Starred" && (ps.atKw("for") || ps.atKw("async")) {
				g := &Node{Kind: "GeneratorExp", Value: first, Generators: ps.comprehension()}
				ps.expect(OP, ")")
				return g
			}
			if ps.accept(OP, ")") {
				if first.Kind == "Starred" {
					ps.fail("cannot use starred expression here")
				}
				first.Paren = true
				return first
			}
			elts := []*Node{first}
			for ps.accept(OP, ",") {
				if ps.atOp(")") {
					break
				}
				elts = append(elts, ps.starExpression())
			}
			ps.expect(OP, ")")
			return &Node{Kind: "Tuple", Elts: elts, Paren: true}
		case "[":
			ps.p++
			if ps.accept(OP, "]") {
				return &Node{Kind: "List"}
			}
			first := ps.starExpression()
			if first.Kind != "Starred" && (ps.atKw("for") || ps.atKw("async")) {
				g := &Node{Kind: "ListComp", Value: first, Generators: ps.comprehension()}
				ps.expect(OP, "]")
				return g
			}
			elts := []*Node{first}
			for ps.accept(OP, ",") {
				if ps.atOp("]") {
					break
				}
				elts = append(elts, ps.starExpression())
			}
			ps.expect(OP, "]")
			return &Node{Kind: "List", Elts: elts}
		case "{":
			ps.p++
			return ps.dictOrSet()
		}
	}
	ps.fail("invalid syntax at %q", t.Str)
	return nil
}

func (ps *parser) dictOrSet() *Node {
	if ps.accept(OP, "}") {
		return &Node{Kind: "Dict"}
	}
	if ps.atOp("**") {
		return ps.dictRest(nil, nil)
	}
	first := ps.starExpression()
	if first.Kind != "Starred" && ps.accept(OP, ":") {
		v := ps.expression()
		if ps.atKw("for") || ps.atKw("async") {
			g := &Node{Kind: "DictComp", Left: first, Value: v, Generators: ps.comprehension()}
			ps.expect(OP, "}")
			return g
		}
		return ps.dictRest(first, v)
	}
	if first.Kind != "Starred" && (ps.atKw("for") || ps.atKw("async")) {
		g := &Node{Kind: "SetComp", Value: first, Generators: ps.comprehension()}
		ps.expect(OP, "}")
		return g
	}
	elts := []*Node{first}
	for ps.accept(OP, ",") {
		if ps.atOp("}") {
			break
		}
		elts = append(elts, ps.starExpression())
	}
	ps.expect(OP, "}")
	return &Node{Kind: "Set", Elts: elts}
}

// dictRest parses a dict display after its first item (k, v), or from the
// start when k and v are nil.
func (ps *parser) dictRest(k, v *Node) *Node {
	d := &Node{Kind: "Dict"}
	if v != nil {
		d.Keys = append(d.Keys, k)
		d.Values = append(d.Values, v)
		if !ps.accept(OP, ",") {
			ps.expect(OP, "}")
			return d
		}
	}
	for !ps.atOp("}") {
		if ps.accept(OP, "**") {
			d.Keys = append(d.Keys, nil)
			d.Values = append(d.Values, ps.bitwiseOr())
		} else {
			k := ps.expression()
			ps.expect(OP, ":")
			d.Keys = append(d.Keys, k)
			d.Values = append(d.Values, ps.expression())
		}
		if !ps.accept(OP, ",") {
			break
		}
	}
	ps.expect(OP, "}")
	return d
}
