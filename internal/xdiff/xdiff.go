// Package xdiff renders file diffs exactly as `git diff` prints them with
// git's defaults: the Myers algorithm of git's xdiff (with its heuristics
// for long runs of lines), the indent heuristic that slides ambiguous
// groups of added or removed lines, three lines of context, hunk headers
// that carry the nearest line above starting with a letter, '_' or '$'
// (git's funcname rule when no diff driver is set), and `index` lines with
// abbreviated git blob SHA-1s.
//
// It is a port of the algorithms in git's xdiff/xdiffi.c, xprepare.c and
// xemit.c (git 2.39), written so that the Agentless Mini scaffold's
// `fake_git_repo` can be reproduced byte for byte without running git.
package xdiff

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"swerl/internal/difflib"
)

// Constants of git's xdiff (xdiffi.c, xprepare.c).
const (
	maxCostMin      = 256
	snakeCnt        = 20
	heurMinCost     = 256
	kHeur           = 4
	maxEqLimit      = 1024
	simscanWindow   = 100
	kpdisRun        = 4
	lineMax         = int(^uint(0) >> 1)
	maxIndent       = 200
	maxBlanks       = 20
	maxSliding      = 100
	indentWeight    = 60
	funcLineMaxSize = 80
)

// file is one side of a diff: its lines (each with its '\n' when it has
// one), their equivalence classes, and the changed-line marks.
type file struct {
	recs []string
	ha   []int // class of each line: equal classes mean equal bytes
	// rchg has len(recs)+2 entries; rchg[i+1] marks line i as changed, so
	// that the sentinels at both ends read as unchanged.
	rchg   []bool
	rindex []int // lines that take part in the Myers pass
	reffha []int // their classes
	dstart int
	dend   int
}

func (f *file) changed(i int) bool       { return f.rchg[i+1] }
func (f *file) setChanged(i int, v bool) { f.rchg[i+1] = v }

// Change is one group of changed lines: I1/Chg1 lines of the old side are
// replaced by I2/Chg2 lines of the new side (0-based).
type Change struct {
	I1, I2, Chg1, Chg2 int
}

// Diff returns git's edit script from a to b (lines that keep their "\n",
// as difflib.SplitAfterNewline gives them), in order.
func Diff(a, b []string) ([]Change, *[2]file) {
	var f [2]file
	f[0].recs, f[1].recs = a, b
	classes := map[string]int{}
	counts := [][2]int{}
	for s := 0; s < 2; s++ {
		f[s].ha = make([]int, len(f[s].recs))
		for i, r := range f[s].recs {
			c, ok := classes[r]
			if !ok {
				c = len(counts)
				classes[r] = c
				counts = append(counts, [2]int{})
			}
			counts[c][s]++
			f[s].ha[i] = c
		}
		f[s].rchg = make([]bool, len(f[s].recs)+2)
	}
	trimEnds(&f[0], &f[1])
	cleanupRecords(&f[0], &f[1], counts)

	n1, n2 := len(f[0].rindex), len(f[1].rindex)
	ndiags := n1 + n2 + 3
	kv := make([]int, 2*ndiags+2)
	env := algoEnv{mxcost: bogosqrt(ndiags), ndiags: ndiags}
	if env.mxcost < maxCostMin {
		env.mxcost = maxCostMin
	}
	env.kvdf = kv[:ndiags]
	env.kvdb = kv[ndiags:]
	env.koff = n2 + 1
	env.recsCmp(&f[0], 0, n1, &f[1], 0, n2, false)

	changeCompact(&f[0], &f[1])
	changeCompact(&f[1], &f[0])
	return buildScript(&f[0], &f[1]), &f
}

func bogosqrt(n int) int {
	i := 1
	for ; n > 0; n >>= 2 {
		i <<= 1
	}
	return i
}

func trimEnds(a, b *file) {
	lim := min(len(a.recs), len(b.recs))
	i := 0
	for ; i < lim; i++ {
		if a.ha[i] != b.ha[i] {
			break
		}
	}
	a.dstart, b.dstart = i, i
	lim -= i
	j := 0
	for ; j < lim; j++ {
		if a.ha[len(a.recs)-1-j] != b.ha[len(b.recs)-1-j] {
			break
		}
	}
	a.dend = len(a.recs) - j - 1
	b.dend = len(b.recs) - j - 1
}

