package pyast

// tryMatch parses a match statement at "match" (a soft keyword); it
// returns nil, with the position unchanged, when the line is not one.
func (ps *parser) tryMatch() (n *Node) {
	save := ps.p
	defer func() {
		if r := recover(); r != nil {
			if _, ok := r.(*SyntaxError); !ok {
				panic(r)
			}
			// Not a match statement unless a case block was already seen.
			if n == nil {
				ps.p = save
			} else {
				panic(r)
			}
		}
	}()
	ps.expect(NAME, "match")
	subj := ps.starExpression()
	if ps.atOp(",") {
		elts := []*Node{subj}
		for ps.accept(OP, ",") {
			if ps.atOp(":") {
				break
			}
			elts = append(elts, ps.starExpression())
		}
		subj = &Node{Kind: "Tuple", Elts: elts}
	}
	ps.expect(OP, ":")
	ps.expect(NEWLINE, "")
	ps.expect(INDENT, "")
	if !ps.atKw("case") {
		ps.fail("expected case")
	}
	m := &Node{Kind: "Match", Value: subj}
	// From here on errors are real syntax errors of a match statement.
	func() {
		defer func() {
			if r := recover(); r != nil {
				n = m
				panic(r)
			}
		}()
		for !ps.accept(DEDENT, "") {
			ps.expect(NAME, "case")
			c := &Node{Kind: "match_case", Target: ps.patterns()}
			if ps.accept(NAME, "if") {
				c.Test = ps.namedExpression()
			}
			c.Body = ps.block()
			m.Items = append(m.Items, c)
		}
	}()
	return m
}

func (ps *parser) patterns() *Node {
	first := ps.maybeStarPattern()
	if !ps.atOp(",") {
		if first.Kind == "MatchStar" {
			return &Node{Kind: "MatchSequence", Elts: []*Node{first}}
		}
		return first
	}
	elts := []*Node{first}
	for ps.accept(OP, ",") {
		if ps.atOp(":") || ps.atKw("if") {
			break
		}
		elts = append(elts, ps.maybeStarPattern())
	}
	return &Node{Kind: "MatchSequence", Elts: elts}
}

func (ps *parser) maybeStarPattern() *Node {
	if ps.accept(OP, "*") {
		name := ps.name()
		if name == "_" {
			name = ""
		}
		return &Node{Kind: "MatchStar", Name: name}
	}
	return ps.pattern()
}

func (ps *parser) pattern() *Node {
	p := ps.orPattern()
	if ps.accept(NAME, "as") {
		name := ps.name()
		if name == "_" {
			ps.fail("cannot use '_' as a target")
		}
		return &Node{Kind: "MatchAs", Target: p, Name: name}
	}
	return p
}

func (ps *parser) orPattern() *Node {
	first := ps.closedPattern()
	if !ps.atOp("|") {
		return first
	}
	o := &Node{Kind: "MatchOr", Elts: []*Node{first}}
	for ps.accept(OP, "|") {
		o.Elts = append(o.Elts, ps.closedPattern())
	}
	return o
}

func (ps *parser) signedNumber() *Node {
	neg := ps.accept(OP, "-")
	t := ps.expect(NUMBER, "")
	c, err := parseNumber(t.Str)
	if err != nil {
		panic(&SyntaxError{t.Start, err.Error()})
	}
	n := &Node{Kind: "Constant", Const: c}
	if neg {
		n = &Node{Kind: "UnaryOp", Op: "-", Value: n}
	}
	if ps.atOp("+") || ps.atOp("-") {
		op := ps.next().Str
		t := ps.expect(NUMBER, "")
		c, err := parseNumber(t.Str)
		if err != nil || c.Kind != CComplex {
			panic(&SyntaxError{t.Start, "imaginary number required in complex literal"})
		}
		n = &Node{Kind: "BinOp", Op: op, Left: n, Right: &Node{Kind: "Constant", Const: c}}
	}
	return n
}

