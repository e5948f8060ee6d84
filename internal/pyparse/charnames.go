package pyparse

import (
	"strings"
	"sync"
	"unicode"

	"golang.org/x/text/unicode/runenames"
)

var (
	charNamesOnce sync.Once
	charNames     map[string]bool
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
		charNames = map[string]bool{}
		for r := rune(0); r <= unicode.MaxRune; r++ {
			if r >= 0xD800 && r <= 0xDFFF {
				continue
			}
			if s := runenames.Name(r); s != "" && s[0] != '<' {
				charNames[s] = true
			}
		}
	})
	return charNames[n]
}
