package gputest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"swerl/gpu"
)

// TestBackend checks every op of b against the float64 reference and
// finite differences, at boundary shapes. It ends with the error contract
// (a bad op makes Err and Download fail), after which b is unusable.
func TestBackend(t *testing.T, b gpu.Backend) {
	s := &suite{t: t, b: b, r: rand.New(rand.NewPCG(7, 11))}
	run := func(name string, f func(s *suite)) {
		t.Run(name, func(t *testing.T) {
			f(&suite{t: t, b: b, r: s.r})
			if err := b.Err(); err != nil {
				t.Fatalf("backend error: %v", err)
			}
		})
	}
	run("Buffers", testBuffers)
	run("Matmul", testMatmul)
	run("RMSNorm", testRMSNorm)
	run("RoPE", testRoPE)
	run("Attention", testAttention)
	run("SwiGLU", testSwiGLU)
	run("LogProb", testLogProb)
	run("Embedding", testEmbedding)
	run("AdamW", testAdamW)
	if fa, ok := b.(gpu.FlashAttention); ok {
		run("Flash", func(s *suite) { testFlash(s, fa) })
	}
	if ra, ok := b.(gpu.RaggedAttention); ok {
		run("Ragged", func(s *suite) { testRagged(s, ra) })
	}
	t.Run("StickyError", func(t *testing.T) { testStickyError(&suite{t: t, b: b, r: s.r}) })
}

func testBuffers(s *suite) {
	x := s.rand(37)
	b := s.up(x)
	if b.Len() != 37 {
		s.t.Errorf("Len = %d, want 37", b.Len())
	}
	s.expect("upload/download", b, x, 0)
	// A view aliases its parent.
	v := s.b.Slice(b, 5, 10)
	s.expect("slice", v, x[5:15], 0)
	s.b.Zero(v)
	want := append([]float64(nil), x...)
	clear(want[5:15])
	s.expect("zero through a view", b, want, 0)
	// Copy and Add.
	c, _ := s.b.Alloc(37)
	s.b.Copy(c, b)
	s.expect("copy", c, want, 0)
	y := s.rand(37)
	yb := s.up(y)
	s.b.Add(c, c, yb, 37)
	sum := make([]float64, 37)
	for i := range sum {
		sum[i] = want[i] + y[i]
	}
	s.expect("add in place", c, sum, TolForward)
	// Axpy over a prefix: c[0:30] += -0.75 * y[0:30], the rest unchanged.
	s.b.Axpy(c, yb, -0.75, 30)
	for i := range 30 {
		sum[i] += -0.75 * float64(float32(y[i]))
	}
	s.expect("axpy", c, sum, TolForward)
	ss, err := s.b.SumSquares(yb)
	var ref float64
	for _, v := range y {
		ref += v * v
	}
	if err != nil || math.Abs(ss-ref) > 1e-5*ref {
		s.t.Errorf("SumSquares = %v, %v; want %v", ss, err, ref)
	}
	z, _ := s.b.Alloc(3)
	s.expect("alloc zeroed", z, []float64{0, 0, 0}, 0)
}

func testMatmul(s *suite) {
	for _, sh := range []struct{ N, C, OC int }{
		{1, 1, 1}, {1, 7, 5}, {5, 3, 1}, {7, 13, 11}, {4, 33, 17}, {10, 10, 10},
		{5, 300, 7},  // crosses the k block
		{300, 5, 4},  // crosses the backward panel over N
		{3, 4, 300},  // crosses the backward panel over OC
		{2, 70, 130}, // crosses the column block
	} {
		for _, withBias := range []bool{false, true} {
			s.t.Run(fmt.Sprintf("N=%d,C=%d,OC=%d,bias=%v", sh.N, sh.C, sh.OC, withBias), func(t *testing.T) {
				s := &suite{t: t, b: s.b, r: s.r}
				N, C, OC := sh.N, sh.C, sh.OC
				inp, w := s.rand(N*C), s.rand(OC*C)
				var bias []float64
				var biasB gpu.Buf
				if withBias {
					bias = s.rand(OC)
					biasB = s.up(bias)
				}
				inpB, wB := s.up(inp), s.up(w)
				out, _ := s.b.Alloc(N * OC)
				s.b.MatmulForward(out, inpB, wB, biasB, N, C, OC)
				s.expect("out", out, refMatmul(inp, w, bias, N, C, OC), TolForward)

				r := s.rand(N * OC)
				f := func(xs [][]float64) []float64 {
					var bb []float64
					if withBias {
						bb = xs[2]
					}
					return refMatmul(xs[0], xs[1], bb, N, C, OC)
				}
				xs := [][]float64{inp, w, bias}
				pi, pw, pb := s.rand(N*C), s.rand(OC*C), s.rand(OC)
				dinp, dw, dbias := s.up(pi), s.up(pw), s.up(pb)
				if !withBias {
					dbias = nil
				}
				s.b.MatmulBackward(dinp, dw, dbias, s.up(r), inpB, wB, N, C, OC)
				s.expect("dinp", dinp, addTo(pi, fdGrad(f, xs, 0, r)), TolBackward)
				s.expect("dw", dw, addTo(pw, fdGrad(f, xs, 1, r)), TolBackward)
				if withBias {
					s.expect("dbias", dbias, addTo(pb, fdGrad(f, xs, 2, r)), TolBackward)
				}
			})
		}
	}
}

