package gitdiff

// xdl_change_compact and its indent heuristic (xdiffi.c): groups of changed
// lines that can slide are moved to line up with the other file's changes,
// or else to the position whose surrounding indentation scores best.

const (
	maxIndent                       = 200
	maxBlanks                       = 20
	startOfFilePenalty              = 1
	endOfFilePenalty                = 21
	totalBlankWeight                = -30
	postBlankWeight                 = 6
	relativeIndentPenalty           = -4
	relativeIndentWithBlankPenalty  = 10
	relativeOutdentPenalty          = 24
	relativeOutdentWithBlankPenalty = 17
	relativeDedentPenalty           = 23
	relativeDedentWithBlankPenalty  = 17
	indentWeight                    = 60
	indentHeuristicMaxSliding       = 100
)

func isXSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// getIndent is the line's indentation (tabs to multiples of 8), -1 for a
// blank line, at most maxIndent.
func getIndent(rec string) int {
	ret := 0
	for i := 0; i < len(rec); i++ {
		c := rec[i]
		if !isXSpace(c) {
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

type splitMeasurement struct {
	endOfFile, indent, preBlank, preIndent, postBlank, postIndent int
}

type splitScore struct{ effectiveIndent, penalty int }

func measureSplit(x *xfile, split int) splitMeasurement {
	var m splitMeasurement
	if split >= x.nrec() {
		m.endOfFile = 1
		m.indent = -1
	} else {
		m.indent = getIndent(x.recs[split])
	}
	m.preIndent = -1
	for i := split - 1; i >= 0; i-- {
		m.preIndent = getIndent(x.recs[i])
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
	for i := split + 1; i < x.nrec(); i++ {
		m.postIndent = getIndent(x.recs[i])
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

func scoreAddSplit(m *splitMeasurement, s *splitScore) {
	if m.preIndent == -1 && m.preBlank == 0 {
		s.penalty += startOfFilePenalty
	}
	if m.endOfFile != 0 {
		s.penalty += endOfFilePenalty
	}
	postBlank := 0
	if m.indent == -1 {
		postBlank = 1 + m.postBlank
	}
	totalBlank := m.preBlank + postBlank
	s.penalty += totalBlankWeight * totalBlank
	s.penalty += postBlankWeight * postBlank
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
	case indent == -1, m.preIndent == -1, indent == m.preIndent:
	case indent > m.preIndent:
		s.penalty += pick(relativeIndentWithBlankPenalty, relativeIndentPenalty)
	default:
		if m.postIndent != -1 && m.postIndent > indent {
			s.penalty += pick(relativeOutdentWithBlankPenalty, relativeOutdentPenalty)
		} else {
			s.penalty += pick(relativeDedentWithBlankPenalty, relativeDedentPenalty)
		}
	}
}

func scoreCmp(s1, s2 *splitScore) int {
	c := 0
	if s1.effectiveIndent > s2.effectiveIndent {
		c = 1
	} else if s1.effectiveIndent < s2.effectiveIndent {
		c = -1
	}
	return indentWeight*c + (s1.penalty - s2.penalty)
}

type group struct{ start, end int }

func groupInit(x *xfile) group {
	g := group{}
	for x.changed(g.end) {
		g.end++
	}
	return g
}

func groupNext(x *xfile, g *group) bool {
	if g.end == x.nrec() {
		return false
	}
	g.start = g.end + 1
	for g.end = g.start; x.changed(g.end); g.end++ {
	}
	return true
}

func groupPrevious(x *xfile, g *group) bool {
	if g.start == 0 {
		return false
	}
	g.end = g.start - 1
	for g.start = g.end; x.changed(g.start - 1); g.start-- {
	}
	return true
}

func groupSlideDown(x *xfile, g *group) bool {
	if g.end < x.nrec() && x.cls[g.start] == x.cls[g.end] {
		x.setChanged(g.start, false)
		g.start++
		x.setChanged(g.end, true)
		g.end++
		for x.changed(g.end) {
			g.end++
		}
		return true
	}
	return false
}

func groupSlideUp(x *xfile, g *group) bool {
	if g.start > 0 && x.cls[g.start-1] == x.cls[g.end-1] {
		g.start--
		x.setChanged(g.start, true)
		g.end--
		x.setChanged(g.end, false)
		for x.changed(g.start - 1) {
			g.start--
		}
		return true
	}
	return false
}

// changeCompact is xdl_change_compact with XDF_INDENT_HEURISTIC. The group
// sync between the files cannot break for a consistent diff; if it did,
// that would be a bug here, so it panics as git's BUG() aborts.
func changeCompact(x, xo *xfile) {
	g, og := groupInit(x), groupInit(xo)
	for {
		if g.end != g.start {
			var groupsize, earliestEnd, endMatchingOther int
			for {
				groupsize = g.end - g.start
				endMatchingOther = -1
				for groupSlideUp(x, &g) {
					if !groupPrevious(xo, &og) {
						panic("gitdiff: group sync broken sliding up")
					}
				}
				earliestEnd = g.end
				if og.end > og.start {
					endMatchingOther = g.end
				}
				for groupSlideDown(x, &g) {
					if !groupNext(xo, &og) {
						panic("gitdiff: group sync broken sliding down")
					}
					if og.end > og.start {
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
				for og.end == og.start {
					if !groupSlideUp(x, &g) || !groupPrevious(xo, &og) {
						panic("gitdiff: match disappeared")
					}
				}
			default:
				shift := earliestEnd
				if g.end-groupsize-1 > shift {
					shift = g.end - groupsize - 1
				}
				if g.end-indentHeuristicMaxSliding > shift {
					shift = g.end - indentHeuristicMaxSliding
				}
				bestShift := -1
				var best splitScore
				for ; shift <= g.end; shift++ {
					var score splitScore
					m := measureSplit(x, shift)
					scoreAddSplit(&m, &score)
					m = measureSplit(x, shift-groupsize)
					scoreAddSplit(&m, &score)
					if bestShift == -1 || scoreCmp(&score, &best) <= 0 {
						best = score
						bestShift = shift
					}
				}
				for g.end > bestShift {
					if !groupSlideUp(x, &g) || !groupPrevious(xo, &og) {
						panic("gitdiff: best shift unreached")
					}
				}
			}
		}
		if !groupNext(x, &g) {
			break
		}
		if !groupNext(xo, &og) {
			panic("gitdiff: group sync broken moving to next group")
		}
	}
}
