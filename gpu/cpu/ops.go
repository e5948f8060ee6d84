package cpu

import (
	"math"

	"swerl/gpu"
)

// Zero implements gpu.Backend.
func (be *Backend[F]) Zero(x gpu.Buf) {
	d := be.get("zero", x)
	if be.err == nil {
		clear(d)
	}
}

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
	const op = "embedding forward"
	o, w := be.get(op, out), be.get(op, wte)
	if !be.need(op, len(tokens)*C, "out", o) {
		return
	}
	V := len(w) / max(C, 1)
	for n, t := range tokens {
		if t < 0 || int(t) >= V {
			be.fail(op, "token %d at row %d outside the vocabulary of %d", t, n, V)
			return
		}
		copy(o[n*C:n*C+C], w[int(t)*C:int(t)*C+C])
	}
}

// EmbeddingBackward implements gpu.Backend.
func (be *Backend[F]) EmbeddingBackward(dwte, dout gpu.Buf, tokens []int32, C int) {
	const op = "embedding backward"
	dw, do := be.get(op, dwte), be.get(op, dout)
	if !be.need(op, len(tokens)*C, "dout", do) {
		return
	}
	V := len(dw) / max(C, 1)
	for n, t := range tokens {
		if t < 0 || int(t) >= V {
			be.fail(op, "token %d at row %d outside the vocabulary of %d", t, n, V)
			return
		}
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
	be.pool.parallel(funcJob(func(lo, hi int) {
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
	}), N, 16, 1)
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
	be.pool.parallel(funcJob(func(lo, hi int) {
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
	}), N, 16, 1)
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
	be.pool.parallel(funcJob(func(lo, hi int) {
		for bt := lo; bt < hi; bt++ {
			p := pos0 + bt%T
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
	}), B*T, 8, 1)
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
	dot, axpy := be.vec.dot, be.vec.axpy
	be.pool.parallel(funcJob(func(lo, hi int) {
		for bh := lo; bh < hi; bh++ {
			b, h := bh/NH, bh%NH
			kh := h / group
			for i := range Tq {
				last := Tk - Tq + i // attends to keys 0..last
				qi := qd[((b*Tq+i)*NH+h)*HS:][:HS]
				row := a[((b*NH+h)*Tq+i)*Tk:][:Tk]
				mx := F(math.Inf(-1))
				for j := 0; j <= last; j++ {
					kj := kd[((b*Tk+j)*NKV+kh)*HS:][:HS]
					s := dot(qi, kj) * scale
					row[j] = s
					mx = max(mx, s)
				}
				var sum F
				for j := 0; j <= last; j++ {
					e := exp(row[j] - mx)
					row[j] = e
					sum += e
				}
				inv := 1 / sum
				for j := 0; j <= last; j++ {
					row[j] *= inv
				}
				clear(row[last+1:])
				oi := o[((b*Tq+i)*NH+h)*HS:][:HS]
				clear(oi)
				for j := 0; j <= last; j++ {
					axpy(row[j], vd[((b*Tk+j)*NKV+kh)*HS:][:HS], oi)
				}
			}
		}
	}), B*NH, 1, 1)
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
	dot, axpy := be.vec.dot, be.vec.axpy
	be.pool.parallel(funcJob(func(lo, hi int) {
		for bk := lo; bk < hi; bk++ {
			b, kh := bk/NKV, bk%NKV
			for h := kh * group; h < (kh+1)*group; h++ {
				for i := range Tq {
					last := Tk - Tq + i
					row := a[((b*NH+h)*Tq+i)*Tk:][:Tk]
					drow := da[((b*NH+h)*Tq+i)*Tk:][:Tk]
					doi := do[((b*Tq+i)*NH+h)*HS:][:HS]
					// out = sum_j p_j v_j: dp_j = do·v_j, dv_j += p_j do.
					for j := 0; j <= last; j++ {
						off := ((b*Tk+j)*NKV + kh) * HS
						drow[j] = dot(doi, vd[off:][:HS])
						if dv != nil {
							axpy(row[j], doi, dvd[off:][:HS])
						}
					}
					clear(drow[last+1:])
					// softmax backward: ds_j = p_j (dp_j - sum_l p_l dp_l).
					var dot F
					for j := 0; j <= last; j++ {
						dot += row[j] * drow[j]
					}
					qi := qd[((b*Tq+i)*NH+h)*HS:][:HS]
					var dqi []F
					if dq != nil {
						dqi = dqd[((b*Tq+i)*NH+h)*HS:][:HS]
					}
					for j := 0; j <= last; j++ {
						ds := row[j] * (drow[j] - dot) * scale
						drow[j] = ds
						off := ((b*Tk+j)*NKV + kh) * HS
						if dq != nil {
							axpy(ds, kd[off:][:HS], dqi)
						}
						if dk != nil {
							axpy(ds, qi, dkd[off:][:HS])
						}
					}
				}
			}
		}
	}), B*NKV, 1, 1)
}

func (be *Backend[F]) attnShapes(op string, B, Tq, Tk, NH, NKV, HS int) bool {
	switch {
	case be.err != nil:
		return false
	case B < 0 || Tq < 0 || HS <= 0 || NKV <= 0 || NH <= 0:
		be.fail(op, "bad shape B=%d Tq=%d HS=%d NH=%d NKV=%d", B, Tq, HS, NH, NKV)
	case Tq > Tk:
		be.fail(op, "Tq=%d exceeds Tk=%d", Tq, Tk)
	case NH%NKV != 0:
		be.fail(op, "NH=%d is not a multiple of NKV=%d", NH, NKV)
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
	be.pool.parallel(funcJob(func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x := g[i]
			o[i] = x / (1 + exp(-x)) * u[i]
		}
	}), n, 4096, 1)
}

// SwiGLUBackward implements gpu.Backend.
func (be *Backend[F]) SwiGLUBackward(dgate, dup, dout, gate, up gpu.Buf, n int) {
	const op = "swiglu backward"
	dg, du, do, g, u := be.get(op, dgate), be.get(op, dup), be.get(op, dout), be.get(op, gate), be.get(op, up)
	if !be.need(op, n, "dout", do, "gate", g, "up", u) ||
		dgate != nil && !be.need(op, n, "dgate", dg) || dup != nil && !be.need(op, n, "dup", du) {
		return
	}
	be.pool.parallel(funcJob(func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x := g[i]
			sig := 1 / (1 + exp(-x))
			if dup != nil {
				du[i] += do[i] * x * sig
			}
			if dgate != nil {
				// d silu/dx = sig * (1 + x*(1-sig))
				dg[i] += do[i] * u[i] * sig * (1 + x*(1-sig))
			}
		}
	}), n, 4096, 1)
}

