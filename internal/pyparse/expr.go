package pyparse

// Expressions, following the precedence levels of Python 3.11's grammar.

func tuple(elts []*Node) *Node { return &Node{T: "Tuple", L: elts} }

func (ps *parser) expressions() *Node {
	e := ps.expression()
	if !ps.op(",") {
		return e
	}
	elts := []*Node{e}
	for ps.accept(",") && ps.startsExpr() {
		elts = append(elts, ps.expression())
	}
	return tuple(elts)
}

// starExpressions is a tuple display without parentheses where items may
// be starred (the right side of an assignment, an expression statement).
func (ps *parser) starExpressions() *Node {
	e := ps.starExpression()
	if !ps.op(",") {
		return e
	}
	elts := []*Node{e}
	for ps.accept(",") && ps.startsExpr() {
		elts = append(elts, ps.starExpression())
	}
	return tuple(elts)
}

func starred(x *Node) *Node { return &Node{T: "Starred", A: x} }

func (ps *parser) starExpression() *Node {
	if ps.accept("*") {
		return starred(ps.bitwiseOr())
	}
	return ps.expression()
}

func (ps *parser) starNamedExpression() *Node {
	if ps.accept("*") {
		return starred(ps.bitwiseOr())
	}
	return ps.namedExpr()
}

// startsExpr reports whether the current token can begin an expression.
func (ps *parser) startsExpr() bool {
	t := ps.tok()
	switch t.Kind {
	case NAME:
		if !keywords[t.Text] {
			return true
		}
		switch t.Text {
		case "None", "True", "False", "not", "lambda", "await", "yield":
			return true
		}
		return false
	case NUMBER, STRING:
		return true
	case OP:
		switch t.Text {
		case "(", "[", "{", "-", "+", "~", "*", "...":
			return true
		}
	}
	return false
}

func (ps *parser) namedExpr() *Node {
	if ps.isName() && ps.toks[ps.p+1].Kind == OP && ps.toks[ps.p+1].Text == ":=" {
		name := &Node{T: "Name", Op: ps.next().Text}
		ps.p++
		return &Node{T: "NamedExpr", A: name, B: ps.expression()}
	}
	e := ps.expression()
	if ps.op(":=") {
		ps.fail("cannot use assignment expressions with this expression")
	}
	return e
}

func (ps *parser) expression() *Node {
	if ps.kw("lambda") {
		ps.next()
		args := ps.params(":", false)
		ps.expect(":")
		return &Node{T: "Lambda", A: args, B: ps.expression()}
	}
	e := ps.disjunction()
	if ps.accept("if") {
		test := ps.disjunction()
		if !ps.accept("else") {
			ps.fail("expected 'else' after 'if' expression")
		}
		return &Node{T: "IfExp", A: test, B: e, C: ps.expression()}
	}
	return e
}

func (ps *parser) boolOp(op string, sub func() *Node) *Node {
	e := sub()
	if !ps.kw(op) {
		return e
	}
	n := &Node{T: "BoolOp", Op: op, L: []*Node{e}}
	for ps.accept(op) {
		n.L = append(n.L, sub())
	}
	return n
}

func (ps *parser) disjunction() *Node { return ps.boolOp("or", ps.conjunction) }
func (ps *parser) conjunction() *Node { return ps.boolOp("and", ps.inversion) }

func (ps *parser) inversion() *Node {
	if ps.accept("not") {
		return &Node{T: "UnaryOp", Op: "not", A: ps.inversion()}
	}
	return ps.comparison()
}

func (ps *parser) compOp() string {
	t := ps.tok()
	switch {
	case t.Kind == OP && (t.Text == "<" || t.Text == ">" || t.Text == "==" || t.Text == ">=" || t.Text == "<=" || t.Text == "!="):
		ps.next()
		return t.Text
	case ps.kw("in"):
		ps.next()
		return "in"
	case ps.kw("not") && ps.toks[ps.p+1].Kind == NAME && ps.toks[ps.p+1].Text == "in":
		ps.p += 2
		return "not in"
	case ps.kw("is"):
		ps.next()
		if ps.accept("not") {
			return "is not"
		}
		return "is"
	}
	return ""
}

func (ps *parser) comparison() *Node {
	e := ps.bitwiseOr()
	var n *Node
	for {
		op := ps.compOp()
		if op == "" {
			break
		}
		if n == nil {
			n = &Node{T: "Compare", A: e}
		}
		n.Names = append(n.Names, op)
		n.L = append(n.L, ps.bitwiseOr())
	}
	if n == nil {
		return e
	}
	return n
}

func (ps *parser) binary(ops []string, sub func() *Node) *Node {
	e := sub()
	for {
		t := ps.tok()
		found := false
		if t.Kind == OP {
			for _, o := range ops {
				if t.Text == o {
					found = true
					break
				}
			}
		}
		if !found {
			return e
		}
		ps.next()
		e = &Node{T: "BinOp", Op: t.Text, A: e, B: sub()}
	}
}

