package cpu

import (
	"swerl/gpu"
)

// Zero implements gpu.Backend.
func (be *Backend[F]) Zero(x gpu.Buf) {
	d := be.get("zero", x)
	if be.err == nil {
		runJob(be.pool, &be.jobs.zero, zeroJob[F]{d}, len(d), 1<<16)
	}
}

// zeroJob clears elements [lo, hi) of d.
type zeroJob[F float] struct{ d []F }

func (j *zeroJob[F]) run(lo, hi int) { clear(j.d[lo:hi]) }

// Copy implements gpu.Backend.
func (be *Backend[F]) Copy(dst, src gpu.Buf) {
	d, s := be.get("copy", dst), be.get("copy", src)
	if be.need("copy", len(s), "dst", d) {
		copy(d, s)
	}
}

// Add implements gpu.Backend.
func (be *Backend[F]) Add(out, a, b gpu.Buf, n int) {
	const op = "add"
	o, x, y := be.get(op, out), be.get(op, a), be.get(op, b)
	if !be.need(op, n, "out", o, "a", x, "b", y) {
		return
	}
	o, x, y = o[:n], x[:n], y[:n]
	for i := range o {
		o[i] = x[i] + y[i]
	}
}

// Axpy implements gpu.Backend.
func (be *Backend[F]) Axpy(y, x gpu.Buf, alpha float32, n int) {
	const op = "axpy"
	yd, xd := be.get(op, y), be.get(op, x)
	if !be.need(op, n, "y", yd, "x", xd) {
		return
	}
	a := F(alpha)
	yd, xd = yd[:n], xd[:n]
	for i := range yd {
		yd[i] += a * xd[i]
	}
}

// SumSquares implements gpu.Backend.
func (be *Backend[F]) SumSquares(x gpu.Buf) (float64, error) {
	d := be.get("sum squares", x)
	if be.err != nil {
		return 0, be.err
	}
	var s float64
	for _, v := range d {
		s += float64(v) * float64(v)
	}
	return s, nil
}

// EmbeddingForward implements gpu.Backend.
func (be *Backend[F]) EmbeddingForward(out, wte gpu.Buf, tokens []int32, C int) {
	w, o, ok := be.embeddingOperands("embedding forward", wte, out, "out", tokens, C)
	if !ok {
		return
	}
	for n, t := range tokens {
		copy(o[n*C:n*C+C], w[int(t)*C:int(t)*C+C])
	}
}

// EmbeddingBackward implements gpu.Backend.
func (be *Backend[F]) EmbeddingBackward(dwte, dout gpu.Buf, tokens []int32, C int) {
	dw, do, ok := be.embeddingOperands("embedding backward", dwte, dout, "dout", tokens, C)
	if !ok {
		return
	}
	for n, t := range tokens {
		row, g := dw[int(t)*C:int(t)*C+C], do[n*C:n*C+C]
		for i := range row {
			row[i] += g[i]
		}
	}
}

// RMSNormForward implements gpu.Backend.
func (be *Backend[F]) RMSNormForward(out, rstd, inp, w gpu.Buf, N, C int, eps float32) {
	const op = "rmsnorm forward"
	o, rs, x, wt := be.get(op, out), be.get(op, rstd), be.get(op, inp), be.get(op, w)
	if !be.need(op, N*C, "out", o, "inp", x) || !be.need(op, N, "rstd", rs) || !be.need(op, C, "w", wt) {
		return
	}
	runJob(be.pool, &be.jobs.rmsForward, rmsForward[F]{x: x, o: o, rs: rs, wt: wt, C: C, eps: eps}, N, 16)
}

// RMSNormBackward implements gpu.Backend.
func (be *Backend[F]) RMSNormBackward(dinp, dw, dout, inp, w, rstd gpu.Buf, N, C int) {
	const op = "rmsnorm backward"
	di, dwt, do := be.get(op, dinp), be.get(op, dw), be.get(op, dout)
	x, wt, rs := be.get(op, inp), be.get(op, w), be.get(op, rstd)
	if !be.need(op, N*C, "dout", do, "inp", x) || !be.need(op, N, "rstd", rs) || !be.need(op, C, "w", wt) {
		return
	}
	if dinp != nil && !be.need(op, N*C, "dinp", di) || dw != nil && !be.need(op, C, "dw", dwt) {
		return
	}
	if dw != nil {
		// dw[i] += sum_n dout[n,i] * x[n,i] * rstd[n], rows in order.
		for n := range N {
			r := rs[n]
			xr, gr := x[n*C:n*C+C], do[n*C:n*C+C]
			for i := range dwt[:C] {
				dwt[i] += gr[i] * xr[i] * r
			}
		}
	}
	if dinp == nil {
		return
	}
	// y = x*r*w with r = (mean(x²)+eps)^-1/2:
	// dx = r*(w*dy) - x * r³/C * sum_i(w_i dy_i x_i).
	runJob(be.pool, &be.jobs.rmsBackward, rmsBackward[F]{x: x, do: do, di: di, rs: rs, wt: wt, C: C}, N, 16)
}

