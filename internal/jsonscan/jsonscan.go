// Package jsonscan is a one-pass reader for JSON texts of a known common
// shape. It accepts a subset of what encoding/json accepts (no null for a
// typed value, no escapes in keys where asked, no invalid UTF-8, no lone
// surrogates) and reports false on anything else, so a caller tries it
// first and falls back to encoding/json, which also words the error. Where
// a caller's fast path says ok, its result must be encoding/json's: each
// caller holds that with a differential fuzz test.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// Try runs read over b and reports whether it succeeded and only
// whitespace follows; an index out of range (truncated input) is false.
func Try(b []byte, read func(p *Scanner) bool) (ok bool) {
	p := &Scanner{b: b}
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	p.WS()
	return read(p) && p.End()
}

// Scanner is a cursor over one JSON text; its methods report false
// instead of errors (the caller then decodes with encoding/json, which
// words them). Methods may panic with an index out of range on truncated
// input: see Try.
type Scanner struct {
	b []byte
	i int
}

func (p *Scanner) WS() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *Scanner) Eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// End reports whether only whitespace is left.
func (p *Scanner) End() bool {
	p.WS()
	return p.i == len(p.b)
}

// RawKey reads a string without escapes (a key with one: false).
func (p *Scanner) RawKey() (string, bool) {
	if !p.Eat('"') {
		return "", false
	}
	start := p.i
	for p.i < len(p.b) {
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			return string(p.b[start : p.i-1]), true
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			return "", false
		}
		p.i++
	}
	return "", false
}

// Str reads a string value.
func (p *Scanner) Str() (string, bool) {
	raw, esc, ok := p.scanStr()
	if !ok {
		return "", false
	}
	if !esc {
		return string(raw), true
	}
	return p.unescape(raw)
}

// scanStr moves past a string and returns its bytes between the quotes,
// whether it holds escapes, and false on a control character, invalid
// UTF-8 or a missing end.
func (p *Scanner) scanStr() (raw []byte, esc, ok bool) {
	if !p.Eat('"') {
		return nil, false, false
	}
	b := p.b
	start := p.i
	i := p.i
	for i < len(b) {
		// Eight plain bytes at a time: none a quote, a backslash, a
		// control character or outside ASCII.
		for i+8 <= len(b) && Plain8(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		if i >= len(b) {
			break
		}
		c := b[i]
		switch {
		case c == '"':
			p.i = i + 1
			return b[start:i], esc, true
		case c == '\\':
			esc = true
			i += 2 // the escaped byte is checked by unescape
		case c < 0x20:
			return nil, false, false
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return nil, false, false
			}
			i += size
		}
	}
	return nil, false, false
}

// Plain8 reports whether none of the eight bytes of x is a quote, a
// backslash, below 0x20 or at least 0x80: whether a JSON string's bytes
// need no unescaping, eight at a time. The bit tricks are "Bit Twiddling
// Hacks"' haszero and hasless: a flag may be wrong only in a byte above one
// truly flagged, so "no flag" is exact.
func Plain8(x uint64) bool {
	return (hasZero(x^(ones*'"')) | hasZero(x^(ones*'\\')) | (x-ones*0x20)&^x&highs | x&highs) == 0
}

// HTMLPlain8 is Plain8 that also refuses <, > and &: whether encoding/json
// (HTML-escaping, its default) writes the eight bytes of x unchanged.
func HTMLPlain8(x uint64) bool {
	return Plain8(x) && (hasZero(x^(ones*'<'))|hasZero(x^(ones*'>'))|hasZero(x^(ones*'&'))) == 0
}

const ones, highs = 0x0101010101010101, 0x8080808080808080

// hasZero flags (0x80) the zero bytes of v.
func hasZero(v uint64) uint64 { return (v - ones) &^ v & highs }

