package pyparse

// The match statement (soft keywords match, case and _). Patterns are read
// by their grammar; the checks of the compiler on them (irrefutable
// patterns, duplicate names) are not made by ast.parse either.

func (ps *parser) matchStmt() {
	ps.next() // match
	if ps.op("=") || ps.op(".") || ps.op("(") && false {
		ps.fail("invalid syntax")
	}
	e := ps.starNamedExpression()
	if ps.op(",") {
		for ps.accept(",") && !ps.op(":") {
			ps.starNamedExpression()
		}
	} else if e.k == exStarred {
		ps.fail("invalid syntax")
	}
	ps.expect(":")
	ps.expectNewline()
	if !ps.acceptKind(INDENT, "") {
		ps.fail("expected an indented block")
	}
	n := 0
	for ps.kw("case") {
		ps.next()
		ps.patterns()
		if ps.accept("if") {
			ps.namedExpr()
		}
		ps.block()
		n++
	}
	if n == 0 {
		ps.fail("invalid syntax")
	}
	if !ps.acceptKind(DEDENT, "") {
		ps.fail("invalid syntax")
	}
}

// patterns is an open sequence pattern or a single pattern.
func (ps *parser) patterns() {
	ps.maybeStarPattern()
	for ps.accept(",") && !ps.op(":") && !ps.kw("if") {
		ps.maybeStarPattern()
	}
}

func (ps *parser) maybeStarPattern() {
	if ps.accept("*") {
		ps.name()
		return
	}
	ps.pattern()
}

func (ps *parser) pattern() {
	ps.closedPattern()
	for ps.accept("|") {
		ps.closedPattern()
	}
	if ps.accept("as") {
		if ps.kw("_") {
			ps.fail("cannot use '_' as a target")
		}
		ps.name()
	}
}

func (ps *parser) signedNumber() {
	ps.accept("-")
	if !ps.acceptKind(NUMBER, "") {
		ps.fail("invalid syntax")
	}
	if ps.op("+") || ps.op("-") {
		ps.next()
		if !ps.acceptKind(NUMBER, "") {
			ps.fail("invalid syntax")
		}
	}
}

func (ps *parser) closedPattern() {
	t := ps.tok()
	switch {
	case t.Kind == NUMBER || ps.op("-"):
		ps.signedNumber()
	case t.Kind == STRING:
		for ps.at(STRING, "") {
			s := ps.next()
			if err := checkString(s); err != nil {
				panic(err)
			}
		}
	case ps.kw("None") || ps.kw("True") || ps.kw("False"):
		ps.next()
	case ps.isName():
		ps.next()
		dotted := false
		for ps.accept(".") {
			ps.name()
			dotted = true
		}
		_ = dotted
		if ps.accept("(") {
			sawKw := false
			for !ps.op(")") {
				if ps.isName() && ps.toks[ps.p+1].Text == "=" && ps.toks[ps.p+1].Kind == OP {
					ps.p += 2
					ps.pattern()
					sawKw = true
				} else {
					if sawKw {
						ps.fail("positional patterns follow keyword patterns")
					}
					ps.pattern()
				}
				if !ps.accept(",") {
					break
				}
			}
			ps.expect(")")
		}
	case ps.accept("("):
		if ps.accept(")") {
			return
		}
		ps.maybeStarPattern()
		for ps.accept(",") && !ps.op(")") {
			ps.maybeStarPattern()
		}
		ps.expect(")")
	case ps.accept("["):
		for !ps.op("]") {
			ps.maybeStarPattern()
			if !ps.accept(",") {
				break
			}
		}
		ps.expect("]")
	case ps.accept("{"):
		for !ps.op("}") {
			if ps.accept("**") {
				ps.name()
			} else {
				switch {
				case ps.at(STRING, ""):
					for ps.acceptKind(STRING, "") {
					}
				case ps.at(NUMBER, "") || ps.op("-"):
					ps.signedNumber()
				case ps.kw("None") || ps.kw("True") || ps.kw("False"):
					ps.next()
				default:
					ps.name()
					if !ps.op(".") {
						ps.fail("invalid syntax")
					}
					for ps.accept(".") {
						ps.name()
					}
				}
				ps.expect(":")
				ps.pattern()
			}
			if !ps.accept(",") {
				break
			}
		}
		ps.expect("}")
	default:
		ps.fail("invalid syntax")
	}
}
