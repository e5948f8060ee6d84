// Package difflib is a faithful port of the parts of Python's difflib that the
// SWE-RL reward depends on: SequenceMatcher (matching blocks, opcodes, grouped
// opcodes, ratio) with isjunk=None and the exact autojunk popularity
// heuristic, unified_diff, and str.splitlines.
//
// Results are identical to CPython's: the same Ratcliff/Obershelp recursion,
// the same find_longest_match tie-breaks (earliest i, then earliest j) and the
// same extension of a match over popular elements. Sequences are compared as
// small integer ids (lines and code points are interned first), with the
// b2j index held in slices and the DP rows reused across calls; without
// popular elements, large find_longest_match calls use a suffix automaton
// that gives the DP's answer in linear time (sam.go).
package difflib

import (
	"context"
	"sort"
	"sync"
	"unicode/utf8"
)

// Match is a matching block: A[I:I+Size] == B[J:J+Size].
type Match struct {
	I, J, Size int
}

// OpCode is one edit operation: Tag is 'r' (replace), 'd' (delete),
// 'i' (insert) or 'e' (equal), on A[I1:I2] and B[J1:J2].
type OpCode struct {
	Tag            byte
	I1, I2, J1, J2 int
}

// Name returns Python's name of the opcode's tag ("replace", "delete",
// "insert", "equal").
func (o OpCode) Name() string {
	switch o.Tag {
	case 'r':
		return "replace"
	case 'd':
		return "delete"
	case 'i':
		return "insert"
	default:
		return "equal"
	}
}

// Matcher is Python's SequenceMatcher(None, a, b, autojunk) over two
// sequences of interned ids. Build one with NewRunes, NewLines or NewIDs.
// A Matcher is not safe for concurrent use.
type Matcher struct {
	a, b []int32
	// b2j is CPython's b2j as one array: pos[start[id]:start[id+1]]
	// lists, ascending, the positions of id in b; empty for ids not in b
	// and for popular ids (autojunk).
	start, pos []int32
	// sc holds the arrays above (and a, b when the matcher interned
	// them) for Release to hand to the next matcher.
	sc *scratch
	// popular: some ids were dropped from b2j (autojunk).
	popular bool
	// occ[i] is the number of positions in b of a[:i]'s elements, the DP
	// work estimate, built on first use for matchers without popular
	// elements.
	occ []int64

	// cells[j] of find_longest_match: the row stamp (high 32 bits) and
	// the length of the match ending at b[j]; reused across calls.
	cells []uint64
	row   uint64

	blocks []Match
	done   <-chan struct{}
	ctxErr func() error
	err    error
	tick   int
}

// NewIDs returns a matcher over id sequences. Ids must be >= 0 for b; an id
// of a that is negative never matches. nids must exceed every id in b.
func NewIDs(a, b []int32, nids int, autojunk bool) *Matcher {
	return newMatcher(getScratch(), a, b, nids, autojunk)
}

func newMatcher(sc *scratch, a, b []int32, nids int, autojunk bool) *Matcher {
	m := &Matcher{a: a, b: b, sc: sc}
	m.chainB(nids, autojunk)
	return m
}

// positions returns the positions of id in b (CPython's b2j[id]).
func (m *Matcher) positions(id int32) []int32 {
	return m.pos[m.start[id]:m.start[id+1]]
}

// scratch is a matcher's reusable arrays: whole-file matchers need arrays
// as long as the file, and fresh ones cost a clear and the GC.
type scratch struct {
	a, b             []int32 // interned sequences (NewRunes, NewLines)
	start, fill, pos []int32 // the b2j index
	lines            lineTable
	occ              []int64  // dpCostly's prefix sums
	cells            []uint64 // longestDP's cells, stamped up to row
	row              uint64
}

var scratchPool sync.Pool

func getScratch() *scratch {
	if poolScratch {
		if sc, ok := scratchPool.Get().(*scratch); ok {
			return sc
		}
	}
	return new(scratch)
}

// grow returns (*p)[:n], reallocating when too short; the contents are
// whatever was there.
func grow[T any](p *[]T, n int) []T {
	if cap(*p) < n {
		*p = make([]T, n, n+n/4)
	}
	return (*p)[:n]
}

