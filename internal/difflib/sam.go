package difflib

import "sync"

// Suffix automaton path of find_longest_match, for matchers without popular
// elements.
//
// Without popular elements (autojunk off, or no element frequent enough) the
// DP of FindLongestMatch computes exactly the longest common substring of
// a[alo:ahi] and b[blo:bhi] and, among the longest, the one ending at the
// smallest i and then at the smallest j (rows ascend, a row keeps its
// smallest j of the row's maximum, a later row only wins when strictly
// longer); the extension loops then find nothing to add, since a longer
// match would have been a longer DP cell. A suffix automaton of b[blo:bhi]
// whose states carry their first end position gives the same answer in
// O((ahi-alo) + (bhi-blo)) instead of O(occurrences of a's elements in b):
// walk a keeping the state of the longest suffix of a[alo:i+1] that occurs
// in b, and record the first i at which that length is strictly longer than
// all before. All strings of a state share their end positions, so the
// state's first end position is the smallest j where that match ends.

// sam is a suffix automaton, its storage reused across builds. Transitions
// out of the root are a dense table over ids; the others, few per state,
// are singly linked edge lists.
type sam struct {
	st   []samState
	root []int32 // root transitions by id (-1: none)
	ed   []samEdge
}

type samState struct {
	length int32 // longest string of the state
	link   int32 // suffix link (-1 for the root)
	first  int32 // smallest end position in b (absolute index)
	head   int32 // first edge (-1: none); unused for the root
}

type samEdge struct{ sym, to, next int32 }

// samPool holds automata between calls: one is only used within a call.
var samPool = sync.Pool{New: func() any { return new(sam) }}

// samMinWork is how many DP cell updates per element of the two ranges a
// call must be estimated to need before the automaton is used instead.
const samMinWork = 4

func (s *sam) newState(length, link, first int32) int32 {
	s.st = append(s.st, samState{length, link, first, -1})
	return int32(len(s.st) - 1)
}

// next returns the transition of state v on id c, or -1.
func (s *sam) next(v, c int32) int32 {
	if v == 0 {
		return s.root[c]
	}
	for e := s.st[v].head; e >= 0; {
		x := &s.ed[e]
		if x.sym == c {
			return x.to
		}
		e = x.next
	}
	return -1
}

// add adds a transition of v on c (v has none yet).
func (s *sam) add(v, c, to int32) {
	if v == 0 {
		s.root[c] = to
		return
	}
	s.ed = append(s.ed, samEdge{c, to, s.st[v].head})
	s.st[v].head = int32(len(s.ed) - 1)
}

// redirect changes v's existing transition on c to to.
func (s *sam) redirect(v, c, to int32) {
	if v == 0 {
		s.root[c] = to
		return
	}
	for e := s.st[v].head; e >= 0; e = s.ed[e].next {
		if s.ed[e].sym == c {
			s.ed[e].to = to
			return
		}
	}
}

// build makes s the automaton of b[lo:hi] over ids below nids.
func (s *sam) build(b []int32, lo, hi, nids int) {
	n := hi - lo
	if cap(s.st) < 2*n+1 {
		s.st = make([]samState, 0, 2*n+1)
	}
	if cap(s.ed) < 3*n {
		s.ed = make([]samEdge, 0, 3*n)
	}
	s.st, s.ed = s.st[:0], s.ed[:0]
	if cap(s.root) < nids {
		s.root = make([]int32, nids)
	}
	s.root = s.root[:nids]
	for i := range s.root {
		s.root[i] = -1
	}
	s.newState(0, -1, -1)
	last := int32(0)
	for j := lo; j < hi; j++ {
		c := b[j]
		cur := s.newState(s.st[last].length+1, 0, int32(j))
		p := last
		q := int32(-1)
		for p >= 0 {
			if q = s.next(p, c); q >= 0 {
				break
			}
			s.add(p, c, cur)
			p = s.st[p].link
		}
		if p >= 0 {
			if s.st[p].length+1 == s.st[q].length {
				s.st[cur].link = q
			} else {
				clone := s.newState(s.st[p].length+1, s.st[q].link, s.st[q].first)
				for e := s.st[q].head; e >= 0; e = s.ed[e].next {
					s.add(clone, s.ed[e].sym, s.ed[e].to)
				}
				for p >= 0 && s.next(p, c) == q {
					s.redirect(p, c, clone)
					p = s.st[p].link
				}
				s.st[q].link = clone
				s.st[cur].link = clone
			}
		}
		last = cur
	}
}

// longestSAM is FindLongestMatch(alo, ahi, blo, bhi) by the automaton;
// valid only for matchers without popular elements.
func (m *Matcher) longestSAM(alo, ahi, blo, bhi int) Match {
	var c samRange
	defer c.release()
	return m.longestSAMIn(&c, alo, ahi, blo, bhi)
}

// samRange is an automaton of b[blo:bhi] kept across find_longest_match
// calls of one MatchingBlocks.
type samRange struct {
	s        *sam
	blo, bhi int
}

// release returns c's automaton to the pool.
func (c *samRange) release() {
	if c.s != nil {
		samPool.Put(c.s)
		c.s = nil
	}
}

// longestSAMIn is longestSAM answered from c when c holds an automaton of
// b[blo:hi] with hi >= bhi (MatchingBlocks' left subproblems share their
// parent's blo), else from one built into c.
func (m *Matcher) longestSAMIn(c *samRange, alo, ahi, blo, bhi int) Match {
	if c.s == nil {
		c.s, c.blo = samPool.Get().(*sam), -1
	}
	if c.blo != blo || c.bhi < bhi {
		c.s.build(m.b, blo, bhi, len(m.start)-1)
		c.blo, c.bhi = blo, bhi
	}
	return m.walkSAM(c.s, alo, ahi, blo, bhi)
}

// walkSAM finds the longest match of a[alo:ahi] in b[blo:bhi] with s an
// automaton of b[blo:hi], hi >= bhi. A substring of b[blo:hi] occurs in
// b[blo:bhi] exactly when its first end position is below bhi, and all
// strings of a state share their end positions, so the walk treats a
// transition into a state whose first end is at or past bhi as absent. The
// matched lengths stay right: the suffixes of a[alo:i+1] that occur in
// b[blo:bhi] are still closed under shortening, every string of a state
// extends by c into the same state, and a suffix link's state ends
// everywhere its child does (so it is never excluded when the child is not).
func (m *Matcher) walkSAM(s *sam, alo, ahi, blo, bhi int) Match {
	if m.stopped() {
		return Match{alo, blo, 0}
	}
	a, lim := m.a, int32(bhi)
	v, l := int32(0), int32(0)
	best, bestEnd, bestState := int32(0), alo, int32(0)
	for i := alo; i < ahi; i++ {
		c := a[i]
		if c < 0 {
			v, l = 0, 0
			continue
		}
		for {
			if t := s.next(v, c); t >= 0 && s.st[t].first < lim {
				v, l = t, l+1
				break
			}
			if v == 0 {
				l = 0
				break
			}
			v = s.st[v].link
			l = s.st[v].length
		}
		if l > best {
			best, bestEnd, bestState = l, i, v
		}
	}
	if best == 0 {
		return Match{alo, blo, 0}
	}
	k := int(best)
	return Match{bestEnd - k + 1, int(s.st[bestState].first) - k + 1, k}
}
