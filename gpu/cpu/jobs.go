package cpu

import "math"

// Row jobs of the ops: a job struct per op lives in the backend, so an op
// hands its operands to the worker pool without allocating (a closure
// would escape to the heap on every call).

// jobs holds one job of each kind; an op fills its job, runs it and clears
// it (runJob) so the backend keeps no references to the caller's buffers.
type jobs[F float] struct {
	zero           zeroJob[F]
	rmsForward     rmsForward[F]
	rmsBackward    rmsBackward[F]
	ropeJob        ropeJob[F]
	attnForward    attnForward[F]
	attnRows       attnRows[F]
	attnBackward   attnBackward[F]
	flashForward   flashForward[F]
	flashBackward  flashBackward[F]
	swigluForward  swigluForward[F]
	swigluBackward swigluBackward[F]
	logpForward    logpForward[F]
	logpBackward   logpBackward[F]
	adamwJob       adamwJob[F]
	packW          packWJob
	packed         packedJob
}

// runJob sets the job slot to j, runs it over rows [0, n) on the pool in
// chunks of at least grain rows, and clears the slot again.
func runJob[J any, P interface {
	*J
	job
}](p *pool, slot P, j J, n, grain int) {
	*slot = j
	p.parallel(slot, n, grain, 1)
	var zero J
	*slot = zero
}

// rmsForward runs RMSNormForward over rows; its fields are the op's operands.
type rmsForward[F float] struct {
	x   []F
	o   []F
	rs  []F
	wt  []F
	C   int
	eps float32
}

func (j *rmsForward[F]) run(lo, hi int) {
	x, o, rs, wt, C, eps := j.x, j.o, j.rs, j.wt, j.C, j.eps
	for n := lo; n < hi; n++ {
		xr, or := x[n*C:n*C+C], o[n*C:n*C+C]
		var ss F
		for _, v := range xr {
			ss += v * v
		}
		r := 1 / sqrt(ss/F(C)+F(eps))
		rs[n] = r
		for i, v := range xr {
			or[i] = v * r * wt[i]
		}
	}
}

// rmsBackward runs RMSNormBackward's input gradient over rows; its fields are the op's operands.
type rmsBackward[F float] struct {
	x  []F
	do []F
	di []F
	rs []F
	wt []F
	C  int
}

func (j *rmsBackward[F]) run(lo, hi int) {
	x, do, di, rs, wt, C := j.x, j.do, j.di, j.rs, j.wt, j.C
	for n := lo; n < hi; n++ {
		r := rs[n]
		xr, gr, dr := x[n*C:n*C+C], do[n*C:n*C+C], di[n*C:n*C+C]
		var dot F
		for i := range xr {
			dot += wt[i] * gr[i] * xr[i]
		}
		c := dot * r * r * r / F(C)
		for i := range xr {
			dr[i] += r*wt[i]*gr[i] - xr[i]*c
		}
	}
}

// ropeJob runs RoPEForward and RoPEBackward over (batch, position) rows,
// and RoPERows over rows at positions pos; its fields are the op's operands.
type ropeJob[F float] struct {
	d    []F
	cs   []F
	sn   []F
	pos  []int32 // nil: row bt is at position pos0 + bt%T
	pos0 int
	T    int
	NH   int
	HS   int
	half int
	s    F
}

func (j *ropeJob[F]) run(lo, hi int) {
	d, cs, sn, pos0, T, NH, HS, half, s := j.d, j.cs, j.sn, j.pos0, j.T, j.NH, j.HS, j.half, j.s
	for bt := lo; bt < hi; bt++ {
		p := pos0 + bt%T
		if j.pos != nil {
			p = int(j.pos[bt])
		}
		c, sr := cs[p*half:p*half+half], sn[p*half:p*half+half]
		for h := range NH {
			v := d[(bt*NH+h)*HS : (bt*NH+h+1)*HS]
			for i := range half {
				x1, x2 := v[i], v[i+half]
				si := s * sr[i]
				v[i] = x1*c[i] - x2*si
				v[i+half] = x2*c[i] + x1*si
			}
		}
	}
}

// attnForward runs AttentionForward over (batch, query head) pairs; its fields are the op's operands.
type attnForward[F float] struct {
	o     []F
	a     []F
	qd    []F
	kd    []F
	vd    []F
	NH    int
	NKV   int
	Tq    int
	Tk    int
	HS    int
	group int
	scale F
	vec   *vecOps[F]
}

func (j *attnForward[F]) run(lo, hi int) {
	o, a, qd, kd, vd, NH, NKV, Tq, Tk, HS, group, scale := j.o, j.a, j.qd, j.kd, j.vd, j.NH, j.NKV, j.Tq, j.Tk, j.HS, j.group, j.scale
	stride := NKV * HS // from one key (value) row of a head to the next
	for bh := lo; bh < hi; bh++ {
		b, h := bh/NH, bh%NH
		kh := h / group
		keys := kd[(b*Tk*NKV+kh)*HS:]
		vals := vd[(b*Tk*NKV+kh)*HS:]
		for i := range Tq {
			last := Tk - Tq + i // attends to keys 0..last
			row := a[((b*NH+h)*Tq+i)*Tk:][:Tk]
			j.vec.attend(o[((b*Tq+i)*NH+h)*HS:][:HS], qd[((b*Tq+i)*NH+h)*HS:][:HS], keys, vals, stride, row[:last+1], scale)
			clear(row[last+1:])
		}
	}
}

