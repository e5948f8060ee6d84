package pyparse

import (
	"strings"
)

// strParts splits a STRING token into its prefix (lower-cased), its quote
// and its body.
func strParts(lit string) (prefix, body string, triple bool) {
	i := strings.IndexAny(lit, `'"`)
	prefix = strings.ToLower(lit[:i])
	q := lit[i]
	rest := lit[i:]
	if strings.HasPrefix(rest, strings.Repeat(string(q), 3)) && len(rest) >= 6 {
		return prefix, rest[3 : len(rest)-3], true
	}
	return prefix, rest[1 : len(rest)-1], false
}

func isBytes(lit string) bool {
	p, _, _ := strParts(lit)
	return strings.Contains(p, "b")
}

func hexN(s string, n int) bool {
	if len(s) < n {
		return false
	}
	for i := 0; i < n; i++ {
		if !isDigitIn(s[i], 16) {
			return false
		}
	}
	return true
}

// checkString applies the checks the compiler makes of a literal: ASCII
// bytes, complete \x \u \U \N escapes, and f-string fields.
func checkString(t *Token) error {
	prefix, body, _ := strParts(t.Text)
	raw := strings.Contains(prefix, "r")
	bad := func(msg string) error { return &Error{t.Start, msg} }
	if strings.Contains(prefix, "b") {
		for i := 0; i < len(body); i++ {
			if body[i] >= 0x80 {
				return bad("bytes can only contain ASCII literal characters")
			}
		}
	}
	if !raw {
		for i := 0; i < len(body); i++ {
			if body[i] != '\\' {
				continue
			}
			i++
			if i >= len(body) {
				break
			}
			switch body[i] {
			case 'x':
				if !hexN(body[i+1:], 2) {
					return bad("(value error) invalid \\x escape")
				}
			case 'u', 'U', 'N':
				if strings.Contains(prefix, "b") {
					continue
				}
				switch body[i] {
				case 'u':
					if !hexN(body[i+1:], 4) {
						return bad("(unicode error) truncated \\uXXXX escape")
					}
				case 'U':
					if !hexN(body[i+1:], 8) || body[i+1:i+9] > "0010ffff" && strings.ToLower(body[i+1:i+9]) > "0010ffff" {
						return bad("(unicode error) illegal \\UXXXXXXXX escape")
					}
				case 'N':
					end := strings.IndexByte(body[i+1:], '}')
					if i+1 >= len(body) || body[i+1] != '{' || end < 0 {
						return bad("(unicode error) malformed \\N character escape")
					}
					if !knownCharName(body[i+2 : i+1+end]) {
						return bad("(unicode error) unknown Unicode character name")
					}
				}
			}
		}
	}
	if strings.Contains(prefix, "f") {
		_, err := checkFString(t, body, raw, 0)
		return err
	}
	return nil
}

// checkFString checks the replacement fields of an f-string body (Python
// 3.11 rules: no backslash or '#' in an expression, a conversion of s, r or
// a, nested fields in the format spec at most two deep). It returns the
// offset where it stopped when called for a format spec (depth > 0).
func checkFString(t *Token, s string, raw bool, depth int) (int, error) {
	bad := func(msg string) (int, error) { return 0, &Error{t.Start, "f-string: " + msg} }
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\\' && !raw:
			if strings.HasPrefix(s[i:], "\\N{") {
				if e := strings.IndexByte(s[i:], '}'); e > 0 {
					i += e + 1
					continue
				}
			}
			i += 2
			continue
		case c == '{':
			if depth == 0 && i+1 < len(s) && s[i+1] == '{' {
				i += 2
				continue
			}
			if depth >= 2 {
				return bad("expressions nested too deeply")
			}
			n, err := fstringField(t, s[i+1:], raw, depth)
			if err != nil {
				return 0, err
			}
			i += 1 + n
			continue
		case c == '}':
			if depth > 0 {
				return i, nil
			}
			if i+1 < len(s) && s[i+1] == '}' {
				i += 2
				continue
			}
			return bad("single '}' is not allowed")
		}
		i++
	}
	if depth > 0 {
		return bad("expecting '}'")
	}
	return i, nil
}

// fstringField checks one field whose text starts after '{' and returns
// the length consumed, through the closing '}'.
func fstringField(t *Token, s string, raw bool, depth int) (int, error) {
	bad := func(msg string) (int, error) { return 0, &Error{t.Start, "f-string: " + msg} }
	var stack []byte
	i := 0
	var quote string
	for ; i < len(s); i++ {
		c := s[i]
		if quote != "" {
			if strings.HasPrefix(s[i:], quote) {
				i += len(quote) - 1
				quote = ""
			}
			continue
		}
		if c == '\\' {
			return bad("expression part cannot include a backslash")
		}
		if c == '\'' || c == '"' {
			quote = string(c)
			if strings.HasPrefix(s[i:], strings.Repeat(quote, 3)) {
				quote = strings.Repeat(quote, 3)
				i += 2
			}
			continue
		}
		if c == '#' {
			return bad("expression part cannot include '#'")
		}
		if c == '(' || c == '[' || c == '{' {
			stack = append(stack, c)
			continue
		}
		if c == ')' || c == ']' || c == '}' {
			if len(stack) == 0 {
				if c == '}' {
					break
				}
				return bad("unmatched '" + string(c) + "'")
			}
			stack = stack[:len(stack)-1]
			continue
		}
		if len(stack) > 0 {
			continue
		}
		if c == '!' && !strings.HasPrefix(s[i:], "!=") {
			break
		}
		if c == ':' {
			break
		}
		if c == '=' && !strings.HasPrefix(s[i:], "==") && (i == 0 || !strings.ContainsRune("=!<>", rune(s[i-1]))) {
			break
		}
	}
	if quote != "" {
		return bad("unterminated string")
	}
	if i >= len(s) {
		return bad("expecting '}'")
	}
	expr := s[:i]
	if strings.TrimSpace(expr) == "" {
		return bad("empty expression not allowed")
	}
	if err := checkFieldExpr(t, expr); err != nil {
		return 0, err
	}
	if s[i] == '=' {
		i++
		for i < len(s) && strings.IndexByte(" \t\n\r\f", s[i]) >= 0 {
			i++
		}
	}
	if i < len(s) && s[i] == '!' {
		i++
		if i >= len(s) || !strings.ContainsRune("sra", rune(s[i])) {
			return bad("invalid conversion character: expected 's', 'r', or 'a'")
		}
		i++
	}
	if i < len(s) && s[i] == ':' {
		i++
		n, err := checkFString(t, s[i:], raw, depth+1)
		if err != nil {
			return 0, err
		}
		i += n
	}
	if i >= len(s) || s[i] != '}' {
		return bad("expecting '}'")
	}
	return i + 1, nil
}

// checkFieldExpr checks a field's expression.
func checkFieldExpr(t *Token, expr string) error {
	_, err := parseFieldExpr(t, expr)
	return err
}