// RoPEForward implements gpu.Backend.
func (be *Backend[F]) RoPEForward(x, cos, sin gpu.Buf, B, T, NH, HS, pos0 int) {
	be.rope("rope forward", x, cos, sin, B, T, NH, HS, pos0, 1)
}

// RoPEBackward implements gpu.Backend.
func (be *Backend[F]) RoPEBackward(dx, cos, sin gpu.Buf, B, T, NH, HS, pos0 int) {
	be.rope("rope backward", dx, cos, sin, B, T, NH, HS, pos0, -1)
}

// rope rotates pairs (i, i+HS/2) by +angle (dir 1) or -angle (dir -1).
func (be *Backend[F]) rope(op string, x, cos, sin gpu.Buf, B, T, NH, HS, pos0, dir int) {
	d, cs, sn := be.get(op, x), be.get(op, cos), be.get(op, sin)
	if HS%2 != 0 {
		be.fail(op, "head size %d is odd", HS)
		return
	}
	half := HS / 2
	if !be.need(op, B*T*NH*HS, "x", d) || !be.need(op, (pos0+T)*half, "cos", cs, "sin", sn) {
		return
	}
	s := F(dir)
	runJob(be.pool, &be.jobs.ropeJob, ropeJob[F]{d: d, cs: cs, sn: sn, pos0: pos0, T: T, NH: NH, HS: HS, half: half, s: s}, B*T, 8)
}

// AttentionForward implements gpu.Backend.
func (be *Backend[F]) AttentionForward(out, att, q, k, v gpu.Buf, B, Tq, Tk, NH, NKV, HS int) {
	const op = "attention forward"
	o, a, qd, kd, vd := be.get(op, out), be.get(op, att), be.get(op, q), be.get(op, k), be.get(op, v)
	if !be.attnShapes(op, B, Tq, Tk, NH, NKV, HS) ||
		!be.need(op, B*Tq*NH*HS, "out", o, "q", qd) || !be.need(op, B*Tk*NKV*HS, "k", kd, "v", vd) ||
		!be.need(op, B*NH*Tq*Tk, "att", a) {
		return
	}
	group := NH / NKV
	scale := 1 / sqrt(F(HS))
	runJob(be.pool, &be.jobs.attnForward, attnForward[F]{o: o, a: a, qd: qd, kd: kd, vd: vd, NH: NH, NKV: NKV, Tq: Tq, Tk: Tk, HS: HS, group: group, scale: scale, vec: &be.vec}, B*NH, 1)
}

// AttentionBackward implements gpu.Backend. Work is split over (batch,
// kv head) so that the query heads sharing a kv head accumulate into dk
// and dv in a fixed order on one worker.
func (be *Backend[F]) AttentionBackward(dq, dk, dv, datt, dout, q, k, v, att gpu.Buf, B, Tq, Tk, NH, NKV, HS int) {
	const op = "attention backward"
	dqd, dkd, dvd, da, do := be.get(op, dq), be.get(op, dk), be.get(op, dv), be.get(op, datt), be.get(op, dout)
	qd, kd, vd, a := be.get(op, q), be.get(op, k), be.get(op, v), be.get(op, att)
	if !be.attnShapes(op, B, Tq, Tk, NH, NKV, HS) ||
		!be.need(op, B*Tq*NH*HS, "dout", do, "q", qd) || !be.need(op, B*Tk*NKV*HS, "k", kd, "v", vd) ||
		!be.need(op, B*NH*Tq*Tk, "att", a, "datt", da) {
		return
	}
	if dq != nil && !be.need(op, B*Tq*NH*HS, "dq", dqd) ||
		dk != nil && !be.need(op, B*Tk*NKV*HS, "dk", dkd) || dv != nil && !be.need(op, B*Tk*NKV*HS, "dv", dvd) {
		return
	}
	group := NH / NKV
	scale := 1 / sqrt(F(HS))
	if cap(be.attnCols) < B*NKV*Tq {
		be.attnCols = make([]F, B*NKV*Tq)
	}
	runJob(be.pool, &be.jobs.attnBackward, attnBackward[F]{dqd: dqd, dkd: dkd, dvd: dvd, da: da, do: do, qd: qd, kd: kd, vd: vd, a: a, NH: NH, NKV: NKV, Tq: Tq, Tk: Tk, HS: HS, group: group, scale: scale, vec: &be.vec, cols: be.attnCols[:B*NKV*Tq]}, B*NKV, 1)
}

func (be *Backend[F]) attnShapes(op string, B, Tq, Tk, NH, NKV, HS int) bool {
	if be.err != nil {
		return false
	}
	if err := gpu.AttentionShapeError(B, Tq, Tk, NH, NKV, HS); err != nil {
		be.fail(op, "%v", err)
	}
	return be.err == nil
}

