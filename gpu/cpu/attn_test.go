package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// perKeyBackward is AttentionBackward written the direct way, one key at
// a time (dp_j, dv_j, then ds_j, dq, dk_j per key, heads then rows in
// order), in float64: the reference order of the row calls.
func perKeyBackward(dq, dk, dv, da, do, q, k, v, a []float64, B, Tq, Tk, NH, NKV, HS int) {
	group := NH / NKV
	scale := 1 / sqrt(float64(HS))
	for b := range B {
		for kh := range NKV {
			for h := kh * group; h < (kh+1)*group; h++ {
				for i := range Tq {
					last := Tk - Tq + i
					row := a[((b*NH+h)*Tq+i)*Tk:][:Tk]
					drow := da[((b*NH+h)*Tq+i)*Tk:][:Tk]
					doi := do[((b*Tq+i)*NH+h)*HS:][:HS]
					for j := 0; j <= last; j++ {
						off := ((b*Tk+j)*NKV + kh) * HS
						drow[j] = goDot(doi, v[off:][:HS])
						goAxpy(row[j], doi, dv[off:][:HS])
					}
					clear(drow[last+1:])
					var dot float64
					for j := 0; j <= last; j++ {
						dot += row[j] * drow[j]
					}
					qi := q[((b*Tq+i)*NH+h)*HS:][:HS]
					dqi := dq[((b*Tq+i)*NH+h)*HS:][:HS]
					for j := 0; j <= last; j++ {
						ds := row[j] * (drow[j] - dot) * scale
						drow[j] = ds
						off := ((b*Tk+j)*NKV + kh) * HS
						goAxpy(ds, k[off:][:HS], dqi)
						goAxpy(ds, qi, dk[off:][:HS])
					}
				}
			}
		}
	}
}

// TestAttentionBackwardOrder: the float64 backend's AttentionBackward
// (row calls: one dots per query row, one axpys per key over a gathered
// column) is bitwise the per-key loop, over random shapes with Tq <= Tk,
// grouped heads and odd head sizes, on 1 and 3 workers.
func TestAttentionBackwardOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for trial := range 30 {
		NKV := 1 + r.IntN(3)
		NH := NKV * (1 + r.IntN(3))
		B, Tk, HS := 1+r.IntN(2), 1+r.IntN(40), 1+r.IntN(20)
		Tq := 1 + r.IntN(Tk)
		t.Run(fmt.Sprintf("%d:B=%d,Tq=%d,Tk=%d,NH=%d,NKV=%d,HS=%d", trial, B, Tq, Tk, NH, NKV, HS), func(t *testing.T) {
			be := newBackend[float64]("cpu64", 1+2*(trial%2))
			defer be.Close()
			mk := func(n int) []float64 {
				x := make([]float64, n)
				for i := range x {
					x[i] = r.NormFloat64()
				}
				return x
			}
			q, k, v, do := mk(B*Tq*NH*HS), mk(B*Tk*NKV*HS), mk(B*Tk*NKV*HS), mk(B*Tq*NH*HS)
			out, att := make([]float64, B*Tq*NH*HS), make([]float64, B*NH*Tq*Tk)
			w := func(x []float64) *buf[float64] { return &buf[float64]{d: x} }
			be.AttentionForward(w(out), w(att), w(q), w(k), w(v), B, Tq, Tk, NH, NKV, HS)
			dq0, dk0, dv0 := mk(B*Tq*NH*HS), mk(B*Tk*NKV*HS), mk(B*Tk*NKV*HS) // accumulated into
			dq, dk, dv, da := slices.Clone(dq0), slices.Clone(dk0), slices.Clone(dv0), make([]float64, B*NH*Tq*Tk)
			be.AttentionBackward(w(dq), w(dk), w(dv), w(da), w(do), w(q), w(k), w(v), w(att), B, Tq, Tk, NH, NKV, HS)
			if err := be.Err(); err != nil {
				t.Fatal(err)
			}
			rq, rk, rv, ra := slices.Clone(dq0), slices.Clone(dk0), slices.Clone(dv0), make([]float64, B*NH*Tq*Tk)
			perKeyBackward(rq, rk, rv, ra, do, q, k, v, att, B, Tq, Tk, NH, NKV, HS)
			for _, c := range []struct {
				name      string
				got, want []float64
			}{{"dq", dq, rq}, {"dk", dk, rk}, {"dv", dv, rv}, {"datt", da, ra}} {
				if !slices.Equal(c.got, c.want) {
					t.Fatalf("%s differs from the per-key loop", c.name)
				}
			}
		})
	}
}

