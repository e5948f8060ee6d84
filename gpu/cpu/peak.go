package cpu

import (
	"sync"
	"time"
)

// PeakFLOPS measures the machine's float32 multiply-add peak with workers
// goroutines running for about d, all at once, in flop/s. Where the AVX2+FMA
// kernels run (VectorKernels), each worker runs 12 independent 8-wide
// VFMADD231PS chains (16 flops per instruction), the hardware's ymm FMA
// peak; otherwise it runs 16 scalar chains c = c*a + b of pure Go, the
// ceiling of the portable kernel. Benchmarks report matmul throughput as a
// fraction of it.
func PeakFLOPS(workers int, d time.Duration) float64 {
	if haveFMA {
		return measure(workers, d, func() float64 { fmaLoop(1 << 14); return 1 << 14 * 12 * 16 })
	}
	return measure(workers, d, func() float64 { peakLoop(1 << 16); return 1 << 16 * 16 * 2 })
}

// VectorKernels reports whether float32 matmuls use the AVX2+FMA assembly
// kernels (amd64 with AVX2 and FMA, not built with the purego tag).
func VectorKernels() bool { return haveFMA }

func measure(workers int, d time.Duration, loop func() float64) float64 {
	workers = max(workers, 1)
	var wg sync.WaitGroup
	flops := make([]float64, workers)
	start := time.Now()
	for w := range workers {
		wg.Go(func() {
			var n float64
			for time.Since(start) < d {
				n += loop()
			}
			flops[w] = n
		})
	}
	wg.Wait()
	el := time.Since(start).Seconds()
	var total float64
	for _, f := range flops {
		total += f
	}
	return total / el
}

var peakSink float32

func peakLoop(n int) {
	const a, b = 0.9999999, 1e-7
	c0, c1, c2, c3, c4, c5, c6, c7 := float32(1), float32(2), float32(3), float32(4), float32(5), float32(6), float32(7), float32(8)
	c8, c9, c10, c11, c12, c13, c14, c15 := float32(1), float32(2), float32(3), float32(4), float32(5), float32(6), float32(7), float32(8)
	for range n {
		c0 = c0*a + b
		c1 = c1*a + b
		c2 = c2*a + b
		c3 = c3*a + b
		c4 = c4*a + b
		c5 = c5*a + b
		c6 = c6*a + b
		c7 = c7*a + b
		c8 = c8*a + b
		c9 = c9*a + b
		c10 = c10*a + b
		c11 = c11*a + b
		c12 = c12*a + b
		c13 = c13*a + b
		c14 = c14*a + b
		c15 = c15*a + b
	}
	peakSink = c0 + c1 + c2 + c3 + c4 + c5 + c6 + c7 + c8 + c9 + c10 + c11 + c12 + c13 + c14 + c15
}
