package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// peakAround measures the FMA peak of workers just before and just after
// the timed loop and keeps the higher: the machine's cores are shared, and
// the higher ceiling gives the conservative fraction.
func peakAround(b *testing.B, workers int, loop func()) float64 {
	b.StopTimer()
	p := PeakFLOPS(workers, 150*time.Millisecond)
	b.StartTimer()
	loop()
	b.StopTimer()
	return max(p, PeakFLOPS(workers, 150*time.Millisecond))
}

// BenchmarkMatmul reports GFLOP/s of MatmulForward and the fraction of the
// pure-Go multiply-add peak (PeakFLOPS) measured in the same run with the
// same worker count.
func BenchmarkMatmul(b *testing.B) {
	for _, s := range []struct{ N, C, OC int }{{256, 512, 512}, {512, 512, 1536}, {64, 768, 768}} {
		b.Run(fmt.Sprintf("fwd/N=%d,C=%d,OC=%d", s.N, s.C, s.OC), func(b *testing.B) {
			be := New()
			defer be.Close()
			r := rand.New(rand.NewPCG(1, 2))
			inp, w, out := randBuf(be, r, s.N*s.C), randBuf(be, r, s.OC*s.C), randBuf(be, r, s.N*s.OC)
			b.ReportAllocs()
			pk := peakAround(b, be.Workers(), func() {
				for b.Loop() {
					be.MatmulForward(out, inp, w, nil, s.N, s.C, s.OC)
				}
			})
			reportOfPeak(b, 2*float64(s.N*s.C*s.OC), pk)
		})
		b.Run(fmt.Sprintf("bwd/N=%d,C=%d,OC=%d", s.N, s.C, s.OC), func(b *testing.B) {
			be := New()
			defer be.Close()
			r := rand.New(rand.NewPCG(1, 2))
			inp, w, dout := randBuf(be, r, s.N*s.C), randBuf(be, r, s.OC*s.C), randBuf(be, r, s.N*s.OC)
			dinp, dw := randBuf(be, r, s.N*s.C), randBuf(be, r, s.OC*s.C)
			b.ReportAllocs()
			pk := peakAround(b, be.Workers(), func() {
				for b.Loop() {
					be.MatmulBackward(dinp, dw, nil, dout, inp, w, s.N, s.C, s.OC)
				}
			})
			reportOfPeak(b, 4*float64(s.N*s.C*s.OC), pk)
		})
	}
}

// reportOfPeak reports GFLOP/s of flop flops an iteration, the peak pk
// (flop/s) and the fraction of it.
func reportOfPeak(b *testing.B, flop, pk float64) {
	flops := flop * float64(b.N) / b.Elapsed().Seconds()
	b.ReportMetric(flops/1e9, "GFLOP/s")
	b.ReportMetric(pk/1e9, "peakGFLOP/s")
	b.ReportMetric(flops/pk, "of_peak")
}

func randBuf(be *Backend[float32], r *rand.Rand, n int) *buf[float32] {
	x, _ := be.Alloc(n)
	d := be.Data(x)
	for i := range d {
		d[i] = float32(r.NormFloat64())
	}
	return x.(*buf[float32])
}

// BenchmarkMatmulPackedOneWorker reports GFLOP/s of MatmulPacked on one
// worker, with the 6-row AVX2 and (where the CPU has it) the 8-row
// AVX-512 kernel, at the row counts of batched decoding (32 sequences a
// step, 130 rows when prompts are admitted, 1 alone) against the ~20M
// benchmark model's weights, and the fraction of the one-worker FMA peak
// measured around it.
func BenchmarkMatmulPackedOneWorker(b *testing.B) {
	for _, s := range []struct{ N, C, OC int }{{32, 512, 1408}, {130, 512, 1408}, {32, 1408, 512}, {32, 512, 4096}, {1, 512, 1408}} {
		for _, z := range []bool{false, true} {
			if z && !haveAVX512 {
				continue
			}
			kern := map[bool]string{false: "6x16", true: "8x16z"}[z]
			b.Run(fmt.Sprintf("N=%d,C=%d,OC=%d,kernel=%s", s.N, s.C, s.OC, kern), func(b *testing.B) {
				be := NewWorkers(1)
				defer be.Close()
				be.avx512 = z
				r := rand.New(rand.NewPCG(1, 2))
				inp, w, out := randBuf(be, r, s.N*s.C), randBuf(be, r, s.OC*s.C), randBuf(be, r, s.N*s.OC)
				wp, _ := be.Alloc(be.PackedLen(s.OC, s.C))
				be.PackWeight(wp, w, s.OC, s.C)
				b.ReportAllocs()
				pk := peakAround(b, 1, func() {
					for b.Loop() {
						be.MatmulPacked(out, inp, wp, nil, s.N, s.C, s.OC)
					}
				})
				reportOfPeak(b, 2*float64(s.N*s.C*s.OC), pk)
			})
		}
	}
}
