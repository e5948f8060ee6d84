package pyast

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/runenames"
)

// parseNumber turns a NUMBER token into a Constant with Python's repr of
// its value.
func parseNumber(s string) (*Const, error) {
	s = strings.ReplaceAll(s, "_", "")
	ls := strings.ToLower(s)
	if strings.HasSuffix(ls, "j") {
		f, err := strconv.ParseFloat(s[:len(s)-1], 64)
		if err != nil && !isRangeErr(err) {
			return nil, fmt.Errorf("invalid imaginary literal %q", s)
		}
		return &Const{Kind: CComplex, Num: floatRepr(f, false) + "j"}, nil
	}
	base := 10
	digits := s
	switch {
	case strings.HasPrefix(ls, "0x"):
		base, digits = 16, s[2:]
	case strings.HasPrefix(ls, "0o"):
		base, digits = 8, s[2:]
	case strings.HasPrefix(ls, "0b"):
		base, digits = 2, s[2:]
	}
	if base == 10 && strings.ContainsAny(ls, ".e") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil && !isRangeErr(err) {
			return nil, fmt.Errorf("invalid float literal %q", s)
		}
		return &Const{Kind: CFloat, Num: floatRepr(f, true)}, nil
	}
	if base == 10 && len(digits) > 1 && digits[0] == '0' && strings.Trim(digits, "0") != "" {
		return nil, fmt.Errorf("leading zeros in decimal integer literals are not permitted")
	}
	v, ok := new(big.Int).SetString(digits, base)
	if !ok {
		return nil, fmt.Errorf("invalid integer literal %q", s)
	}
	return &Const{Kind: CInt, Num: v.String()}, nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// floatRepr is Python's repr of a float ('r' format); addDot0 adds ".0"
// to integral values in fixed notation, as float repr does (complex repr
// does not).
func floatRepr(f float64, addDot0 bool) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	neg := strings.HasPrefix(e, "-")
	e = strings.TrimPrefix(e, "-")
	mant, exps, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(exps)
	ds := strings.Replace(mant, ".", "", 1)
	decpt := exp + 1
	var out string
	if decpt <= -4 || decpt > 16 {
		m := ds[:1]
		if len(ds) > 1 {
			m += "." + ds[1:]
		}
		sign := "+"
		if exp < 0 {
			sign = "-"
			exp = -exp
		}
		out = fmt.Sprintf("%se%s%02d", m, sign, exp)
	} else if decpt <= 0 {
		out = "0." + strings.Repeat("0", -decpt) + ds
	} else if decpt >= len(ds) {
		out = ds + strings.Repeat("0", decpt-len(ds))
		if addDot0 {
			out += ".0"
		}
	} else {
		out = ds[:decpt] + "." + ds[decpt:]
	}
	if neg {
		out = "-" + out
	}
	return out
}

// strTok is one STRING token split into its parts.
type strTok struct {
	raw, bytes, fstr, u bool
	body                string
	quote               string
	pos                 Pos
}

func splitStrTok(t Token) strTok {
	s := t.Str
	i := strings.IndexAny(s, "'\"")
	prefix := strings.ToLower(s[:i])
	q := s[i : i+1]
	if strings.HasPrefix(s[i:], strings.Repeat(q, 3)) && len(s)-i >= 6 {
		q = strings.Repeat(q, 3)
	}
	return strTok{
		raw: strings.Contains(prefix, "r"), bytes: strings.Contains(prefix, "b"),
		fstr: strings.Contains(prefix, "f"), u: strings.Contains(prefix, "u"),
		body: s[i+len(q) : len(s)-len(q)], quote: q, pos: t.Start,
	}
}

