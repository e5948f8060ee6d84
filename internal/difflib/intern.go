package difflib

import "hash/maphash"

// lineTable interns lines: an open-addressing hash table from a line to its
// id, reused across matchers. Go maps cost an allocation and a rehash per
// matcher; this one is cleared by bumping a generation stamp.
type lineTable struct {
	slots []lineSlot
	mask  uint64
	gen   uint32
}

// lineSlot maps the line b[at] (hash h) to id; it is empty unless gen is
// the table's generation.
type lineSlot struct {
	h   uint64
	id  int32
	at  int32
	gen uint32
}

var lineSeed = maphash.MakeSeed()

// reset empties the table and sizes it for n distinct lines.
func (t *lineTable) reset(n int) {
	size := 16
	for size < 2*n {
		size *= 2
	}
	if cap(t.slots) < size {
		t.slots = make([]lineSlot, size)
		t.gen = 0
	}
	t.slots = t.slots[:size]
	t.mask = uint64(size - 1)
	t.gen++
	if t.gen == 0 { // wrapped: stale stamps could read as current
		clear(t.slots[:cap(t.slots)])
		t.gen = 1
	}
}

// intern returns the id of line b[at], adding it with id next when the
// table does not hold it yet (added true).
func (t *lineTable) intern(b []string, at, next int32) (id int32, added bool) {
	l := b[at]
	h := maphash.String(lineSeed, l)
	i := h & t.mask
	for ; t.slots[i].gen == t.gen; i = (i + 1) & t.mask {
		if s := &t.slots[i]; s.h == h && b[s.at] == l {
			return s.id, false
		}
	}
	t.slots[i] = lineSlot{h: h, id: next, at: at, gen: t.gen}
	return next, true
}

// find returns the id of line l, or -1 when b (the lines interned) does
// not hold it.
func (t *lineTable) find(l string, b []string) int32 {
	h := maphash.String(lineSeed, l)
	for i := h & t.mask; t.slots[i].gen == t.gen; i = (i + 1) & t.mask {
		if s := &t.slots[i]; s.h == h && b[s.at] == l {
			return s.id
		}
	}
	return -1
}