// unescape decodes a string's escapes like encoding/json; a lone surrogate
// (which encoding/json turns into U+FFFD) or a bad escape gives false.
//
// The decoded text is never longer than raw, so it is built in one
// allocation of that size that becomes the string without a copy.
func (p *Scanner) unescape(raw []byte) (string, bool) {
	out := make([]byte, 0, len(raw))
	for i := 0; i < len(raw); {
		if raw[i] != '\\' {
			j := bytes.IndexByte(raw[i:], '\\')
			if j < 0 {
				j = len(raw) - i
			}
			out = append(out, raw[i:i+j]...)
			i += j
			continue
		}
		if i+1 >= len(raw) {
			return "", false
		}
		switch raw[i+1] {
		case '"', '\\', '/':
			out = append(out, raw[i+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r := hex4(raw[i+2:])
			if r < 0 {
				return "", false
			}
			if utf16.IsSurrogate(r) {
				if i+12 > len(raw) || raw[i+6] != '\\' || raw[i+7] != 'u' {
					return "", false
				}
				r2 := hex4(raw[i+8:])
				dec := utf16.DecodeRune(r, r2)
				if r2 < 0 || dec == utf8.RuneError {
					return "", false
				}
				out = utf8.AppendRune(out, dec)
				i += 12
				continue
			}
			out = utf8.AppendRune(out, r)
			i += 6
			continue
		default:
			return "", false
		}
		i += 2
	}
	if len(out) == 0 {
		return "", true
	}
	return unsafe.String(&out[0], len(out)), true // out is not used again
}

// hex4 is the value of four hex digits at the start of b, or -1.
func hex4(b []byte) rune {
	if len(b) < 4 {
		return -1
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// StrMap reads an object of string values.
func (p *Scanner) StrMap() (map[string]string, bool) {
	m := map[string]string{}
	ok := p.Object(false, func(k string) bool {
		v, ok := p.Str()
		m[k] = v
		return ok
	})
	return m, ok
}

// StrList reads an array of strings.
func (p *Scanner) StrList() ([]string, bool) {
	l := []string{}
	ok := p.Array(func() bool {
		s, ok := p.Str()
		l = append(l, s)
		return ok
	})
	return l, ok
}

// Object reads an object, calling value with each key when the cursor is
// at the key's value; value reads it and reports whether it was valid.
// With rawKeys a key holding an escape gives up (see rawKey).
func (p *Scanner) Object(rawKeys bool, value func(key string) bool) bool {
	if !p.Eat('{') {
		return false
	}
	p.WS()
	if p.Eat('}') {
		return true
	}
	for {
		p.WS()
		var k string
		var ok bool
		if rawKeys {
			k, ok = p.RawKey()
		} else {
			k, ok = p.Str()
		}
		if !ok {
			return false
		}
		p.WS()
		if !p.Eat(':') {
			return false
		}
		p.WS()
		if !value(k) {
			return false
		}
		p.WS()
		if !p.Eat(',') {
			return p.Eat('}')
		}
	}
}

// Fields reads an object whose keys are names (at most 64): value reads
// the value of names[f]; a null value is skipped, as encoding/json leaves
// the field as it is (zero, into a zero record); an unknown key's value is
// skipped; a repeated key, or one that matches a name only
// case-insensitively (encoding/json would take it), gives up. Keys holding
// escapes give up too.
func (p *Scanner) Fields(names []string, value func(f int) bool) bool {
	if len(names) > 64 {
		panic("jsonscan: Fields takes at most 64 names")
	}
	var seen uint64
	return p.Object(true, func(key string) bool {
		f := fieldOf(key, names)
		switch {
		case f == -2:
			return false
		case f == -1:
			return p.Skip(0)
		case seen&(1<<f) != 0:
			return false
		}
		seen |= 1 << f
		return p.Null() || value(f)
	})
}

// fieldOf is the index of key in names, -1 for an unknown key, and -2 for
// a key that matches a name only case-insensitively.
func fieldOf(key string, names []string) int {
	for i, n := range names {
		if key == n {
			return i
		}
	}
	for _, n := range names {
		if strings.EqualFold(key, n) {
			return -2
		}
	}
	return -1
}

// Array reads an array, calling elem when the cursor is at each element;
// elem reads it and reports whether it was valid.
func (p *Scanner) Array(elem func() bool) bool {
	if !p.Eat('[') {
		return false
	}
	p.WS()
	if p.Eat(']') {
		return true
	}
	for {
		p.WS()
		if !elem() {
			return false
		}
		p.WS()
		if !p.Eat(',') {
			return p.Eat(']')
		}
	}
}

// Skip moves past any JSON value, checking its syntax (strings as str
// does, so the same inputs give up).
func (p *Scanner) Skip(depth int) bool {
	if depth > 64 || p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		_, ok := p.Str()
		return ok
	case c == '{':
		return p.Object(false, func(string) bool { return p.Skip(depth + 1) })
	case c == '[':
		return p.Array(func() bool { return p.Skip(depth + 1) })
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'n':
		return p.lit("null")
	default:
		return p.Number()
	}
}

// Null reads a null literal if one is next (and reports whether it did).
func (p *Scanner) Null() bool { return p.lit("null") }

func (p *Scanner) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// Number moves past a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *Scanner) Number() bool {
	digits := func() int {
		n := 0
		for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	p.Eat('-')
	if p.Eat('0') {
		// no more integer digits
	} else if p.i < len(p.b) && '1' <= p.b[p.i] && p.b[p.i] <= '9' {
		digits()
	} else {
		return false
	}
	if p.Eat('.') && digits() == 0 {
		return false
	}
	if p.Eat('e') || p.Eat('E') {
		if !p.Eat('+') {
			p.Eat('-')
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}

// Float reads a number as encoding/json decodes it into a float of
// bitSize bits (32 or 64); false where that would fail (out of range).
func (p *Scanner) Float(bitSize int) (float64, bool) {
	start := p.i
	if !p.Number() {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(p.b[start:p.i]), bitSize)
	return f, err == nil
}

// Int reads an integer literal, -?(0|[1-9][0-9]*), that fits in an int64
// (what encoding/json decodes into an int field; a fraction, an exponent
// or an overflow gives false).
func (p *Scanner) Int() (int64, bool) {
	neg := p.Eat('-')
	start := p.i
	var u uint64
	for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
		d := uint64(p.b[p.i] - '0')
		if u > (1<<63-1-d)/10 {
			return 0, false // beyond int64 (even -1<<63 is left to encoding/json)
		}
		u = u*10 + d
		p.i++
	}
	switch n := p.i - start; {
	case n == 0, n > 1 && p.b[start] == '0': // no digits, or a leading zero
		return 0, false
	case p.i < len(p.b) && (p.b[p.i] == '.' || p.b[p.i] == 'e' || p.b[p.i] == 'E'):
		return 0, false
	case neg:
		return -int64(u), true
	}
	return int64(u), true
}
