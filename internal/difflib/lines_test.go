package difflib

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// referenceLineIDs interns lines the plain way, a map over b in order
// (ids by first occurrence, as NewLines numbers them) and a lookup for
// every line of a (-1 when b lacks it).
func referenceLineIDs(a, b []string) (aa, bb []int32, nids int) {
	ids := map[string]int32{}
	for _, l := range b {
		id, ok := ids[l]
		if !ok {
			id = int32(len(ids))
			ids[l] = id
		}
		bb = append(bb, id)
	}
	for _, l := range a {
		id, ok := ids[l]
		if !ok {
			id = -1
		}
		aa = append(aa, id)
	}
	return aa, bb, len(ids)
}

// editedPair returns two versions of a random file: b is a with a few
// lines replaced, inserted and deleted, so the two share long runs, and
// often their first and last lines (what NewLines takes without a
// lookup). Lines come from a small vocabulary, so many repeat, and files
// of 200 lines or more have popular lines (autojunk).
func editedPair(r *rand.Rand) (a, b []string) {
	vocab := 1 + r.IntN(60)
	line := func() string {
		l := fmt.Sprintf("line %d", r.IntN(vocab))
		if r.IntN(8) == 0 {
			return l // no newline: only ever last in a real file, anywhere here
		}
		return l + "\n"
	}
	n := r.IntN(400)
	if r.IntN(4) == 0 {
		n = r.IntN(8)
	}
	for range n {
		a = append(a, line())
	}
	b = slices.Clone(a)
	for range r.IntN(6) {
		switch i := r.IntN(len(b) + 1); r.IntN(3) {
		case 0:
			b = slices.Insert(b, i, line())
		case 1:
			if i < len(b) {
				b = slices.Delete(b, i, i+1)
			}
		default:
			if i < len(b) {
				b[i] = line()
			}
		}
	}
	if r.IntN(2) == 0 {
		a, b = b, a
	}
	return a, b
}

// TestNewLinesMatchesPlainInterning: NewLines (which gives a's lines that
// equal b's at both ends b's ids without a lookup, and reuses pooled
// tables) computes the matching blocks and grouped opcodes of a matcher
// over plainly interned ids, on edited versions of random files.
func TestNewLinesMatchesPlainInterning(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for iter := range 3000 {
		a, b := editedPair(r)
		autojunk := iter%3 != 0
		aa, bb, nids := referenceLineIDs(a, b)
		ref := NewIDs(aa, bb, nids, autojunk)
		want, wantGroups := slices.Clone(ref.MatchingBlocks()), ref.GroupedOpCodes(3)
		m := NewLines(a, b, autojunk)
		got, gotGroups := slices.Clone(m.MatchingBlocks()), m.GroupedOpCodes(3)
		if !slices.Equal(m.a, aa) || !slices.Equal(m.b, bb) {
			t.Fatalf("iter %d: ids differ:\na %q\nb %q\ngot  %v %v\nwant %v %v", iter, a, b, m.a, m.b, aa, bb)
		}
		m.Release()
		ref.Release()
		if !slices.Equal(got, want) || fmt.Sprint(gotGroups) != fmt.Sprint(wantGroups) {
			t.Fatalf("iter %d (%d×%d lines): blocks %v, want %v", iter, len(a), len(b), got, want)
		}
	}
}

// TestSplitAfterNewline: the pieces join back to the input, each but the
// last ends in "\n", none is empty, and none holds a "\n" before its end.
func TestSplitAfterNewline(t *testing.T) {
	for _, s := range []string{"", "\n", "\n\n", "a", "a\n", "a\nb", "a\nb\n", "\na\n\nb", strings.Repeat("xy\n", 100) + "z"} {
		got := SplitAfterNewline(s)
		if strings.Join(got, "") != s {
			t.Fatalf("%q: pieces %q do not join back", s, got)
		}
		for i, l := range got {
			if l == "" || strings.Contains(strings.TrimSuffix(l, "\n"), "\n") || (i < len(got)-1 && !strings.HasSuffix(l, "\n")) {
				t.Fatalf("%q: piece %d %q", s, i, l)
			}
		}
		if want := strings.Count(s, "\n") + 1; len(s) > 0 && !strings.HasSuffix(s, "\n") && len(got) != want {
			t.Fatalf("%q: %d pieces, want %d", s, len(got), want)
		}
	}
}
