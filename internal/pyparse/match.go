package pyparse

// The match statement (soft keywords match, case and _). Patterns are read
// by their grammar; the compiler's checks of them (irrefutable patterns,
// duplicate names) are not made by ast.parse either.

func (ps *parser) matchStmt() *Node {
	ps.next() // match
	n := nd("Match")
	e := ps.starNamedExpression()
	if ps.op(",") {
		t := tuple([]*Node{e})
		for ps.accept(",") && !ps.op(":") {
			t.L = append(t.L, ps.starNamedExpression())
		}
		e = t
	} else if e.T == "Starred" {
		ps.fail("invalid syntax")
	}
	n.A = e
	ps.expect(":")
	ps.expectNewline()
	if !ps.acceptKind(INDENT, "") {
		ps.fail("expected an indented block")
	}
	for ps.kw("case") {
		ps.next()
		c := &Node{T: "match_case", A: ps.patterns()}
		if ps.accept("if") {
			c.B = ps.namedExpr()
		}
		c.Body = ps.block()
		n.L = append(n.L, c)
	}
	if len(n.L) == 0 || !ps.acceptKind(DEDENT, "") {
		ps.fail("invalid syntax")
	}
	return n
}

// patterns is an open sequence pattern or a single pattern.
func (ps *parser) patterns() *Node {
	p := ps.maybeStarPattern()
	if !ps.op(",") {
		if p.T == "MatchStar" {
			return &Node{T: "MatchSequence", L: []*Node{p}}
		}
		return p
	}
	seq := &Node{T: "MatchSequence", L: []*Node{p}}
	for ps.accept(",") && !ps.op(":") && !ps.kw("if") {
		seq.L = append(seq.L, ps.maybeStarPattern())
	}
	return seq
}

func (ps *parser) maybeStarPattern() *Node {
	if ps.accept("*") {
		n := ps.name()
		if n == "_" {
			n = ""
		}
		return &Node{T: "MatchStar", Op: n}
	}
	return ps.pattern()
}

func (ps *parser) pattern() *Node {
	p := ps.closedPattern()
	if ps.op("|") {
		or := &Node{T: "MatchOr", L: []*Node{p}}
		for ps.accept("|") {
			or.L = append(or.L, ps.closedPattern())
		}
		p = or
	}
	if ps.accept("as") {
		if ps.kw("_") {
			ps.fail("cannot use '_' as a target")
		}
		p = &Node{T: "MatchAs", A: p, Op: ps.name()}
	}
	return p
}

func (ps *parser) signedNumber() *Node {
	neg := ps.accept("-")
	t := ps.tok()
	if !ps.acceptKind(NUMBER, "") {
		ps.fail("invalid syntax")
	}
	e := numberNode(t.Text)
	if neg {
		e = &Node{T: "UnaryOp", Op: "-", A: e}
	}
	if ps.op("+") || ps.op("-") {
		op := ps.next().Text
		t := ps.tok()
		if !ps.acceptKind(NUMBER, "") {
			ps.fail("invalid syntax")
		}
		e = &Node{T: "BinOp", Op: op, A: e, B: numberNode(t.Text)}
	}
	return e
}

func (ps *parser) stringsPattern() *Node {
	var toks []*Token
	for ps.at(STRING, "") {
		s := ps.next()
		if err := checkString(s); err != nil {
			panic(err)
		}
		toks = append(toks, s)
	}
	n, err := stringNode(toks)
	if err != nil {
		panic(err)
	}
	return n
}

func (ps *parser) closedPattern() *Node {
	t := ps.tok()
	switch {
	case t.Kind == NUMBER || ps.op("-"):
		return &Node{T: "MatchValue", A: ps.signedNumber()}
	case t.Kind == STRING:
		return &Node{T: "MatchValue", A: ps.stringsPattern()}
	case ps.kw("None") || ps.kw("True") || ps.kw("False"):
		ps.next()
		return &Node{T: "MatchSingleton", Const: &Const{Kind: t.Text}}
	case ps.isName():
		ps.next()
		var e *Node = &Node{T: "Name", Op: t.Text}
		dotted := false
		for ps.accept(".") {
			e = &Node{T: "Attribute", A: e, Op: ps.name()}
			dotted = true
		}
		if ps.accept("(") {
			c := &Node{T: "MatchClass", A: e}
			sawKw := false
			for !ps.op(")") {
				if ps.isName() && ps.toks[ps.p+1].Text == "=" && ps.toks[ps.p+1].Kind == OP {
					c.Names = append(c.Names, ps.next().Text)
					ps.p++
					c.L2 = append(c.L2, ps.pattern())
					sawKw = true
				} else {
					if sawKw {
						ps.fail("positional patterns follow keyword patterns")
					}
					c.L = append(c.L, ps.pattern())
				}
				if !ps.accept(",") {
					break
				}
			}
			ps.expect(")")
			return c
		}
		if dotted {
			return &Node{T: "MatchValue", A: e}
		}
		if t.Text == "_" {
			return &Node{T: "MatchAs"}
		}
		return &Node{T: "MatchAs", Op: t.Text}
	case ps.accept("("):
		if ps.accept(")") {
			return &Node{T: "MatchSequence"}
		}
		p := ps.maybeStarPattern()
		if ps.accept(")") {
			if p.T == "MatchStar" {
				return &Node{T: "MatchSequence", L: []*Node{p}}
			}
			return p
		}
		seq := &Node{T: "MatchSequence", L: []*Node{p}}
		for ps.accept(",") && !ps.op(")") {
			seq.L = append(seq.L, ps.maybeStarPattern())
		}
		ps.expect(")")
		return seq
	case ps.accept("["):
		seq := &Node{T: "MatchSequence"}
		for !ps.op("]") {
			seq.L = append(seq.L, ps.maybeStarPattern())
			if !ps.accept(",") {
				break
			}
		}
		ps.expect("]")
		return seq
	case ps.accept("{"):
		m := &Node{T: "MatchMapping"}
		for !ps.op("}") {
			if ps.accept("**") {
				m.Op = ps.name()
			} else {
				var key *Node
				switch {
				case ps.at(STRING, ""):
					key = ps.stringsPattern()
				case ps.at(NUMBER, "") || ps.op("-"):
					key = ps.signedNumber()
				case ps.kw("None") || ps.kw("True") || ps.kw("False"):
					key = constant(ps.next().Text)
				default:
					key = &Node{T: "Name", Op: ps.name()}
					if !ps.op(".") {
						ps.fail("invalid syntax")
					}
					for ps.accept(".") {
						key = &Node{T: "Attribute", A: key, Op: ps.name()}
					}
				}
				ps.expect(":")
				m.L = append(m.L, key)
				m.L2 = append(m.L2, ps.pattern())
			}
			if !ps.accept(",") {
				break
			}
		}
		ps.expect("}")
		return m
	}
	ps.fail("invalid syntax")
	return nil
}