// cleanupRecords leaves out of the Myers pass the lines that have no
// match on the other side (they are changed for sure) and lines with very
// many matches that sit inside runs of unmatched lines, as xprepare.c does.
func cleanupRecords(a, b *file, counts [][2]int) {
	mark := func(f *file, other int) []byte {
		dis := make([]byte, len(f.recs)+1)
		mlim := bogosqrt(len(f.recs))
		if mlim > maxEqLimit {
			mlim = maxEqLimit
		}
		for i := f.dstart; i <= f.dend; i++ {
			nm := counts[f.ha[i]][other]
			switch {
			case nm == 0:
				dis[i] = 0
			case nm >= mlim:
				dis[i] = 2
			default:
				dis[i] = 1
			}
		}
		return dis
	}
	dis1 := mark(a, 1)
	dis2 := mark(b, 0)
	keep := func(f *file, dis []byte) {
		for i := f.dstart; i <= f.dend; i++ {
			if dis[i] == 1 || (dis[i] == 2 && !cleanMmatch(dis, i, f.dstart, f.dend)) {
				f.rindex = append(f.rindex, i)
				f.reffha = append(f.reffha, f.ha[i])
			} else {
				f.setChanged(i, true)
			}
		}
	}
	keep(a, dis1)
	keep(b, dis2)
}

func cleanMmatch(dis []byte, i, s, e int) bool {
	if i-s > simscanWindow {
		s = i - simscanWindow
	}
	if e-i > simscanWindow {
		e = i + simscanWindow
	}
	rdis0, rpdis0 := 0, 1
	for r := 1; i-r >= s; r++ {
		if dis[i-r] == 0 {
			rdis0++
		} else if dis[i-r] == 2 {
			rpdis0++
		} else {
			break
		}
	}
	if rdis0 == 0 {
		return false
	}
	rdis1, rpdis1 := 0, 1
	for r := 1; i+r <= e; r++ {
		if dis[i+r] == 0 {
			rdis1++
		} else if dis[i+r] == 2 {
			rpdis1++
		} else {
			break
		}
	}
	if rdis1 == 0 {
		return false
	}
	rdis1 += rdis0
	rpdis1 += rpdis0
	return rpdis1*kpdisRun < rpdis1+rdis1
}

type algoEnv struct {
	mxcost     int
	ndiags     int
	kvdf, kvdb []int
	koff       int // index of diagonal 0 in kvdf and kvdb
}

type split struct {
	i1, i2       int
	minLo, minHi bool
}

func (e *algoEnv) recsCmp(d1 *file, off1, lim1 int, d2 *file, off2, lim2 int, needMin bool) {
	ha1, ha2 := d1.reffha, d2.reffha
	for off1 < lim1 && off2 < lim2 && ha1[off1] == ha2[off2] {
		off1++
		off2++
	}
	for off1 < lim1 && off2 < lim2 && ha1[lim1-1] == ha2[lim2-1] {
		lim1--
		lim2--
	}
	switch {
	case off1 == lim1:
		for ; off2 < lim2; off2++ {
			d2.setChanged(d2.rindex[off2], true)
		}
	case off2 == lim2:
		for ; off1 < lim1; off1++ {
			d1.setChanged(d1.rindex[off1], true)
		}
	default:
		spl := e.split(ha1, off1, lim1, ha2, off2, lim2, needMin)
		e.recsCmp(d1, off1, spl.i1, d2, off2, spl.i2, spl.minLo)
		e.recsCmp(d1, spl.i1, lim1, d2, spl.i2, lim2, spl.minHi)
	}
}

