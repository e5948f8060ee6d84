package jsonscan

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestPlain8 checks the word tests against their byte-by-byte rules for
// every byte value in every position, and for random words.
func TestPlain8(t *testing.T) {
	plain := func(c byte) bool { return c != '"' && c != '\\' && c >= 0x20 && c < 0x80 }
	html := func(c byte) bool { return plain(c) && c != '<' && c != '>' && c != '&' }
	for _, tc := range []struct {
		name  string
		word  func(uint64) bool
		plain func(byte) bool
	}{{"Plain8", Plain8, plain}, {"HTMLPlain8", HTMLPlain8, html}} {
		check := func(w [8]byte) {
			want := true
			for _, c := range w {
				want = want && tc.plain(c)
			}
			if got := tc.word(binary.LittleEndian.Uint64(w[:])); got != want {
				t.Fatalf("%s(%q) = %v, want %v", tc.name, w, got, want)
			}
		}
		for pos := range 8 {
			for c := range 256 {
				w := [8]byte{'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'}
				w[pos] = byte(c)
				check(w)
				w = [8]byte{}
				w[pos] = byte(c)
				check(w)
			}
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for range 200000 {
			var w [8]byte
			for i := range w {
				// Mostly plain bytes, so words without a special byte occur.
				w[i] = byte(0x18 + rng.IntN(0x70))
				if rng.IntN(16) == 0 {
					w[i] = byte(rng.IntN(256))
				}
			}
			check(w)
		}
	}
}

// Int reads what encoding/json decodes into an int64 and gives up on the
// rest (fractions, exponents, overflow, leading zeros, junk).
func TestInt(t *testing.T) {
	for _, s := range []string{"0", "-0", "7", "-7", "1234567890", "9223372036854775807", "-9223372036854775807"} {
		var want int64
		if err := json.Unmarshal([]byte(s), &want); err != nil {
			t.Fatal(err)
		}
		var got int64
		ok := Try([]byte(s), func(p *Scanner) bool {
			var ok bool
			got, ok = p.Int()
			return ok
		})
		if !ok || got != want {
			t.Errorf("Int(%s) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "-", "01", "-01", "1.0", "1e3", "1E3", "0.5", "9223372036854775808", "-9223372036854775808", "99999999999999999999", "+1", "1x", "0x1", "\"1\""} {
		if Try([]byte(s), func(p *Scanner) bool { _, ok := p.Int(); return ok }) {
			t.Errorf("Int(%q) did not give up", s)
		}
	}
	// Every int64 that fits round-trips.
	r := rand.New(rand.NewPCG(3, 4))
	for range 10000 {
		v := int64(r.Uint64()) >> r.IntN(63)
		if v == -1<<63 {
			continue
		}
		var got int64
		s := strconv.FormatInt(v, 10)
		if !Try([]byte(s), func(p *Scanner) bool { var ok bool; got, ok = p.Int(); return ok }) || got != v {
			t.Fatalf("Int(%s) = %d", s, got)
		}
	}
}
