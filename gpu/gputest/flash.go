package gputest

import (
	"fmt"
	"math"
	"testing"

	"swerl/gpu"
)

// refLSE is the log-sum-exp of each causal row's scaled scores, [B,NH,T].
func refLSE(q, k []float64, B, T, NH, NKV, HS int) []float64 {
	lse := make([]float64, B*NH*T)
	for b := range B {
		for h := range NH {
			kh := h / (NH / NKV)
			for i := range T {
				mx, s := math.Inf(-1), make([]float64, i+1)
				for j := range s {
					for c := range HS {
						s[j] += q[((b*T+i)*NH+h)*HS+c] * k[((b*T+j)*NKV+kh)*HS+c]
					}
					s[j] /= math.Sqrt(float64(HS))
					mx = math.Max(mx, s[j])
				}
				var sum float64
				for _, v := range s {
					sum += math.Exp(v - mx)
				}
				lse[(b*NH+h)*T+i] = mx + math.Log(sum)
			}
		}
	}
	return lse
}

type flashShape struct{ B, T, NH, NKV, HS int }

func (sh flashShape) String() string {
	return fmt.Sprintf("B=%d,T=%d,NH=%d,NKV=%d,HS=%d", sh.B, sh.T, sh.NH, sh.NKV, sh.HS)
}

// testFlash checks gpu.FlashAttention against the float64 reference and
// finite differences at small shapes (a partial last tile, GQA), and
// against the backend's own AttentionForward/AttentionBackward at shapes
// of real models.
func testFlash(s *suite, fa gpu.FlashAttention) {
	for _, sh := range []flashShape{{1, 5, 2, 1, 32}, {1, 35, 2, 1, 32}, {1, 9, 4, 2, 64}} {
		if !fa.FlashSupported(sh.NH, sh.NKV, sh.HS) {
			continue
		}
		s.t.Run(sh.String(), func(t *testing.T) {
			s := &suite{t: t, b: s.b, r: s.r}
			B, T, NH, NKV, HS := sh.B, sh.T, sh.NH, sh.NKV, sh.HS
			q, k, v := s.rand(B*T*NH*HS), s.rand(B*T*NKV*HS), s.rand(B*T*NKV*HS)
			qB, kB, vB := s.up(q), s.up(k), s.up(v)
			out := s.up(s.rand(B * T * NH * HS)) // garbage in: must be overwritten
			lse := s.up(s.rand(B * NH * T))
			fa.AttentionForwardLSE(out, lse, qB, kB, vB, B, T, NH, NKV, HS)
			wantOut, _ := refAttention(q, k, v, B, T, T, NH, NKV, HS)
			s.expect("out", out, wantOut, TolForward)
			s.expect("lse", lse, refLSE(q, k, B, T, NH, NKV, HS), TolForward)

			s.expectAttnGrads(q, k, v, B, T, T, NH, NKV, HS, func(dq, dk, dv, dout gpu.Buf) {
				fa.AttentionBackwardLSE(dq, dk, dv, s.up(s.rand(B*NH*T)), dout, out, qB, kB, vB, lse, B, T, NH, NKV, HS)
			})
		})
	}
	for _, sh := range []flashShape{{1, 300, 14, 2, 64}, {1, 100, 4, 2, 128}, {1, 64, 3, 1, 96}} {
		if !fa.FlashSupported(sh.NH, sh.NKV, sh.HS) {
			continue
		}
		s.t.Run("vs-backend/"+sh.String(), func(t *testing.T) {
			s := &suite{t: t, b: s.b, r: s.r}
			B, T, NH, NKV, HS := sh.B, sh.T, sh.NH, sh.NKV, sh.HS
			nq, nkv := B*T*NH*HS, B*T*NKV*HS
			qB, kB, vB, dout := s.up(s.rand(nq)), s.up(s.rand(nkv)), s.up(s.rand(nkv)), s.up(s.rand(nq))
			alloc := func(n int) gpu.Buf {
				b, err := s.b.Alloc(n)
				if err != nil {
					s.t.Fatal(err)
				}
				return b
			}
			out, att, datt := alloc(nq), alloc(B*NH*T*T), alloc(B*NH*T*T)
			s.b.AttentionForward(out, att, qB, kB, vB, B, T, T, NH, NKV, HS)
			dq, dk, dv := alloc(nq), alloc(nkv), alloc(nkv)
			s.b.AttentionBackward(dq, dk, dv, datt, dout, qB, kB, vB, att, B, T, T, NH, NKV, HS)
			want := func(b gpu.Buf, n int) []float64 {
				x := s.down(b, n)
				y := make([]float64, n)
				for i, v := range x {
					y[i] = float64(v)
				}
				return y
			}
			wOut, wdq, wdk, wdv := want(out, nq), want(dq, nq), want(dk, nkv), want(dv, nkv)
			fout, lse, delta := alloc(nq), alloc(B*NH*T), alloc(B*NH*T)
			fa.AttentionForwardLSE(fout, lse, qB, kB, vB, B, T, NH, NKV, HS)
			s.expect("out", fout, wOut, TolForward)
			fdq, fdk, fdv := alloc(nq), alloc(nkv), alloc(nkv)
			fa.AttentionBackwardLSE(fdq, fdk, fdv, delta, dout, fout, qB, kB, vB, lse, B, T, NH, NKV, HS)
			s.expect("dq", fdq, wdq, TolBackward)
			s.expect("dk", fdk, wdk, TolBackward)
			s.expect("dv", fdv, wdv, TolBackward)
			// Only dv: dk goes to the backend's scratch, dv is the same.
			odv := alloc(nkv)
			fa.AttentionBackwardLSE(nil, nil, odv, delta, dout, fout, qB, kB, vB, lse, B, T, NH, NKV, HS)
			s.expect("dv alone", odv, wdv, TolBackward)
		})
	}
}
