package cpu

// The float32 matmul path on machines with AVX2+FMA: BLIS-style packing
// around the 6×16 register kernel of kernel_amd64.s.
//
// C[i,j] += Σ_k A(i,k)·B(j,k), where A(i,k) = a[i*ars+k*aks] and
// B(j,k) = b[j*brs+k*bks]: the strides let the forward (A = inp, B = w)
// and both backward products (dinp = dout·w, dw = doutᵀ·inp) read their
// operands in place, with no transposed copies.
//
// Loop nest, outermost first: columns in blocks of ncBlock; k in blocks
// of kcBlock, for which B is packed once into 16-column strips (shared by
// all workers, kcBlock×16 floats = 16 KiB per strip, an L1 resident);
// then the workers split the rows, each packing mcBlock rows of A into
// 6-row strips (96 KiB, in L2) and sweeping every B strip against them.
//
// Each element's sum runs over k in order within a k block and the blocks
// are added in order, whatever the worker count: results are bitwise
// reproducible.
const (
	mr      = 6
	mrZ     = 8 // rows of the AVX-512 kernel of MatmulPacked
	nr      = 16
	kcBlock = 256
	ncBlock = 4096 // multiple of nr
	mcBlock = 96   // multiple of mr
	// gemvRows: below this many rows of A, a forward product is a set of
	// dot products parallel over columns instead (decoding one token).
	gemvRows = 4
)

type sgemmJob struct {
	c             []float32
	ldc           int
	a             []float32
	ars, aks      int
	b             []float32
	brs, bks      int
	m, n, k       int
	j0, jn        int // current column block
	k0, kn        int // current k block
	packing       bool
	init          bool      // set C to the bias (or zero) before the first k block
	bias          []float32 // may be nil
	parts, strips int       // row parts (one per worker) and 6-row strips of A
	bp            []float32
	ap            [][]float32
}

func (g *sgemmJob) run(lo, hi int) {
	for x := lo; x < hi; x++ {
		if g.packing {
			g.packB(x)
		} else {
			g.compute(x)
		}
	}
}

// packB packs 16-column strip s of the current block: bp[s*kn*16 + k*16 + jj].
func (g *sgemmJob) packB(s int) {
	j := g.j0 + s*nr
	g.packStrip(g.bp[s*g.kn*nr:(s+1)*g.kn*nr], g.b, g.brs, g.bks, j, min(nr, g.j0+g.jn-j), nr)
}

// packA packs rows [i0, i0+rows) of the current k block into 6-row strips:
// ap[s*kn*6 + k*6 + r].
func (g *sgemmJob) packA(ap []float32, i0, rows int) {
	for s := 0; s*mr < rows; s++ {
		i := i0 + s*mr
		g.packStrip(ap[s*g.kn*mr:(s+1)*g.kn*mr], g.a, g.ars, g.aks, i, min(mr, i0+rows-i), mr)
	}
}

// packStrip packs lines [l0, l0+n) of an operand x, whose line l at step
// k is x[l*ls+k*ks] (rows of A, columns of B), over the current k block
// into a strip w lines wide: dst[k*w + l]. Lines n..w-1 are zeroed, so
// the kernel always runs a full strip. Contiguous lines (ks 1) are read
// line by line, strided ones step by step, each in memory order.
func (g *sgemmJob) packStrip(dst, x []float32, ls, ks, l0, n, w int) {
	if ks == 1 {
		for l := range n {
			src := x[(l0+l)*ls+g.k0:][:g.kn]
			for k, v := range src {
				dst[k*w+l] = v
			}
		}
	} else {
		for k := range g.kn {
			base := (g.k0+k)*ks + l0*ls
			row := dst[k*w : k*w+n]
			for l := range row {
				row[l] = x[base+l*ls]
			}
		}
	}
	if n < w {
		for k := range g.kn {
			clear(dst[k*w+n : k*w+w])
		}
	}
}

