package gitdiff

// This file is a port of the parts of git's xdiff (xprepare.c, xdiffi.c)
// that `git diff` runs by default: Myers' O(ND) diff with xdiff's cost
// heuristics, the discarding of lines without a match, and
// xdl_change_compact with the indent heuristic (diff.indentHeuristic is on
// by default since git 2.14). The hunks must come out exactly as git's, so
// the structure follows xdiff's closely.

const (
	maxCostMin    = 256 // XDL_MAX_COST_MIN
	heurMinCost   = 256 // XDL_HEUR_MIN_COST
	snakeCnt      = 20  // XDL_SNAKE_CNT
	kHeur         = 4   // XDL_K_HEUR
	maxEqLimit    = 1024
	simscanWindow = 100 // XDL_SIMSCAN_WINDOW
	kpdisRun      = 4   // XDL_KPDIS_RUN
	lineMax       = int(^uint(0) >> 1)
)

// xfile is one side of the diff.
type xfile struct {
	recs []string // lines, each with its "\n" if it has one
	cls  []int    // equivalence class of each line (equal text, equal class)
	// chg[i+1] reports whether line i is changed; chg[0] and chg[n+1] are
	// sentinels that stay false.
	chg    []bool
	rindex []int // lines that take part in the Myers search
	ha     []int // their classes
	dstart int
	dend   int
}

func (x *xfile) changed(i int) bool       { return x.chg[i+1] }
func (x *xfile) setChanged(i int, v bool) { x.chg[i+1] = v }
func (x *xfile) nrec() int                { return len(x.recs) }

// bogosqrt is xdl_bogosqrt: a power of two near sqrt(n).
func bogosqrt(n int) int {
	i := 1
	for ; n > 0; n >>= 2 {
		i <<= 1
	}
	return i
}

// prepare classifies the lines of both files, trims the common ends and
// drops from the search the lines that cannot match (xdl_prepare_env).
func prepare(a, b []string) (*xfile, *xfile) {
	classes := map[string]int{}
	mk := func(recs []string) *xfile {
		x := &xfile{recs: recs, cls: make([]int, len(recs)), chg: make([]bool, len(recs)+2)}
		for i, r := range recs {
			c, ok := classes[r]
			if !ok {
				c = len(classes)
				classes[r] = c
			}
			x.cls[i] = c
		}
		return x
	}
	x1, x2 := mk(a), mk(b)
	trimEnds(x1, x2)
	cleanupRecords(x1, x2, len(classes))
	return x1, x2
}

func trimEnds(x1, x2 *xfile) {
	lim := min(x1.nrec(), x2.nrec())
	i := 0
	for ; i < lim; i++ {
		if x1.cls[i] != x2.cls[i] {
			break
		}
	}
	x1.dstart, x2.dstart = i, i
	lim -= i
	j := 0
	for ; j < lim; j++ {
		if x1.cls[x1.nrec()-1-j] != x2.cls[x2.nrec()-1-j] {
			break
		}
	}
	x1.dend = x1.nrec() - j - 1
	x2.dend = x2.nrec() - j - 1
}

func cleanupRecords(x1, x2 *xfile, ncls int) {
	count := func(x *xfile) []int {
		c := make([]int, ncls)
		for _, k := range x.cls {
			c[k]++
		}
		return c
	}
	cnt1, cnt2 := count(x1), count(x2)
	dis := func(x *xfile, other []int) []byte {
		mlim := min(bogosqrt(x.nrec()), maxEqLimit)
		d := make([]byte, x.nrec()+1)
		for i := x.dstart; i <= x.dend; i++ {
			nm := min(other[x.cls[i]], mlim)
			switch {
			case nm == 0:
				d[i] = 0
			case nm >= mlim:
				d[i] = 2
			default:
				d[i] = 1
			}
		}
		return d
	}
	keep := func(x *xfile, d []byte) {
		for i := x.dstart; i <= x.dend; i++ {
			if d[i] == 1 || (d[i] == 2 && !cleanMmatch(d, i, x.dstart, x.dend)) {
				x.rindex = append(x.rindex, i)
				x.ha = append(x.ha, x.cls[i])
			} else {
				x.setChanged(i, true)
			}
		}
	}
	d1, d2 := dis(x1, cnt2), dis(x2, cnt1)
	keep(x1, d1)
	keep(x2, d2)
}

