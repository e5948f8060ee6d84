package difflib

import (
	"math/rand/v2"
	"regexp"
	"slices"
	"testing"
)

// lineBreak matches what ends a line for Python's str.splitlines, "\r\n"
// before a lone "\r". Like utf8.DecodeRuneInString, regexp reads an
// invalid byte as U+FFFD, so a stray 0x85 is no boundary.
var lineBreak = regexp.MustCompile("\r\n|[\n\r\v\f\x1c\x1d\x1e\u0085\u2028\u2029]")

// splitLinesByRegexp is SplitLines written plainly from lineBreak's
// matches: the reading of str.splitlines that the byte-skipping version
// must equal.
func splitLinesByRegexp(s string, keepends bool) []string {
	var out []string
	start := 0
	for _, m := range lineBreak.FindAllStringIndex(s, -1) {
		end := m[0]
		if keepends {
			end = m[1]
		}
		out = append(out, s[start:end])
		start = m[1]
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// TestSplitLinesMatchesRegexp: random strings built from boundaries,
// their UTF-8 lead bytes alone, other multi-byte runes and invalid bytes.
func TestSplitLinesMatchesRegexp(t *testing.T) {
	parts := []string{"a", "xyz", "\n", "\r", "\r\n", "\v", "\f", "\x1c", "\x1d", "\x1e",
		"\u0085", "\u2028", "\u2029", "\u2027", "\u00e9", "é", "世", "\xc2", "\xe2", "\xe2\x80",
		"\x80", "\xff", "\xf0\x9f\x98\x80", "\xf0\x9f"}
	r := rand.New(rand.NewPCG(1, 2))
	for n := range 20000 {
		var s string
		for range r.IntN(12) {
			s += parts[r.IntN(len(parts))]
		}
		for _, keep := range []bool{false, true} {
			got, want := SplitLines(s, keep), splitLinesByRegexp(s, keep)
			if !slices.Equal(got, want) {
				t.Fatalf("case %d %q keepends=%v: got %q, want %q", n, s, keep, got, want)
			}
		}
	}
}

func FuzzSplitLines(f *testing.F) {
	f.Add("a\r\nb\u2028c\xe2\x80")
	f.Fuzz(func(t *testing.T, s string) {
		for _, keep := range []bool{false, true} {
			if got, want := SplitLines(s, keep), splitLinesByRegexp(s, keep); !slices.Equal(got, want) {
				t.Fatalf("%q keepends=%v: got %q, want %q", s, keep, got, want)
			}
		}
	})
}

// TestMayLead8 checks the word test against boundaryLead and the bytes it
// adds (0x80 and above), for every byte value in every position.
func TestMayLead8(t *testing.T) {
	for pos := range 8 {
		for c := range 256 {
			w := []byte("abcdefgh")
			w[pos] = byte(c)
			want := boundaryLead[c] || c >= 0x80
			if got := mayLead8(le64(string(w))); got != want {
				t.Fatalf("mayLead8(%q) = %v, want %v", w, got, want)
			}
		}
	}
	// Pairs: a borrow from one byte must not hide or fake another's.
	for c1 := range 256 {
		for c2 := range 256 {
			w := []byte{byte(c1), byte(c2), 'x', 'x', 'x', 'x', 'x', byte(c1)}
			want := boundaryLead[c1] || boundaryLead[c2] || c1 >= 0x80 || c2 >= 0x80
			if got := mayLead8(le64(string(w))); got != want {
				t.Fatalf("mayLead8(%q) = %v, want %v", w, got, want)
			}
		}
	}
}
