package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestMatmulPacked: the product against a packed weight is the float64
// product within rounding, and each output row is bitwise the same
// whether the row is multiplied alone or at any place in a larger batch,
// on the vector and the portable kernels and for several worker counts.
func TestMatmulPacked(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	// The portable kernel, the 6-row AVX2 and the 8-row AVX-512 kernel.
	for _, kern := range []struct{ vector, avx512 bool }{{false, false}, {true, false}, {true, true}} {
		vector := kern.vector
		if vector && !haveFMA || kern.avx512 && !haveAVX512 {
			continue
		}
		for _, workers := range []int{1, 3} {
			be := NewWorkers(workers)
			be.vector = vector && be.vector
			be.avx512 = kern.avx512
			for _, s := range []struct{ N, C, OC int }{
				{1, 300, 40}, {5, 17, 33}, {6, 16, 16}, {13, 513, 100}, {100, 96, 50}, {7, 64, 4096}, {32, 512, 48}, {12, 40, 16},
			} {
				t.Run(fmt.Sprintf("vector=%v,avx512=%v,workers=%d,N=%d,C=%d,OC=%d", vector, kern.avx512, workers, s.N, s.C, s.OC), func(t *testing.T) {
					inp, w, bias := rnd(r, s.N*s.C), rnd(r, s.OC*s.C), rnd(r, s.OC)
					wb := &buf[float32]{d: w}
					wp, _ := be.Alloc(be.PackedLen(s.OC, s.C))
					be.PackWeight(wp, wb, s.OC, s.C)
					out := &buf[float32]{d: make([]float32, s.N*s.OC)}
					be.MatmulPacked(out, &buf[float32]{d: inp}, wp, &buf[float32]{d: bias}, s.N, s.C, s.OC)
					if err := be.Err(); err != nil {
						t.Fatal(err)
					}
					for n := range s.N {
						for o := range s.OC {
							ref := float64(bias[o])
							for c := range s.C {
								ref += float64(inp[n*s.C+c]) * float64(w[o*s.C+c])
							}
							tol := 4e-6 * float64(s.C+1) * math.Sqrt(float64(s.C)+1)
							if d := math.Abs(float64(out.d[n*s.OC+o]) - ref); d > tol {
								t.Fatalf("out[%d,%d] = %v, float64 %v", n, o, out.d[n*s.OC+o], ref)
							}
						}
					}
					// Every row alone, and the rows in reverse order.
					for n := range s.N {
						one := &buf[float32]{d: make([]float32, s.OC)}
						be.MatmulPacked(one, &buf[float32]{d: inp[n*s.C : (n+1)*s.C]}, wp, &buf[float32]{d: bias}, 1, s.C, s.OC)
						if !slices.Equal(one.d, out.d[n*s.OC:(n+1)*s.OC]) {
							t.Fatalf("row %d alone differs from row %d of %d", n, n, s.N)
						}
					}
					rev := make([]float32, 0, len(inp))
					for n := s.N - 1; n >= 0; n-- {
						rev = append(rev, inp[n*s.C:(n+1)*s.C]...)
					}
					outRev := &buf[float32]{d: make([]float32, s.N*s.OC)}
					be.MatmulPacked(outRev, &buf[float32]{d: rev}, wp, &buf[float32]{d: bias}, s.N, s.C, s.OC)
					for n := range s.N {
						m := s.N - 1 - n
						if !slices.Equal(outRev.d[m*s.OC:(m+1)*s.OC], out.d[n*s.OC:(n+1)*s.OC]) {
							t.Fatalf("row %d moved to %d changed", n, m)
						}
					}
				})
			}
			be.Close()
		}
	}
}

// TestMatmulPackedErrors: short buffers are reported, not a panic.
func TestMatmulPackedErrors(t *testing.T) {
	be := New()
	defer be.Close()
	w, _ := be.Alloc(10 * 8)
	wp, _ := be.Alloc(be.PackedLen(10, 8) - 1)
	be.PackWeight(wp, w, 10, 8)
	if be.Err() == nil {
		t.Fatal("packing into a short buffer: no error")
	}
	be2 := New()
	defer be2.Close()
	wp, _ = be2.Alloc(be2.PackedLen(10, 8))
	x, _ := be2.Alloc(3*8 - 1)
	out, _ := be2.Alloc(3 * 10)
	be2.MatmulPacked(out, x, wp, nil, 3, 8, 10)
	if be2.Err() == nil {
		t.Fatal("a short input: no error")
	}
}

// BenchmarkMatmulPacked compares the decode shapes of the ~20M benchmark
// model (512 → 1408) against a packed weight and through MatmulForward.
func BenchmarkMatmulPacked(b *testing.B) {
	const C, OC = 512, 1408
	for _, N := range []int{1, 32} {
		for _, packed := range []bool{true, false} {
			b.Run(fmt.Sprintf("N=%d,packed=%v", N, packed), func(b *testing.B) {
				be := New()
				defer be.Close()
				r := rand.New(rand.NewPCG(1, 2))
				inp, w, out := randBuf(be, r, N*C), randBuf(be, r, OC*C), randBuf(be, r, N*OC)
				wp, _ := be.Alloc(be.PackedLen(OC, C))
				be.PackWeight(wp, w, OC, C)
				for b.Loop() {
					if packed {
						be.MatmulPacked(out, inp, wp, nil, N, C, OC)
					} else {
						be.MatmulForward(out, inp, w, nil, N, C, OC)
					}
				}
				b.ReportMetric(2*float64(N*C*OC)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// TestPackedKernelsAgree: the 6-row AVX2 and the 8-row AVX-512 kernels
// (and its 4-row tail) run the same chain of multiply-adds per element,
// so MatmulPacked gives bitwise equal products with either, and equal to
// MatmulForward's sgemm, over random shapes.
func TestPackedKernelsAgree(t *testing.T) {
	if !haveAVX512 {
		t.Skip("no AVX-512 kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(7, 8))
	be := NewWorkers(2)
	defer be.Close()
	for range 40 {
		N, C, OC := 4+r.IntN(40), 1+r.IntN(700), 1+r.IntN(100)
		inp, w, bias := rnd(r, N*C), rnd(r, OC*C), rnd(r, OC)
		wb := &buf[float32]{d: w}
		wp, _ := be.Alloc(be.PackedLen(OC, C))
		be.PackWeight(wp, wb, OC, C)
		var outs [3][]float32
		for i, z := range []bool{false, true} {
			be.avx512 = z
			out := &buf[float32]{d: make([]float32, N*OC)}
			be.MatmulPacked(out, &buf[float32]{d: inp}, wp, &buf[float32]{d: bias}, N, C, OC)
			outs[i] = out.d
		}
		out := &buf[float32]{d: make([]float32, N*OC)}
		be.MatmulForward(out, &buf[float32]{d: inp}, wb, &buf[float32]{d: bias}, N, C, OC)
		outs[2] = out.d
		if err := be.Err(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(outs[0], outs[1]) || !slices.Equal(outs[0], outs[2]) {
			t.Fatalf("N=%d C=%d OC=%d: AVX2, AVX-512 and sgemm products differ", N, C, OC)
		}
	}
}
