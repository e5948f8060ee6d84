package tokenizer

import "unicode/utf8"

// The byte-level alphabet of GPT-2: every byte maps to one printable rune,
// so that vocabularies can be stored as text. Printable Latin-1 bytes map to
// themselves; the other 68 bytes map, in order, to U+0100 onwards.
var (
	byteToRune [256]rune
	runeToByte = map[rune]byte{}
)

func init() {
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = rune(256 + n)
			n++
		}
		runeToByte[byteToRune[b]] = byte(b)
	}
}

// byteLevelDecode maps a byte-level string (as stored in vocabularies) back
// to raw bytes. ok is false when s holds a rune outside the alphabet.
func byteLevelDecode(s string) (b []byte, ok bool) {
	b = make([]byte, 0, len(s))
	for _, r := range s {
		c, in := runeToByte[r]
		if !in {
			return nil, false
		}
		b = append(b, c)
	}
	return b, true
}

// byteLevelEncode maps raw bytes to their byte-level string.
func byteLevelEncode(b []byte) string {
	out := make([]byte, 0, len(b)*2)
	for _, c := range b {
		out = utf8.AppendRune(out, byteToRune[c])
	}
	return string(out)
}

// ByteLevelDecode returns the bytes a token's byte-level text form (as in
// tokenizer.json's vocab or GGUF's tokenizer.ggml.tokens) stands for; ok
// is false when s has a rune outside the byte-level alphabet.
func ByteLevelDecode(s string) (b []byte, ok bool) { return byteLevelDecode(s) }
