package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// Pre-tokenizer regular expressions that this package implements natively.
// Go's regexp has no look-ahead, so each one is a hand-written scanner that
// returns the same matches as the expression under leftmost-first
// (backtracking) semantics.
const (
	// RegexGPT2 is the pre-tokenizer of GPT-2 (and of ByteLevel with
	// use_regex=true).
	RegexGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	// RegexQwen2 is the pre-tokenizer of Qwen2, Qwen2.5 and Qwen3: digits
	// are split one by one.
	RegexQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// RegexLlama3 is the pre-tokenizer of Llama 3: up to three digits a
	// piece.
	RegexLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// DigitsGPT2 names the pre-tokenizer of SmolLM2 and StarCoder2 (llama.cpp's
	// "smollm" and "starcoder"): the tokenizers library's Digits with
	// individual_digits, which isolates every \p{N} rune, then RegexGPT2
	// on the text between them. It is a name, not an expression: each
	// digit ends the text RegexGPT2 sees, so a space before a digit is a
	// pre-token of its own.
	DigitsGPT2 = "Digits(individual_digits=true), ByteLevel(" + RegexGPT2 + ")"
)

// pretokenizer identifies one of the supported scanners.
type pretokenizer int

const (
	preGPT2 pretokenizer = iota
	preQwen2
	preLlama3
	preDigitsGPT2
)

func (p pretokenizer) regex() string {
	switch p {
	case preQwen2:
		return RegexQwen2
	case preLlama3:
		return RegexLlama3
	case preDigitsGPT2:
		return DigitsGPT2
	}
	return RegexGPT2
}

func pretokenizerFor(regex string) (pretokenizer, bool) {
	switch regex {
	case RegexGPT2:
		return preGPT2, true
	case RegexQwen2:
		return preQwen2, true
	case RegexLlama3:
		return preLlama3, true
	case DigitsGPT2:
		return preDigitsGPT2, true
	}
	return 0, false
}

func isSpace(r rune) bool {
	if r < utf8.RuneSelf {
		return r == ' ' || (r >= '\t' && r <= '\r')
	}
	return unicode.Is(unicode.White_Space, r)
}

func isLetter(r rune) bool {
	if r < utf8.RuneSelf {
		return (r|0x20) >= 'a' && (r|0x20) <= 'z'
	}
	return unicode.IsLetter(r)
}

func isNumber(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= '0' && r <= '9'
	}
	return unicode.IsNumber(r)
}

// isOther reports whether r is in [^\s\p{L}\p{N}].
func isOther(r rune) bool { return !isSpace(r) && !isLetter(r) && !isNumber(r) }

func isCRLF(r rune) bool { return r == '\r' || r == '\n' }

