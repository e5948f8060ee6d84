package pyparse

import (
	"strings"
	"unicode/utf8"
)

// numberNode is the Constant of a NUMBER token; the value is kept as
// written and printed the way repr prints it (see unparse.go).
func numberNode(lit string) *Node {
	l := strings.ToLower(lit)
	kind := "int"
	switch {
	case strings.HasSuffix(l, "j"):
		kind = "complex"
	case strings.HasPrefix(l, "0x") || strings.HasPrefix(l, "0o") || strings.HasPrefix(l, "0b"):
	case strings.ContainsAny(l, ".e"):
		kind = "float"
	}
	return &Node{T: "Constant", Const: &Const{Kind: kind, Num: lit}}
}

// decodeEscapes is the value of a non-raw literal body: Python's escape
// sequences replaced. For bytes, the result holds the raw byte values.
func decodeEscapes(body string, bytes bool) string {
	if strings.IndexByte(body, '\\') < 0 {
		return body
	}
	var sb strings.Builder
	put := func(r rune) {
		switch {
		case bytes:
			sb.WriteByte(byte(r))
		case r >= 0xD800 && r <= 0xDFFF:
			// A lone surrogate, which Python strings may hold: kept as
			// its generalized UTF-8 (WTF-8) bytes, read back by
			// decodeRune.
			sb.WriteByte(0xED)
			sb.WriteByte(byte(0x80 | (r>>6)&0x3F))
			sb.WriteByte(byte(0x80 | r&0x3F))
		default:
			sb.WriteRune(r)
		}
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c != '\\' || i+1 >= len(body) {
			sb.WriteByte(c)
			continue
		}
		i++
		switch e := body[i]; e {
		case '\n':
		case '\r':
			if i+1 < len(body) && body[i+1] == '\n' {
				i++
			}
		case '\\', '\'', '"':
			sb.WriteByte(e)
		case 'a':
			sb.WriteByte('\a')
		case 'b':
			sb.WriteByte('\b')
		case 'f':
			sb.WriteByte('\f')
		case 'n':
			sb.WriteByte('\n')
		case 'r':
			sb.WriteByte('\r')
		case 't':
			sb.WriteByte('\t')
		case 'v':
			sb.WriteByte('\v')
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v, n := 0, 0
			for n < 3 && i < len(body) && body[i] >= '0' && body[i] <= '7' {
				v = v*8 + int(body[i]-'0')
				i++
				n++
			}
			i--
			if bytes {
				v &= 0xff
			}
			put(rune(v))
		case 'x':
			put(rune(hexVal(body[i+1 : i+3])))
			i += 2
		case 'u', 'U', 'N':
			if bytes {
				sb.WriteByte('\\')
				sb.WriteByte(e)
				continue
			}
			switch e {
			case 'u':
				put(rune(hexVal(body[i+1 : i+5])))
				i += 4
			case 'U':
				put(rune(hexVal(body[i+1 : i+9])))
				i += 8
			case 'N':
				end := strings.IndexByte(body[i:], '}')
				put(charByName(body[i+2 : i+end]))
				i += end
			}
		default:
			sb.WriteByte('\\')
			sb.WriteByte(e)
		}
	}
	return sb.String()
}

func hexVal(s string) int {
	v := 0
	for i := 0; i < len(s); i++ {
		c := s[i] | 0x20
		if c >= 'a' {
			v = v*16 + int(c-'a'+10)
		} else {
			v = v*16 + int(s[i]-'0')
		}
	}
	return v
}

// stringNode is the value of adjacent string literals: a Constant (str or
// bytes), or a JoinedStr when one of them is an f-string.
func stringNode(toks []*Token) (*Node, error) {
	first, _, _ := strParts(toks[0].Text)
	isF := false
	for _, t := range toks {
		p, _, _ := strParts(t.Text)
		if strings.Contains(p, "f") {
			isF = true
		}
	}
	if !isF {
		var sb strings.Builder
		bytes := strings.Contains(first, "b")
		for _, t := range toks {
			p, body, _ := strParts(t.Text)
			if strings.Contains(p, "r") {
				sb.WriteString(body)
			} else {
				sb.WriteString(decodeEscapes(body, bytes))
			}
		}
		kind := "str"
		if bytes {
			kind = "bytes"
		}
		return &Node{T: "Constant", Const: &Const{Kind: kind, S: sb.String(), U: strings.Contains(first, "u")}}, nil
	}
	js := &Node{T: "JoinedStr"}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			js.L = append(js.L, &Node{T: "Constant", Const: &Const{Kind: "str", S: lit.String()}})
			lit.Reset()
		}
	}
	for _, t := range toks {
		p, body, _ := strParts(t.Text)
		raw := strings.Contains(p, "r")
		if !strings.Contains(p, "f") {
			if raw {
				lit.WriteString(body)
			} else {
				lit.WriteString(decodeEscapes(body, false))
			}
			continue
		}
		parts, _, err := fstringParts(t, body, raw, 0)
		if err != nil {
			return nil, err
		}
		for _, part := range parts {
			if part.T == "Constant" {
				lit.WriteString(part.Const.S)
				continue
			}
			flush()
			js.L = append(js.L, part)
		}
	}
	flush()
	return js, nil
}

