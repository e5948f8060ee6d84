package difflib

import (
	"fmt"
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
	defer func() { dpOnly = false }()
	samePooled(t, cases, 2, blocks, func(p pair) string { return fmt.Sprintf("%d×%d", len(p.a), len(p.b)) })
}

// samePooled runs every case with fresh scratch arrays, then rounds times
// with pooled ones (each reusing what the cases before it released), and
// fails on the first result that differs; size names a case's size.
func samePooled[C any, R comparable](t *testing.T, cases []C, rounds int, run func(C) []R, size func(C) string) {
	t.Helper()
	defer func() { poolScratch = true }()
	poolScratch = false
	want := make([][]R, len(cases))
	for i, c := range cases {
		want[i] = run(c)
	}
	poolScratch = true
	for round := range rounds {
		for i, c := range cases {
			if got := run(c); !slices.Equal(got, want[i]) {
				t.Fatalf("round %d case %d (%s): pooled %v, fresh %v", round, i, size(c), got, want[i])
			}
		}
	}
}

// TestReleasedLineScratchIsClean: line matchers built on the interning
// table and index arrays of released ones (big then small, lines repeated
// and shared between a and b, more rounds than fit in one table size) give
// the opcodes of matchers that were never pooled.
func TestReleasedLineScratchIsClean(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	type pair struct{ a, b []string }
	var cases []pair
	for n := range 200 {
		vocab := 2 + r.IntN(1+40*(n%5))
		gen := func() []string {
			out := make([]string, r.IntN(1+300*(n%3)))
			for i := range out {
				out[i] = strings.Repeat("x", r.IntN(vocab)) + "\n"
			}
			return out
		}
		cases = append(cases, pair{gen(), gen()})
	}
	opcodes := func(p pair) []OpCode {
		m := NewLines(p.a, p.b, true)
		defer m.Release()
		return slices.Clone(m.OpCodes())
	}
	samePooled(t, cases, 3, opcodes, func(p pair) string { return fmt.Sprintf("%d×%d lines", len(p.a), len(p.b)) })
}

// TestLineTableGenerationWrap: after the stamp wraps, no line interned
// before reads as present.
func TestLineTableGenerationWrap(t *testing.T) {
	var tab lineTable
	b := []string{"a", "b", "c"}
	tab.reset(len(b))
	for i := range b {
		tab.intern(b, int32(i), int32(i))
	}
	tab.gen = ^uint32(0) // the next reset wraps
	tab.reset(len(b))
	for _, l := range b {
		if id := tab.find(l, b); id != -1 {
			t.Fatalf("%q found as %d in an emptied table", l, id)
		}
	}
	if id, added := tab.intern(b, 1, 0); !added || id != 0 || tab.find("b", b) != 0 {
		t.Fatalf("intern after the wrap: id %d added %v", id, added)
	}
}