// split finds the middle snake of the box (xdl_split), with xdiff's
// heuristics that cut the search short on expensive inputs.
func (e *algoEnv) split(ha1 []int, off1, lim1 int, ha2 []int, off2, lim2 int, needMin bool) split {
	ko := e.koff
	kvdf := func(d int) *int { return &e.kvdf[d+ko] }
	kvdb := func(d int) *int { return &e.kvdb[d+ko] }
	dmin, dmax := off1-lim2, lim1-off2
	fmid, bmid := off1-off2, lim1-lim2
	odd := (fmid-bmid)&1 != 0
	fmin, fmax := fmid, fmid
	bmin, bmax := bmid, bmid
	*kvdf(fmid) = off1
	*kvdb(bmid) = lim1
	var spl split
	for ec := 1; ; ec++ {
		gotSnake := false
		if fmin > dmin {
			fmin--
			*kvdf(fmin - 1) = -1
		} else {
			fmin++
		}
		if fmax < dmax {
			fmax++
			*kvdf(fmax + 1) = -1
		} else {
			fmax--
		}
		for d := fmax; d >= fmin; d -= 2 {
			var i1 int
			if *kvdf(d - 1) >= *kvdf(d + 1) {
				i1 = *kvdf(d - 1) + 1
			} else {
				i1 = *kvdf(d + 1)
			}
			prev1 := i1
			i2 := i1 - d
			for i1 < lim1 && i2 < lim2 && ha1[i1] == ha2[i2] {
				i1++
				i2++
			}
			if i1-prev1 > snakeCnt {
				gotSnake = true
			}
			*kvdf(d) = i1
			if odd && bmin <= d && d <= bmax && *kvdb(d) <= i1 {
				return split{i1, i2, true, true}
			}
		}
		if bmin > dmin {
			bmin--
			*kvdb(bmin - 1) = lineMax
		} else {
			bmin++
		}
		if bmax < dmax {
			bmax++
			*kvdb(bmax + 1) = lineMax
		} else {
			bmax--
		}
		for d := bmax; d >= bmin; d -= 2 {
			var i1 int
			if *kvdb(d - 1) < *kvdb(d + 1) {
				i1 = *kvdb(d - 1)
			} else {
				i1 = *kvdb(d + 1) - 1
			}
			prev1 := i1
			i2 := i1 - d
			for i1 > off1 && i2 > off2 && ha1[i1-1] == ha2[i2-1] {
				i1--
				i2--
			}
			if prev1-i1 > snakeCnt {
				gotSnake = true
			}
			*kvdb(d) = i1
			if !odd && fmin <= d && d <= fmax && i1 <= *kvdf(d) {
				return split{i1, i2, true, true}
			}
		}
		if needMin {
			continue
		}
		if gotSnake && ec > heurMinCost {
			best := 0
			for d := fmax; d >= fmin; d -= 2 {
				dd := d - fmid
				if dd < 0 {
					dd = -dd
				}
				i1 := *kvdf(d)
				i2 := i1 - d
				v := (i1 - off1) + (i2 - off2) - dd
				if v > kHeur*ec && v > best &&
					off1+snakeCnt <= i1 && i1 < lim1 &&
					off2+snakeCnt <= i2 && i2 < lim2 {
					for k := 1; ha1[i1-k] == ha2[i2-k]; k++ {
						if k == snakeCnt {
							best = v
							spl.i1, spl.i2 = i1, i2
							break
						}
					}
				}
			}
			if best > 0 {
				spl.minLo, spl.minHi = true, false
				return spl
			}
			for d := bmax; d >= bmin; d -= 2 {
				dd := d - bmid
				if dd < 0 {
					dd = -dd
				}
				i1 := *kvdb(d)
				i2 := i1 - d
				v := (lim1 - i1) + (lim2 - i2) - dd
				if v > kHeur*ec && v > best &&
					off1 < i1 && i1 <= lim1-snakeCnt &&
					off2 < i2 && i2 <= lim2-snakeCnt {
					for k := 0; ha1[i1+k] == ha2[i2+k]; k++ {
						if k == snakeCnt-1 {
							best = v
							spl.i1, spl.i2 = i1, i2
							break
						}
					}
				}
			}
			if best > 0 {
				spl.minLo, spl.minHi = false, true
				return spl
			}
		}
		if ec >= e.mxcost {
			fbest, fbest1 := -1, -1
			for d := fmax; d >= fmin; d -= 2 {
				i1 := min(*kvdf(d), lim1)
				i2 := i1 - d
				if lim2 < i2 {
					i1, i2 = lim2+d, lim2
				}
				if fbest < i1+i2 {
					fbest, fbest1 = i1+i2, i1
				}
			}
			bbest, bbest1 := lineMax, lineMax
			for d := bmax; d >= bmin; d -= 2 {
				i1 := max(off1, *kvdb(d))
				i2 := i1 - d
				if i2 < off2 {
					i1, i2 = off2+d, off2
				}
				if i1+i2 < bbest {
					bbest, bbest1 = i1+i2, i1
				}
			}
			if (lim1+lim2)-bbest < fbest-(off1+off2) {
				return split{fbest1, fbest - fbest1, true, false}
			}
			return split{bbest1, bbest - bbest1, false, true}
		}
	}
}