// TestFlashMatchesDense: AttentionForwardLSE and AttentionBackwardLSE give
// bitwise the outputs and gradients of AttentionForward and
// AttentionBackward (the probabilities recomputed by the forward's own
// kernel), and lse is the log-sum-exp of the scaled scores, over random
// causal shapes with grouped heads, odd head sizes and rows longer than
// the vector kernels' blocks, in float32 on 1 and 2 workers.
func TestFlashMatchesDense(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	for trial := range 20 {
		NKV := 1 + r.IntN(3)
		NH := NKV * (1 + r.IntN(3))
		B, T, HS := 1+r.IntN(2), 1+r.IntN(70), 1+r.IntN(40)
		t.Run(fmt.Sprintf("%d:B=%d,T=%d,NH=%d,NKV=%d,HS=%d", trial, B, T, NH, NKV, HS), func(t *testing.T) {
			be := newBackend[float32]("cpu", 1+trial%2)
			defer be.Close()
			mk := func(n int) []float32 {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				return x
			}
			w := func(x []float32) *buf[float32] { return &buf[float32]{d: x} }
			q, k, v, do := mk(B*T*NH*HS), mk(B*T*NKV*HS), mk(B*T*NKV*HS), mk(B*T*NH*HS)
			out, att := make([]float32, B*T*NH*HS), make([]float32, B*NH*T*T)
			be.AttentionForward(w(out), w(att), w(q), w(k), w(v), B, T, T, NH, NKV, HS)
			fout, lse := make([]float32, B*T*NH*HS), make([]float32, B*NH*T)
			be.AttentionForwardLSE(w(fout), w(lse), w(q), w(k), w(v), B, T, NH, NKV, HS)
			dq0, dk0, dv0 := mk(B*T*NH*HS), mk(B*T*NKV*HS), mk(B*T*NKV*HS) // accumulated into
			dq, dk, dv := slices.Clone(dq0), slices.Clone(dk0), slices.Clone(dv0)
			be.AttentionBackward(w(dq), w(dk), w(dv), w(make([]float32, B*NH*T*T)), w(do), w(q), w(k), w(v), w(att), B, T, T, NH, NKV, HS)
			fq, fk, fv := slices.Clone(dq0), slices.Clone(dk0), slices.Clone(dv0)
			be.AttentionBackwardLSE(w(fq), w(fk), w(fv), w(make([]float32, B*NH*T)), w(do), w(fout), w(q), w(k), w(v), w(lse), B, T, NH, NKV, HS)
			if err := be.Err(); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct {
				name      string
				got, want []float32
			}{{"out", fout, out}, {"dq", fq, dq}, {"dk", fk, dk}, {"dv", fv, dv}} {
				if !slices.Equal(c.got, c.want) {
					t.Fatalf("%s with flash attention differs from the dense path", c.name)
				}
			}
			// lse against the scores in float64.
			scale := 1 / math.Sqrt(float64(HS))
			for b := range B {
				for h := range NH {
					kh := h / (NH / NKV)
					for i := range T {
						s := make([]float64, i+1)
						mx := math.Inf(-1)
						for j := range s {
							for c := range HS {
								s[j] += float64(q[((b*T+i)*NH+h)*HS+c]) * float64(k[((b*T+j)*NKV+kh)*HS+c])
							}
							s[j] *= scale
							mx = math.Max(mx, s[j])
						}
						var sum float64
						for _, x := range s {
							sum += math.Exp(x - mx)
						}
						want, got := mx+math.Log(sum), float64(lse[(b*NH+h)*T+i])
						if math.Abs(got-want) > 1e-4*math.Max(1, math.Abs(want)) {
							t.Fatalf("lse of b=%d h=%d row %d: %v, want %v", b, h, i, got, want)
						}
					}
				}
			}
		})
	}
}
