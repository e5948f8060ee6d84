package cpu

import "swerl/gpu"

// Products against packed weights (gpu.PackedMatmul), for decoding: the
// sampler multiplies the same weights by a few rows (one per sequence in
// the batch) at every step, so the weights are packed once into the
// 16-column strips the kernels read (6×16 ymm, or with AVX-512 8×16 zmm
// and 4×16 for tails of up to 4 rows), instead of at every call as sgemm
// does, and the workers split the columns, each streaming its own strips
// of the weights once per step.
//
// Packed layout of w[OC,C]: strip s (columns 16s..16s+15, zero past OC)
// holds C×16 floats, wp[s*C*16 + k*16 + jj] = w[(16s+jj)*C + k].
//
// Every output element is bias (or 0), then the kernel's sum over each
// k block of kcBlock added in block order, each block's sum a chain of
// fused multiply-adds over k in order — the same sums as sgemm, with any
// of the kernels, whatever N, the row's place in the batch or the worker
// count: a row's result does not depend on the other rows of the call.

// PackedLen implements gpu.PackedMatmul.
func (be *Backend[F]) PackedLen(OC, C int) int {
	if !be.vector {
		return OC * C
	}
	return (OC + nr - 1) / nr * nr * C
}

// PackWeight implements gpu.PackedMatmul. Without the vector kernel the
// packed form is a plain copy (the portable gemm is batch-independent as
// it is).
func (be *Backend[F]) PackWeight(dst, w gpu.Buf, OC, C int) {
	const op = "pack weight"
	d, s := be.get(op, dst), be.get(op, w)
	if !be.need(op, OC*C, "w", s) || !be.need(op, be.PackedLen(OC, C), "dst", d) {
		return
	}
	if !be.vector {
		copy(d, s[:OC*C])
		return
	}
	f := func(x []F) []float32 { return any(x).([]float32) }
	runJob(be.pool, &be.jobs.packW, packWJob{dst: f(d), w: f(s), OC: OC, C: C}, (OC+nr-1)/nr, 1)
}

// packWJob packs 16-column strips [lo, hi) of a weight.
type packWJob struct {
	dst, w []float32
	OC, C  int
}

func (j *packWJob) run(lo, hi int) {
	for s := lo; s < hi; s++ {
		packStrip(j.dst[s*j.C*nr:(s+1)*j.C*nr], j.w, j.OC, j.C, nr, s)
	}
}

// packStrip writes strip s of src[rows, C], its rows s*width.., with the
// rows interleaved: dst[k*width + r] = src[(s*width+r)*C + k], zero for
// rows past the end.
func packStrip(dst, src []float32, rows, C, width, s int) {
	for r := range width {
		i := s*width + r
		if i >= rows {
			for k := range C {
				dst[k*width+r] = 0
			}
			continue
		}
		for k, v := range src[i*C : i*C+C] {
			dst[k*width+r] = v
		}
	}
}

// MatmulPacked implements gpu.PackedMatmul: out[N,OC] = inp[N,C] @ wᵀ +
// bias with w packed by PackWeight.
func (be *Backend[F]) MatmulPacked(out, inp, wp, bias gpu.Buf, N, C, OC int) {
	if !be.vector {
		be.MatmulForward(out, inp, wp, bias, N, C, OC)
		return
	}
	const op = "matmul packed"
	o, x, w, bs := be.get(op, out), be.get(op, inp), be.get(op, wp), be.get(op, bias)
	if !be.need(op, N*OC, "out", o) || !be.need(op, N*C, "inp", x) || !be.need(op, be.PackedLen(OC, C), "packed w", w) {
		return
	}
	if bias != nil && !be.need(op, OC, "bias", bs) {
		return
	}
	if N == 0 || OC == 0 {
		return
	}
	f := func(x []F) []float32 { return any(x).([]float32) }
	// Rows in strips of 8 for the AVX-512 kernel, else of 6.
	mr := mr
	if be.avx512 {
		mr = mrZ
	}
	strips := (N + mr - 1) / mr
	if cap(be.packRows) < strips*mr*C {
		be.packRows = make([]float32, strips*mr*C)
	}
	j := &be.jobs.packed
	*j = packedJob{c: f(o), a: f(x), w: f(w), bias: f(bs), ap: be.packRows[:strips*mr*C], N: N, C: C, OC: OC, strips: strips, mr: mr}
	// First the rows of inp into row strips (shared by all workers),
	// then the column strips of the weight split over the workers.
	j.packing = true
	be.pool.parallel(j, strips, 4, 1)
	j.packing = false
	be.pool.parallel(j, (OC+nr-1)/nr, 1, 1)
	*j = packedJob{}
}

// packedJob is MatmulPacked: with packing set, run packs mr-row strips of
// a; otherwise it computes 16-column strips of c with the kernel of mr
// rows (kern8x16z or kern6x16).
type packedJob struct {
	c, a, w, bias []float32
	ap            []float32 // a in mr-row strips: ap[s*C*mr + k*mr + r]
	N, C, OC      int
	strips        int
	mr            int
	packing       bool
}

func (j *packedJob) run(lo, hi int) {
	if j.packing {
		j.packA(lo, hi)
		return
	}
	C, OC, mr := j.C, j.OC, j.mr
	// Rows in blocks of mcBlock, so that the block's packed rows of one k
	// block stay in L2 while the strip of the weight (16 KiB) stays in L1.
	for s0 := 0; s0 < j.strips; s0 += mcBlock / mr {
		s1 := min(s0+mcBlock/mr, j.strips)
		for js := lo; js < hi; js++ {
			col := js * nr
			cols := min(nr, OC-col)
			for i := s0 * mr; i < min(s1*mr, j.N); i++ {
				row := j.c[i*OC+col:][:cols]
				if j.bias != nil {
					copy(row, j.bias[col:col+cols])
				} else {
					clear(row)
				}
			}
			for k0 := 0; k0 < C; k0 += kcBlock {
				kn := min(kcBlock, C-k0)
				bs := &j.w[js*C*nr+k0*nr]
				for s := s0; s < s1; s++ {
					i := s * mr
					rs := min(mr, j.N-i)
					as := &j.ap[s*C*mr+k0*mr]
					if rs == mr && cols == nr {
						j.kern(kn, as, bs, &j.c[i*OC+col], OC)
						continue
					}
					var tile [mrZ * nr]float32
					if j.mr == mrZ && rs <= 4 {
						kern4x16z(kn, as, bs, &tile[0], nr)
					} else {
						j.kern(kn, as, bs, &tile[0], nr)
					}
					for r := range rs {
						crow := j.c[(i+r)*OC+col:][:cols]
						for x := range crow {
							crow[x] += tile[r*nr+x]
						}
					}
				}
			}
		}
	}
}

// kern runs the kernel of the job's strip height (direct calls: the
// assembly does not keep its pointers, so a tile on the stack stays there).
func (j *packedJob) kern(k int, a, b, c *float32, ldc int) {
	if j.mr == mrZ {
		kern8x16z(k, a, b, c, ldc)
	} else {
		kern6x16(k, a, b, c, ldc)
	}
}

// packA packs row strips [lo, hi) of a, zero past row N.
func (j *packedJob) packA(lo, hi int) {
	for s := lo; s < hi; s++ {
		packStrip(j.ap[s*j.C*j.mr:(s+1)*j.C*j.mr], j.a, j.N, j.C, j.mr, s)
	}
}