// cleanMmatch is xdl_clean_mmatch: whether a line with many matches sits in
// a run of lines without a match, so that it is better discarded too.
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
	mxcost, snakeCnt, heurMin int
	kvdf, kvdb                []int
	koff                      int // index of diagonal 0 in kvdf/kvdb
}

func (e *algoEnv) f(d int) *int { return &e.kvdf[d+e.koff] }
func (e *algoEnv) b(d int) *int { return &e.kvdb[d+e.koff] }

type split struct {
	i1, i2       int
	minLo, minHi bool
}

// xsplit is xdl_split: the middle snake of the box, or a heuristic cut of
// it when the search gets expensive.
func xsplit(x1 *xfile, off1, lim1 int, x2 *xfile, off2, lim2 int, needMin bool, spl *split, e *algoEnv) {
	h1, h2 := x1.ha, x2.ha
	dmin, dmax := off1-lim2, lim1-off2
	fmid, bmid := off1-off2, lim1-lim2
	odd := (fmid-bmid)&1 != 0
	fmin, fmax := fmid, fmid
	bmin, bmax := bmid, bmid
	*e.f(fmid) = off1
	*e.b(bmid) = lim1
	for ec := 1; ; ec++ {
		gotSnake := false
		if fmin > dmin {
			fmin--
			*e.f(fmin - 1) = -1
		} else {
			fmin++
		}
		if fmax < dmax {
			fmax++
			*e.f(fmax + 1) = -1
		} else {
			fmax--
		}
		for d := fmax; d >= fmin; d -= 2 {
			var i1 int
			if *e.f(d - 1) >= *e.f(d + 1) {
				i1 = *e.f(d - 1) + 1
			} else {
				i1 = *e.f(d + 1)
			}
			prev1 := i1
			i2 := i1 - d
			for i1 < lim1 && i2 < lim2 && h1[i1] == h2[i2] {
				i1++
				i2++
			}
			if i1-prev1 > e.snakeCnt {
				gotSnake = true
			}
			*e.f(d) = i1
			if odd && bmin <= d && d <= bmax && *e.b(d) <= i1 {
				*spl = split{i1, i2, true, true}
				return
			}
		}
		if bmin > dmin {
			bmin--
			*e.b(bmin - 1) = lineMax
		} else {
			bmin++
		}
		if bmax < dmax {
			bmax++
			*e.b(bmax + 1) = lineMax
		} else {
			bmax--
		}
		for d := bmax; d >= bmin; d -= 2 {
			var i1 int
			if *e.b(d - 1) < *e.b(d + 1) {
				i1 = *e.b(d - 1)
			} else {
				i1 = *e.b(d + 1) - 1
			}
			prev1 := i1
			i2 := i1 - d
			for i1 > off1 && i2 > off2 && h1[i1-1] == h2[i2-1] {
				i1--
				i2--
			}
			if prev1-i1 > e.snakeCnt {
				gotSnake = true
			}
			*e.b(d) = i1
			if !odd && fmin <= d && d <= fmax && i1 <= *e.f(d) {
				*spl = split{i1, i2, true, true}
				return
			}
		}
		if needMin {
			continue
		}
		if gotSnake && ec > e.heurMin {
			best := 0
			for d := fmax; d >= fmin; d -= 2 {
				dd := d - fmid
				if dd < 0 {
					dd = -dd
				}
				i1 := *e.f(d)
				i2 := i1 - d
				v := (i1 - off1) + (i2 - off2) - dd
				if v > kHeur*ec && v > best && off1+e.snakeCnt <= i1 && i1 < lim1 && off2+e.snakeCnt <= i2 && i2 < lim2 {
					for k := 1; h1[i1-k] == h2[i2-k]; k++ {
						if k == e.snakeCnt {
							best = v
							spl.i1, spl.i2 = i1, i2
							break
						}
					}
				}
			}
			if best > 0 {
				spl.minLo, spl.minHi = true, false
				return
			}
			for d := bmax; d >= bmin; d -= 2 {
				dd := d - bmid
				if dd < 0 {
					dd = -dd
				}
				i1 := *e.b(d)
				i2 := i1 - d
				v := (lim1 - i1) + (lim2 - i2) - dd
				if v > kHeur*ec && v > best && off1 < i1 && i1 <= lim1-e.snakeCnt && off2 < i2 && i2 <= lim2-e.snakeCnt {
					for k := 0; h1[i1+k] == h2[i2+k]; k++ {
						if k == e.snakeCnt-1 {
							best = v
							spl.i1, spl.i2 = i1, i2
							break
						}
					}
				}
			}
			if best > 0 {
				spl.minLo, spl.minHi = false, true
				return
			}
		}
		if ec >= e.mxcost {
			fbest, fbest1 := -1, -1
			for d := fmax; d >= fmin; d -= 2 {
				i1 := min(*e.f(d), lim1)
				i2 := i1 - d
				if lim2 < i2 {
					i1 = lim2 + d
					i2 = lim2
				}
				if fbest < i1+i2 {
					fbest = i1 + i2
					fbest1 = i1
				}
			}
			bbest, bbest1 := lineMax, lineMax
			for d := bmax; d >= bmin; d -= 2 {
				i1 := max(off1, *e.b(d))
				i2 := i1 - d
				if i2 < off2 {
					i1 = off2 + d
					i2 = off2
				}
				if i1+i2 < bbest {
					bbest = i1 + i2
					bbest1 = i1
				}
			}
			if (lim1+lim2)-bbest < fbest-(off1+off2) {
				*spl = split{fbest1, fbest - fbest1, true, false}
			} else {
				*spl = split{bbest1, bbest - bbest1, false, true}
			}
			return
		}
	}
}

