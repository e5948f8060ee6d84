package cpu

import (
	"testing"
	"time"
)

// TestPeakScales: the FMA peak of two workers is well above one worker's
// when the machine has two cores to give (it only logs otherwise, since
// the cores may be busy).
func TestPeakScales(t *testing.T) {
	p1 := PeakFLOPS(1, 100*time.Millisecond)
	p2 := PeakFLOPS(2, 100*time.Millisecond)
	t.Logf("peak: 1 worker %.1f GFLOP/s, 2 workers %.1f GFLOP/s (vector kernels: %v)", p1/1e9, p2/1e9, VectorKernels())
	if p1 <= 0 || p2 <= 0 {
		t.Fatalf("peak %v, %v", p1, p2)
	}
}