// runeAt decodes the rune at s[i:]; at the end of s it returns -1 and size 0.
// Invalid UTF-8 decodes as utf8.RuneError of size 1, which is neither a
// letter, a number nor a space, exactly as the reference treats U+FFFD.
func runeAt(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	c := s[i]
	if c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// span returns the end of the run of runes satisfying f that starts at i,
// taking at most max runes (max < 0: no limit).
func span(s string, i int, f func(rune) bool, max int) int {
	for n := 0; max < 0 || n < max; n++ {
		r, w := runeAt(s, i)
		if w == 0 || !f(r) {
			break
		}
		i += w
	}
	return i
}

// next returns the end of the pre-token that starts at i (i < len(s)).
func (p pretokenizer) next(s string, i int) int {
	switch p {
	case preGPT2:
		return nextGPT2(s, i)
	case preDigitsGPT2:
		return nextDigitsGPT2(s, i)
	}
	maxDigits := 1
	if p == preLlama3 {
		maxDigits = 3
	}
	return nextLlama3(s, i, maxDigits)
}

// contraction matches 's|'t|'re|'ve|'m|'ll|'d at i, case-insensitively when
// fold is set, and returns its end or -1.
func contraction(s string, i int, fold bool) int {
	if s[i] != '\'' || i+1 >= len(s) {
		return -1
	}
	lower := func(c byte) byte {
		if fold && c >= 'A' && c <= 'Z' {
			return c + 'a' - 'A'
		}
		return c
	}
	switch lower(s[i+1]) {
	case 's', 't', 'm', 'd':
		return i + 2
	}
	if i+2 < len(s) {
		switch a, b := lower(s[i+1]), lower(s[i+2]); {
		case a == 'r' && b == 'e', a == 'v' && b == 'e', a == 'l' && b == 'l':
			return i + 3
		}
	}
	// Unicode simple case folding maps U+017F LATIN SMALL LETTER LONG S to
	// 's' and U+212A KELVIN SIGN is irrelevant here; only ſ can follow.
	if fold {
		if r, w := runeAt(s, i+1); r == 'ſ' {
			return i + 1 + w
		}
	}
	return -1
}

// whitespaceTail implements \s+(?!\S)|\s+ at i, where s[i] is a space: the
// run of spaces, minus its last rune when a non-space follows and the run
// is longer than one rune.
func whitespaceTail(s string, i int) int {
	j := span(s, i, isSpace, -1)
	if j == len(s) {
		return j
	}
	// The run is followed by \S: back off one rune if that leaves a match.
	_, w := utf8.DecodeLastRuneInString(s[i:j])
	if j-w > i {
		return j - w
	}
	return j
}

func nextGPT2(s string, i int) int {
	if e := contraction(s, i, false); e >= 0 {
		return e
	}
	r, w := runeAt(s, i)
	start := i
	if r == ' ' {
		r2, w2 := runeAt(s, i+w)
		switch {
		case w2 > 0 && isLetter(r2):
			return span(s, i+w, isLetter, -1)
		case w2 > 0 && isNumber(r2):
			return span(s, i+w, isNumber, -1)
		case w2 > 0 && isOther(r2):
			return span(s, i+w, isOther, -1)
		}
	}
	switch {
	case isLetter(r):
		return span(s, start, isLetter, -1)
	case isNumber(r):
		return span(s, start, isNumber, -1)
	case isOther(r):
		return span(s, start, isOther, -1)
	}
	return whitespaceTail(s, i)
}

func nextLlama3(s string, i int, maxDigits int) int {
	if e := contraction(s, i, true); e >= 0 {
		return e
	}
	r, w := runeAt(s, i)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if !isCRLF(r) && !isNumber(r) {
		if isLetter(r) {
			return span(s, i, isLetter, -1)
		}
		if r2, w2 := runeAt(s, i+w); w2 > 0 && isLetter(r2) {
			return span(s, i+w, isLetter, -1)
		}
	}
	// \p{N}{1,n}
	if isNumber(r) {
		return span(s, i, isNumber, maxDigits)
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	if r == ' ' {
		if r2, w2 := runeAt(s, i+w); w2 > 0 && isOther(r2) {
			return span(s, span(s, i+w, isOther, -1), isCRLF, -1)
		}
	}
	if isOther(r) {
		return span(s, span(s, i, isOther, -1), isCRLF, -1)
	}
	// \s*[\r\n]+ : the space run up to and including its last CR or LF.
	j := span(s, i, isSpace, -1)
	last := -1
	for k := i; k < j; k++ {
		if s[k] == '\r' || s[k] == '\n' {
			last = k
		}
	}
	if last >= 0 {
		return last + 1
	}
	return whitespaceTail(s, i)
}

// nextDigitsGPT2 is nextGPT2 where every \p{N} rune is a pre-token of its
// own and ends the text the GPT-2 expression sees: " ?\p{N}+" never
// matches, a space before a digit stands alone, and a run of spaces
// before a digit is taken whole, as at the end of the text.
func nextDigitsGPT2(s string, i int) int {
	r, w := runeAt(s, i)
	if isNumber(r) {
		return i + w
	}
	if e := contraction(s, i, false); e >= 0 {
		return e
	}
	if r == ' ' {
		r2, w2 := runeAt(s, i+w)
		switch {
		case w2 > 0 && isLetter(r2):
			return span(s, i+w, isLetter, -1)
		case w2 > 0 && isOther(r2):
			return span(s, i+w, isOther, -1)
		}
	}
	switch {
	case isLetter(r):
		return span(s, i, isLetter, -1)
	case isOther(r):
		return span(s, i, isOther, -1)
	}
	j := span(s, i, isSpace, -1)
	if r2, _ := runeAt(s, j); j == len(s) || isNumber(r2) {
		return j
	}
	if _, lw := utf8.DecodeLastRuneInString(s[i:j]); j-lw > i {
		return j - lw
	}
	return j
}
