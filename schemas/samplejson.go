package schemas

import (
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf8"

	"swerl/internal/jsonscan"
)

// SampleEncoder writes Samples in their JSON wire form, byte for byte what
// encoding/json's Marshal writes for them, without reflection (its field
// list is generated from Sample's: jsoncodec_gen.go). It keeps the
// escaped form of the last prompt it wrote: the G samples of a group share
// their prompt, which is most of a sample's bytes, so a run of them escapes
// it once. The zero value is ready to use; it is not safe for concurrent use.
//
// The train pipeline's sample sink spent about a tenth of its CPU in
// json.Marshal before this existed; FuzzSampleEncoder holds it to Marshal.
type SampleEncoder struct {
	prompt, system escaped // named by codecgen's targets (Cached)
}

// escaped is a string and its JSON form, kept for the next record that
// repeats the string.
type escaped struct {
	text string
	json []byte
}

func (c *escaped) of(s string) []byte {
	if c.json == nil || s != c.text {
		c.text, c.json = s, appendJSONString(c.json[:0], s)
	}
	return c.json
}

// Append appends the JSON of s to dst. Like Encode it sets a zero
// schema_version to Version, and like Marshal it fails on a NaN or infinite
// number, naming the field; on failure it returns dst unchanged.
func (e *SampleEncoder) Append(dst []byte, s *Sample) ([]byte, error) {
	if s.SchemaVersion == 0 {
		s.SchemaVersion = Version
	}
	return e.appendJSON(dst, s) // generated from Sample's fields: jsoncodec_gen.go
}

// appendJSONInts writes a list of integers.
func appendJSONInts[T int | int32 | int64](b []byte, v []T) []byte {
	b = append(b, '[')
	for i, x := range v {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(x), 10)
	}
	return append(b, ']')
}

// appendJSONFloat writes f as encoding/json does for a float of the given
// bit size: the shortest representation, in exponent form below 1e-6 and
// from 1e21 on, with a one-digit negative exponent unpadded.
func appendJSONFloat(b []byte, f float64, bits int) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return b, &json.UnsupportedValueError{Str: strconv.FormatFloat(f, 'g', -1, bits)}
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	b = strconv.AppendFloat(b, f, format, -1, bits)
	if format == 'e' {
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}

// jsonSafe[c] is true for the ASCII bytes encoding/json copies unescaped
// (with its default HTML escaping: not <, > or &).
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// appendJSONString writes s quoted as encoding/json does: \" \\ \b \f \n
// \r \t, other control bytes and <, >, & as \u00XX, invalid UTF-8 as
// \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		// Skip 8 plain bytes at a time: none below 0x20 or above 0x7f,
		// none of " \\ < > &.
		for i+8 <= len(s) && jsonscan.HTMLPlain8(load8(s, i)) {
			i += 8
		}
		if i >= len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// load8 reads s[i:i+8] little-endian (the compiler makes it one load).
func load8(s string, i int) uint64 {
	s = s[i : i+8]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}