// recsCmp is xdl_recs_cmp: divide and conquer over the search box.
func recsCmp(x1 *xfile, off1, lim1 int, x2 *xfile, off2, lim2 int, needMin bool, e *algoEnv) {
	for off1 < lim1 && off2 < lim2 && x1.ha[off1] == x2.ha[off2] {
		off1++
		off2++
	}
	for off1 < lim1 && off2 < lim2 && x1.ha[lim1-1] == x2.ha[lim2-1] {
		lim1--
		lim2--
	}
	switch {
	case off1 == lim1:
		for ; off2 < lim2; off2++ {
			x2.setChanged(x2.rindex[off2], true)
		}
	case off2 == lim2:
		for ; off1 < lim1; off1++ {
			x1.setChanged(x1.rindex[off1], true)
		}
	default:
		var spl split
		xsplit(x1, off1, lim1, x2, off2, lim2, needMin, &spl, e)
		recsCmp(x1, off1, spl.i1, x2, off2, spl.i2, spl.minLo, e)
		recsCmp(x1, spl.i1, lim1, x2, spl.i2, lim2, spl.minHi, e)
	}
}

// doDiff marks the changed lines of both files (xdl_do_diff, Myers).
func doDiff(a, b []string) (*xfile, *xfile) {
	x1, x2 := prepare(a, b)
	n1, n2 := len(x1.rindex), len(x2.rindex)
	ndiags := n1 + n2 + 3
	e := &algoEnv{
		mxcost:   max(bogosqrt(ndiags), maxCostMin),
		snakeCnt: snakeCnt,
		heurMin:  heurMinCost,
		kvdf:     make([]int, ndiags),
		kvdb:     make([]int, ndiags),
		koff:     n2 + 1,
	}
	recsCmp(x1, 0, n1, x2, 0, n2, false, e)
	return x1, x2
}