// decodeEscapes decodes backslash escapes of a str (or bytes) literal body.
func decodeEscapes(s string, isBytes bool, pos Pos) (string, error) {
	if !strings.Contains(s, "\\") {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			i++
			continue
		}
		n := s[i+1]
		i += 2
		switch n {
		case '\n':
		case '\\', '\'', '"':
			b.WriteByte(n)
		case 'a':
			b.WriteByte(7)
		case 'b':
			b.WriteByte(8)
		case 'f':
			b.WriteByte(12)
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'v':
			b.WriteByte(11)
		case '0', '1', '2', '3', '4', '5', '6', '7':
			v := int(n - '0')
			for k := 0; k < 2 && i < len(s) && s[i] >= '0' && s[i] <= '7'; k++ {
				v = v*8 + int(s[i]-'0')
				i++
			}
			if isBytes {
				b.WriteByte(byte(v))
			} else {
				writeRune(&b, rune(v))
			}
		case 'x', 'u', 'U':
			w := map[byte]int{'x': 2, 'u': 4, 'U': 8}[n]
			if isBytes && n != 'x' {
				b.WriteByte('\\')
				b.WriteByte(n)
				continue
			}
			if i+w > len(s) {
				return "", &SyntaxError{pos, "truncated \\" + string(n) + " escape"}
			}
			v, err := strconv.ParseUint(s[i:i+w], 16, 32)
			if err != nil || v > unicode.MaxRune {
				return "", &SyntaxError{pos, "invalid \\" + string(n) + " escape"}
			}
			i += w
			if isBytes {
				b.WriteByte(byte(v))
			} else {
				writeRune(&b, rune(v))
			}
		case 'N':
			if isBytes {
				b.WriteString("\\N")
				continue
			}
			end := strings.IndexByte(s[i:], '}')
			if i >= len(s) || s[i] != '{' || end < 0 {
				return "", &SyntaxError{pos, "malformed \\N character escape"}
			}
			r, ok := runeByName(s[i+1 : i+end])
			if !ok {
				return "", &SyntaxError{pos, "unknown Unicode character name " + s[i+1:i+end]}
			}
			b.WriteRune(r)
			i += end + 1
		default:
			b.WriteByte('\\')
			b.WriteByte(n)
		}
	}
	return b.String(), nil
}

var (
	runeNamesOnce sync.Once
	runeNames     map[string]rune
)

// runeByName looks a character up by its Unicode name, as \N{...} does
// (case-insensitively). The table is built on first use.
func runeByName(name string) (rune, bool) {
	runeNamesOnce.Do(func() {
		runeNames = map[string]rune{}
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if n := runenames.Name(r); n != "" && !strings.HasPrefix(n, "<") {
				runeNames[n] = r
			}
		}
	})
	r, ok := runeNames[strings.ToUpper(name)]
	return r, ok
}

// parseStrings builds the Constant or JoinedStr of adjacent STRING tokens.
func parseStrings(toks []Token) (*Node, error) {
	parts := make([]strTok, len(toks))
	anyF, anyBytes, allBytes := false, false, true
	for i, t := range toks {
		parts[i] = splitStrTok(t)
		anyF = anyF || parts[i].fstr
		anyBytes = anyBytes || parts[i].bytes
		allBytes = allBytes && parts[i].bytes
	}
	if anyBytes && !allBytes {
		return nil, &SyntaxError{toks[0].Start, "cannot mix bytes and nonbytes literals"}
	}
	if !anyF {
		var b strings.Builder
		for _, p := range parts {
			if p.bytes {
				for _, r := range p.body {
					if r >= 0x80 {
						return nil, &SyntaxError{p.pos, "bytes can only contain ASCII literal characters"}
					}
				}
			}
			s := p.body
			if !p.raw {
				var err error
				if s, err = decodeEscapes(s, p.bytes, p.pos); err != nil {
					return nil, err
				}
			}
			b.WriteString(s)
		}
		k := CStr
		if allBytes {
			k = CBytes
		}
		return &Node{Kind: "Constant", Const: &Const{Kind: k, Str: b.String(), U: parts[0].u}}, nil
	}
	js := &Node{Kind: "JoinedStr"}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			js.Values = append(js.Values, &Node{Kind: "Constant", Const: &Const{Kind: CStr, Str: lit.String()}})
			lit.Reset()
		}
	}
	for _, p := range parts {
		if !p.fstr {
			s := p.body
			if !p.raw {
				var err error
				if s, err = decodeEscapes(s, false, p.pos); err != nil {
					return nil, err
				}
			}
			lit.WriteString(s)
			continue
		}
		fp := &fparser{s: p.body, raw: p.raw, pos: p.pos}
		if err := fp.parse(js, &lit, flush, 0); err != nil {
			return nil, err
		}
	}
	flush()
	return js, nil
}

// fparser parses one f-string body as CPython 3.11's fstring_find_literal
// and fstring_find_expr do.
type fparser struct {
	s   string
	i   int
	raw bool
	pos Pos
}

func (f *fparser) err(msg string) error { return &SyntaxError{f.pos, "f-string: " + msg} }