// group is a run of changed lines [start, end) in one file.
type group struct{ start, end int }

func groupInit(f *file) group {
	g := group{}
	for f.changed(g.end) {
		g.end++
	}
	return g
}

func groupNext(f *file, g *group) bool {
	if g.end == len(f.recs) {
		return false
	}
	g.start = g.end + 1
	g.end = g.start
	for f.changed(g.end) {
		g.end++
	}
	return true
}

func groupPrevious(f *file, g *group) bool {
	if g.start == 0 {
		return false
	}
	g.end = g.start - 1
	g.start = g.end
	for f.changed(g.start - 1) {
		g.start--
	}
	return true
}

func groupSlideDown(f *file, g *group) bool {
	if g.end < len(f.recs) && f.ha[g.start] == f.ha[g.end] {
		f.setChanged(g.start, false)
		g.start++
		f.setChanged(g.end, true)
		g.end++
		for f.changed(g.end) {
			g.end++
		}
		return true
	}
	return false
}

func groupSlideUp(f *file, g *group) bool {
	if g.start > 0 && f.ha[g.start-1] == f.ha[g.end-1] {
		g.start--
		f.setChanged(g.start, true)
		g.end--
		f.setChanged(g.end, false)
		for f.changed(g.start - 1) {
			g.start--
		}
		return true
	}
	return false
}