func testRMSNorm(s *suite) {
	const eps = 1e-5
	for _, sh := range []struct{ N, C int }{{1, 1}, {3, 7}, {5, 64}, {2, 129}} {
		s.t.Run(fmt.Sprintf("N=%d,C=%d", sh.N, sh.C), func(t *testing.T) {
			s := &suite{t: t, b: s.b, r: s.r}
			N, C := sh.N, sh.C
			inp, w := s.rand(N*C), s.rand(C)
			inpB, wB := s.up(inp), s.up(w)
			out, _ := s.b.Alloc(N * C)
			rstd, _ := s.b.Alloc(N)
			s.b.RMSNormForward(out, rstd, inpB, wB, N, C, eps)
			wantOut, wantRstd := refRMSNorm(inp, w, N, C, eps)
			s.expect("out", out, wantOut, TolForward)
			s.expect("rstd", rstd, wantRstd, TolForward)

			r := s.rand(N * C)
			f := func(xs [][]float64) []float64 { o, _ := refRMSNorm(xs[0], xs[1], N, C, eps); return o }
			xs := [][]float64{inp, w}
			pi, pw := s.rand(N*C), s.rand(C)
			dinp, dw := s.up(pi), s.up(pw)
			s.b.RMSNormBackward(dinp, dw, s.up(r), inpB, wB, rstd, N, C)
			s.expect("dinp", dinp, addTo(pi, fdGrad(f, xs, 0, r)), TolBackward)
			s.expect("dw", dw, addTo(pw, fdGrad(f, xs, 1, r)), TolBackward)
		})
	}
}

func testRoPE(s *suite) {
	for _, sh := range []struct{ B, T, NH, HS, pos0 int }{{1, 1, 1, 2, 0}, {2, 3, 3, 6, 5}, {1, 5, 2, 10, 0}, {3, 2, 1, 4, 9}} {
		s.t.Run(fmt.Sprintf("B=%d,T=%d,NH=%d,HS=%d,pos0=%d", sh.B, sh.T, sh.NH, sh.HS, sh.pos0), func(t *testing.T) {
			s := &suite{t: t, b: s.b, r: s.r}
			B, T, NH, HS, pos0 := sh.B, sh.T, sh.NH, sh.HS, sh.pos0
			P, half := pos0+T, HS/2
			cos, sin := make([]float64, P*half), make([]float64, P*half)
			for i := range cos {
				a := float64(float32(s.r.Float64() * 6.3))
				cos[i], sin[i] = float64(float32(math.Cos(a))), float64(float32(math.Sin(a)))
			}
			cosB, sinB := s.up(cos), s.up(sin)
			x := s.rand(B * T * NH * HS)
			xB := s.up(x)
			s.b.RoPEForward(xB, cosB, sinB, B, T, NH, HS, pos0)
			s.expect("x", xB, refRoPE(x, cos, sin, B, T, NH, HS, pos0), TolForward)

			// Backward rotates in place (no accumulation).
			r := s.rand(len(x))
			f := func(xs [][]float64) []float64 { return refRoPE(xs[0], cos, sin, B, T, NH, HS, pos0) }
			d := s.up(r)
			s.b.RoPEBackward(d, cosB, sinB, B, T, NH, HS, pos0)
			s.expect("dx", d, fdGrad(f, [][]float64{x}, 0, r), TolBackward)
		})
	}
}