// parse reads literal text and replacement fields into out until the end
// of the body (level 0) or a closing '}' of a format spec (level 1).
func (f *fparser) parse(out *Node, lit *strings.Builder, flush func(), level int) error {
	for f.i < len(f.s) {
		// Literal text up to the next field.
		start := f.i
		var seg strings.Builder
		for f.i < len(f.s) {
			c := f.s[f.i]
			if c == '\\' && !f.raw && f.i+1 < len(f.s) {
				// \N{NAME} is one escape: its braces open no field.
				if f.s[f.i+1] == 'N' && f.i+2 < len(f.s) && f.s[f.i+2] == '{' {
					if end := strings.IndexByte(f.s[f.i:], '}'); end >= 0 {
						f.i += end + 1
						continue
					}
				}
				f.i += 2
				continue
			}
			if c == '{' || c == '}' {
				if level == 0 && f.i+1 < len(f.s) && f.s[f.i+1] == c {
					seg.WriteString(f.s[start : f.i+1])
					f.i += 2
					start = f.i
					continue
				}
				break
			}
			f.i++
		}
		seg.WriteString(f.s[start:f.i])
		text := seg.String()
		if !f.raw {
			var err error
			if text, err = decodeEscapes(text, false, f.pos); err != nil {
				return err
			}
		}
		lit.WriteString(text)
		if f.i >= len(f.s) {
			return nil
		}
		if f.s[f.i] == '}' {
			if level > 0 {
				return nil
			}
			return f.err("single '}' is not allowed")
		}
		f.i++ // '{'
		if err := f.field(out, lit, flush, level); err != nil {
			return err
		}
	}
	return nil
}

func (f *fparser) field(out *Node, lit *strings.Builder, flush func(), level int) error {
	if level >= 2 {
		return f.err("expressions nested too deeply")
	}
	start := f.i
	depth := 0
	var quote string
	for f.i < len(f.s) {
		c := f.s[f.i]
		if c == '\\' {
			return f.err("expression part cannot include a backslash")
		}
		if quote != "" {
			if strings.HasPrefix(f.s[f.i:], quote) {
				f.i += len(quote)
				quote = ""
				continue
			}
			f.i++
			continue
		}
		if c == '\'' || c == '"' {
			quote = string(c)
			if strings.HasPrefix(f.s[f.i:], strings.Repeat(quote, 3)) {
				quote = strings.Repeat(quote, 3)
			}
			f.i += len(quote)
			continue
		}
		if c == '[' || c == '(' || c == '{' {
			depth++
		} else if c == ']' || c == ')' || (c == '}' && depth > 0) {
			depth--
		} else if c == '#' {
			return f.err("expression part cannot include '#'")
		} else if depth == 0 && (c == '!' || c == ':' || c == '}' || c == '=' || c == '<' || c == '>') {
			if f.i+1 < len(f.s) {
				n := f.s[f.i+1]
				if n == '=' && (c == '=' || c == '!' || c == '<' || c == '>') {
					f.i += 2
					continue
				}
			}
			if c == '<' || c == '>' {
				f.i++
				continue
			}
			break
		}
		f.i++
	}
	if quote != "" {
		return f.err("unterminated string")
	}
	if f.i >= len(f.s) {
		return f.err("expecting '}'")
	}
	exprText := f.s[start:f.i]
	if strings.TrimSpace(exprText) == "" {
		return f.err("empty expression not allowed")
	}
	expr, err := parseFExpr(exprText, f.pos)
	if err != nil {
		return err
	}
	fv := &Node{Kind: "FormattedValue", Value: expr, Conversion: -1}
	debug := false
	if f.s[f.i] == '=' {
		debug = true
		f.i++
		for f.i < len(f.s) && strings.IndexByte(" \t\n\r\f\v", f.s[f.i]) >= 0 {
			f.i++
		}
		lit.WriteString(f.s[start:f.i])
	}
	if f.i < len(f.s) && f.s[f.i] == '!' {
		f.i++
		if f.i >= len(f.s) || strings.IndexByte("sra", f.s[f.i]) < 0 {
			return f.err("invalid conversion character: expected 's', 'r', or 'a'")
		}
		fv.Conversion = int(f.s[f.i])
		f.i++
	}
	if f.i < len(f.s) && f.s[f.i] == ':' {
		f.i++
		spec := &Node{Kind: "JoinedStr"}
		var slit strings.Builder
		sflush := func() {
			if slit.Len() > 0 {
				spec.Values = append(spec.Values, &Node{Kind: "Constant", Const: &Const{Kind: CStr, Str: slit.String()}})
				slit.Reset()
			}
		}
		if err := f.parse(spec, &slit, sflush, level+1); err != nil {
			return err
		}
		sflush()
		fv.FormatSpec = spec
	}
	if f.i >= len(f.s) || f.s[f.i] != '}' {
		return f.err("expecting '}'")
	}
	f.i++
	if debug && fv.Conversion == -1 && fv.FormatSpec == nil {
		fv.Conversion = 'r'
	}
	flush()
	out.Values = append(out.Values, fv)
	return nil
}