func (ps *parser) bitwiseOr() *Node {
	return ps.binary([]string{"|"}, func() *Node {
		return ps.binary([]string{"^"}, func() *Node {
			return ps.binary([]string{"&"}, func() *Node {
				return ps.binary([]string{"<<", ">>"}, func() *Node {
					return ps.binary([]string{"+", "-"}, func() *Node {
						return ps.binary([]string{"*", "/", "//", "%", "@"}, ps.factor)
					})
				})
			})
		})
	})
}

func (ps *parser) factor() *Node {
	if ps.op("+") || ps.op("-") || ps.op("~") {
		op := ps.next().Text
		return &Node{T: "UnaryOp", Op: op, A: ps.factor()}
	}
	return ps.power()
}

func (ps *parser) power() *Node {
	e := ps.awaitPrimary()
	if ps.accept("**") {
		return &Node{T: "BinOp", Op: "**", A: e, B: ps.factor()}
	}
	return e
}

func (ps *parser) awaitPrimary() *Node {
	if ps.accept("await") {
		return &Node{T: "Await", A: ps.primary()}
	}
	return ps.primary()
}

func (ps *parser) primary() *Node {
	e := ps.atom()
	for {
		switch {
		case ps.accept("."):
			e = &Node{T: "Attribute", A: e, Op: ps.name()}
		case ps.accept("("):
			c := &Node{T: "Call", A: e}
			ps.callArgs(c, true)
			e = c
		case ps.accept("["):
			e = &Node{T: "Subscript", A: e, B: ps.slices()}
		default:
			return e
		}
	}
}

func (ps *parser) slices() *Node {
	var elts []*Node
	tupled := false
	for {
		if ps.accept("*") {
			elts = append(elts, starred(ps.bitwiseOr()))
			tupled = true
		} else {
			elts = append(elts, ps.slice())
		}
		if !ps.accept(",") {
			break
		}
		tupled = true
		if ps.op("]") {
			break
		}
	}
	ps.expect("]")
	if !tupled {
		return elts[0]
	}
	return tuple(elts)
}

func (ps *parser) slice() *Node {
	s := &Node{T: "Slice"}
	if !ps.op(":") {
		e := ps.namedExpr()
		if !ps.op(":") {
			return e
		}
		s.A = e
	}
	ps.expect(":")
	if !ps.op(":") && !ps.op(",") && !ps.op("]") {
		s.B = ps.expression()
	}
	if ps.accept(":") && !ps.op(",") && !ps.op("]") {
		s.C = ps.expression()
	}
	return s
}

// callArgs reads arguments after '(' up to and including ')' into c.L
// (positional, starred) and c.L2 (keyword nodes).
func (ps *parser) callArgs(c *Node, genexpOK bool) {
	n := 0
	sawKw, sawKwUnpack, sawGenexp := false, false, false
	for !ps.op(")") {
		n++
		switch {
		case ps.accept("**"):
			c.L2 = append(c.L2, &Node{T: "keyword", A: ps.expression()})
			sawKwUnpack = true
		case ps.accept("*"):
			if sawKwUnpack {
				ps.fail("iterable argument unpacking follows keyword argument unpacking")
			}
			c.L = append(c.L, starred(ps.expression()))
		case ps.isName() && ps.toks[ps.p+1].Kind == OP && ps.toks[ps.p+1].Text == "=":
			name := ps.next().Text
			ps.p++
			c.L2 = append(c.L2, &Node{T: "keyword", Op: name, A: ps.expression()})
			sawKw = true
		default:
			e := ps.namedExpr()
			if ps.op("=") {
				ps.fail("expression cannot contain assignment, perhaps you meant \"==\"?")
			}
			if ps.kw("for") || ps.kw("async") {
				e = &Node{T: "GeneratorExp", A: e, L2: ps.comprehension()}
				sawGenexp = true
				if ps.op(",") && ps.toks[ps.p+1].Text == ")" {
					ps.fail("Generator expression must be parenthesized")
				}
				if !genexpOK {
					ps.fail("invalid syntax")
				}
			} else if sawKwUnpack {
				ps.fail("positional argument follows keyword argument unpacking")
			} else if sawKw {
				ps.fail("positional argument follows keyword argument")
			}
			c.L = append(c.L, e)
		}
		if !ps.accept(",") {
			break
		}
	}
	if sawGenexp && n > 1 {
		ps.fail("Generator expression must be parenthesized")
	}
	ps.expect(")")
}

// comprehension reads one or more for/if clauses.
func (ps *parser) comprehension() []*Node {
	if !ps.kw("for") && !ps.kw("async") {
		ps.fail("invalid syntax")
	}
	var gens []*Node
	for ps.kw("for") || ps.kw("async") {
		g := &Node{T: "comprehension"}
		if ps.accept("async") {
			g.N = 1
		}
		ps.expect("for")
		g.A = ps.targetList()
		ps.expect("in")
		g.B = ps.disjunction()
		for ps.accept("if") {
			g.L = append(g.L, ps.disjunction())
		}
		gens = append(gens, g)
	}
	return gens
}

