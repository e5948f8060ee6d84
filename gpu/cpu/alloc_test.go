package cpu

import (
	"math/rand/v2"
	"testing"

	"swerl/gpu"
)

// TestSteadyStateAllocs: once its workspace has grown, every op of a
// training step runs without allocating.
func TestSteadyStateAllocs(t *testing.T) {
	be := NewWorkers(3)
	defer be.Close()
	r := rand.New(rand.NewPCG(1, 1))
	const B, T, NH, NKV, HS, C, OC, V = 2, 9, 4, 2, 8, 32, 40, 50
	N := B * T
	mk := func(n int) *buf[float32] { return &buf[float32]{d: rnd(r, n)} }
	x, w, bias, out, dout := mk(N*C), mk(OC*C), mk(OC), mk(N*OC), mk(N*OC)
	dx, dw, db := mk(N*C), mk(OC*C), mk(OC)
	rstd, nw := mk(N), mk(C)
	q, k, v, att, datt, ao := mk(N*NH*HS), mk(N*NKV*HS), mk(N*NKV*HS), mk(B*NH*T*T), mk(B*NH*T*T), mk(N*NH*HS)
	dq, dk, dv := mk(N*NH*HS), mk(N*NKV*HS), mk(N*NKV*HS)
	cos, sin := mk(T*HS/2), mk(T*HS/2)
	logits, dlogits, logp, lse, dlogp := mk(N*V), mk(N*V), mk(N), mk(N), mk(N)
	targets := make([]int32, N)
	for i := range targets {
		targets[i] = int32(r.IntN(V))
	}
	m, vv := mk(OC*C), mk(OC*C)
	for i := range vv.d {
		vv.d[i] *= vv.d[i]
	}
	step := func() {
		be.MatmulForward(out, x, w, bias, N, C, OC)
		be.MatmulForward(out, x, w, nil, 1, C, OC) // decode shape
		be.MatmulBackward(dx, dw, db, dout, x, w, N, C, OC)
		be.RMSNormForward(dx, rstd, x, nw, N, C, 1e-5)
		be.RMSNormBackward(dx, nw, x, x, nw, rstd, N, C)
		be.RoPEForward(q, cos, sin, B, T, NH, HS, 0)
		be.RoPEBackward(q, cos, sin, B, T, NH, HS, 0)
		be.AttentionForward(ao, att, q, k, v, B, T, T, NH, NKV, HS)
		be.AttentionBackward(dq, dk, dv, datt, ao, q, k, v, att, B, T, T, NH, NKV, HS)
		be.SwiGLUForward(out, x, x, N*C)
		be.SwiGLUBackward(dx, dx, x, x, x, N*C)
		be.LogProbForward(logp, lse, logits, targets, V)
		be.LogProbBackward(dlogits, dlogp, logits, lse, targets, V)
		be.AdamW(w, dw, m, vv, OC*C, gpu.AdamWParams{LR: 1e-3, Beta1: 0.9, Beta2: 0.95, Eps: 1e-8, GradScale: 1, Step: 1})
		be.Zero(dw)
		if err := be.Err(); err != nil {
			t.Fatal(err)
		}
	}
	step()
	if a := testing.AllocsPerRun(5, step); a != 0 {
		t.Errorf("%v allocations per training step of ops, want 0", a)
	}
}
