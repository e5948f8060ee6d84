// Package pyparse reads Python 3.11 source without Python: a tokenizer
// with the rules of CPython's (indentation, brackets, continuation lines,
// string and number literals) and a recursive-descent parser of Python
// 3.11's grammar. Check accepts exactly what ast.parse accepts, as far as
// the tests against CPython go; Agentless Mini drops a repair whose result
// ast.parse rejects.
package pyparse

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Kind is a token's type, named as in Python's token module.
type Kind int

// Token kinds.
const (
	ENDMARKER Kind = iota
	NAME
	NUMBER
	STRING
	OP
	NEWLINE
	INDENT
	DEDENT
	COMMENT // only with Tokenizer.Comments
	NL      // only with Tokenizer.Comments: a line break that ends no statement
)

var kindNames = [...]string{"ENDMARKER", "NAME", "NUMBER", "STRING", "OP", "NEWLINE", "INDENT", "DEDENT", "COMMENT", "NL"}

func (k Kind) String() string { return kindNames[k] }

// Pos is a position: line from 1, column in code points from 0 (as
// Python's tokenize module counts them).
type Pos struct{ Line, Col int }

// Token is one token.
type Token struct {
	Kind       Kind
	Text       string
	Start, End Pos
	Off        int // byte offset of the start in the source
}

// Error is a syntax error at a position.
type Error struct {
	Pos Pos
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("line %d:%d: %s", e.Pos.Line, e.Pos.Col, e.Msg) }

// tokenizer state.
type tokenizer struct {
	src      string
	off      int // byte offset
	line     int
	lineOff  int // byte offset of the current line's start
	indents  []int
	altInd   []int
	parens   []byte
	atBOL    bool
	comments bool
	out      []Token
}

// Tokenize splits src into tokens. With comments, COMMENT and NL tokens are
// kept as Python's tokenize module gives them.
func Tokenize(src string, comments bool) ([]Token, error) {
	t := &tokenizer{src: src, line: 1, indents: []int{0}, altInd: []int{0}, atBOL: true, comments: comments}
	t.out = make([]Token, 0, len(src)/4+8) // about one token per 4 bytes of code
	if err := t.run(); err != nil {
		return nil, err
	}
	return t.out, nil
}

func (t *tokenizer) col(off int) int { return utf8.RuneCountInString(t.src[t.lineOff:off]) }

func (t *tokenizer) pos(off int) Pos { return Pos{t.line, t.col(off)} }

func (t *tokenizer) errf(off int, f string, a ...any) error {
	return &Error{t.pos(off), fmt.Sprintf(f, a...)}
}

func (t *tokenizer) emit(k Kind, start, end int) {
	t.out = append(t.out, Token{Kind: k, Text: t.src[start:end], Start: t.pos(start), End: t.pos(end), Off: start})
}

func (t *tokenizer) newline(off int) {
	t.line++
	t.lineOff = off
}

func isIDStart(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || r == 0x2118 || r == 0x212E || r == 0x309B || r == 0x309C
}

func isIDContinue(r rune) bool {
	return isIDStart(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r) || r == 0xB7 || r == 0x387 || (r >= 0x1369 && r <= 0x1371) || r == 0x19DA
}