// changeCompact slides each group of changes in f as git's
// xdl_change_compact does, with the indent heuristic on (git's default).
func changeCompact(f, fo *file) {
	g := groupInit(f)
	gov := groupInit(fo)
	for {
		if g.end != g.start {
			var groupsize, earliestEnd, endMatchingOther int
			for {
				groupsize = g.end - g.start
				endMatchingOther = -1
				for groupSlideUp(f, &g) {
					if !groupPrevious(fo, &gov) {
						panic("xdiff: group sync broken sliding up")
					}
				}
				earliestEnd = g.end
				if gov.end > gov.start {
					endMatchingOther = g.end
				}
				for groupSlideDown(f, &g) {
					if !groupNext(fo, &gov) {
						panic("xdiff: group sync broken sliding down")
					}
					if gov.end > gov.start {
						endMatchingOther = g.end
					}
				}
				if groupsize == g.end-g.start {
					break
				}
			}
			switch {
			case g.end == earliestEnd:
			case endMatchingOther != -1:
				for gov.end == gov.start {
					if !groupSlideUp(f, &g) {
						panic("xdiff: match disappeared")
					}
					if !groupPrevious(fo, &gov) {
						panic("xdiff: group sync broken sliding to match")
					}
				}
			default:
				shift := earliestEnd
				if g.end-groupsize-1 > shift {
					shift = g.end - groupsize - 1
				}
				if g.end-maxSliding > shift {
					shift = g.end - maxSliding
				}
				bestShift := -1
				var best score
				for ; shift <= g.end; shift++ {
					var s score
					s.add(measureSplit(f, shift))
					s.add(measureSplit(f, shift-groupsize))
					if bestShift == -1 || s.cmp(best) <= 0 {
						best = s
						bestShift = shift
					}
				}
				for g.end > bestShift {
					if !groupSlideUp(f, &g) {
						panic("xdiff: best shift unreached")
					}
					if !groupPrevious(fo, &gov) {
						panic("xdiff: group sync broken sliding to blank line")
					}
				}
			}
		}
		if !groupNext(f, &g) {
			break
		}
		if !groupNext(fo, &gov) {
			panic("xdiff: group sync broken moving to next group")
		}
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// getIndent is the width of a line's leading whitespace (tabs to 8), or -1
// for a line of only whitespace.
func getIndent(rec string) int {
	ret := 0
	for i := 0; i < len(rec); i++ {
		c := rec[i]
		if !isSpace(c) {
			return ret
		} else if c == ' ' {
			ret++
		} else if c == '\t' {
			ret += 8 - ret%8
		}
		if ret >= maxIndent {
			return maxIndent
		}
	}
	return -1
}

type measurement struct {
	endOfFile             bool
	indent                int
	preBlank, preIndent   int
	postBlank, postIndent int
}

func measureSplit(f *file, split int) measurement {
	var m measurement
	if split >= len(f.recs) {
		m.endOfFile = true
		m.indent = -1
	} else {
		m.indent = getIndent(f.recs[split])
	}
	m.preIndent = -1
	for i := split - 1; i >= 0; i-- {
		m.preIndent = getIndent(f.recs[i])
		if m.preIndent != -1 {
			break
		}
		m.preBlank++
		if m.preBlank == maxBlanks {
			m.preIndent = 0
			break
		}
	}
	m.postIndent = -1
	for i := split + 1; i < len(f.recs); i++ {
		m.postIndent = getIndent(f.recs[i])
		if m.postIndent != -1 {
			break
		}
		m.postBlank++
		if m.postBlank == maxBlanks {
			m.postIndent = 0
			break
		}
	}
	return m
}

type score struct{ effectiveIndent, penalty int }

func (s *score) add(m measurement) {
	if m.preIndent == -1 && m.preBlank == 0 {
		s.penalty += 1 // start of file
	}
	if m.endOfFile {
		s.penalty += 21
	}
	postBlank := 0
	if m.indent == -1 {
		postBlank = 1 + m.postBlank
	}
	totalBlank := m.preBlank + postBlank
	s.penalty += -30 * totalBlank
	s.penalty += 6 * postBlank
	indent := m.indent
	if indent == -1 {
		indent = m.postIndent
	}
	anyBlanks := totalBlank != 0
	s.effectiveIndent += indent
	pick := func(withBlank, without int) int {
		if anyBlanks {
			return withBlank
		}
		return without
	}
	switch {
	case indent == -1:
	case m.preIndent == -1:
	case indent > m.preIndent:
		s.penalty += pick(10, -4)
	case indent == m.preIndent:
	default:
		if m.postIndent != -1 && m.postIndent > indent {
			s.penalty += pick(17, 24)
		} else {
			s.penalty += pick(17, 23)
		}
	}
}

func (s score) cmp(o score) int {
	c := 0
	if s.effectiveIndent > o.effectiveIndent {
		c = 1
	} else if s.effectiveIndent < o.effectiveIndent {
		c = -1
	}
	return indentWeight*c + (s.penalty - o.penalty)
}

func buildScript(a, b *file) []Change {
	var rev []Change
	i1, i2 := len(a.recs), len(b.recs)
	for i1 >= 0 || i2 >= 0 {
		if a.changed(i1-1) || b.changed(i2-1) {
			l1, l2 := i1, i2
			for a.changed(i1 - 1) {
				i1--
			}
			for b.changed(i2 - 1) {
				i2--
			}
			rev = append(rev, Change{I1: i1, I2: i2, Chg1: l1 - i1, Chg2: l2 - i2})
		}
		i1--
		i2--
	}
	out := make([]Change, len(rev))
	for i, c := range rev {
		out[len(rev)-1-i] = c
	}
	return out
}

func isAlpha(c byte) bool { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') }

// funcName is git's default funcname match (no diff driver): a line that
// starts with a letter, '_' or '$', cut to 80 bytes, trailing whitespace
// dropped.
func funcName(rec string) (string, bool) {
	if len(rec) > 0 && (isAlpha(rec[0]) || rec[0] == '_' || rec[0] == '$') {
		n := len(rec)
		if n > funcLineMaxSize {
			n = funcLineMaxSize
		}
		for n > 0 && isSpace(rec[n-1]) {
			n--
		}
		return rec[:n], true
	}
	return "", false
}

// Unified writes the hunks of the diff from old to new text as git diff
// prints them (3 lines of context, funcname headers), and "\ No newline at
// end of file" after a last line without '\n'. It writes nothing when the
// texts are equal.
func Unified(sb *strings.Builder, oldText, newText string) {
	const ctx = 3
	a, b := difflib.SplitAfterNewline(oldText), difflib.SplitAfterNewline(newText)
	script, fs := Diff(a, b)
	emitRec := func(prefix string, rec string) {
		sb.WriteString(prefix)
		sb.WriteString(rec)
		if !strings.HasSuffix(rec, "\n") {
			sb.WriteString("\n\\ No newline at end of file\n")
		}
	}
	_ = fs
	funcLine := ""
	funcLinePrev := -1
	for k := 0; k < len(script); {
		// The hunk runs from script[k] to script[last]: changes no more
		// than 2*ctx unchanged lines apart share a hunk.
		last := k
		for last+1 < len(script) && script[last+1].I1-(script[last].I1+script[last].Chg1) <= 2*ctx {
			last++
		}
		xch, xche := script[k], script[last]
		s1 := max(xch.I1-ctx, 0)
		s2 := max(xch.I2-ctx, 0)
		lctx := ctx
		lctx = min(lctx, len(a)-(xche.I1+xche.Chg1))
		lctx = min(lctx, len(b)-(xche.I2+xche.Chg2))
		e1 := xche.I1 + xche.Chg1 + lctx
		e2 := xche.I2 + xche.Chg2 + lctx

		// Search upward from the line above the hunk down to the line
		// searched last time; when nothing matches the previous name stays.
		start, limit := s1-1, funcLinePrev
		step := 1
		if start > limit {
			step = -1
		}
		for l := start; l != limit && l >= 0 && l < len(a); l += step {
			if name, ok := funcName(a[l]); ok {
				funcLine = name
				break
			}
		}
		funcLinePrev = s1 - 1

		sb.WriteString(hunkHeader(s1+1, e1-s1, s2+1, e2-s2, funcLine))
		for ; s2 < xch.I2; s2++ {
			emitRec(" ", b[s2])
		}
		s1, s2 = xch.I1, xch.I2
		for j := k; ; j++ {
			c := script[j]
			for ; s1 < c.I1 && s2 < c.I2; s1, s2 = s1+1, s2+1 {
				emitRec(" ", b[s2])
			}
			for s1 = c.I1; s1 < c.I1+c.Chg1; s1++ {
				emitRec("-", a[s1])
			}
			for s2 = c.I2; s2 < c.I2+c.Chg2; s2++ {
				emitRec("+", b[s2])
			}
			if j == last {
				break
			}
			s1 = c.I1 + c.Chg1
			s2 = c.I2 + c.Chg2
		}
		for s2 = xche.I2 + xche.Chg2; s2 < e2; s2++ {
			emitRec(" ", b[s2])
		}
		k = last + 1
	}
}

func hunkHeader(s1, c1, s2, c2 int, fn string) string {
	var sb strings.Builder
	sb.WriteString("@@ -")
	if c1 != 0 {
		fmt.Fprint(&sb, s1)
	} else {
		fmt.Fprint(&sb, s1-1)
	}
	if c1 != 1 {
		fmt.Fprintf(&sb, ",%d", c1)
	}
	sb.WriteString(" +")
	if c2 != 0 {
		fmt.Fprint(&sb, s2)
	} else {
		fmt.Fprint(&sb, s2-1)
	}
	if c2 != 1 {
		fmt.Fprintf(&sb, ",%d", c2)
	}
	sb.WriteString(" @@")
	if fn != "" {
		sb.WriteString(" " + fn)
	}
	sb.WriteString("\n")
	return sb.String()
}

// BlobID is the git blob SHA-1 of content, in hex.
func BlobID(content string) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(content))
	h.Write([]byte(content))
	return hex.EncodeToString(h.Sum(nil))
}

// FileDiff is one modified file: its path and both contents.
type FileDiff struct {
	Path     string
	Old, New string
}

// GitDiff prints what `git diff` prints in a repository where each file's
// Old content is committed (mode 100644) and New is in the work tree:
// files in byte order of their paths, unchanged files left out, blob ids
// abbreviated to 7 hex digits.
func GitDiff(files []FileDiff) string {
	fs := append([]FileDiff(nil), files...)
	sort.SliceStable(fs, func(i, j int) bool { return fs[i].Path < fs[j].Path })
	var sb strings.Builder
	for _, f := range fs {
		if f.Old == f.New {
			continue
		}
		fmt.Fprintf(&sb, "diff --git a/%s b/%s\n", f.Path, f.Path)
		fmt.Fprintf(&sb, "index %s..%s 100644\n", BlobID(f.Old)[:7], BlobID(f.New)[:7])
		fmt.Fprintf(&sb, "--- a/%s\n+++ b/%s\n", f.Path, f.Path)
		Unified(&sb, f.Old, f.New)
	}
	return sb.String()
}
