// Package pyast parses Python 3.11 source and prints it back as CPython
// 3.11's ast.unparse does, and tokenizes it as the tokenize module does,
// so that Agentless Mini's patch normalization (ast.parse/ast.unparse,
// remove_comments_and_docstrings) runs without a Python interpreter.
package pyast

import (
	"fmt"
	"strings"
	"unicode"
)

// TokType is a token type of Python's tokenize module.
type TokType int

// Token types, as tokenize names them.
const (
	ENDMARKER TokType = iota
	NAME
	NUMBER
	STRING
	OP
	NEWLINE
	NL
	COMMENT
	INDENT
	DEDENT
	ERRORTOKEN
)

// Pos is a token position: 1-based line, 0-based column in code points.
type Pos struct{ Line, Col int }

// Token is one token as tokenize.generate_tokens yields it.
type Token struct {
	Type       TokType
	Str        string
	Start, End Pos
}

// SyntaxError is a tokenizing or parsing failure at a position.
type SyntaxError struct {
	Pos Pos
	Msg string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("line %d column %d: %s", e.Pos.Line, e.Pos.Col, e.Msg)
}

var exactOps = []string{
	"**=", "...", "//=", "<<=", ">>=", "!=", "%=", "&=", "**", "*=", "+=", "-=", "->", "//", "/=", ":=", "<<", "<=", "==", ">=", ">>", "@=", "^=", "|=",
	"!", "%", "&", "(", ")", "*", "+", ",", "-", ".", "/", ":", ";", "<", "=", ">", "@", "[", "]", "^", "{", "|", "}", "~",
}

func isIDStart(r rune) bool {
	return r == '_' || unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_ID_Start, r)
}

func isIDChar(r rune) bool {
	return isIDStart(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r) ||
		unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r) || unicode.Is(unicode.Other_ID_Continue, r)
}

// stringPrefix reports the length of a valid string prefix at line[i:]
// that is followed by a quote, or -1.
func stringPrefix(line []rune, i int) int {
	j := i
	for j < len(line) && j-i < 2 && strings.ContainsRune("bBrRuUfF", line[j]) {
		j++
	}
	for k := j; k >= i; k-- {
		if k < len(line) && (line[k] == '\'' || line[k] == '"') {
			p := strings.ToLower(string(line[i:k]))
			switch p {
			case "", "b", "r", "u", "f", "br", "rb", "fr", "rf":
				return k - i
			}
			return -1
		}
	}
	return -1
}