// attnRows runs AttentionRows over (row, query head) pairs; its fields
// are the op's operands, and p holds each worker's probabilities.
type attnRows[F float] struct {
	o, qd, kd, vd []F
	start, cnt    []int32
	NH, NKV, HS   int
	scale         F
	maxCnt        int
	vec           *vecOps[F]
}

func (j *attnRows[F]) run(lo, hi int) {
	NH, HS, stride := j.NH, j.HS, j.NKV*j.HS
	group := NH / j.NKV
	p := make([]F, j.maxCnt)
	for nh := lo; nh < hi; nh++ {
		n, h := nh/NH, nh%NH
		first := (int(j.start[n])*j.NKV + h/group) * HS
		j.vec.attend(j.o[nh*HS:][:HS], j.qd[nh*HS:][:HS], j.kd[first:], j.vd[first:], stride, p[:j.cnt[n]], j.scale)
	}
}

// attend is one query row of one head: p[j] = softmax_j(scale * q·k_j)
// over the len(p) keys k_j = keys[j*stride:][:len(q)], and
// o = Σ_j p[j] v_j with v_j read likewise from vals. AttentionForward,
// AttentionRows and AttentionForwardLSE all call it, so a row gets the
// same bits through any of them. It returns probs' max and sum.
func (v *vecOps[F]) attend(o, q, keys, vals []F, stride int, p []F, scale F) (mx, sum F) {
	mx, sum = v.probs(q, keys, stride, p, scale)
	clear(o)
	v.axpys(p, vals, stride, o)
	return mx, sum
}

// probs fills p with the softmax of the scaled scores scale * q·k_j and
// returns their max and Σ_j exp(score_j - max), whose log plus the max is
// the row's log-sum-exp. The flash backward recomputes a forward's
// probabilities with it, bit for bit.
func (v *vecOps[F]) probs(q, keys []F, stride int, p []F, scale F) (mx, sum F) {
	v.dots(q, keys, stride, p)
	mx = F(math.Inf(-1))
	for i, s := range p {
		s *= scale
		p[i] = s
		mx = max(mx, s)
	}
	v.expSub(p, mx, p)
	for _, e := range p {
		sum += e
	}
	inv := 1 / sum
	for i := range p {
		p[i] *= inv
	}
	return mx, sum
}

// attnBackward runs AttentionBackward over (batch, kv head) pairs; its fields are the op's operands.
type attnBackward[F float] struct {
	dqd   []F
	dkd   []F
	dvd   []F
	da    []F
	do    []F
	qd    []F
	kd    []F
	vd    []F
	a     []F
	NH    int
	NKV   int
	Tq    int
	Tk    int
	HS    int
	group int
	scale F
	vec   *vecOps[F]
	cols  []F // Tq floats per (batch, kv head): a gathered column of p or ds
}

// run computes, for each query head of the pair's kv head: per query row
// i, dp = do_i·v_j over its keys (one dots call), the softmax backward
// into da, and dq_i += Σ_j ds_j k_j (one axpys call); then per key j,
// dv_j += Σ_i p_ij do_i and dk_j += Σ_i ds_ij q_i over the rows i that see
// it (one axpys call each, the column of p or ds gathered first). Every
// element of dq, dk and dv gets its multiply-adds in the order of a
// per-key loop: heads in order, then rows i in order.
func (j *attnBackward[F]) run(lo, hi int) {
	NH, NKV, Tq, Tk := j.NH, j.NKV, j.Tq, j.Tk
	for bk := lo; bk < hi; bk++ {
		b := bk / NKV
		for h := bk % NKV * j.group; h < (bk%NKV+1)*j.group; h++ {
			j.head(b, h, j.a[(b*NH+h)*Tq*Tk:][:Tq*Tk], j.da[(b*NH+h)*Tq*Tk:][:Tq*Tk], j.cols[bk*Tq:][:Tq])
		}
	}
}

