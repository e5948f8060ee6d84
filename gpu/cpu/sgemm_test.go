package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestVectorMatchesPortable runs the AVX2+FMA matmul and the portable Go
// kernel on the same operands, at shapes that cross every block and tile
// edge, and compares both against a float64 sum.
func TestVectorMatchesPortable(t *testing.T) {
	if !haveFMA {
		t.Skip("no AVX2+FMA on this machine or purego build: only the portable kernel exists")
	}
	vec, port := New(), New()
	defer vec.Close()
	defer port.Close()
	port.vector = false
	r := rand.New(rand.NewPCG(3, 4))
	for _, s := range []struct{ N, C, OC int }{
		{1, 300, 40}, {3, 17, 33}, {6, 16, 16}, {7, 257, 17}, {13, 513, 4100}, {100, 96, 50}, {257, 31, 97},
	} {
		t.Run(fmt.Sprintf("N=%d,C=%d,OC=%d", s.N, s.C, s.OC), func(t *testing.T) {
			inp, w, bias, dout := rnd(r, s.N*s.C), rnd(r, s.OC*s.C), rnd(r, s.OC), rnd(r, s.N*s.OC)
			type res struct{ out, dinp, dw []float32 }
			run := func(be *Backend[float32]) res {
				up := func(x []float32) *buf[float32] { return &buf[float32]{d: append([]float32(nil), x...)} }
				out, di, dw := up(make([]float32, s.N*s.OC)), up(dout[:0]), up(nil)
				di.d, dw.d = make([]float32, s.N*s.C), make([]float32, s.OC*s.C)
				for i := range di.d {
					di.d[i] = 1 // backward accumulates
				}
				be.MatmulForward(out, up(inp), up(w), up(bias), s.N, s.C, s.OC)
				be.MatmulBackward(di, dw, nil, up(dout), up(inp), up(w), s.N, s.C, s.OC)
				if err := be.Err(); err != nil {
					t.Fatal(err)
				}
				return res{out.d, di.d, dw.d}
			}
			a, b := run(vec), run(port)
			// float64 references
			for n := range s.N {
				for o := range s.OC {
					ref := float64(bias[o])
					for c := range s.C {
						ref += float64(inp[n*s.C+c]) * float64(w[o*s.C+c])
					}
					cmp(t, "out", n*s.OC+o, ref, a.out, b.out, s.C)
				}
				for c := range s.C {
					ref := 1.0
					for o := range s.OC {
						ref += float64(dout[n*s.OC+o]) * float64(w[o*s.C+c])
					}
					cmp(t, "dinp", n*s.C+c, ref, a.dinp, b.dinp, s.OC)
				}
			}
			for o := range s.OC {
				for c := range s.C {
					var ref float64
					for n := range s.N {
						ref += float64(dout[n*s.OC+o]) * float64(inp[n*s.C+c])
					}
					cmp(t, "dw", o*s.C+c, ref, a.dw, b.dw, s.N)
				}
			}
		})
	}
}

func cmp(t *testing.T, name string, i int, ref float64, vec, port []float32, k int) {
	t.Helper()
	tol := 1e-6 * float64(k+1) * math.Sqrt(float64(k)+1) * 4
	if d := math.Abs(float64(vec[i]) - ref); d > tol {
		t.Fatalf("%s[%d]: vector %v, float64 %v", name, i, vec[i], ref)
	}
	if d := math.Abs(float64(vec[i]) - float64(port[i])); d > tol {
		t.Fatalf("%s[%d]: vector %v, portable %v", name, i, vec[i], port[i])
	}
}

func rnd(r *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

// TestVectorDeterministic: the vector matmul gives bit-identical results
// for any worker count.
func TestVectorDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	const N, C, OC = 67, 300, 131
	inp, w := rnd(r, N*C), rnd(r, OC*C)
	var first []float32
	for _, workers := range []int{1, 2, 3, 7} {
		be := NewWorkers(workers)
		out := &buf[float32]{d: make([]float32, N*OC)}
		be.MatmulForward(out, &buf[float32]{d: inp}, &buf[float32]{d: w}, nil, N, C, OC)
		be.Close()
		if first == nil {
			first = out.d
			continue
		}
		for i := range first {
			if first[i] != out.d[i] {
				t.Fatalf("workers=%d: out[%d] = %v, with 1 worker %v", workers, i, out.d[i], first[i])
			}
		}
	}
}