// compute runs part w of the rows against the packed B block.
func (g *sgemmJob) compute(w int) {
	s0, s1 := w*g.strips/g.parts, (w+1)*g.strips/g.parts
	ap := g.ap[w]
	if g.init && g.k0 == 0 {
		// Each worker initialises its own rows of this column block.
		for i := s0 * mr; i < min(s1*mr, g.m); i++ {
			row := g.c[i*g.ldc+g.j0:][:g.jn]
			if g.bias != nil {
				copy(row, g.bias[g.j0:g.j0+g.jn])
			} else {
				clear(row)
			}
		}
	}
	for sb := s0; sb < s1; sb += mcBlock / mr {
		i0 := sb * mr
		rows := min(min(sb+mcBlock/mr, s1)*mr, g.m) - i0
		g.packA(ap, i0, rows)
		for js := 0; js*nr < g.jn; js++ {
			j := g.j0 + js*nr
			cols := min(nr, g.j0+g.jn-j)
			bs := &g.bp[js*g.kn*nr]
			for s := 0; s*mr < rows; s++ {
				i := i0 + s*mr
				rs := min(mr, i0+rows-i)
				as := &ap[s*g.kn*mr]
				if rs == mr && cols == nr {
					kern6x16(g.kn, as, bs, &g.c[i*g.ldc+j], g.ldc)
					continue
				}
				var tile [mr * nr]float32
				kern6x16(g.kn, as, bs, &tile[0], nr)
				for r := range rs {
					crow := g.c[(i+r)*g.ldc+j:][:cols]
					for x := range crow {
						crow[x] += tile[r*nr+x]
					}
				}
			}
		}
	}
}

// sgemm runs C (+)= A·Bᵀ (+ bias) over the worker pool (see sgemmJob).
// With acc false, C is first set to the bias (or zero), each worker
// setting its own rows.
func (be *Backend[F]) sgemm(c []float32, ldc int, a []float32, ars, aks int, b []float32, brs, bks int, m, n, K int, bias []float32, acc bool) {
	if m == 0 || n == 0 {
		return
	}
	if K == 0 || m < gemvRows && aks == 1 && bks == 1 {
		if !acc {
			for i := range m {
				row := c[i*ldc : i*ldc+n]
				if bias != nil {
					copy(row, bias[:n])
				} else {
					clear(row)
				}
			}
		}
		if K == 0 {
			return
		}
	}
	if m < gemvRows && aks == 1 && bks == 1 {
		runJob(be.pool, &be.gv, gemvJob{c: c, ldc: ldc, a: a, lda: ars, b: b, ldb: brs, m: m, k: K}, n, max(1, 1<<15/K))
		return
	}
	g := &be.sg
	*g = sgemmJob{c: c, ldc: ldc, a: a, ars: ars, aks: aks, b: b, brs: brs, bks: bks, m: m, n: n, k: K, init: !acc, bias: bias}
	g.strips = (m + mr - 1) / mr
	g.parts = min(be.pool.n, g.strips)
	kc := min(K, kcBlock)
	nc := min((n+nr-1)/nr*nr, ncBlock)
	if cap(be.packB) < nc*kc {
		be.packB = make([]float32, nc*kc)
	}
	g.bp = be.packB[:nc*kc]
	for len(be.packA) < g.parts {
		be.packA = append(be.packA, nil)
	}
	for w := range g.parts {
		if cap(be.packA[w]) < mcBlock*kc {
			be.packA[w] = make([]float32, mcBlock*kc)
		}
	}
	g.ap = be.packA[:g.parts]
	for j0 := 0; j0 < n; j0 += ncBlock {
		g.j0, g.jn = j0, min(ncBlock, n-j0)
		for k0 := 0; k0 < K; k0 += kcBlock {
			g.k0, g.kn = k0, min(kcBlock, K-k0)
			g.packing = true
			// A strip of B is kn*16 multiply-adds per row of A to come:
			// hand out several per task when m is small.
			be.pool.parallel(g, (g.jn+nr-1)/nr, 4, 1)
			g.packing = false
			be.pool.parallel(g, g.parts, 1, 1)
		}
	}
	*g = sgemmJob{}
}

// gemvJob computes c[i,j] += a_i·b_j for i < m over columns j, with the
// vector dot product.
type gemvJob struct {
	c, a, b       []float32
	ldc, lda, ldb int
	m, k          int
}

func (g *gemvJob) run(lo, hi int) {
	for j := lo; j < hi; j++ {
		bj := &g.b[j*g.ldb]
		for i := range g.m {
			var d float32
			sdots(g.k, &g.a[i*g.lda], bj, 0, 1, &d)
			g.c[i*g.ldc+j] += d
		}
	}
}