// NewRunes returns a matcher comparing the Unicode code points of a and b,
// like SequenceMatcher(None, a, b, autojunk) on two Python str.
func NewRunes(a, b string, autojunk bool) *Matcher {
	// Code points below 128 are interned through a table, the rest
	// through a map.
	var ascii [utf8.RuneSelf]int32
	for i := range ascii {
		ascii[i] = -1
	}
	var ids map[rune]int32
	nids := int32(0)
	sc := getScratch()
	bb := grow(&sc.b, len(b))[:0] // len(b) bytes hold at most that many runes
	for _, r := range b {
		if r < utf8.RuneSelf {
			id := ascii[r]
			if id < 0 {
				id = nids
				ascii[r] = id
				nids++
			}
			bb = append(bb, id)
			continue
		}
		if ids == nil {
			ids = make(map[rune]int32)
		}
		id, ok := ids[r]
		if !ok {
			id = nids
			ids[r] = id
			nids++
		}
		bb = append(bb, id)
	}
	aa := grow(&sc.a, len(a))[:0]
	for _, r := range a {
		if r < utf8.RuneSelf {
			aa = append(aa, ascii[r])
			continue
		}
		id, ok := ids[r]
		if !ok {
			id = -1
		}
		aa = append(aa, id)
	}
	return newMatcher(sc, aa, bb, int(nids), autojunk)
}

// NewLines returns a matcher comparing two lists of lines (each line one
// element), like SequenceMatcher(None, a, b, autojunk) on two Python lists.
func NewLines(a, b []string, autojunk bool) *Matcher {
	sc := getScratch()
	bb := grow(&sc.b, len(b))
	t := &sc.lines
	t.reset(len(b))
	nids := int32(0)
	for i := range b {
		id, added := t.intern(b, int32(i), nids)
		if added {
			nids++
		}
		bb[i] = id
	}
	// The lines a shares with b at both ends (two versions of a file
	// mostly do) take b's ids without a lookup: the table would give the
	// same id for an equal line.
	n := min(len(a), len(b))
	pre := 0
	for pre < n && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < n-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	aa := grow(&sc.a, len(a))
	copy(aa, bb[:pre])
	for i := pre; i < len(a)-suf; i++ {
		aa[i] = t.find(a[i], b)
	}
	copy(aa[len(a)-suf:], bb[len(b)-suf:])
	return newMatcher(sc, aa, bb, int(nids), autojunk)
}

// chainB builds b2j and drops popular elements: with autojunk and
// len(b) >= 200, an element occurring more than len(b)/100+1 times is
// removed from the index (it can no longer anchor a match but is still
// absorbed when a match is extended).
func (m *Matcher) chainB(nids int, autojunk bool) {
	sc := m.sc
	// Counts first (start[id+1]), popular ids' counts zeroed, then the
	// prefix sums make them offsets.
	start := grow(&sc.start, nids+1)
	clear(start)
	for _, id := range m.b {
		start[id+1]++
	}
	n := len(m.b)
	if autojunk && n >= 200 {
		ntest := int32(n/100 + 1)
		for id := 1; id <= nids; id++ {
			if start[id] > ntest {
				start[id] = 0
				m.popular = true
			}
		}
	}
	for id := range nids {
		start[id+1] += start[id]
	}
	fill := grow(&sc.fill, nids)
	copy(fill, start)
	pos := grow(&sc.pos, int(start[nids]))
	for j, id := range m.b {
		if start[id] != start[id+1] { // not popular
			pos[fill[id]] = int32(j)
			fill[id]++
		}
	}
	m.start, m.pos = start, pos
}

// SetContext makes later computations stop early when ctx is done; Err then
// reports why and the results are incomplete.
func (m *Matcher) SetContext(ctx context.Context) {
	if ctx != nil {
		m.done = ctx.Done()
		if m.done != nil {
			m.ctxErr = ctx.Err
		}
	}
}

// Err returns the context's error when a computation was cut short.
func (m *Matcher) Err() error { return m.err }

func (m *Matcher) stopped() bool {
	if m.err != nil {
		return true
	}
	if m.done == nil {
		return false
	}
	m.tick++
	if m.tick&63 != 0 {
		return false
	}
	select {
	case <-m.done:
		m.err = m.ctxErr()
		return true
	default:
		return false
	}
}

// FindLongestMatch is find_longest_match(alo, ahi, blo, bhi).
//
// The DP is CPython's (k[i][j] = k[i-1][j-1] + 1 over the positions of
// a[i] in b), with the two j2len dicts replaced by one array of cells
// stamped with their row: row i walks its positions downwards, so a cell
// it writes is never one it still has to read. Among a row's longest
// matches the smallest j wins, and a row only replaces the best match when
// it is strictly longer: CPython's earliest-i-then-earliest-j tie-break.
//
// Without popular elements, a call whose estimated DP work is large is
// answered by a suffix automaton instead (see longestSAM), with the same
// result.
func (m *Matcher) FindLongestMatch(alo, ahi, blo, bhi int) Match {
	var c samRange
	defer c.release()
	return m.findLongest(&c, alo, ahi, blo, bhi)
}