// parseFExpr parses the expression of a replacement field, as CPython
// does: in parentheses, so that it may span lines.
func parseFExpr(text string, pos Pos) (*Node, error) {
	toks, err := Tokenize("(" + text + ")")
	if err != nil {
		return nil, &SyntaxError{pos, "f-string: " + err.Error()}
	}
	ps := &parser{}
	for _, t := range toks {
		if t.Type == COMMENT || t.Type == NL {
			continue
		}
		ps.toks = append(ps.toks, t)
	}
	var n *Node
	err = func() (err error) {
		defer func() {
			if r := recover(); r != nil {
				se, ok := r.(*SyntaxError)
				if !ok {
					panic(r)
				}
				err = &SyntaxError{pos, "f-string: " + se.Msg}
			}
		}()
		ps.expect(OP, "(")
		if ps.atKw("yield") {
			n = ps.yieldExpr()
		} else {
			n = ps.starExpressions()
		}
		ps.expect(OP, ")")
		if !ps.at(NEWLINE, "") && !ps.at(ENDMARKER, "") {
			ps.fail("invalid syntax")
		}
		return nil
	}()
	return n, err
}

// writeRune appends r to b; a lone surrogate (which a Python str may
// hold and UTF-8 may not) is written as its 3-byte generalized UTF-8 form
// (WTF-8), which nextRune reads back.
func writeRune(b *strings.Builder, r rune) {
	if r >= 0xd800 && r <= 0xdfff {
		b.WriteByte(0xed)
		b.WriteByte(byte(0xa0 | (r>>6)&0x1f))
		b.WriteByte(byte(0x80 | r&0x3f))
		return
	}
	b.WriteRune(r)
}

// nextRune decodes the character at s[i:], surrogates in WTF-8 included.
func nextRune(s string, i int) (rune, int) {
	if s[i] == 0xed && i+2 < len(s) && s[i+1] >= 0xa0 && s[i+1] <= 0xbf && s[i+2]&0xc0 == 0x80 {
		return 0xd000 | rune(s[i+1]&0x3f)<<6 | rune(s[i+2]&0x3f), 3
	}
	return utf8.DecodeRuneInString(s[i:])
}

// eachRune calls fn for every character of s (see nextRune).
func eachRune(s string, fn func(r rune)) {
	for i := 0; i < len(s); {
		r, n := nextRune(s, i)
		fn(r)
		i += n
	}
}

// pyRepr is Python's repr of a str.
func pyRepr(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	eachRune(s, func(r rune) {
		switch {
		case r == rune(q) || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\t':
			b.WriteString("\\t")
		case r == '\n':
			b.WriteString("\\n")
		case r == '\r':
			b.WriteString("\\r")
		case r < ' ' || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		case r < 0x7f:
			b.WriteRune(r)
		case isPrintable(r):
			b.WriteRune(r)
		case r <= 0xff:
			fmt.Fprintf(&b, "\\x%02x", r)
		case r <= 0xffff:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			fmt.Fprintf(&b, "\\U%08x", r)
		}
	})
	b.WriteByte(q)
	return b.String()
}

// bytesRepr is Python's repr of bytes.
func bytesRepr(s string) string {
	q := byte('\'')
	if strings.IndexByte(s, '\'') >= 0 && strings.IndexByte(s, '"') < 0 {
		q = '"'
	}
	var b strings.Builder
	b.WriteString("b")
	b.WriteByte(q)
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == q || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\t':
			b.WriteString("\\t")
		case c == '\n':
			b.WriteString("\\n")
		case c == '\r':
			b.WriteString("\\r")
		case c < ' ' || c >= 0x7f:
			fmt.Fprintf(&b, "\\x%02x", c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// isPrintable is str.isprintable for one rune.
func isPrintable(r rune) bool {
	if r == ' ' {
		return true
	}
	return unicode.IsPrint(r) && (r < 0xd800 || r > 0xdfff)
}

// unicodeEscape is one character encoded with Python's unicode_escape.
func unicodeEscape(r rune) string {
	switch {
	case r == '\\':
		return "\\\\"
	case r == '\t':
		return "\\t"
	case r == '\n':
		return "\\n"
	case r == '\r':
		return "\\r"
	case r < ' ' || (r >= 0x7f && r <= 0xff):
		return fmt.Sprintf("\\x%02x", r)
	case r < 0x7f:
		return string(r)
	case r <= 0xffff:
		return fmt.Sprintf("\\u%04x", r)
	default:
		return fmt.Sprintf("\\U%08x", r)
	}
}
