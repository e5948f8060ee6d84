package groups

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// m is a test member: group g, identity id, the group size it claims and
// whether its group ends at the next group's member.
type m struct {
	g, id  string
	size   int
	closed bool
}

func sized(ms []m) bool { return len(ms) >= ms[0].size }

func newAsm(id bool, full func([]m) bool, ends bool) *Assembler[m] {
	cfg := Config[m]{Key: func(x *m) string { return x.g }, Full: full}
	if id {
		cfg.ID = func(x *m) string { return x.id }
	}
	if ends {
		cfg.EndsAtNext = func(first *m) bool { return first.closed }
	}
	return New(cfg)
}

// show writes groups as "key[id id …]" (a trailing ! when full).
func show(gs []*Group[m]) string {
	var out []string
	for _, g := range gs {
		var ids []string
		for _, x := range g.Members {
			ids = append(ids, x.id)
		}
		s := g.Key + "[" + strings.Join(ids, " ") + "]"
		if g.Full {
			s += "!"
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestCompleteGroups(t *testing.T) {
	a := newAsm(true, sized, false)
	var got []*Group[m]
	for i := range 3 {
		done, dup := a.Add(m{g: "a", id: fmt.Sprint(i), size: 3})
		if dup {
			t.Fatal("dup")
		}
		if i < 2 && len(done) != 0 {
			t.Fatalf("member %d: %s, want nothing yet", i, show(done))
		}
		got = append(got, done...)
	}
	if show(got) != "a[0 1 2]!" || a.Len() != 0 {
		t.Fatalf("%s, %d pending", show(got), a.Len())
	}
	// The key can start a new group once its last left.
	if done, dup := a.Add(m{g: "a", id: "0", size: 1}); dup || show(done) != "a[0]!" {
		t.Fatalf("again: %s dup %v", show(done), dup)
	}
}

func TestDuplicates(t *testing.T) {
	a := newAsm(true, sized, false)
	a.Add(m{g: "a", id: "0", size: 3})
	if done, dup := a.Add(m{g: "a", id: "0", size: 3}); !dup || done != nil {
		t.Fatalf("second copy: dup %v, %s", dup, show(done))
	}
	a.Add(m{g: "a", id: "1", size: 3})
	done, _ := a.Add(m{g: "a", id: "2", size: 3})
	if show(done) != "a[0 1 2]!" {
		t.Fatal(show(done))
	}
	// Without an ID every copy counts, and can complete the group.
	b := newAsm(false, sized, false)
	b.Add(m{g: "a", id: "0", size: 2})
	if done, dup := b.Add(m{g: "a", id: "0", size: 2}); dup || show(done) != "a[0 0]!" {
		t.Fatalf("no ID: %s dup %v", show(done), dup)
	}
}

// A duplicate changes nothing: in particular it does not end the previous
// group under EndsAtNext.
func TestDuplicateDoesNotEndPrevious(t *testing.T) {
	a := newAsm(true, sized, true)
	a.Add(m{g: "a", id: "0", size: 3})
	a.Add(m{g: "b", id: "0", size: 3, closed: true})
	if done, dup := a.Add(m{g: "a", id: "0", size: 3}); !dup || done != nil {
		t.Fatalf("dup %v, %s", dup, show(done))
	}
	if done, _ := a.Add(m{g: "b", id: "1", size: 3, closed: true}); done != nil {
		t.Fatalf("b ended by a duplicate of a: %s", show(done))
	}
}

func TestInterleavedAndOutOfOrder(t *testing.T) {
	a := newAsm(true, sized, false)
	var got []*Group[m]
	for _, x := range []m{{"a", "2", 3, false}, {"b", "1", 2, false}, {"a", "0", 3, false}, {"c", "0", 2, false}, {"b", "0", 2, false}, {"a", "1", 3, false}} {
		done, _ := a.Add(x)
		got = append(got, done...)
	}
	if show(got) != "b[1 0]! a[2 0 1]!" {
		t.Fatal(show(got))
	}
	if rest := a.Flush(); show(rest) != "c[0]" {
		t.Fatal(show(rest))
	}
}

func TestTakeAndFlushPartial(t *testing.T) {
	a := newAsm(true, sized, false)
	for _, x := range []m{{"z", "0", 3, false}, {"a", "0", 3, false}, {"y", "0", 3, false}, {"a", "1", 3, false}} {
		a.Add(x)
	}
	var keys []string
	for g := range a.Pending() {
		keys = append(keys, g.Key)
	}
	if !slices.Equal(keys, []string{"z", "a", "y"}) {
		t.Fatalf("pending %v, want arrival order", keys)
	}
	g, ok := a.Take("a") // its timeout
	if !ok || show([]*Group[m]{g}) != "a[0 1]" {
		t.Fatalf("take: %v %v", g, ok)
	}
	if _, ok := a.Take("a"); ok {
		t.Fatal("took a twice")
	}
	if rest := a.Flush(); show(rest) != "z[0] y[0]" || a.Len() != 0 {
		t.Fatalf("flush %s, %d left", show(rest), a.Len())
	}
	if rest := a.Flush(); len(rest) != 0 {
		t.Fatal(show(rest))
	}
}

// Without Full a group leaves only by Take or Flush, however many members
// it has.
func TestNoFull(t *testing.T) {
	a := newAsm(true, nil, false)
	for i := range 10 {
		if done, _ := a.Add(m{g: "a", id: fmt.Sprint(i), size: 1}); done != nil {
			t.Fatal(show(done))
		}
	}
	if g, ok := a.Take("a"); !ok || len(g.Members) != 10 || g.Full {
		t.Fatalf("%v %v", g, ok)
	}
}

func TestEndsAtNext(t *testing.T) {
	a := newAsm(true, sized, true)
	var got []*Group[m]
	add := func(x m) {
		done, _ := a.Add(x)
		got = append(got, done...)
	}
	// a is closed (2 of 4 will ever come); b is not and waits for its size.
	add(m{g: "a", id: "0", size: 4, closed: true})
	add(m{g: "a", id: "1", size: 4, closed: true})
	add(m{g: "b", id: "0", size: 2})
	if show(got) != "a[0 1]" {
		t.Fatalf("%s: a ends when b begins", show(got))
	}
	add(m{g: "c", id: "0", size: 2})
	if show(got) != "a[0 1]" {
		t.Fatalf("%s: b is not closed, it stays", show(got))
	}
	// A closed group that completes leaves full, once.
	add(m{g: "d", id: "0", size: 1, closed: true})
	add(m{g: "e", id: "0", size: 2, closed: true})
	// The next member ends e, and fills b.
	add(m{g: "b", id: "1", size: 2})
	if show(got) != "a[0 1] d[0]! e[0] b[0 1]!" {
		t.Fatal(show(got))
	}
	if rest := a.Flush(); show(rest) != "c[0]" {
		t.Fatal(show(rest))
	}
}

func TestNoKeyPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	New(Config[m]{})
}