// findLongest is FindLongestMatch with the automaton, when one is used,
// taken from or built into c.
func (m *Matcher) findLongest(c *samRange, alo, ahi, blo, bhi int) Match {
	if !m.popular && !dpOnly && m.dpCostly(alo, ahi, blo, bhi) {
		return m.longestSAMIn(c, alo, ahi, blo, bhi)
	}
	return m.longestDP(alo, ahi, blo, bhi)
}

// dpCostly reports whether the DP over the ranges is estimated to update
// more than samMinWork cells per element of the two ranges: the positions
// in all of b of a[alo:ahi]'s elements, scaled to the share of b in range.
func (m *Matcher) dpCostly(alo, ahi, blo, bhi int) bool {
	if ahi <= alo || bhi <= blo {
		return false
	}
	if m.occ == nil {
		m.occ = grow(&m.sc.occ, len(m.a)+1)
		for i, id := range m.a {
			n := int64(0)
			if id >= 0 {
				n = int64(m.start[id+1] - m.start[id])
			}
			m.occ[i+1] = m.occ[i] + n
		}
	}
	work := (m.occ[ahi] - m.occ[alo]) * int64(bhi-blo) / int64(len(m.b))
	return work > samMinWork*int64(ahi-alo+bhi-blo)
}

// longestDP is FindLongestMatch by CPython's DP.
func (m *Matcher) longestDP(alo, ahi, blo, bhi int) Match {
	a, b := m.a, m.b
	if m.cells == nil {
		// Cells reused from a released matcher keep their stamps, all at
		// most the row it stopped at, so rows continuing above it never
		// read a stale cell as their predecessor: no clearing needed.
		sc := m.sc
		if cap(sc.cells) < len(b) {
			sc.cells, sc.row = make([]uint64, len(b)), 0
		}
		m.cells, m.row = sc.cells[:len(b)], sc.row
	}
	cells := m.cells
	// Skip one stamp so the first row of this call never reads the last
	// row of the previous call as its predecessor.
	if m.row >= 1<<31 {
		clear(cells)
		m.row = 0
	}
	m.row++
	besti, bestj, bestsize := alo, blo, 0
	for i := alo; i < ahi; i++ {
		if m.stopped() {
			break
		}
		m.row++
		prev, cur := uint64(m.row-1), uint64(m.row)<<32
		id := a[i]
		if id < 0 {
			continue
		}
		js := m.positions(id)
		if len(js) == 0 {
			continue
		}
		// hi: first position >= bhi; lo: first position >= blo. Most
		// lines occur once or a few times, all inside the range (always
		// so in the first call, over the whole of b): no search then.
		lo, hi := 0, len(js)
		if int(js[hi-1]) >= bhi {
			hi = searchInt32(js, bhi)
		}
		if hi > 0 && int(js[0]) < blo {
			lo = searchInt32(js[:hi], blo)
		}
		rowBest, rowJ := 0, 0
		for x := hi - 1; x >= lo; x-- {
			j := int(js[x])
			k := uint64(1)
			if j > 0 {
				if c := cells[j-1]; c>>32 == prev {
					k += c & 0xffffffff
				}
			}
			cells[j] = cur | k
			if int(k) >= rowBest {
				rowBest, rowJ = int(k), j
			}
		}
		if rowBest > bestsize {
			besti, bestj, bestsize = i-rowBest+1, rowJ-rowBest+1, rowBest
		}
	}

	// Extend over equal elements on both ends (there is no junk, so
	// popular elements are absorbed here too).
	for besti > alo && bestj > blo && a[besti-1] == b[bestj-1] {
		besti, bestj, bestsize = besti-1, bestj-1, bestsize+1
	}
	for besti+bestsize < ahi && bestj+bestsize < bhi && a[besti+bestsize] == b[bestj+bestsize] {
		bestsize++
	}
	return Match{besti, bestj, bestsize}
}

// searchInt32 returns the first index of the ascending js whose value is
// at least v (len(js) when none is).
func searchInt32(js []int32, v int) int {
	l, h := 0, len(js)
	for l < h {
		mid := int(uint(l+h) >> 1)
		if int(js[mid]) < v {
			l = mid + 1
		} else {
			h = mid
		}
	}
	return l
}

