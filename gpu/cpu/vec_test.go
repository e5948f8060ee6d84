package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRowVectorOps: dots and axpys over m strided rows give bitwise the
// results of m calls over one row each (a row's result does not depend on
// the call's other rows, and axpys adds the rows in order), and the
// float64 results within rounding, at lengths that exercise every tail of
// the kernels, on the vector and the portable primitives.
func TestRowVectorOps(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for _, vector := range []bool{haveFMA, false} {
		v := newVecOps[float32](vector)
		for _, n := range []int{1, 7, 8, 9, 31, 32, 33, 64, 70} {
			for _, m := range []int{0, 1, 5} {
				t.Run(fmt.Sprintf("vector=%v,n=%d,m=%d", vector, n, m), func(t *testing.T) {
					stride := n + 3
					q, k, alpha := rnd(r, n), rnd(r, max(m*stride, 1)), rnd(r, m)
					got := make([]float32, m)
					v.dots(q, k, stride, got)
					for j := range got {
						var one [1]float32
						v.dots(q, k[j*stride:][:n], 0, one[:])
						var ref float64
						for i := range q {
							ref += float64(q[i]) * float64(k[j*stride+i])
						}
						if one[0] != got[j] || math.Abs(float64(got[j])-ref) > 1e-5*float64(n) {
							t.Fatalf("dots[%d] %v, alone %v, float64 %v", j, got[j], one[0], ref)
						}
					}
					y := rnd(r, n)
					y2 := slices.Clone(y)
					v.axpys(alpha, k, stride, y)
					for j := range alpha {
						v.axpys(alpha[j:j+1], k[j*stride:][:n], 0, y2)
					}
					if !slices.Equal(y, y2) {
						t.Fatalf("axpys %v, one row at a time %v", y, y2)
					}
				})
			}
		}
	}
}

// TestVectorExp: expSub and swiglu of the vector kernels are the float64
// exp within a few float32 ulps over the whole range of the clamp, at
// lengths that exercise the tail; past the clamp they saturate at
// exp(-87.3) and exp(88), and a NaN stays NaN.
func TestVectorExp(t *testing.T) {
	if !haveFMA {
		t.Skip("no vector kernels in this build")
	}
	v := newVecOps[float32](true)
	r := rand.New(rand.NewPCG(3, 4))
	const ulps = 3 * 0x1p-23
	for _, n := range []int{1, 7, 8, 9, 16, 31, 100, 1001} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.Float64()*200 - 100)
		}
		x[0] = 0
		sub := float32(r.Float64()*4 - 2)
		y := make([]float32, n)
		v.expSub(x, sub, y)
		for i, xi := range x {
			d := float64(xi - sub)
			want := math.Exp(min(max(d, float64(float32(-87.3))), 88))
			if e := math.Abs(float64(y[i])-want) / want; e > ulps {
				t.Fatalf("n=%d: exp(%v-%v) = %v, float64 %v (relative error %.2g)", n, xi, sub, y[i], want, e)
			}
		}
		// In place, as the softmax calls it.
		in := slices.Clone(x)
		v.expSub(in, sub, in)
		if !slices.Equal(in, y) {
			t.Fatalf("n=%d: in place %v, out of place %v", n, in, y)
		}
		g, u, o := rnd(r, n), rnd(r, n), make([]float32, n)
		for i := range g {
			g[i] *= 40
		}
		v.swiglu(o, g, u)
		for i := range o {
			x := float64(g[i])
			want := x / (1 + math.Exp(-x)) * float64(u[i])
			if e := math.Abs(float64(o[i]) - want); e > 4*ulps*math.Abs(want)+1e-30 {
				t.Fatalf("n=%d: swiglu(%v, %v) = %v, float64 %v", n, g[i], u[i], o[i], want)
			}
		}
	}
	nan := []float32{float32(math.NaN()), 1, float32(math.Inf(1)), float32(math.Inf(-1))}
	v.expSub(nan, 0, nan)
	if !math.IsNaN(float64(nan[0])) || nan[1] != float32(math.E) && math.Abs(float64(nan[1])-math.E) > 1e-6 ||
		math.IsInf(float64(nan[2]), 0) || nan[3] < 0 || nan[3] > 1e-37 {
		t.Fatalf("exp of NaN, 1, +Inf, -Inf: %v", nan)
	}
}