// Tokenize is tokenize.generate_tokens over source.
func Tokenize(source string) ([]Token, error) {
	var lines [][]rune
	for s := source; len(s) > 0; {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			lines = append(lines, []rune(s))
			break
		}
		lines = append(lines, []rune(s[:i+1]))
		s = s[i+1:]
	}
	var toks []Token
	emit := func(t TokType, s string, sl, sc, el, ec int) {
		toks = append(toks, Token{t, s, Pos{sl, sc}, Pos{el, ec}})
	}
	lnum, parenlev := 0, 0
	continued := false
	indents := []int{0}
	var contstr []rune
	var contQuote string
	contRaw := false
	var strstart Pos
	inCont := false
	var lastLine []rune
	for li := 0; ; li++ {
		var line []rune
		if li < len(lines) {
			line = lines[li]
		}
		if li > 0 && li-1 < len(lines) {
			lastLine = lines[li-1]
		}
		lnum++
		pos, max := 0, len(line)
		if inCont {
			if len(line) == 0 {
				return toks, &SyntaxError{strstart, "EOF in multi-line string"}
			}
			if end := findStringEnd(line, 0, contQuote, contRaw); end >= 0 {
				pos = end
				contstr = append(contstr, line[:end]...)
				emit(STRING, string(contstr), strstart.Line, strstart.Col, lnum, end)
				contstr, inCont = nil, false
			} else if len(contQuote) == 1 && !strings.HasSuffix(string(line), "\\\n") {
				return toks, &SyntaxError{strstart, "unterminated string literal"}
			} else {
				contstr = append(contstr, line...)
				continue
			}
		} else if parenlev == 0 && !continued {
			if len(line) == 0 {
				break
			}
			column := 0
			for pos < max {
				switch line[pos] {
				case ' ':
					column++
				case '\t':
					column = (column/8 + 1) * 8
				case '\f':
					column = 0
				default:
					goto measured
				}
				pos++
			}
		measured:
			if pos == max {
				break
			}
			if c := line[pos]; c == '#' || c == '\r' || c == '\n' {
				if c == '#' {
					ct := strings.TrimRight(string(line[pos:]), "\r\n")
					n := len([]rune(ct))
					emit(COMMENT, ct, lnum, pos, lnum, pos+n)
					pos += n
				}
				emit(NL, string(line[pos:]), lnum, pos, lnum, len(line))
				continue
			}
			if column > indents[len(indents)-1] {
				indents = append(indents, column)
				emit(INDENT, string(line[:pos]), lnum, 0, lnum, pos)
			}
			for column < indents[len(indents)-1] {
				found := false
				for _, in := range indents {
					if in == column {
						found = true
					}
				}
				if !found {
					return toks, &SyntaxError{Pos{lnum, pos}, "unindent does not match any outer indentation level"}
				}
				indents = indents[:len(indents)-1]
				emit(DEDENT, "", lnum, pos, lnum, pos)
			}
		} else {
			if len(line) == 0 {
				return toks, &SyntaxError{Pos{lnum, 0}, "EOF in multi-line statement"}
			}
			continued = false
		}
		for pos < max {
			for pos < max && (line[pos] == ' ' || line[pos] == '\f' || line[pos] == '\t') {
				pos++
			}
			if pos >= max {
				break
			}
			start := pos
			c := line[pos]
			switch {
			case c == '\\' && (pos+1 < max && line[pos+1] == '\n' || pos+2 < max && line[pos+1] == '\r' && line[pos+2] == '\n'):
				continued = true
				pos = max
				continue
			case c == '#':
				ct := strings.TrimRight(string(line[pos:]), "\r\n")
				n := len([]rune(ct))
				emit(COMMENT, ct, lnum, pos, lnum, pos+n)
				pos += n
				continue
			}
			if pl := stringPrefix(line, pos); pl >= 0 {
				q := pos + pl
				raw := strings.ContainsAny(string(line[pos:q]), "rR")
				quote := string(line[q])
				if q+2 < max && line[q+1] == line[q] && line[q+2] == line[q] {
					quote = strings.Repeat(quote, 3)
				}
				body := q + len(quote)
				if end := findStringEnd(line, body, quote, raw); end >= 0 {
					emit(STRING, string(line[start:end]), lnum, start, lnum, end)
					pos = end
					continue
				}
				if len(quote) == 3 || strings.HasSuffix(string(line), "\\\n") {
					strstart = Pos{lnum, start}
					contstr = append([]rune(nil), line[start:]...)
					contQuote, contRaw, inCont = quote, raw, true
					pos = max
					continue
				}
				return toks, &SyntaxError{Pos{lnum, start}, "unterminated string literal"}
			}
			if n := scanNumber(line, pos); n > 0 {
				emit(NUMBER, string(line[pos:pos+n]), lnum, pos, lnum, pos+n)
				pos += n
				continue
			}
			if c == '\r' || c == '\n' {
				n := max - pos
				t := NEWLINE
				if parenlev > 0 {
					t = NL
				}
				emit(t, string(line[pos:]), lnum, pos, lnum, pos+n)
				pos = max
				continue
			}
			if isIDStart(c) {
				j := pos + 1
				for j < max && isIDChar(line[j]) {
					j++
				}
				emit(NAME, string(line[pos:j]), lnum, pos, lnum, j)
				pos = j
				continue
			}
			matched := false
			for _, op := range exactOps {
				r := []rune(op)
				if pos+len(r) <= max && string(line[pos:pos+len(r)]) == op {
					switch op {
					case "(", "[", "{":
						parenlev++
					case ")", "]", "}":
						parenlev--
					}
					emit(OP, op, lnum, pos, lnum, pos+len(r))
					pos += len(r)
					matched = true
					break
				}
			}
			if !matched {
				return toks, &SyntaxError{Pos{lnum, pos}, fmt.Sprintf("invalid character %q", c)}
			}
		}
	}
	if len(lastLine) > 0 {
		ll := lastLine[len(lastLine)-1]
		if ll != '\r' && ll != '\n' && !strings.HasPrefix(strings.TrimSpace(string(lastLine)), "#") {
			emit(NEWLINE, "", lnum-1, len(lastLine), lnum-1, len(lastLine)+1)
		}
	}
	for range indents[1:] {
		emit(DEDENT, "", lnum, 0, lnum, 0)
	}
	emit(ENDMARKER, "", lnum, 0, lnum, 0)
	return toks, nil
}

