package cpu

import "swerl/gpu"

// Blocking: a panel of nb rows of B (nb*kb elements) stays in L2 while every
// row tile of the worker's A rows passes over it; kb bounds the stretch of
// each row the 3x3 kernel streams through L1.
const (
	kb     = 256
	nb     = 64
	panelK = 256 // rows per transposed panel in the backward products
)

// gemmJob computes c[i*ldc+j] (+)= bias[j] + sum_k a[i*lda+k]*b[j*ldb+k]
// for i < M, j < n, k < K, parallel over rows i.
type gemmJob[F float] struct {
	c, a, b, bias []F
	ldc, lda, ldb int
	n, K          int
	acc           bool // add to c instead of overwriting it
}

func (g *gemmJob[F]) run(lo, hi int) {
	c, a, b := g.c, g.a, g.b
	for j0 := 0; j0 < g.n; j0 += nb {
		j1 := min(j0+nb, g.n)
		for k0 := 0; k0 < g.K; k0 += kb {
			k1 := min(k0+kb, g.K)
			kn := k1 - k0
			first := k0 == 0 && !g.acc
			i := lo
			for ; i+3 <= hi; i += 3 {
				a0 := a[i*g.lda+k0:]
				a1 := a[(i+1)*g.lda+k0:]
				a2 := a[(i+2)*g.lda+k0:]
				j := j0
				for ; j+3 <= j1; j += 3 {
					s := kernel3x3(a0, a1, a2, b[j*g.ldb+k0:], b[(j+1)*g.ldb+k0:], b[(j+2)*g.ldb+k0:], kn)
					for r := range 3 {
						g.store(c[(i+r)*g.ldc+j:(i+r)*g.ldc+j+3], s[r*3:r*3+3], j, first)
					}
				}
				for ; j < j1; j++ {
					bj := b[j*g.ldb+k0:]
					for r, ar := range [3][]F{a0, a1, a2} {
						s := dot(ar, bj, kn)
						g.store(c[(i+r)*g.ldc+j:(i+r)*g.ldc+j+1], []F{s}, j, first)
					}
				}
			}
			for ; i < hi; i++ {
				ai := a[i*g.lda+k0:]
				for j := j0; j < j1; j++ {
					s := dot(ai, b[j*g.ldb+k0:], kn)
					g.store(c[i*g.ldc+j:i*g.ldc+j+1], []F{s}, j, first)
				}
			}
		}
	}
}

// store writes the sums s for columns j.. of one row of c.
func (g *gemmJob[F]) store(c, s []F, j int, first bool) {
	switch {
	case !first:
		for x := range s {
			c[x] += s[x]
		}
	case g.bias != nil:
		for x := range s {
			c[x] = g.bias[j+x] + s[x]
		}
	default:
		copy(c, s)
	}
}

// dot sums a[k]*b[k] for k < n in order.
func dot[F float](a, b []F, n int) F {
	a, b = a[:n], b[:n]
	var s F
	for k := range n {
		s += a[k] * b[k]
	}
	return s
}

// gemm runs c (+)= a·bᵀ (+ bias) with m rows over the worker pool.
func (be *Backend[F]) gemm(c []F, ldc int, a []F, lda int, b []F, ldb int, m, n, K int, bias []F, acc bool) {
	be.mm = gemmJob[F]{c: c, a: a, b: b, bias: bias, ldc: ldc, lda: lda, ldb: ldb, n: n, K: K, acc: acc}
	// A chunk of rows should carry enough work to pay for the hand-off.
	grain := max(3, 1<<16/max(n*K, 1))
	be.pool.parallel(&be.mm, m, grain, 3)
	be.mm = gemmJob[F]{}
}

