package pyparse

import (
	"strings"
	"sync"
	"unicode"

	"golang.org/x/text/unicode/runenames"
)

var (
	charNamesOnce sync.Once
	charNames     map[string]rune
)

// knownCharName reports whether \N{name} names a character, as far as the
// Unicode character names go (case-insensitive, as CPython looks them up;
// CJK ideographs and Hangul syllables by their derived names).
func knownCharName(name string) bool {
	n := strings.ToUpper(name)
	if n == "" {
		return false
	}
	if strings.HasPrefix(n, "CJK UNIFIED IDEOGRAPH-") || strings.HasPrefix(n, "HANGUL SYLLABLE ") {
		return true
	}
	charNamesOnce.Do(func() {
		charNames = map[string]rune{}
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if r >= 0xD800 && r <= 0xDFFF {
				continue
			}
			if s := runenames.Name(r); s != "" && s[0] != '<' {
				charNames[s] = r
			}
		}
	})
	_, ok := charNames[n]
	return ok
}

// charByName is the character \N{name} stands for (U+FFFD if unknown).
func charByName(name string) rune {
	n := strings.ToUpper(name)
	for _, p := range []string{"CJK UNIFIED IDEOGRAPH-"} {
		if strings.HasPrefix(n, p) {
			return rune(hexVal(n[len(p):]))
		}
	}
	if !knownCharName(name) {
		return unicode.ReplacementChar
	}
	return charNames[n]
}