// findStringEnd returns the index just past the closing quote of a string
// body that starts at line[i:], or -1 when the line does not close it.
func findStringEnd(line []rune, i int, quote string, raw bool) int {
	q := []rune(quote)
	for i < len(line) {
		if line[i] == '\\' {
			i += 2
			continue
		}
		if len(q) == 1 && line[i] == '\n' {
			return -1
		}
		if i+len(q) <= len(line) && string(line[i:i+len(q)]) == quote {
			return i + len(q)
		}
		i++
	}
	return -1
}

func isDigit(r rune) bool { return r >= '0' && r <= '9' }

// digits scans [0-9](_?[0-9])* at i and returns its length.
func digits(line []rune, i int, ok func(rune) bool) int {
	if i >= len(line) || !ok(line[i]) {
		return 0
	}
	j := i + 1
	for j < len(line) {
		if ok(line[j]) {
			j++
		} else if line[j] == '_' && j+1 < len(line) && ok(line[j+1]) {
			j += 2
		} else {
			break
		}
	}
	return j - i
}

// scanNumber returns the length of the number literal at line[i:], 0 if
// none, following tokenize's Number pattern.
func scanNumber(line []rune, i int) int {
	n := len(line)
	if i >= n {
		return 0
	}
	if line[i] == '0' && i+1 < n {
		var ok func(rune) bool
		switch line[i+1] {
		case 'x', 'X':
			ok = func(r rune) bool { return isDigit(r) || (r >= 'a' && r <= 'f') || (r >= 'A' && r <= 'F') }
		case 'b', 'B':
			ok = func(r rune) bool { return r == '0' || r == '1' }
		case 'o', 'O':
			ok = func(r rune) bool { return r >= '0' && r <= '7' }
		}
		if ok != nil {
			j := i + 2
			for {
				if j < n && line[j] == '_' && j+1 < n && ok(line[j+1]) {
					j += 2
				} else if j < n && ok(line[j]) {
					j++
				} else {
					break
				}
			}
			if j > i+2 {
				return j - i
			}
			return 1 // "0" alone, as Decnumber
		}
	}
	j := i
	intPart := digits(line, j, isDigit)
	j += intPart
	isFloat := false
	if j < n && line[j] == '.' {
		frac := digits(line, j+1, isDigit)
		if intPart > 0 || frac > 0 {
			j += 1 + frac
			isFloat = true
		}
	}
	if intPart == 0 && !isFloat {
		return 0
	}
	if j < n && (line[j] == 'e' || line[j] == 'E') {
		k := j + 1
		if k < n && (line[k] == '+' || line[k] == '-') {
			k++
		}
		if d := digits(line, k, isDigit); d > 0 {
			j = k + d
			isFloat = true
		}
	}
	if j < n && (line[j] == 'j' || line[j] == 'J') {
		return j + 1 - i
	}
	if !isFloat {
		// Decnumber: a leading 0 takes only zeros.
		if line[i] == '0' {
			k := i + 1
			for k < n && (line[k] == '0' || (line[k] == '_' && k+1 < n && line[k+1] == '0')) {
				if line[k] == '_' {
					k += 2
				} else {
					k++
				}
			}
			return k - i
		}
	}
	return j - i
}