// fstringParts splits an f-string body (already checked) into literal
// Constants and FormattedValues. With depth > 0 it reads a format spec and
// stops at the '}' that closes the field.
func fstringParts(t *Token, s string, raw bool, depth int) ([]*Node, int, error) {
	var parts []*Node
	var lit strings.Builder
	flushLit := func() {
		if lit.Len() > 0 {
			v := lit.String()
			if !raw {
				v = decodeEscapes(v, false)
			}
			parts = append(parts, &Node{T: "Constant", Const: &Const{Kind: "str", S: v}})
			lit.Reset()
		}
	}
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\\' && !raw && i+1 < len(s):
			if strings.HasPrefix(s[i:], "\\N{") {
				if e := strings.IndexByte(s[i:], '}'); e > 0 {
					lit.WriteString(s[i : i+e+1])
					i += e + 1
					continue
				}
			}
			lit.WriteString(s[i : i+2])
			i += 2
			continue
		case c == '{':
			if depth == 0 && i+1 < len(s) && s[i+1] == '{' {
				lit.WriteByte('{')
				i += 2
				continue
			}
			flushLit()
			fv, n, err := fstringFieldNode(t, s[i+1:], raw, depth, &parts)
			if err != nil {
				return nil, 0, err
			}
			parts = append(parts, fv)
			i += 1 + n
			continue
		case c == '}':
			if depth > 0 {
				flushLit()
				return parts, i, nil
			}
			lit.WriteByte('}')
			i += 2
			continue
		}
		lit.WriteByte(c)
		i++
	}
	flushLit()
	return parts, i, nil
}

// fstringFieldNode reads one field after '{'; a "=" field adds its text
// to parts first, as CPython does.
func fstringFieldNode(t *Token, s string, raw bool, depth int, parts *[]*Node) (*Node, int, error) {
	n, err := fstringField(t, s, raw, depth) // validates and finds the end
	if err != nil {
		return nil, 0, err
	}
	// find the expression's end again (fstringField's scan)
	end := exprEnd(s)
	expr := s[:end]
	node, err := parseFieldExpr(t, expr)
	if err != nil {
		return nil, 0, err
	}
	fv := &Node{T: "FormattedValue", A: node, N: -1}
	i := end
	if s[i] == '=' {
		j := i + 1
		for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r' || s[j] == '\f') {
			j++
		}
		*parts = append(*parts, &Node{T: "Constant", Const: &Const{Kind: "str", S: s[:j]}})
		i = j
		if s[i] != '!' && s[i] != ':' {
			fv.N = 'r'
		}
	}
	if s[i] == '!' {
		fv.N = int(s[i+1])
		i += 2
	}
	if s[i] == ':' {
		i++
		spec, m, err := fstringParts(t, s[i:], raw, depth+1)
		if err != nil {
			return nil, 0, err
		}
		fv.B = &Node{T: "JoinedStr", L: spec}
		i += m
	}
	_ = n
	return fv, i + 1, nil
}

// exprEnd is where a field's expression ends: at a top-level '!', ':',
// '=' (not part of an operator) or '}', outside strings and brackets.
func exprEnd(s string) int {
	depth := 0
	quote := ""
	for i := 0; i < len(s); i++ {
		c := s[i]
		if quote != "" {
			if strings.HasPrefix(s[i:], quote) {
				i += len(quote) - 1
				quote = ""
			}
			continue
		}
		switch c {
		case '\'', '"':
			quote = string(c)
			if strings.HasPrefix(s[i:], strings.Repeat(quote, 3)) {
				quote = strings.Repeat(quote, 3)
				i += 2
			}
		case '(', '[', '{':
			depth++
		case ')', ']':
			depth--
		case '}':
			if depth == 0 {
				return i
			}
			depth--
		case '!':
			if depth == 0 && !strings.HasPrefix(s[i:], "!=") {
				return i
			}
		case ':':
			if depth == 0 {
				return i
			}
		case '=':
			if depth == 0 && !strings.HasPrefix(s[i:], "==") && (i == 0 || !strings.ContainsRune("=!<>", rune(s[i-1]))) {
				return i
			}
		}
	}
	return len(s)
}

// parseFieldExpr parses a field's expression as CPython 3.11 does: as the
// expression "(" + expr + ")".
func parseFieldExpr(t *Token, expr string) (node *Node, err error) {
	toks, err := Tokenize("("+expr+")", false)
	if err != nil {
		return nil, &Error{t.Start, "f-string: " + err.(*Error).Msg}
	}
	ps := &parser{toks: toks}
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*Error)
			if !ok {
				panic(r)
			}
			node, err = nil, &Error{t.Start, "f-string: " + e.Msg}
		}
	}()
	ps.expect("(")
	if ps.kw("yield") {
		node = ps.yieldExpr()
	} else {
		node = ps.starExpressions()
	}
	ps.expect(")")
	ps.acceptKind(NEWLINE, "")
	if !ps.at(ENDMARKER, "") {
		ps.fail("invalid syntax")
	}
	return node, nil
}

// decodeRune is utf8.DecodeRuneInString that also reads the WTF-8 bytes
// of a lone surrogate.
func decodeRune(s string) (rune, int) {
	if len(s) >= 3 && s[0] == 0xED && s[1] >= 0xA0 && s[1] <= 0xBF && s[2] >= 0x80 && s[2] <= 0xBF {
		return 0xD000 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), 3
	}
	return utf8.DecodeRuneInString(s)
}