// head is the backward of query head h of sequence b, given its
// probabilities att [Tq,Tk]; datt [Tq,Tk] and col [Tq] are scratch. The
// heads of one kv head must run in order on one worker (run, and the
// flash backward's run, do).
func (j *attnBackward[F]) head(b, h int, att, datt, col []F) {
	NH, NKV, Tq, Tk, HS := j.NH, j.NKV, j.Tq, j.Tk, j.HS
	kvStride, qStride := NKV*HS, NH*HS // from one row of a head to the next
	kh := h / j.group
	keys, vals := j.kd[(b*Tk*NKV+kh)*HS:], j.vd[(b*Tk*NKV+kh)*HS:]
	dout, q := j.do[(b*Tq*NH+h)*HS:], j.qd[(b*Tq*NH+h)*HS:]
	for i := range Tq {
		last := Tk - Tq + i
		row, drow := att[i*Tk:][:last+1], datt[i*Tk:][:Tk]
		// out = sum_j p_j v_j: dp_j = do·v_j.
		j.vec.dots(dout[i*qStride:][:HS], vals, kvStride, drow[:last+1])
		clear(drow[last+1:])
		// softmax backward: ds_j = p_j (dp_j - sum_l p_l dp_l).
		var dot F
		for jj, p := range row {
			dot += p * drow[jj]
		}
		for jj, p := range row {
			drow[jj] = p * (drow[jj] - dot) * j.scale
		}
		if j.dqd != nil {
			j.vec.axpys(drow[:last+1], keys, kvStride, j.dqd[((b*Tq+i)*NH+h)*HS:][:HS])
		}
	}
	// Key j is seen by the rows i >= j - (Tk - Tq).
	for jj := range Tk {
		i0 := max(0, jj-(Tk-Tq))
		if i0 >= Tq {
			continue
		}
		c := col[:Tq-i0]
		off := ((b*Tk+jj)*NKV + kh) * HS
		if j.dvd != nil {
			for i := range c {
				c[i] = att[(i0+i)*Tk+jj]
			}
			j.vec.axpys(c, dout[i0*qStride:], qStride, j.dvd[off:][:HS])
		}
		if j.dkd != nil {
			for i := range c {
				c[i] = datt[(i0+i)*Tk+jj]
			}
			j.vec.axpys(c, q[i0*qStride:], qStride, j.dkd[off:][:HS])
		}
	}
}

// swigluForward runs SwiGLUForward over elements; its fields are the op's operands.
type swigluForward[F float] struct {
	o   []F
	g   []F
	u   []F
	vec *vecOps[F]
}

func (j *swigluForward[F]) run(lo, hi int) {
	j.vec.swiglu(j.o[lo:hi], j.g[lo:hi], j.u[lo:hi])
}

// swigluBackward runs SwiGLUBackward over elements; its fields are the op's operands.
type swigluBackward[F float] struct {
	dg []F
	du []F
	do []F
	g  []F
	u  []F
}

func (j *swigluBackward[F]) run(lo, hi int) {
	dg, du, do, g, u := j.dg, j.du, j.do, j.g, j.u
	for i := lo; i < hi; i++ {
		x := g[i]
		sig := 1 / (1 + exp(-x))
		if du != nil {
			du[i] += do[i] * x * sig
		}
		if dg != nil {
			// d silu/dx = sig * (1 + x*(1-sig))
			dg[i] += do[i] * u[i] * sig * (1 + x*(1-sig))
		}
	}
}

// logpForward runs LogProbForward over rows; its fields are the op's operands.
type logpForward[F float] struct {
	lp      []F
	ls      []F
	lg      []F
	targets []int32
	V       int
}

func (j *logpForward[F]) run(lo, hi int) {
	lp, ls, lg, targets, V := j.lp, j.ls, j.lg, j.targets, j.V
	for n := lo; n < hi; n++ {
		row := lg[n*V : n*V+V]
		mx := F(math.Inf(-1))
		for _, v := range row {
			mx = max(mx, v)
		}
		var s float64
		for _, v := range row {
			s += math.Exp(float64(v - mx))
		}
		l := mx + F(math.Log(s))
		ls[n] = l
		lp[n] = row[targets[n]] - l
	}
}

// logpBackward runs LogProbBackward over rows; its fields are the op's operands.
type logpBackward[F float] struct {
	dl      []F
	dp      []F
	lg      []F
	ls      []F
	targets []int32
	V       int
}

func (j *logpBackward[F]) run(lo, hi int) {
	dl, dp, lg, ls, targets, V := j.dl, j.dp, j.lg, j.ls, j.targets, j.V
	for n := lo; n < hi; n++ {
		g := dp[n]
		if g == 0 {
			continue
		}
		row, drow, l := lg[n*V:n*V+V], dl[n*V:n*V+V], ls[n]
		for v, x := range row {
			drow[v] -= g * exp(x-l)
		}
		drow[targets[n]] += g
	}
}

// adamwJob runs AdamW over elements; its fields are the op's operands.
type adamwJob[F float] struct {
	pd  []F
	gd  []F
	md  []F
	vd  []F
	lr  F
	eps F
	wd  F
	gs  F
	fb1 F
	fb2 F
	c1  F
	c2  F
}

func (j *adamwJob[F]) run(lo, hi int) {
	pd, gd, md, vd, lr, eps, wd, gs, fb1, fb2, c1, c2 := j.pd, j.gd, j.md, j.vd, j.lr, j.eps, j.wd, j.gs, j.fb1, j.fb2, j.c1, j.c2
	for i := lo; i < hi; i++ {
		grad := gd[i] * gs
		mi := fb1*md[i] + (1-fb1)*grad
		vi := fb2*vd[i] + (1-fb2)*grad*grad
		md[i], vd[i] = mi, vi
		pd[i] -= lr * ((mi/c1)/(sqrt(vi/c2)+eps) + wd*pd[i])
	}
}