func (t *tokenizer) run() error {
	src := t.src
	if strings.HasPrefix(src, "\ufeff") {
		t.off = 3
		t.lineOff = 3
	}
	if strings.IndexByte(src, 0) >= 0 {
		return &Error{Pos{1, 0}, "source code cannot contain null bytes"}
	}
	for {
		if t.atBOL {
			done, err := t.indentation()
			if err != nil {
				return err
			}
			if done {
				break
			}
		}
		if t.off >= len(src) {
			break
		}
		c := src[t.off]
		switch {
		case c == ' ' || c == '\t' || c == '\f':
			t.off++
		case c == '#':
			s := t.off
			for t.off < len(src) && src[t.off] != '\n' && src[t.off] != '\r' {
				t.off++
			}
			if t.comments {
				t.emit(COMMENT, s, t.off)
			}
		case c == '\\':
			s := t.off
			sp := t.pos(s)
			t.off++
			if t.off < len(src) && src[t.off] == '\r' {
				t.off++
			}
			if t.off < len(src) && src[t.off] == '\n' {
				t.off++
				t.newline(t.off)
				if t.off >= len(src) {
					return &Error{sp, "unexpected EOF while parsing"}
				}
				continue
			}
			if t.off >= len(src) {
				return &Error{sp, "unexpected EOF while parsing"}
			}
			return t.errf(s, "unexpected character after line continuation character")
		case c == '\n' || c == '\r':
			s := t.off
			t.off++
			if c == '\r' && t.off < len(src) && src[t.off] == '\n' {
				t.off++
			}
			if len(t.parens) > 0 {
				if t.comments {
					t.emit(NL, s, t.off)
				}
			} else {
				t.emit(NEWLINE, s, t.off)
				t.atBOL = true
			}
			t.newline(t.off)
		default:
			if err := t.token(); err != nil {
				return err
			}
		}
	}
	if len(t.parens) > 0 {
		return &Error{t.pos(t.off), "unexpected EOF in multi-line statement"}
	}
	// A last line without a newline still ends its statement.
	if n := len(t.out); n > 0 {
		last := t.out[n-1].Kind
		if last != NEWLINE && last != DEDENT && last != INDENT && !(t.comments && last == NL) {
			if !(t.comments && last == COMMENT && t.lastSignificantIsNewline()) {
				// as tokenize reports it: empty, one column wide
				end := t.pos(t.off)
				end.Col++
				t.out = append(t.out, Token{Kind: NEWLINE, Start: t.pos(t.off), End: end, Off: t.off})
			}
		}
	}
	for len(t.indents) > 1 {
		t.indents = t.indents[:len(t.indents)-1]
		t.out = append(t.out, Token{Kind: DEDENT, Start: Pos{t.line + 1, 0}, End: Pos{t.line + 1, 0}, Off: len(src)})
	}
	t.out = append(t.out, Token{Kind: ENDMARKER, Start: Pos{t.line + 1, 0}, End: Pos{t.line + 1, 0}, Off: len(src)})
	return nil
}

func (t *tokenizer) lastSignificantIsNewline() bool {
	for i := len(t.out) - 1; i >= 0; i-- {
		switch t.out[i].Kind {
		case COMMENT, NL:
			continue
		case NEWLINE, DEDENT, INDENT:
			return true
		default:
			return false
		}
	}
	return true
}

// indentation reads the start of a logical line: blank and comment-only
// lines are skipped (NL tokens), otherwise INDENT/DEDENT tokens are made.
// It reports true at the end of the input.
func (t *tokenizer) indentation() (bool, error) {
	src := t.src
	for {
		col, alt := 0, 0
		s := t.off
		for t.off < len(src) {
			c := src[t.off]
			if c == ' ' {
				col++
				alt++
			} else if c == '\t' {
				col = (col/8 + 1) * 8
				alt++
			} else if c == '\f' {
				col, alt = 0, 0
			} else {
				break
			}
			t.off++
		}
		if t.off >= len(src) {
			return true, nil
		}
		c := src[t.off]
		if c == '#' || c == '\n' || c == '\r' || c == '\\' && t.blankContinuation() {
			if c == '#' {
				cs := t.off
				for t.off < len(src) && src[t.off] != '\n' && src[t.off] != '\r' {
					t.off++
				}
				if t.comments {
					t.emit(COMMENT, cs, t.off)
				}
				if t.off >= len(src) {
					return false, nil // the comment ends the input: no NL
				}
			}
			if c == '\\' {
				t.off++
				if src[t.off] == '\r' {
					t.off++
				}
				if t.off < len(src) && src[t.off] == '\n' {
					t.off++
				}
				t.newline(t.off)
				if t.off >= len(src) {
					return false, &Error{t.pos(t.off), "unexpected EOF while parsing"}
				}
				continue
			}
			ns := t.off
			t.off++
			if src[ns] == '\r' && t.off < len(src) && src[t.off] == '\n' {
				t.off++
			}
			if t.comments {
				t.emit(NL, ns, t.off)
			}
			t.newline(t.off)
			_ = s
			continue
		}
		t.atBOL = false
		top := t.indents[len(t.indents)-1]
		topAlt := t.altInd[len(t.altInd)-1]
		switch {
		case col == top:
			if alt != topAlt {
				return false, t.errf(t.off, "inconsistent use of tabs and spaces in indentation")
			}
		case col > top:
			if alt <= topAlt {
				return false, t.errf(t.off, "inconsistent use of tabs and spaces in indentation")
			}
			t.indents = append(t.indents, col)
			t.altInd = append(t.altInd, alt)
			t.out = append(t.out, Token{Kind: INDENT, Text: src[t.lineOff:t.off], Start: Pos{t.line, 0}, End: t.pos(t.off), Off: t.lineOff})
		default:
			for len(t.indents) > 1 && col < t.indents[len(t.indents)-1] {
				t.indents = t.indents[:len(t.indents)-1]
				t.altInd = t.altInd[:len(t.altInd)-1]
				t.out = append(t.out, Token{Kind: DEDENT, Start: t.pos(t.off), End: t.pos(t.off), Off: t.off})
			}
			if col != t.indents[len(t.indents)-1] {
				return false, t.errf(t.off, "unindent does not match any outer indentation level")
			}
			if alt != t.altInd[len(t.altInd)-1] {
				return false, t.errf(t.off, "inconsistent use of tabs and spaces in indentation")
			}
		}
		return false, nil
	}
}

