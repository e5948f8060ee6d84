package gputest

import (
	"fmt"
	"testing"

	"swerl/gpu"
)

// testRagged checks the gpu.RaggedAttention ops against the float64
// references of the per-sequence ops they replace: rows at their own
// positions and over their own cache rows, with key counts that cross the
// CUDA kernel's 256-key chunks and head sizes that do and do not divide
// its block.
func testRagged(s *suite, ra gpu.RaggedAttention) {
	for _, sh := range []struct {
		NH, NKV, HS int
		cnt         []int
	}{
		{1, 1, 2, []int{1}},
		{4, 2, 6, []int{1, 3, 2, 7}},
		{2, 1, 64, []int{5, 300, 1, 257}},
		{14, 2, 64, []int{64, 65, 1}},
		{4, 4, 80, []int{600, 2}},
		{2, 2, 128, []int{256, 513}},
	} {
		s.t.Run(fmt.Sprintf("NH=%d,NKV=%d,HS=%d,rows=%d", sh.NH, sh.NKV, sh.HS, len(sh.cnt)), func(t *testing.T) {
			s := &suite{t: t, b: s.b, r: s.r}
			NH, NKV, HS := sh.NH, sh.NKV, sh.HS
			N, KVC, half := len(sh.cnt), NKV*HS, HS/2

			// RoPE: row n at position pos[n] of a 700-position table.
			P := 700
			cos, sin := s.rand(P*half), s.rand(P*half)
			cosB, sinB := s.up(cos), s.up(sin)
			pos := make([]int32, N)
			x := s.rand(N * NH * HS)
			want := make([]float64, 0, len(x))
			for n := range pos {
				pos[n] = int32(s.r.IntN(P))
				row := x[n*NH*HS : (n+1)*NH*HS]
				want = append(want, refRoPE(row, cos, sin, 1, 1, NH, HS, int(pos[n]))...)
			}
			xB := s.up(x)
			ra.RoPERows(xB, cosB, sinB, pos, NH, HS)
			s.expect("rope rows", xB, want, TolForward)

			// Scatter: each row to its own row of a larger buffer.
			rows := 0
			for _, c := range sh.cnt {
				rows += c + 3
			}
			dst0 := s.rand(rows * KVC)
			src := s.rand(N * KVC)
			idx := make([]int32, N)
			wantDst := append([]float64(nil), dst0...)
			perm := s.r.Perm(rows)
			for n := range idx {
				idx[n] = int32(perm[n])
				copy(wantDst[perm[n]*KVC:(perm[n]+1)*KVC], src[n*KVC:(n+1)*KVC])
			}
			dst := s.up(dst0)
			ra.ScatterRows(dst, s.up(src), idx, KVC)
			s.expect("scatter rows", dst, wantDst, 0)

			// Attention: row n over cnt[n] cache rows starting at start[n].
			k, v := s.rand(rows*KVC), s.rand(rows*KVC)
			q := s.rand(N * NH * HS)
			start, cnt := make([]int32, N), make([]int32, N)
			var wantOut []float64
			for n, c := range sh.cnt {
				start[n] = int32(s.r.IntN(rows - c + 1))
				cnt[n] = int32(c)
				kn := k[int(start[n])*KVC : (int(start[n])+c)*KVC]
				vn := v[int(start[n])*KVC : (int(start[n])+c)*KVC]
				o, _ := refAttention(q[n*NH*HS:(n+1)*NH*HS], kn, vn, 1, 1, c, NH, NKV, HS)
				wantOut = append(wantOut, o...)
			}
			out := s.up(s.rand(N * NH * HS)) // garbage in: must be overwritten
			ra.AttentionRows(out, s.up(q), s.up(k), s.up(v), start, cnt, NH, NKV, HS)
			s.expect("attention rows", out, wantOut, TolForward)
		})
	}
}
