package cpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestRowVectorOps: dots and axpys over m strided rows give bitwise the
// results of m calls of dot and axpy, at lengths that exercise every tail
// of the kernels, on the vector and the portable primitives.
func TestRowVectorOps(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for _, vector := range []bool{haveFMA, false} {
		v := newVecOps[float32](vector)
		for _, n := range []int{1, 7, 8, 9, 31, 32, 33, 64, 70} {
			for _, m := range []int{0, 1, 5} {
				t.Run(fmt.Sprintf("vector=%v,n=%d,m=%d", vector, n, m), func(t *testing.T) {
					stride := n + 3
					q, k, alpha := rnd(r, n), rnd(r, max(m*stride, 1)), rnd(r, m)
					got, want := make([]float32, m), make([]float32, m)
					v.dots(q, k, stride, got)
					for j := range want {
						want[j] = v.dot(q, k[j*stride:][:n])
					}
					if !slices.Equal(got, want) {
						t.Fatalf("dots %v, dot calls %v", got, want)
					}
					y := rnd(r, n)
					y2 := slices.Clone(y)
					v.axpys(alpha, k, stride, y)
					for j, a := range alpha {
						v.axpy(a, k[j*stride:][:n], y2)
					}
					if !slices.Equal(y, y2) {
						t.Fatalf("axpys %v, axpy calls %v", y, y2)
					}
				})
			}
		}
	}
}