// MatchingBlocks is get_matching_blocks(): the non-adjacent matching blocks
// in increasing order, ending with the sentinel {len(a), len(b), 0}.
func (m *Matcher) MatchingBlocks() []Match {
	if m.blocks != nil {
		return m.blocks
	}
	la, lb := len(m.a), len(m.b)
	type span struct{ alo, ahi, blo, bhi int }
	// CPython's queue, in another order (the blocks are sorted at the
	// end): each popped range is followed down its chain of left
	// subproblems before the next is popped. Left subproblems keep their
	// parent's blo, so one suffix automaton of b[blo:bhi] answers the
	// whole chain (see walkSAM); only right subproblems need a new one.
	queue := []span{{0, la, 0, lb}}
	var blocks []Match
	var auto samRange
	for len(queue) > 0 && m.err == nil {
		q := queue[len(queue)-1]
		queue = queue[:len(queue)-1]
		for m.err == nil {
			x := m.findLongest(&auto, q.alo, q.ahi, q.blo, q.bhi)
			if x.Size == 0 {
				break
			}
			blocks = append(blocks, x)
			if x.I+x.Size < q.ahi && x.J+x.Size < q.bhi {
				queue = append(queue, span{x.I + x.Size, q.ahi, x.J + x.Size, q.bhi})
			}
			if !(q.alo < x.I && q.blo < x.J) {
				break
			}
			q = span{q.alo, x.I, q.blo, x.J}
		}
	}
	auto.release()
	sort.Slice(blocks, func(p, q int) bool {
		if blocks[p].I != blocks[q].I {
			return blocks[p].I < blocks[q].I
		}
		if blocks[p].J != blocks[q].J {
			return blocks[p].J < blocks[q].J
		}
		return blocks[p].Size < blocks[q].Size
	})
	out := make([]Match, 0, len(blocks)+1)
	i1, j1, k1 := 0, 0, 0
	for _, x := range blocks {
		if i1+k1 == x.I && j1+k1 == x.J {
			k1 += x.Size
		} else {
			if k1 > 0 {
				out = append(out, Match{i1, j1, k1})
			}
			i1, j1, k1 = x.I, x.J, x.Size
		}
	}
	if k1 > 0 {
		out = append(out, Match{i1, j1, k1})
	}
	out = append(out, Match{la, lb, 0})
	if m.err == nil {
		m.blocks = out
	}
	return out
}

// Ratio is ratio(): 2*M/T where M is the number of matched elements and T
// the total length of both sequences (1.0 when both are empty).
func (m *Matcher) Ratio() float64 {
	matches := 0
	for _, x := range m.MatchingBlocks() {
		matches += x.Size
	}
	return CalculateRatio(matches, len(m.a)+len(m.b))
}

// CalculateRatio is difflib's _calculate_ratio.
func CalculateRatio(matches, length int) float64 {
	if length > 0 {
		return 2.0 * float64(matches) / float64(length)
	}
	return 1.0
}

// OpCodes is get_opcodes().
func (m *Matcher) OpCodes() []OpCode {
	i, j := 0, 0
	var out []OpCode
	for _, x := range m.MatchingBlocks() {
		var tag byte
		switch {
		case i < x.I && j < x.J:
			tag = 'r'
		case i < x.I:
			tag = 'd'
		case j < x.J:
			tag = 'i'
		}
		if tag != 0 {
			out = append(out, OpCode{tag, i, x.I, j, x.J})
		}
		i, j = x.I+x.Size, x.J+x.Size
		if x.Size > 0 {
			out = append(out, OpCode{'e', x.I, i, x.J, j})
		}
	}
	return out
}

// GroupedOpCodes is get_grouped_opcodes(n): change clusters with up to n
// lines of context around them.
func (m *Matcher) GroupedOpCodes(n int) [][]OpCode {
	codes := m.OpCodes()
	if len(codes) == 0 {
		codes = []OpCode{{'e', 0, 1, 0, 1}}
	}
	if c := &codes[0]; c.Tag == 'e' {
		c.I1, c.J1 = max(c.I1, c.I2-n), max(c.J1, c.J2-n)
	}
	if c := &codes[len(codes)-1]; c.Tag == 'e' {
		c.I2, c.J2 = min(c.I2, c.I1+n), min(c.J2, c.J1+n)
	}
	nn := n + n
	var groups [][]OpCode
	var group []OpCode
	for _, c := range codes {
		if c.Tag == 'e' && c.I2-c.I1 > nn {
			group = append(group, OpCode{'e', c.I1, min(c.I2, c.I1+n), c.J1, min(c.J2, c.J1+n)})
			groups = append(groups, group)
			group = nil
			c.I1, c.J1 = max(c.I1, c.I2-n), max(c.J1, c.J2-n)
		}
		group = append(group, c)
	}
	if len(group) > 0 && !(len(group) == 1 && group[0].Tag == 'e') {
		groups = append(groups, group)
	}
	return groups
}

// Release returns the matcher's scratch arrays to a pool for the next
// matcher; m must not be used afterwards. Optional: a matcher that is not
// released is collected as usual.
func (m *Matcher) Release() {
	if m.cells != nil {
		m.sc.row = m.row
	}
	if m.sc != nil && poolScratch {
		scratchPool.Put(m.sc)
	}
	*m = Matcher{}
}

// Test hooks: poolScratch turns the pools on; dpOnly makes every
// find_longest_match run the DP.
var poolScratch, dpOnly = true, false