func (ps *parser) closedPattern() *Node {
	t := ps.tok()
	switch {
	case t.Type == NUMBER || (t.Type == OP && t.Str == "-"):
		return &Node{Kind: "MatchValue", Value: ps.signedNumber()}
	case t.Type == STRING:
		return &Node{Kind: "MatchValue", Value: ps.atom()}
	case t.Type == NAME && (t.Str == "None" || t.Str == "True" || t.Str == "False"):
		return &Node{Kind: "MatchSingleton", Const: ps.atom().Const}
	case t.Type == NAME:
		name := ps.name()
		var v *Node = &Node{Kind: "Name", Name: name}
		dotted := false
		for ps.accept(OP, ".") {
			v = &Node{Kind: "Attribute", Value: v, Name: ps.name()}
			dotted = true
		}
		if ps.accept(OP, "(") {
			c := &Node{Kind: "MatchClass", Value: v}
			for !ps.atOp(")") {
				if ps.at(NAME, "") && ps.peek(1).Type == OP && ps.peek(1).Str == "=" {
					c.Names = append(c.Names, ps.name())
					ps.p++
					c.Values = append(c.Values, ps.pattern())
				} else {
					if len(c.Names) > 0 {
						ps.fail("positional patterns follow keyword patterns")
					}
					c.Elts = append(c.Elts, ps.pattern())
				}
				if !ps.accept(OP, ",") {
					break
				}
			}
			ps.expect(OP, ")")
			return c
		}
		if dotted {
			return &Node{Kind: "MatchValue", Value: v}
		}
		if name == "_" {
			return &Node{Kind: "MatchAs"}
		}
		return &Node{Kind: "MatchAs", Name: name}
	case t.Type == OP && (t.Str == "(" || t.Str == "["):
		ps.p++
		closeTok := ")"
		if t.Str == "[" {
			closeTok = "]"
		}
		if ps.accept(OP, closeTok) {
			return &Node{Kind: "MatchSequence"}
		}
		first := ps.maybeStarPattern()
		if t.Str == "(" && first.Kind != "MatchStar" && ps.accept(OP, ")") {
			return first
		}
		elts := []*Node{first}
		for ps.accept(OP, ",") {
			if ps.atOp(closeTok) {
				break
			}
			elts = append(elts, ps.maybeStarPattern())
		}
		ps.expect(OP, closeTok)
		return &Node{Kind: "MatchSequence", Elts: elts}
	case t.Type == OP && t.Str == "{":
		ps.p++
		m := &Node{Kind: "MatchMapping"}
		for !ps.atOp("}") {
			if ps.accept(OP, "**") {
				m.Name = ps.name()
			} else {
				var k *Node
				kt := ps.tok()
				switch {
				case kt.Type == NUMBER || (kt.Type == OP && kt.Str == "-"):
					k = ps.signedNumber()
				case kt.Type == STRING:
					k = ps.atom()
				case kt.Type == NAME && (kt.Str == "None" || kt.Str == "True" || kt.Str == "False"):
					k = ps.atom()
				default:
					k = &Node{Kind: "Name", Name: ps.name()}
					for ps.accept(OP, ".") {
						k = &Node{Kind: "Attribute", Value: k, Name: ps.name()}
					}
					if k.Kind == "Name" {
						ps.fail("mapping pattern keys may only match literals and attribute lookups")
					}
				}
				ps.expect(OP, ":")
				m.Keys = append(m.Keys, k)
				m.Values = append(m.Values, ps.pattern())
			}
			if !ps.accept(OP, ",") {
				break
			}
		}
		ps.expect(OP, "}")
		return m
	}
	ps.fail("invalid pattern at %q", t.Str)
	return nil
}

func (u *unparser) matchNode(n *Node) bool {
	switch n.Kind {
	case "Match":
		u.fill("match ")
		u.traverse(n.Value)
		u.block(func() { u.traverseAll(n.Items) })
	case "match_case":
		u.fill("case ")
		u.traverse(n.Target)
		u.traverseAfter(" if ", n.Test)
		u.block(func() { u.traverseAll(n.Body) })
	case "MatchValue":
		u.traverse(n.Value)
	case "MatchSingleton":
		u.constant(&Node{Kind: "Constant", Const: n.Const})
	case "MatchSequence":
		u.write("[")
		u.interleave(", ", n.Elts)
		u.write("]")
	case "MatchStar":
		name := n.Name
		if name == "" {
			name = "_"
		}
		u.write("*" + name)
	case "MatchMapping":
		u.write("{")
		for i, k := range n.Keys {
			if i > 0 {
				u.write(", ")
			}
			u.traverse(k)
			u.write(": ")
			u.traverse(n.Values[i])
		}
		if n.Name != "" {
			if len(n.Keys) > 0 {
				u.write(", ")
			}
			u.write("**" + n.Name)
		}
		u.write("}")
	case "MatchClass":
		u.setPrec(pAtom, n.Value)
		u.traverse(n.Value)
		u.write("(")
		u.interleave(", ", n.Elts)
		if len(n.Names) > 0 {
			if len(n.Elts) > 0 {
				u.write(", ")
			}
			for i, a := range n.Names {
				if i > 0 {
					u.write(", ")
				}
				u.write(a + "=")
				u.traverse(n.Values[i])
			}
		}
		u.write(")")
	case "MatchAs":
		switch {
		case n.Name == "":
			u.write("_")
		case n.Target == nil:
			u.write(n.Name)
		default:
			u.requireParens(pTest, n, func() {
				u.setPrec(pBOr, n.Target)
				u.traverse(n.Target)
				u.write(" as " + n.Name)
			})
		}
	case "MatchOr":
		u.requireParens(pBOr, n, func() {
			u.setPrec(nextPrec(pBOr), n.Elts...)
			u.interleave(" | ", n.Elts)
		})
	default:
		return false
	}
	return true
}