func testAttention(s *suite) {
	for _, sh := range []struct{ B, Tq, Tk, NH, NKV, HS int }{
		{1, 1, 1, 1, 1, 2}, {2, 5, 5, 4, 2, 3}, {1, 3, 7, 2, 1, 4}, {1, 1, 6, 4, 4, 2}, {2, 4, 4, 3, 3, 5}, {1, 9, 9, 6, 2, 8},
		{2, 6, 9, 4, 2, 4}, // Tq < Tk with grouped kv heads on the batched-product path
	} {
		s.t.Run(fmt.Sprintf("B=%d,Tq=%d,Tk=%d,NH=%d,NKV=%d,HS=%d", sh.B, sh.Tq, sh.Tk, sh.NH, sh.NKV, sh.HS), func(t *testing.T) {
			s := &suite{t: t, b: s.b, r: s.r}
			B, Tq, Tk, NH, NKV, HS := sh.B, sh.Tq, sh.Tk, sh.NH, sh.NKV, sh.HS
			q, k, v := s.rand(B*Tq*NH*HS), s.rand(B*Tk*NKV*HS), s.rand(B*Tk*NKV*HS)
			qB, kB, vB := s.up(q), s.up(k), s.up(v)
			out, _ := s.b.Alloc(B * Tq * NH * HS)
			att := s.up(s.rand(B * NH * Tq * Tk)) // garbage in: must be overwritten
			s.b.AttentionForward(out, att, qB, kB, vB, B, Tq, Tk, NH, NKV, HS)
			wantOut, wantAtt := refAttention(q, k, v, B, Tq, Tk, NH, NKV, HS)
			s.expect("out", out, wantOut, TolForward)
			s.expect("att", att, wantAtt, TolForward)

			s.expectAttnGrads(q, k, v, B, Tq, Tk, NH, NKV, HS, func(dq, dk, dv, dout gpu.Buf) {
				datt, _ := s.b.Alloc(B * NH * Tq * Tk)
				s.b.AttentionBackward(dq, dk, dv, datt, dout, qB, kB, vB, att, B, Tq, Tk, NH, NKV, HS)
			})
		})
	}
}

// expectAttnGrads runs an attention backward, bwd, with dq, dk, dv holding
// random priors and dout random weights r, and checks that each gained the
// finite-difference gradient of sum(r * attention(q, k, v)).
func (s *suite) expectAttnGrads(q, k, v []float64, B, Tq, Tk, NH, NKV, HS int, bwd func(dq, dk, dv, dout gpu.Buf)) {
	s.t.Helper()
	r := s.rand(B * Tq * NH * HS)
	f := func(xs [][]float64) []float64 {
		o, _ := refAttention(xs[0], xs[1], xs[2], B, Tq, Tk, NH, NKV, HS)
		return o
	}
	xs := [][]float64{q, k, v}
	pq, pk, pv := s.rand(len(q)), s.rand(len(k)), s.rand(len(v))
	dq, dk, dv := s.up(pq), s.up(pk), s.up(pv)
	bwd(dq, dk, dv, s.up(r))
	s.expect("dq", dq, addTo(pq, fdGrad(f, xs, 0, r)), TolBackward)
	s.expect("dk", dk, addTo(pk, fdGrad(f, xs, 1, r)), TolBackward)
	s.expect("dv", dv, addTo(pv, fdGrad(f, xs, 2, r)), TolBackward)
}

func testSwiGLU(s *suite) {
	for _, n := range []int{1, 7, 10001} {
		s.t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			s := &suite{t: t, b: s.b, r: s.r}
			g, u := s.rand(n), s.rand(n)
			gB, uB := s.up(g), s.up(u)
			out, _ := s.b.Alloc(n)
			s.b.SwiGLUForward(out, gB, uB, n)
			s.expect("out", out, refSwiGLU(g, u), TolForward)
			if n > 100 {
				return // elementwise: the small sizes cover the backward math
			}
			r := s.rand(n)
			f := func(xs [][]float64) []float64 { return refSwiGLU(xs[0], xs[1]) }
			pg, pu := s.rand(n), s.rand(n)
			dg, du := s.up(pg), s.up(pu)
			s.b.SwiGLUBackward(dg, du, s.up(r), gB, uB, n)
			s.expect("dgate", dg, addTo(pg, fdGrad(f, [][]float64{g, u}, 0, r)), TolBackward)
			s.expect("dup", du, addTo(pu, fdGrad(f, [][]float64{g, u}, 1, r)), TolBackward)
		})
	}
}