// blankContinuation reports whether the backslash at t.off is followed by
// a newline (a line that continues onto the next one before any token).
func (t *tokenizer) blankContinuation() bool {
	r := t.src[t.off+1:]
	return strings.HasPrefix(r, "\n") || strings.HasPrefix(r, "\r")
}

var ops3 = []string{"**=", "//=", ">>=", "<<=", "...", "!="}
var ops2 = []string{"!=", "%=", "&=", "**", "*=", "+=", "-=", "->", "//", "/=", ":=", "<<", "<=", "==", ">=", ">>", "@=", "^=", "|=", "<>"}

const ops1 = "%&()*+,-./:;<=>@[]^{|}~"

func (t *tokenizer) token() error {
	src := t.src
	s := t.off
	c := src[s]
	r, size := utf8.DecodeRuneInString(src[s:])
	if r == utf8.RuneError && size == 1 {
		return t.errf(s, "invalid utf-8")
	}
	if isIDStart(r) {
		e := s + size
		for e < len(src) {
			r2, n := utf8.DecodeRuneInString(src[e:])
			if !isIDContinue(r2) {
				break
			}
			e += n
		}
		// string prefix?
		if e < len(src) && (src[e] == '"' || src[e] == '\'') && isStrPrefix(src[s:e]) {
			return t.str(s, e)
		}
		t.off = e
		t.emit(NAME, s, e)
		return nil
	}
	if c >= '0' && c <= '9' || c == '.' && s+1 < len(src) && src[s+1] >= '0' && src[s+1] <= '9' {
		return t.number(s)
	}
	if c == '"' || c == '\'' {
		return t.str(s, s)
	}
	for _, o := range ops3 {
		if strings.HasPrefix(src[s:], o) && len(o) == 3 {
			t.off = s + 3
			t.emit(OP, s, t.off)
			return nil
		}
	}
	for _, o := range ops2 {
		if strings.HasPrefix(src[s:], o) {
			if o == "<>" {
				return t.errf(s, "invalid syntax")
			}
			t.off = s + 2
			t.emit(OP, s, t.off)
			return nil
		}
	}
	if strings.IndexByte(ops1, c) >= 0 {
		switch c {
		case '(', '[', '{':
			if len(t.parens) >= 200 {
				return t.errf(s, "too many nested parentheses")
			}
			t.parens = append(t.parens, c)
		case ')', ']', '}':
			if len(t.parens) == 0 {
				return t.errf(s, "unmatched '%c'", c)
			}
			open := t.parens[len(t.parens)-1]
			if open == '(' && c != ')' || open == '[' && c != ']' || open == '{' && c != '}' {
				return t.errf(s, "closing parenthesis '%c' does not match opening parenthesis '%c'", c, open)
			}
			t.parens = t.parens[:len(t.parens)-1]
		}
		t.off = s + 1
		t.emit(OP, s, t.off)
		return nil
	}
	if c == '!' {
		return t.errf(s, "invalid syntax")
	}
	return t.errf(s, "invalid character '%c' (U+%04X)", r, r)
}

func isStrPrefix(p string) bool {
	switch strings.ToLower(p) {
	case "r", "u", "b", "br", "rb", "f", "fr", "rf":
		return true
	}
	return false
}

// str reads a string literal whose prefix is src[s:q] and quote at q.
func (t *tokenizer) str(s, q int) error {
	src := t.src
	quote := src[q]
	triple := strings.HasPrefix(src[q:], strings.Repeat(string(quote), 3))
	i := q + 1
	if triple {
		i = q + 3
	}
	startLine, startLineOff := t.line, t.lineOff
	for {
		if i >= len(src) {
			t.line, t.lineOff = startLine, startLineOff
			if triple {
				return t.errf(s, "unterminated triple-quoted string literal")
			}
			return t.errf(s, "unterminated string literal")
		}
		c := src[i]
		switch {
		case c == '\\':
			i++
			if i < len(src) {
				if src[i] == '\r' && i+1 < len(src) && src[i+1] == '\n' {
					i++
				}
				if src[i] == '\n' || src[i] == '\r' {
					t.newline(i + 1)
				}
				i++
			}
			continue
		case c == '\n' || c == '\r':
			if !triple {
				t.line, t.lineOff = startLine, startLineOff
				return t.errf(s, "unterminated string literal")
			}
			if c == '\r' && i+1 < len(src) && src[i+1] == '\n' {
				i++
			}
			t.newline(i + 1)
		case c == quote:
			if !triple {
				i++
				goto done
			}
			if strings.HasPrefix(src[i:], strings.Repeat(string(quote), 3)) {
				i += 3
				goto done
			}
		}
		i++
	}
done:
	end := i
	tok := Token{Kind: STRING, Text: src[s:end], End: t.pos(end), Off: s}
	// the start is on the string's first line
	curLine, curOff := t.line, t.lineOff
	t.line, t.lineOff = startLine, startLineOff
	tok.Start = t.pos(s)
	t.line, t.lineOff = curLine, curOff
	t.out = append(t.out, tok)
	t.off = end
	return nil
}