// SwiGLUForward implements gpu.Backend.
func (be *Backend[F]) SwiGLUForward(out, gate, up gpu.Buf, n int) {
	const op = "swiglu forward"
	o, g, u := be.get(op, out), be.get(op, gate), be.get(op, up)
	if !be.need(op, n, "out", o, "gate", g, "up", u) {
		return
	}
	runJob(be.pool, &be.jobs.swigluForward, swigluForward[F]{o: o, g: g, u: u, vec: &be.vec}, n, 4096)
}

// SwiGLUBackward implements gpu.Backend.
func (be *Backend[F]) SwiGLUBackward(dgate, dup, dout, gate, up gpu.Buf, n int) {
	const op = "swiglu backward"
	dg, du, do, g, u := be.get(op, dgate), be.get(op, dup), be.get(op, dout), be.get(op, gate), be.get(op, up)
	if !be.need(op, n, "dout", do, "gate", g, "up", u) ||
		dgate != nil && !be.need(op, n, "dgate", dg) || dup != nil && !be.need(op, n, "dup", du) {
		return
	}
	runJob(be.pool, &be.jobs.swigluBackward, swigluBackward[F]{dg: dg, du: du, do: do, g: g, u: u}, n, 4096)
}

// LogProbForward implements gpu.Backend.
func (be *Backend[F]) LogProbForward(logp, lse, logits gpu.Buf, targets []int32, V int) {
	const op = "logprob forward"
	lp, ls, lg := be.get(op, logp), be.get(op, lse), be.get(op, logits)
	N := len(targets)
	if !be.need(op, N, "logp", lp, "lse", ls) || !be.need(op, N*V, "logits", lg) || !be.inVocab(op, "target", targets, V) {
		return
	}
	runJob(be.pool, &be.jobs.logpForward, logpForward[F]{lp: lp, ls: ls, lg: lg, targets: targets, V: V}, N, 4)
}

// LogProbBackward implements gpu.Backend.
func (be *Backend[F]) LogProbBackward(dlogits, dlogp, logits, lse gpu.Buf, targets []int32, V int) {
	const op = "logprob backward"
	dl, dp, lg, ls := be.get(op, dlogits), be.get(op, dlogp), be.get(op, logits), be.get(op, lse)
	N := len(targets)
	if !be.need(op, N, "dlogp", dp, "lse", ls) || !be.need(op, N*V, "logits", lg, "dlogits", dl) || !be.inVocab(op, "target", targets, V) {
		return
	}
	runJob(be.pool, &be.jobs.logpBackward, logpBackward[F]{dl: dl, dp: dp, lg: lg, ls: ls, targets: targets, V: V}, N, 4)
}

// inVocab checks that every id (a token or target of row n) is in 0..V-1.
func (be *Backend[F]) inVocab(op, what string, ids []int32, V int) bool {
	for n, t := range ids {
		if t < 0 || int(t) >= V {
			be.fail(op, "%s %d at row %d outside the vocabulary of %d", what, t, n, V)
			return false
		}
	}
	return true
}

// embeddingOperands unwraps the operands of an embedding op: table (wte
// or its gradient) and rows (named name: out or dout), which must hold
// len(tokens) rows of C; every token must be a row of table. ok false:
// the op failed, and be.err says why.
func (be *Backend[F]) embeddingOperands(op string, table, rows gpu.Buf, name string, tokens []int32, C int) (tab, r []F, ok bool) {
	tab, r = be.get(op, table), be.get(op, rows)
	ok = be.need(op, len(tokens)*C, name, r) && be.inVocab(op, "token", tokens, len(tab)/max(C, 1))
	return tab, r, ok
}

// AdamW implements gpu.Backend.
func (be *Backend[F]) AdamW(p, g, m, v gpu.Buf, n int, h gpu.AdamWParams) {
	const op = "adamw"
	pd, gd, md, vd := be.get(op, p), be.get(op, g), be.get(op, m), be.get(op, v)
	if !be.need(op, n, "p", pd, "g", gd, "m", md, "v", vd) {
		return
	}
	c1, c2, err := h.BiasCorrections()
	if err != nil {
		be.fail(op, "%v", err)
		return
	}
	lr, eps, wd, gs := F(h.LR), F(h.Eps), F(h.WeightDecay), F(h.GradScale)
	fb1, fb2 := F(float64(h.Beta1)), F(float64(h.Beta2))
	runJob(be.pool, &be.jobs.adamwJob, adamwJob[F]{pd: pd, gd: gd, md: md, vd: vd, lr: lr, eps: eps, wd: wd, gs: gs, fb1: fb1, fb2: fb2, c1: F(c1), c2: F(c2)}, n, 8192)
}
