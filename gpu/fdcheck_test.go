package gpu_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"swerl/gpu"
)

// sftLoss64 returns the SFT loss of batch (with w completion tokens) under
// tr's current weights, in float64 on the float64 CPU backend.
func sftLoss64(t *testing.T, tr *gpu.Trainer, batch []gpu.Sequence, w int) func() float64 {
	return func() float64 {
		lp, err := tr.LogProbs64(batch)
		if err != nil {
			t.Fatal(err)
		}
		var l float64
		for _, s := range lp {
			for _, v := range s {
				l -= v / float64(w)
			}
		}
		return l
	}
}

// checkFiniteDifferences compares grads with central finite differences
// of loss over params (the backend's float64 memory, laid out as tensors),
// at the first, last and six random elements of every tensor, and fails
// for a tensor whose sampled gradients are all zero.
func checkFiniteDifferences(t *testing.T, tensors []gpu.Tensor, params, grads []float64, loss func() float64) {
	t.Helper()
	r := rand.New(rand.NewPCG(3, 4))
	off := 0
	for _, ten := range tensors {
		n := len(ten.Data)
		idx := []int{0, n - 1}
		for range 6 {
			idx = append(idx, r.IntN(n))
		}
		var gmax float64
		for _, i := range idx {
			gmax = math.Max(gmax, math.Abs(grads[off+i]))
		}
		for _, i := range idx {
			const h = 1e-5
			old := params[off+i]
			params[off+i] = old + h
			lp := loss()
			params[off+i] = old - h
			lm := loss()
			params[off+i] = old
			fd := (lp - lm) / (2 * h)
			if math.Abs(fd-grads[off+i]) > 1e-7+1e-5*gmax {
				t.Errorf("%s[%d]: backward %.10g, finite difference %.10g", ten.Name, i, grads[off+i], fd)
			}
		}
		if gmax == 0 {
			t.Errorf("%s: all sampled gradients are zero", ten.Name)
		}
		off += n
	}
}
