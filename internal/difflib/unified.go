package difflib

import (
	"context"
	"strconv"
	"strings"
	"unicode/utf8"
)

// isLineBoundary reports whether r ends a line for Python's str.splitlines.
func isLineBoundary(r rune) bool {
	switch r {
	case '\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0x85, 0x2028, 0x2029:
		return true
	}
	return false
}

// SplitLines is Python's str.splitlines(keepends): it splits at \n, \r\n, \r,
// \v, \f, \x1c, \x1d, \x1e, \x85, \u2028 and \u2029, and yields no trailing
// empty element.
func SplitLines(s string, keepends bool) []string {
	if s == "" {
		return nil
	}
	out := make([]string, 0, strings.Count(s, "\n")+1)
	start := 0
	for i := 0; i < len(s); {
		// Eight bytes at a time while none can start a boundary.
		for i+8 <= len(s) && !mayLead8(le64(s[i:])) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if !boundaryLead[c] {
			// Continuation bytes are never lead bytes of a boundary, so
			// skipping byte by byte finds the same boundaries as
			// decoding rune by rune.
			i++
			continue
		}
		r, size := rune(c), 1
		if c >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		if !isLineBoundary(r) {
			i += size
			continue
		}
		end := i + size
		if r == '\r' && end < len(s) && s[end] == '\n' {
			end++
		}
		if keepends {
			out = append(out, s[start:end])
		} else {
			out = append(out, s[start:i])
		}
		start = end
		i = end
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// mayLead8 reports whether one of the eight bytes of x is 0x0a–0x0d,
// 0x1c–0x1e or at least 0x80 (a superset of boundaryLead, by the exact
// "hasbetween" bit test of "Bit Twiddling Hacks").
func mayLead8(x uint64) bool {
	const ones, low7, highs = 0x0101010101010101, 0x7f7f7f7f7f7f7f7f, 0x8080808080808080
	// between(m, n): some byte b with m < b < n (for m, n <= 128).
	between := func(m, n uint64) uint64 {
		return (ones*(127+n) - x&low7) & ^x & (x&low7 + ones*(127-m)) & highs
	}
	return between(0x09, 0x0e)|between(0x1b, 0x1f)|x&highs != 0
}

// le64 is the little-endian word at the start of s (len(s) >= 8).
func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// boundaryLead marks the bytes a line boundary can start with: the ASCII
// boundaries, and 0xC2 (U+0085) and 0xE2 (U+2028, U+2029) in UTF-8.
var boundaryLead = func() (t [256]bool) {
	for _, c := range []byte{'\n', '\r', '\v', '\f', 0x1c, 0x1d, 0x1e, 0xc2, 0xe2} {
		t[c] = true
	}
	return t
}()

// formatRangeUnified is difflib's _format_range_unified.
func formatRangeUnified(start, stop int) string {
	beginning := start + 1
	length := stop - start
	if length == 1 {
		return strconv.Itoa(beginning)
	}
	if length == 0 {
		beginning--
	}
	return strconv.Itoa(beginning) + "," + strconv.Itoa(length)
}

// UnifiedDiff is difflib.unified_diff(a, b, fromfile, tofile, n=n,
// lineterm=lineterm) without dates: the lines of the diff, starting with the
// "--- " and "+++ " header lines; nil when a and b are equal.
func UnifiedDiff(a, b []string, fromfile, tofile string, n int, lineterm string) []string {
	out, _ := UnifiedDiffContext(context.Background(), a, b, fromfile, tofile, n, lineterm)
	return out
}

// UnifiedDiffContext is UnifiedDiff that stops when ctx is done.
func UnifiedDiffContext(ctx context.Context, a, b []string, fromfile, tofile string, n int, lineterm string) ([]string, error) {
	m := NewLines(a, b, true)
	m.SetContext(ctx)
	groups := m.GroupedOpCodes(n)
	if m.Err() != nil {
		return nil, m.Err()
	}
	if len(groups) == 0 {
		return nil, nil
	}
	out := []string{"--- " + fromfile + lineterm, "+++ " + tofile + lineterm}
	for _, g := range groups {
		out = appendHunk(out, a, b, g, lineterm)
	}
	return out, nil
}

func appendHunk(out, a, b []string, g []OpCode, lineterm string) []string {
	EachHunkLine(a, b, g, func(prefix, line string) {
		out = append(out, prefix+line+lineterm)
	})
	return out
}

// EachHunkLine calls fn with each line of one unified_diff hunk (without
// line terminator): the "@@ -a,b +c,d @@" header (as prefix, line ""),
// then each line of the group with its " ", "-" or "+" prefix.
func EachHunkLine(a, b []string, g []OpCode, fn func(prefix, line string)) {
	first, last := g[0], g[len(g)-1]
	fn("@@ -"+formatRangeUnified(first.I1, last.I2)+" +"+formatRangeUnified(first.J1, last.J2)+" @@", "")
	for _, c := range g {
		if c.Tag == 'e' {
			for _, l := range a[c.I1:c.I2] {
				fn(" ", l)
			}
			continue
		}
		if c.Tag == 'r' || c.Tag == 'd' {
			for _, l := range a[c.I1:c.I2] {
				fn("-", l)
			}
		}
		if c.Tag == 'r' || c.Tag == 'i' {
			for _, l := range b[c.J1:c.J2] {
				fn("+", l)
			}
		}
	}
}

// DiffBody returns the SWE-RL normalized diff of two texts: unified_diff of
// their splitlines() with 3 lines of context and lineterm "", the two header
// lines dropped, joined with "\n"; "" when the line lists are equal.
func DiffBody(ctx context.Context, oldText, newText string) (string, error) {
	a, b := SplitLines(oldText, false), SplitLines(newText, false)
	m := NewLines(a, b, true)
	m.SetContext(ctx)
	groups := m.GroupedOpCodes(3)
	err := m.Err()
	m.Release()
	if err != nil {
		return "", err
	}
	var sb strings.Builder
	for _, g := range groups {
		EachHunkLine(a, b, g, func(prefix, line string) {
			if sb.Len() > 0 {
				sb.WriteByte('\n')
			}
			sb.WriteString(prefix)
			sb.WriteString(line)
		})
	}
	return sb.String(), nil
}

// SplitAfterNewline splits s after every "\n", keeping the terminators; a
// last line without one is kept as is. It is how Python iterates a
// StringIO, and how git and unified diffs count lines (unlike
// SplitLines, which also breaks at "\r" and the other Unicode line
// boundaries).
func SplitAfterNewline(s string) []string {
	if s == "" {
		return nil
	}
	// Counted first (strings.Count is vectorized) so the slice is
	// allocated once, at its size, instead of grown by doubling.
	out := make([]string, 0, strings.Count(s, "\n")+1)
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i+1])
		s = s[i+1:]
	}
	return out
}