func (ps *parser) yieldExpr() *Node {
	ps.expect("yield")
	if ps.accept("from") {
		return &Node{T: "YieldFrom", A: ps.expression()}
	}
	n := &Node{T: "Yield"}
	if ps.startsExpr() {
		n.A = ps.starExpressions()
	}
	return n
}

func constant(kind string) *Node { return &Node{T: "Constant", Const: &Const{Kind: kind}} }

func (ps *parser) atom() *Node {
	t := ps.tok()
	switch t.Kind {
	case NAME:
		switch t.Text {
		case "None", "True", "False":
			ps.next()
			return constant(t.Text)
		}
		if keywords[t.Text] {
			ps.fail("invalid syntax")
		}
		ps.next()
		return &Node{T: "Name", Op: t.Text}
	case NUMBER:
		ps.next()
		return numberNode(t.Text)
	case STRING:
		var toks []*Token
		kinds := 0
		for ps.at(STRING, "") {
			s := ps.next()
			if isBytes(s.Text) {
				kinds |= 1
			} else {
				kinds |= 2
			}
			if err := checkString(s); err != nil {
				panic(err)
			}
			toks = append(toks, s)
		}
		if kinds == 3 {
			ps.fail("cannot mix bytes and nonbytes literals")
		}
		n, err := stringNode(toks)
		if err != nil {
			panic(err)
		}
		return n
	case OP:
		switch t.Text {
		case "...":
			ps.next()
			return constant("Ellipsis")
		case "(":
			ps.next()
			if ps.accept(")") {
				return &Node{T: "Tuple", par: true}
			}
			if ps.kw("yield") {
				y := ps.yieldExpr()
				ps.expect(")")
				y.par = true
				return y
			}
			e := ps.starNamedExpression()
			if ps.kw("for") || ps.kw("async") {
				if e.T == "Starred" {
					ps.fail("iterable unpacking cannot be used in comprehension")
				}
				g := &Node{T: "GeneratorExp", A: e, L2: ps.comprehension()}
				ps.expect(")")
				return g
			}
			if ps.accept(")") {
				if e.T == "Starred" {
					ps.fail("cannot use starred expression here")
				}
				e.par = true
				return e
			}
			tup := &Node{T: "Tuple", L: []*Node{e}, par: true}
			for ps.accept(",") && !ps.op(")") {
				tup.L = append(tup.L, ps.starNamedExpression())
			}
			ps.expect(")")
			return tup
		case "[":
			ps.next()
			l := &Node{T: "List"}
			if ps.accept("]") {
				return l
			}
			e := ps.starNamedExpression()
			if ps.kw("for") || ps.kw("async") {
				if e.T == "Starred" {
					ps.fail("iterable unpacking cannot be used in comprehension")
				}
				c := &Node{T: "ListComp", A: e, L2: ps.comprehension()}
				ps.expect("]")
				return c
			}
			l.L = append(l.L, e)
			for ps.accept(",") && !ps.op("]") {
				l.L = append(l.L, ps.starNamedExpression())
			}
			ps.expect("]")
			return l
		case "{":
			ps.next()
			return ps.dictOrSet()
		}
	}
	ps.fail("invalid syntax")
	return nil
}

// dictOrSet reads a dict, set or comprehension display after '{'. A dict's
// keys are in L (nil for a ** item), its values in L2.
func (ps *parser) dictOrSet() *Node {
	if ps.accept("}") {
		return &Node{T: "Dict"}
	}
	n := &Node{T: "Set"}
	unpack := false
	item := func(first bool) {
		if first && (ps.op("**") || ps.op("*")) {
			unpack = true
		}
		if ps.accept("**") {
			if !first && n.T != "Dict" {
				ps.fail("invalid syntax")
			}
			n.T = "Dict"
			n.L = append(n.L, nil)
			n.L2 = append(n.L2, ps.bitwiseOr())
			return
		}
		if !first && n.T != "Dict" {
			n.L = append(n.L, ps.starNamedExpression())
			return
		}
		if first {
			e := ps.starNamedExpression()
			if e.T != "Starred" && ps.accept(":") {
				n.T = "Dict"
				n.L = append(n.L, e)
				n.L2 = append(n.L2, ps.expression())
				return
			}
			n.L = append(n.L, e)
			return
		}
		n.L = append(n.L, ps.expression())
		ps.expect(":")
		n.L2 = append(n.L2, ps.expression())
	}
	item(true)
	if ps.kw("for") || ps.kw("async") {
		if unpack {
			ps.fail("dict unpacking cannot be used in dict comprehension")
		}
		var c *Node
		if n.T == "Dict" {
			c = &Node{T: "DictComp", A: n.L[0], B: n.L2[0]}
		} else {
			c = &Node{T: "SetComp", A: n.L[0]}
		}
		c.L2 = ps.comprehension()
		ps.expect("}")
		return c
	}
	for ps.accept(",") && !ps.op("}") {
		item(false)
	}
	ps.expect("}")
	return n
}
