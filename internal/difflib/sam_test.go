package difflib

import (
	"math/rand"
	"os"
	"slices"
	"testing"
)

// checkSAM compares the automaton with the DP on ranges of m; the matcher
// must have no popular elements.
func checkSAM(t *testing.T, m *Matcher, alo, ahi, blo, bhi int) {
	t.Helper()
	dp := m.longestDP(alo, ahi, blo, bhi)
	sa := m.longestSAM(alo, ahi, blo, bhi)
	if dp != sa {
		t.Fatalf("a=%v b=%v [%d:%d] [%d:%d]: DP %+v, automaton %+v", m.a, m.b, alo, ahi, blo, bhi, dp, sa)
	}
}

func randomIDs(r *rand.Rand, n, alphabet int) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = int32(r.Intn(alphabet))
	}
	return s
}

func randomRange(r *rand.Rand, n int) (int, int) {
	lo := r.Intn(n + 1)
	return lo, lo + r.Intn(n-lo+1)
}

// TestSAMMatchesDP: on small alphabets (ties everywhere), ids of a missing
// from b, and random sub-ranges, the automaton finds the DP's match.
func TestSAMMatchesDP(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for iter := 0; iter < 3000; iter++ {
		alphabet := 1 + r.Intn(5)
		a := randomIDs(r, r.Intn(60), alphabet+1)
		b := randomIDs(r, r.Intn(60), alphabet)
		for i := range a {
			if a[i] == int32(alphabet) {
				a[i] = -1 // an id of a that b lacks
			}
		}
		m := NewIDs(a, b, alphabet, false)
		for k := 0; k < 10; k++ {
			alo, ahi := randomRange(r, len(a))
			blo, bhi := randomRange(r, len(b))
			checkSAM(t, m, alo, ahi, blo, bhi)
		}
		checkSAM(t, m, 0, len(a), 0, len(b))
	}
}

// TestSAMMatchesDPFiles compares the two on real text: this package's
// sources against each other and against edited copies, as code points.
func TestSAMMatchesDPFiles(t *testing.T) {
	var texts []string
	for _, name := range []string{"matcher.go", "unified.go", "sam.go"} {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		texts = append(texts, string(b))
	}
	r := rand.New(rand.NewSource(2))
	for _, x := range texts {
		for _, y := range append(texts, mutate(r, x)) {
			m := NewRunes(x, y, false)
			if m.popular {
				t.Fatal("autojunk=false matcher has popular elements")
			}
			checkSAM(t, m, 0, len(m.a), 0, len(m.b))
			for k := 0; k < 20; k++ {
				alo, ahi := randomRange(r, len(m.a))
				blo, bhi := randomRange(r, len(m.b))
				checkSAM(t, m, alo, ahi, blo, bhi)
			}
		}
	}
}

// FuzzSAMMatchesDP: two byte strings over a folded alphabet, and a range
// of each, taken from the fuzzer's input.
func FuzzSAMMatchesDP(f *testing.F) {
	f.Add([]byte("abcabcab"), []byte("bcabca"), uint8(3), uint16(0), uint16(0xffff))
	f.Add([]byte("aaaa"), []byte("aaaaaa"), uint8(1), uint16(0x0102), uint16(0x0305))
	f.Add([]byte("the quick brown fox"), []byte("the quack brawn fix"), uint8(0), uint16(0), uint16(0xffff))
	f.Fuzz(func(t *testing.T, x, y []byte, fold uint8, ra, rb uint16) {
		ids := func(s []byte) []int32 {
			out := make([]int32, len(s))
			for i, c := range s {
				if fold > 0 {
					c %= fold%8 + 1
				}
				out[i] = int32(c)
			}
			return out
		}
		a, b := ids(x), ids(y)
		m := NewIDs(a, b, 256, false)
		span := func(r uint16, n int) (int, int) {
			lo := int(r>>8) % (n + 1)
			hi := lo + int(r&0xff)%(n-lo+1)
			return lo, hi
		}
		alo, ahi := span(ra, len(a))
		blo, bhi := span(rb, len(b))
		checkSAM(t, m, alo, ahi, blo, bhi)
		checkSAM(t, m, 0, len(a), 0, len(b))
	})
}

// TestSAMPrefixOfRangeMatchesDP: an automaton of b[blo:hi] asked about
// b[blo:bhi] for every bhi <= hi (how MatchingBlocks' left subproblems use
// their parent's) finds the DP's match, on small alphabets.
func TestSAMPrefixOfRangeMatchesDP(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	for iter := 0; iter < 2000; iter++ {
		alphabet := 1 + r.Intn(4)
		a := randomIDs(r, r.Intn(50), alphabet)
		b := randomIDs(r, r.Intn(50), alphabet)
		m := NewIDs(a, b, alphabet, false)
		blo, hi := randomRange(r, len(b))
		c := samRange{s: new(sam), blo: -1}
		m.longestSAMIn(&c, 0, len(a), blo, hi) // builds for b[blo:hi]
		for bhi := blo; bhi <= hi; bhi++ {
			alo, ahi := randomRange(r, len(a))
			if c.blo != blo || c.bhi != hi {
				t.Fatalf("the automaton was rebuilt for [%d:%d]", c.blo, c.bhi)
			}
			got := m.longestSAMIn(&c, alo, ahi, blo, bhi)
			if want := m.longestDP(alo, ahi, blo, bhi); got != want {
				t.Fatalf("a=%v b=%v a[%d:%d] b[%d:%d] of an automaton of b[%d:%d]: DP %+v, automaton %+v", a, b, alo, ahi, blo, bhi, blo, hi, want, got)
			}
		}
	}
}

// TestMatchingBlocksWithSharedAutomata: MatchingBlocks with automata shared
// down chains of left subproblems equals the DP-only recursion, on random
// texts over small alphabets and on this package's sources.
func TestMatchingBlocksWithSharedAutomata(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	var pairs [][2]string
	for iter := 0; iter < 400; iter++ {
		gen := func() string {
			out := make([]byte, r.Intn(600))
			for i := range out {
				out[i] = "ab\ncd"[r.Intn(2+iter%4)]
			}
			return string(out)
		}
		pairs = append(pairs, [2]string{gen(), gen()})
	}
	src, err := os.ReadFile("matcher.go")
	if err != nil {
		t.Fatal(err)
	}
	edited := []byte(string(src))
	for i := 0; i < len(edited); i += 97 {
		edited[i] = 'x'
	}
	pairs = append(pairs, [2]string{string(src), string(edited)}, [2]string{string(edited[len(edited)/3:]), string(src)})
	blocks := func(p [2]string) []Match {
		m := NewRunes(p[0], p[1], false)
		defer m.Release()
		return append([]Match(nil), m.MatchingBlocks()...)
	}
	defer func() { dpOnly = false }()
	for i, p := range pairs {
		dpOnly = true
		want := blocks(p)
		dpOnly = false
		if got := blocks(p); !slices.Equal(got, want) {
			t.Fatalf("pair %d (%d×%d): automata %v, DP %v", i, len(p[0]), len(p[1]), got, want)
		}
	}
}