func testLogProb(s *suite) {
	for _, sh := range []struct{ N, V int }{{1, 1}, {3, 7}, {5, 300}, {2, 1000}} {
		s.t.Run(fmt.Sprintf("N=%d,V=%d", sh.N, sh.V), func(t *testing.T) {
			s := &suite{t: t, b: s.b, r: s.r}
			N, V := sh.N, sh.V
			logits := s.rand(N * V)
			for i := range logits {
				logits[i] = float64(float32(logits[i] * 3))
			}
			targets := make([]int32, N)
			for i := range targets {
				targets[i] = int32(s.r.IntN(V))
			}
			lB := s.up(logits)
			logp, _ := s.b.Alloc(N)
			lse, _ := s.b.Alloc(N)
			s.b.LogProbForward(logp, lse, lB, targets, V)
			wantLogp, wantLse := refLogProb(logits, targets, V)
			s.expect("logp", logp, wantLogp, TolForward)
			s.expect("lse", lse, wantLse, TolForward)

			r := s.rand(N)
			f := func(xs [][]float64) []float64 { lp, _ := refLogProb(xs[0], targets, V); return lp }
			pl := s.rand(N * V)
			dl := s.up(pl)
			s.b.LogProbBackward(dl, s.up(r), lB, lse, targets, V)
			s.expect("dlogits", dl, addTo(pl, fdGrad(f, [][]float64{logits}, 0, r)), TolBackward)
		})
	}
}

func testEmbedding(s *suite) {
	const V, C = 11, 5
	tokens := []int32{3, 0, 10, 3, 3, 7}
	wte := s.rand(V * C)
	wB := s.up(wte)
	out, _ := s.b.Alloc(len(tokens) * C)
	s.b.EmbeddingForward(out, wB, tokens, C)
	want := make([]float64, 0, len(tokens)*C)
	for _, t := range tokens {
		want = append(want, wte[int(t)*C:int(t)*C+C]...)
	}
	s.expect("out", out, want, 0)

	r := s.rand(len(tokens) * C)
	f := func(xs [][]float64) []float64 {
		o := make([]float64, 0, len(tokens)*C)
		for _, t := range tokens {
			o = append(o, xs[0][int(t)*C:int(t)*C+C]...)
		}
		return o
	}
	pw := s.rand(V * C)
	dw := s.up(pw)
	s.b.EmbeddingBackward(dw, s.up(r), tokens, C)
	s.expect("dwte", dw, addTo(pw, fdGrad(f, [][]float64{wte}, 0, r)), TolBackward)
}

func testAdamW(s *suite) {
	for _, n := range []int{1, 1000, 9001} {
		s.t.Run(fmt.Sprintf("n=%d", n), func(t *testing.T) {
			s := &suite{t: t, b: s.b, r: s.r}
			p, m := s.rand(n), s.rand(n)
			v := s.rand(n)
			for i := range v {
				v[i] = float64(float32(v[i] * v[i]))
			}
			pB, mB, vB := s.up(p), s.up(m), s.up(v)
			for step := 1; step <= 2; step++ {
				g := s.rand(n)
				h := gpu.AdamWParams{LR: 1e-2, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, WeightDecay: 0.1, GradScale: 0.5, Step: step}
				s.b.AdamW(pB, s.up(g), mB, vB, n, h)
				refAdamW(p, g, m, v, 1e-2, float64(h.Beta1), float64(h.Beta2), 1e-8, 0.1, 0.5, step)
			}
			s.expect("p", pB, p, TolForward)
			s.expect("m", mB, m, TolForward)
			s.expect("v", vB, v, TolForward)
		})
	}
}

// testStickyError checks that a bad op is reported and poisons the backend.
func testStickyError(s *suite) {
	logits, _ := s.b.Alloc(6)
	logp, _ := s.b.Alloc(2)
	lse, _ := s.b.Alloc(2)
	s.b.LogProbForward(logp, lse, logits, []int32{1, 3}, 3) // 3 is outside V=3
	if s.b.Err() == nil {
		s.t.Fatal("LogProbForward with a target outside the vocabulary: Err() = nil, want an error")
	}
	if err := s.b.Download(make([]float32, 2), logp); err == nil {
		s.t.Error("Download after a failed op: err = nil, want the sticky error")
	}
}
