package pyparse

// Expressions, following the precedence levels of Python 3.11's grammar.

func (ps *parser) expressions() *ex {
	e := ps.expression()
	if !ps.op(",") {
		return e
	}
	t := &ex{k: exTuple, elts: []*ex{e}}
	for ps.accept(",") && ps.startsExpr() {
		t.elts = append(t.elts, ps.expression())
	}
	return t
}

// starExpressions is a tuple display without parentheses where items may
// be starred (the right side of an assignment, an expression statement).
func (ps *parser) starExpressions() *ex {
	e := ps.starExpression()
	if !ps.op(",") {
		return e
	}
	t := &ex{k: exTuple, elts: []*ex{e}}
	for ps.accept(",") && ps.startsExpr() {
		t.elts = append(t.elts, ps.starExpression())
	}
	return t
}

func (ps *parser) starExpression() *ex {
	if ps.accept("*") {
		return &ex{k: exStarred, elts: []*ex{ps.bitwiseOr()}}
	}
	return ps.expression()
}

func (ps *parser) starNamedExpression() *ex {
	if ps.accept("*") {
		return &ex{k: exStarred, elts: []*ex{ps.bitwiseOr()}}
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

func (ps *parser) namedExpr() *ex {
	if ps.isName() && ps.toks[ps.p+1].Kind == OP && ps.toks[ps.p+1].Text == ":=" {
		ps.p += 2
		ps.expression()
		return &ex{}
	}
	e := ps.expression()
	if ps.op(":=") {
		ps.fail("cannot use assignment expressions with this expression")
	}
	return e
}

func (ps *parser) expression() *ex {
	if ps.kw("lambda") {
		ps.next()
		ps.params(":", false)
		ps.expect(":")
		ps.expression()
		return &ex{}
	}
	e := ps.disjunction()
	if ps.accept("if") {
		ps.disjunction()
		if !ps.accept("else") {
			ps.fail("expected 'else' after 'if' expression")
		}
		ps.expression()
		return &ex{}
	}
	return e
}

func (ps *parser) disjunction() *ex {
	e := ps.conjunction()
	for ps.accept("or") {
		ps.conjunction()
		e = &ex{}
	}
	return e
}

func (ps *parser) conjunction() *ex {
	e := ps.inversion()
	for ps.accept("and") {
		ps.inversion()
		e = &ex{}
	}
	return e
}

func (ps *parser) inversion() *ex {
	if ps.accept("not") {
		ps.inversion()
		return &ex{}
	}
	return ps.comparison()
}

func (ps *parser) compOp() bool {
	t := ps.tok()
	switch {
	case t.Kind == OP && (t.Text == "<" || t.Text == ">" || t.Text == "==" || t.Text == ">=" || t.Text == "<=" || t.Text == "!="):
		ps.next()
		return true
	case ps.kw("in"):
		ps.next()
		return true
	case ps.kw("not") && ps.toks[ps.p+1].Kind == NAME && ps.toks[ps.p+1].Text == "in":
		ps.p += 2
		return true
	case ps.kw("is"):
		ps.next()
		ps.accept("not")
		return true
	}
	return false
}

func (ps *parser) comparison() *ex {
	e := ps.bitwiseOr()
	for ps.compOp() {
		ps.bitwiseOr()
		e = &ex{}
	}
	return e
}

func (ps *parser) binary(ops []string, sub func() *ex) *ex {
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
		sub()
		e = &ex{}
	}
}

func (ps *parser) bitwiseOr() *ex {
	return ps.binary([]string{"|"}, func() *ex {
		return ps.binary([]string{"^"}, func() *ex {
			return ps.binary([]string{"&"}, func() *ex {
				return ps.binary([]string{"<<", ">>"}, func() *ex {
					return ps.binary([]string{"+", "-"}, func() *ex {
						return ps.binary([]string{"*", "/", "//", "%", "@"}, ps.factor)
					})
				})
			})
		})
	})
}

func (ps *parser) factor() *ex {
	if ps.op("+") || ps.op("-") || ps.op("~") {
		ps.next()
		ps.factor()
		return &ex{}
	}
	return ps.power()
}

func (ps *parser) power() *ex {
	e := ps.awaitPrimary()
	if ps.accept("**") {
		ps.factor()
		return &ex{}
	}
	return e
}

func (ps *parser) awaitPrimary() *ex {
	if ps.accept("await") {
		ps.primary()
		return &ex{}
	}
	return ps.primary()
}

func (ps *parser) primary() *ex {
	e := ps.atom()
	for {
		switch {
		case ps.accept("."):
			ps.name()
			e = &ex{k: exAttr}
		case ps.accept("("):
			ps.callArgs(true)
			e = &ex{k: exCall}
		case ps.accept("["):
			ps.slices()
			e = &ex{k: exSub}
		default:
			return e
		}
	}
}

func (ps *parser) slices() {
	for {
		if ps.accept("*") {
			ps.bitwiseOr()
		} else {
			ps.slice()
		}
		if !ps.accept(",") || ps.op("]") {
			break
		}
	}
	ps.expect("]")
}

func (ps *parser) slice() {
	if !ps.op(":") {
		ps.namedExpr()
		if !ps.op(":") {
			return
		}
	}
	ps.expect(":")
	if !ps.op(":") && !ps.op(",") && !ps.op("]") {
		ps.expression()
	}
	if ps.accept(":") && !ps.op(",") && !ps.op("]") {
		ps.expression()
	}
}

// callArgs reads arguments after '(' up to and including ')'.
func (ps *parser) callArgs(genexpOK bool) {
	n := 0
	sawKw, sawKwUnpack, sawGenexp := false, false, false
	for !ps.op(")") {
		n++
		switch {
		case ps.accept("**"):
			ps.expression()
			sawKwUnpack = true
		case ps.accept("*"):
			if sawKwUnpack {
				ps.fail("iterable argument unpacking follows keyword argument unpacking")
			}
			ps.expression()
		case ps.isName() && ps.toks[ps.p+1].Kind == OP && ps.toks[ps.p+1].Text == "=":
			ps.p += 2
			ps.expression()
			sawKw = true
		default:
			ps.namedExpr()
			if ps.op("=") {
				ps.fail("expression cannot contain assignment, perhaps you meant \"==\"?")
			}
			if ps.kw("for") || ps.kw("async") {
				ps.comprehension()
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
func (ps *parser) comprehension() {
	if !ps.kw("for") && !ps.kw("async") {
		ps.fail("invalid syntax")
	}
	for ps.kw("for") || ps.kw("async") {
		ps.accept("async")
		ps.expect("for")
		ps.targetList()
		ps.expect("in")
		ps.disjunction()
		for ps.accept("if") {
			ps.disjunction()
		}
	}
}

func (ps *parser) yieldExpr() *ex {
	ps.expect("yield")
	if ps.accept("from") {
		ps.expression()
	} else if ps.startsExpr() {
		ps.starExpressions()
	}
	return &ex{k: exYield}
}

func (ps *parser) atom() *ex {
	t := ps.tok()
	switch t.Kind {
	case NAME:
		switch t.Text {
		case "None", "True", "False":
			ps.next()
			return &ex{}
		}
		if keywords[t.Text] {
			ps.fail("invalid syntax")
		}
		ps.next()
		return &ex{k: exName}
	case NUMBER:
		ps.next()
		return &ex{}
	case STRING:
		kinds := 0
		for ps.at(STRING, "") {
			s := ps.next()
			b := isBytes(s.Text)
			if b {
				kinds |= 1
			} else {
				kinds |= 2
			}
			if err := checkString(s); err != nil {
				panic(err)
			}
		}
		if kinds == 3 {
			ps.fail("cannot mix bytes and nonbytes literals")
		}
		return &ex{}
	case OP:
		switch t.Text {
		case "...":
			ps.next()
			return &ex{}
		case "(":
			ps.next()
			if ps.accept(")") {
				return &ex{k: exTuple, par: true}
			}
			if ps.kw("yield") {
				ps.yieldExpr()
				ps.expect(")")
				return &ex{k: exYield}
			}
			e := ps.starNamedExpression()
			if ps.kw("for") || ps.kw("async") {
				if e.k == exStarred {
					ps.fail("iterable unpacking cannot be used in comprehension")
				}
				ps.comprehension()
				ps.expect(")")
				return &ex{k: exGenexp}
			}
			if ps.accept(")") {
				if e.k == exStarred {
					ps.fail("cannot use starred expression here")
				}
				p := *e
				p.par = true
				return &p
			}
			tup := &ex{k: exTuple, elts: []*ex{e}, par: true}
			for ps.accept(",") && !ps.op(")") {
				tup.elts = append(tup.elts, ps.starNamedExpression())
			}
			ps.expect(")")
			return tup
		case "[":
			ps.next()
			l := &ex{k: exList}
			if ps.accept("]") {
				return l
			}
			e := ps.starNamedExpression()
			if ps.kw("for") || ps.kw("async") {
				if e.k == exStarred {
					ps.fail("iterable unpacking cannot be used in comprehension")
				}
				ps.comprehension()
				ps.expect("]")
				return &ex{}
			}
			l.elts = append(l.elts, e)
			for ps.accept(",") && !ps.op("]") {
				l.elts = append(l.elts, ps.starNamedExpression())
			}
			ps.expect("]")
			return l
		case "{":
			ps.next()
			ps.dictOrSet()
			return &ex{}
		}
	}
	ps.fail("invalid syntax")
	return nil
}

func (ps *parser) dictOrSet() {
	if ps.accept("}") {
		return
	}
	isDict, unpack := false, false
	item := func(first bool) {
		if first && (ps.op("**") || ps.op("*")) {
			unpack = true
		}
		if ps.accept("**") {
			if !first && !isDict {
				ps.fail("invalid syntax")
			}
			isDict = true
			ps.bitwiseOr()
			return
		}
		if !first && !isDict {
			ps.starNamedExpression()
			return
		}
		if first {
			e := ps.starNamedExpression()
			if e.k != exStarred && ps.accept(":") {
				isDict = true
				ps.expression()
			}
			return
		}
		ps.expression()
		ps.expect(":")
		ps.expression()
	}
	item(true)
	if ps.kw("for") || ps.kw("async") {
		if unpack {
			ps.fail("dict unpacking cannot be used in dict comprehension")
		}
		ps.comprehension()
		ps.expect("}")
		return
	}
	for ps.accept(",") && !ps.op("}") {
		item(false)
	}
	ps.expect("}")
}