func isDigitIn(c byte, base int) bool {
	switch base {
	case 2:
		return c == '0' || c == '1'
	case 8:
		return c >= '0' && c <= '7'
	case 16:
		return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
	}
	return c >= '0' && c <= '9'
}

// digits reads digits of base with single underscores between them; it
// returns the end and whether at least one digit was read.
func (t *tokenizer) digits(i, base int) (int, bool, error) {
	src := t.src
	n := 0
	for i < len(src) {
		if isDigitIn(src[i], base) {
			i++
			n++
			continue
		}
		if src[i] == '_' {
			if n == 0 || i+1 >= len(src) || !isDigitIn(src[i+1], base) {
				return i, n > 0, t.errf(i, "invalid %s literal", baseName(base))
			}
			i++
			continue
		}
		break
	}
	return i, n > 0, nil
}

func baseName(base int) string {
	switch base {
	case 2:
		return "binary"
	case 8:
		return "octal"
	case 16:
		return "hexadecimal"
	}
	return "decimal"
}

func (t *tokenizer) number(s int) error {
	src := t.src
	i := s
	var err error
	var ok bool
	at := func(j int) byte {
		if j < len(src) {
			return src[j]
		}
		return 0
	}
	if src[i] == '0' && (at(i+1)|0x20 == 'x' || at(i+1)|0x20 == 'o' || at(i+1)|0x20 == 'b') {
		base := map[byte]int{'x': 16, 'o': 8, 'b': 2}[at(i+1)|0x20]
		i += 2
		if at(i) == '_' {
			i++
		}
		if i, ok, err = t.digits(i, base); err != nil {
			return err
		}
		if !ok || isDigitIn(at(i), 10) {
			return t.errf(s, "invalid %s literal", baseName(base))
		}
		return t.numberEnd(s, i, false)
	}
	isFloat := false
	if src[i] != '.' {
		if i, _, err = t.digits(i, 10); err != nil {
			return err
		}
	}
	if at(i) == '.' {
		isFloat = true
		i++
		if isDigitIn(at(i), 10) {
			if i, _, err = t.digits(i, 10); err != nil {
				return err
			}
		}
	}
	if at(i)|0x20 == 'e' {
		j := i + 1
		if at(j) == '+' || at(j) == '-' {
			j++
		}
		if isDigitIn(at(j), 10) {
			isFloat = true
			if i, _, err = t.digits(j, 10); err != nil {
				return err
			}
		} else {
			return t.errf(s, "invalid decimal literal")
		}
	}
	if !isFloat && at(i)|0x20 != 'j' {
		// leading zeros: only "0", "00", "0_0" ...
		lit := strings.ReplaceAll(src[s:i], "_", "")
		if len(lit) > 1 && lit[0] == '0' && strings.Trim(lit, "0") != "" {
			return t.errf(s, "leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers")
		}
	}
	return t.numberEnd(s, i, true)
}

func (t *tokenizer) numberEnd(s, i int, decimal bool) error {
	src := t.src
	if decimal && i < len(src) && src[i]|0x20 == 'j' {
		i++
	}
	if i < len(src) {
		r, _ := utf8.DecodeRuneInString(src[i:])
		if isIDContinue(r) {
			// CPython allows keywords right after a number (1if x else y)
			// with a warning; other names are an error.
			rest := src[i:]
			for _, kw := range []string{"and", "else", "for", "if", "in", "is", "not", "or"} {
				if strings.HasPrefix(rest, kw) {
					t.off = i
					t.emit(NUMBER, s, i)
					return nil
				}
			}
			return t.errf(s, "invalid decimal literal")
		}
	}
	t.off = i
	t.emit(NUMBER, s, i)
	return nil
}