// MatmulForward implements gpu.Backend.
func (be *Backend[F]) MatmulForward(out, inp, w, bias gpu.Buf, N, C, OC int) {
	const op = "matmul forward"
	o, x, wt, bs := be.get(op, out), be.get(op, inp), be.get(op, w), be.get(op, bias)
	if !be.need(op, N*OC, "out", o) || !be.need(op, N*C, "inp", x) || !be.need(op, OC*C, "w", wt) {
		return
	}
	if bias != nil && !be.need(op, OC, "bias", bs) {
		return
	}
	if C == 0 {
		// No inner dimension: out is the bias (or zero).
		for n := range N {
			for j := range OC {
				o[n*OC+j] = 0
				if bs != nil {
					o[n*OC+j] = bs[j]
				}
			}
		}
		return
	}
	if be.vector {
		f := func(x []F) []float32 { return any(x).([]float32) }
		be.sgemm(f(o), OC, f(x), C, 1, f(wt), C, 1, N, OC, C, f(bs), false)
		return
	}
	be.gemm(o, OC, x, C, wt, C, N, OC, C, bs, false)
}

// MatmulBackward implements gpu.Backend. Both products go through the
// forward kernel on transposed panels of at most panelK rows.
func (be *Backend[F]) MatmulBackward(dinp, dw, dbias, dout, inp, w gpu.Buf, N, C, OC int) {
	const op = "matmul backward"
	di, dwt, db := be.get(op, dinp), be.get(op, dw), be.get(op, dbias)
	do, x, wt := be.get(op, dout), be.get(op, inp), be.get(op, w)
	if !be.need(op, N*OC, "dout", do) {
		return
	}
	if dinp != nil && !(be.need(op, N*C, "dinp", di) && be.need(op, OC*C, "w", wt)) {
		return
	}
	if dw != nil && !(be.need(op, OC*C, "dw", dwt) && be.need(op, N*C, "inp", x)) {
		return
	}
	if dbias != nil && !be.need(op, OC, "dbias", db) {
		return
	}
	if dbias != nil {
		// Column sums in row order, one pass.
		for n := range N {
			row := do[n*OC : n*OC+OC]
			for j, v := range row {
				db[j] += v
			}
		}
	}
	if be.vector {
		f := func(x []F) []float32 { return any(x).([]float32) }
		if dinp != nil {
			// dinp(n,c) += Σ_o dout(n,o)·w(o,c)
			be.sgemm(f(di), C, f(do), OC, 1, f(wt), 1, C, N, C, OC, nil, true)
		}
		if dw != nil {
			// dw(o,c) += Σ_n dout(n,o)·inp(n,c)
			be.sgemm(f(dwt), C, f(do), 1, OC, f(x), 1, C, OC, C, N, nil, true)
		}
		return
	}
	if dinp != nil {
		// dinp[N,C] += dout[N,OC]·w[OC,C]: panel over OC, with the panel
		// of w transposed to [C, p].
		for o0 := 0; o0 < OC; o0 += panelK {
			p := min(panelK, OC-o0)
			wT := be.scratchFor(C * p)
			transpose(wT, wt[o0*C:], p, C, C)
			be.gemm(di, C, do[o0:], OC, wT, p, N, C, p, nil, true)
		}
	}
	if dw != nil {
		// dw[OC,C] += doutᵀ·inp: panel over N, with both panels
		// transposed to [OC, p] and [C, p].
		for n0 := 0; n0 < N; n0 += panelK {
			p := min(panelK, N-n0)
			s := be.scratchFor((OC + C) * p)
			dT, xT := s[:OC*p], s[OC*p:]
			transpose(dT, do[n0*OC:], p, OC, OC)
			transpose(xT, x[n0*C:], p, C, C)
			be.gemm(dwt, C, dT, p, xT, p, OC, C, p, nil, true)
		}
	}
}

// scratchFor returns n elements of reusable workspace.
func (be *Backend[F]) scratchFor(n int) []F {
	if cap(be.scratch) < n {
		be.scratch = make([]F, n)
	}
	return be.scratch[:n]
}

// transpose writes dst[c*rows+r] = src[r*ld+c] for r < rows, c < cols.
func transpose[F float](dst, src []F, rows, cols, ld int) {
	const t = 32 // tile edge: both sides stay in L1
	for r0 := 0; r0 < rows; r0 += t {
		for c0 := 0; c0 < cols; c0 += t {
			for r := r0; r < min(r0+t, rows); r++ {
				s := src[r*ld:]
				for c := c0; c < min(c0+t, cols); c++ {
					dst[c*rows+r] = s[c]
				}
			}
		}
	}
}
