package difflib

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestReleasedScratchIsClean: matchers built on the DP cells and
// occurrence sums of released ones (long then short, many alphabets) give
// the matching blocks of matchers with fresh arrays.
func TestReleasedScratchIsClean(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	type pair struct{ a, b string }
	var cases []pair
	for n := range 300 {
		alpha := "ab"
		if n%3 == 1 {
			alpha = "abcde \n"
		}
		gen := func() string {
			var sb strings.Builder
			for range r.IntN(1 + 400*(n%4)) {
				sb.WriteByte(alpha[r.IntN(len(alpha))])
			}
			return sb.String()
		}
		cases = append(cases, pair{gen(), gen()})
	}
	blocks := func(p pair) []Match {
		m := NewRunes(p.a, p.b, false)
		defer m.Release()
		return slices.Clone(m.MatchingBlocks())
	}
	dpOnly = true // the DP is what reads the cells
	defer func() { dpOnly, poolScratch = false, true }()
	poolScratch = false
	want := make([][]Match, len(cases))
	for i, p := range cases {
		want[i] = blocks(p)
	}
	poolScratch = true
	for round := range 2 {
		for i, p := range cases {
			if got := blocks(p); !slices.Equal(got, want[i]) {
				t.Fatalf("round %d case %d (%d×%d): pooled %v, fresh %v", round, i, len(p.a), len(p.b), got, want[i])
			}
		}
	}
}