// LogProbForward implements gpu.Backend.
func (be *Backend[F]) LogProbForward(logp, lse, logits gpu.Buf, targets []int32, V int) {
	const op = "logprob forward"
	lp, ls, lg := be.get(op, logp), be.get(op, lse), be.get(op, logits)
	N := len(targets)
	if !be.need(op, N, "logp", lp, "lse", ls) || !be.need(op, N*V, "logits", lg) || !be.targets(op, targets, V) {
		return
	}
	be.pool.parallel(funcJob(func(lo, hi int) {
		for n := lo; n < hi; n++ {
			row := lg[n*V : n*V+V]
			mx := F(math.Inf(-1))
			for _, v := range row {
				mx = max(mx, v)
			}
			var s F
			for _, v := range row {
				s += exp(v - mx)
			}
			l := mx + F(math.Log(float64(s)))
			ls[n] = l
			lp[n] = row[targets[n]] - l
		}
	}), N, 4, 1)
}

// LogProbBackward implements gpu.Backend.
func (be *Backend[F]) LogProbBackward(dlogits, dlogp, logits, lse gpu.Buf, targets []int32, V int) {
	const op = "logprob backward"
	dl, dp, lg, ls := be.get(op, dlogits), be.get(op, dlogp), be.get(op, logits), be.get(op, lse)
	N := len(targets)
	if !be.need(op, N, "dlogp", dp, "lse", ls) || !be.need(op, N*V, "logits", lg, "dlogits", dl) || !be.targets(op, targets, V) {
		return
	}
	be.pool.parallel(funcJob(func(lo, hi int) {
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
	}), N, 4, 1)
}

func (be *Backend[F]) targets(op string, targets []int32, V int) bool {
	for n, t := range targets {
		if t < 0 || int(t) >= V {
			be.fail(op, "target %d at row %d outside the vocabulary of %d", t, n, V)
			return false
		}
	}
	return true
}

// AdamW implements gpu.Backend.
func (be *Backend[F]) AdamW(p, g, m, v gpu.Buf, n int, h gpu.AdamWParams) {
	const op = "adamw"
	pd, gd, md, vd := be.get(op, p), be.get(op, g), be.get(op, m), be.get(op, v)
	if !be.need(op, n, "p", pd, "g", gd, "m", md, "v", vd) {
		return
	}
	if h.Step < 1 {
		be.fail(op, "step %d, want >= 1", h.Step)
		return
	}
	b1, b2 := float64(h.Beta1), float64(h.Beta2)
	c1 := F(1 - math.Pow(b1, float64(h.Step)))
	c2 := F(1 - math.Pow(b2, float64(h.Step)))
	lr, eps, wd, gs := F(h.LR), F(h.Eps), F(h.WeightDecay), F(h.GradScale)
	fb1, fb2 := F(b1), F(b2)
	be.pool.parallel(funcJob(func(lo, hi int) {
		for i := lo; i < hi; i++ {
			grad := gd[i] * gs
			mi := fb1*md[i] + (1-fb1)*grad
			vi := fb2*vd[i] + (1-fb2)*grad*grad
			md[i], vd[i] = mi, vi
			pd[i] -= lr * ((mi/c1)/(sqrt(vi/c2)+eps) + wd*pd[i])
		}
	}), n, 8192, 1)
}
