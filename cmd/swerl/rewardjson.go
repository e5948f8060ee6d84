package main

import (
	"bytes"
	"encoding/binary"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// fastRewardWire decodes the common shape of a reward JSONL line in one
// pass: an object whose known fields have their plain types (strings, an
// object of strings, an array of strings) and whose other fields are any
// JSON. It gives up (ok false) on everything else, and the caller decodes
// with encoding/json, which then also words the error: null values, keys
// that only match a field case-insensitively, duplicate fields, escapes
// naming lone surrogates, invalid UTF-8, deep nesting. Where it says ok,
// the result is what json.Unmarshal into rewardWire gives.
func fastRewardWire(b []byte) (w rewardWire, ok bool) {
	p := jsonScan{b: b}
	defer func() {
		if recover() != nil { // index out of range on truncated input
			ok = false
		}
	}()
	p.ws()
	var seen [7]bool
	ok = p.object(true, func(key string) bool {
		field := -1
		for i, name := range rewardWireFields {
			if key == name {
				field = i
			} else if strings.EqualFold(key, name) {
				return false
			}
		}
		if field >= 0 {
			if seen[field] {
				return false
			}
			seen[field] = true
		}
		switch field {
		case 0, 3, 6: // id, output, mode
			s, sok := p.str()
			if !sok {
				return false
			}
			switch field {
			case 0:
				w.ID = s
			case 3:
				w.Output = &s
			default:
				w.Mode = s
			}
		case 1, 2: // code_context, oracle_new_content
			m, mok := p.strMap()
			if !mok {
				return false
			}
			if field == 1 {
				w.CodeContext = m
			} else {
				w.OracleNewContent = m
			}
		case 4, 5: // oracle_patches, pred_patches
			l, lok := p.strList()
			if !lok {
				return false
			}
			if field == 4 {
				w.OraclePatches = &l
			} else {
				w.PredPatches = &l
			}
		default:
			return p.skip(0)
		}
		return true
	})
	return w, ok && p.end()
}

// rewardWireFields are rewardWire's JSON names, in fastRewardWire's order.
var rewardWireFields = [7]string{"id", "code_context", "oracle_new_content", "output", "oracle_patches", "pred_patches", "mode"}

// jsonScan is a cursor over one JSON text; its methods report false
// instead of errors.
type jsonScan struct {
	b []byte
	i int
}

func (p *jsonScan) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonScan) eat(c byte) bool {
	if p.i < len(p.b) && p.b[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (p *jsonScan) end() bool {
	p.ws()
	return p.i == len(p.b)
}

// rawKey reads a string without escapes (a key with one: false).
func (p *jsonScan) rawKey() (string, bool) {
	if !p.eat('"') {
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

// str reads a string value.
func (p *jsonScan) str() (string, bool) {
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
func (p *jsonScan) scanStr() (raw []byte, esc, ok bool) {
	if !p.eat('"') {
		return nil, false, false
	}
	b := p.b
	start := p.i
	i := p.i
	for i < len(b) {
		// Eight plain bytes at a time: none a quote, a backslash, a
		// control character or outside ASCII.
		for i+8 <= len(b) && plain8(binary.LittleEndian.Uint64(b[i:])) {
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

// plain8 reports whether none of the eight bytes of x is a quote, a
// backslash, below 0x20 or at least 0x80 (the bit tricks of "Bit Twiddling
// Hacks": haszero and hasless, exact for whether any byte qualifies).
func plain8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	hasZero := func(v uint64) uint64 { return (v - ones) & ^v & highs }
	special := hasZero(x^(ones*'"')) | hasZero(x^(ones*'\\')) | (x-ones*0x20)&^x&highs | x&highs
	return special == 0
}

// unescape decodes a string's escapes like encoding/json; a lone surrogate
// (which encoding/json turns into U+FFFD) or a bad escape gives false.
//
// The decoded text is never longer than raw, so it is built in one
// allocation of that size that becomes the string without a copy.
func (p *jsonScan) unescape(raw []byte) (string, bool) {
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

// strMap reads an object of string values.
func (p *jsonScan) strMap() (map[string]string, bool) {
	m := map[string]string{}
	ok := p.object(false, func(k string) bool {
		v, ok := p.str()
		m[k] = v
		return ok
	})
	return m, ok
}

// strList reads an array of strings.
func (p *jsonScan) strList() ([]string, bool) {
	l := []string{}
	ok := p.array(func() bool {
		s, ok := p.str()
		l = append(l, s)
		return ok
	})
	return l, ok
}

// object reads an object, calling value with each key when the cursor is
// at the key's value; value reads it and reports whether it was valid.
// With rawKeys a key holding an escape gives up (see rawKey).
func (p *jsonScan) object(rawKeys bool, value func(key string) bool) bool {
	if !p.eat('{') {
		return false
	}
	p.ws()
	if p.eat('}') {
		return true
	}
	for {
		p.ws()
		var k string
		var ok bool
		if rawKeys {
			k, ok = p.rawKey()
		} else {
			k, ok = p.str()
		}
		if !ok {
			return false
		}
		p.ws()
		if !p.eat(':') {
			return false
		}
		p.ws()
		if !value(k) {
			return false
		}
		p.ws()
		if !p.eat(',') {
			return p.eat('}')
		}
	}
}

// array reads an array, calling elem when the cursor is at each element;
// elem reads it and reports whether it was valid.
func (p *jsonScan) array(elem func() bool) bool {
	if !p.eat('[') {
		return false
	}
	p.ws()
	if p.eat(']') {
		return true
	}
	for {
		p.ws()
		if !elem() {
			return false
		}
		p.ws()
		if !p.eat(',') {
			return p.eat(']')
		}
	}
}

// skip moves past any JSON value, checking its syntax (strings as str
// does, so the same inputs give up).
func (p *jsonScan) skip(depth int) bool {
	if depth > 64 || p.i >= len(p.b) {
		return false
	}
	switch c := p.b[p.i]; {
	case c == '"':
		_, ok := p.str()
		return ok
	case c == '{':
		return p.object(false, func(string) bool { return p.skip(depth + 1) })
	case c == '[':
		return p.array(func() bool { return p.skip(depth + 1) })
	case c == 't':
		return p.lit("true")
	case c == 'f':
		return p.lit("false")
	case c == 'n':
		return p.lit("null")
	default:
		return p.number()
	}
}

func (p *jsonScan) lit(s string) bool {
	if len(p.b)-p.i >= len(s) && string(p.b[p.i:p.i+len(s)]) == s {
		p.i += len(s)
		return true
	}
	return false
}

// number moves past a number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (p *jsonScan) number() bool {
	digits := func() int {
		n := 0
		for p.i < len(p.b) && '0' <= p.b[p.i] && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	p.eat('-')
	if p.eat('0') {
		// no more integer digits
	} else if p.i < len(p.b) && '1' <= p.b[p.i] && p.b[p.i] <= '9' {
		digits()
	} else {
		return false
	}
	if p.eat('.') && digits() == 0 {
		return false
	}
	if p.eat('e') || p.eat('E') {
		if !p.eat('+') {
			p.eat('-')
		}
		if digits() == 0 {
			return false
		}
	}
	return true
}
