package gputest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"swerl/gpu"
)

// Tolerances of the suite; see the package documentation.
const (
	TolForward  = 2e-4
	TolBackward = 1e-3
)

// SetBiases gives every bias tensor of m nonzero values, as a trained
// model has (a new one's are zero, which would hide a bias applied twice
// or not at all), and returns how many tensors it set.
func SetBiases(m *gpu.Model) int {
	nb := 0
	for _, x := range m.Tensors() {
		if strings.HasSuffix(x.Name, ".bias") {
			for i := range x.Data {
				x.Data[i] = float32(math.Sin(float64(nb*7+i))) * 0.5
			}
			nb++
		}
	}
	return nb
}

// SameCompletion fails t unless completions a and b (named na and nb in
// the message) have the same tokens and log-probs within tol.
func SameCompletion(t testing.TB, what, na, nb string, a, b gpu.Completion, tol float64) {
	t.Helper()
	if !slices.Equal(a.Tokens, b.Tokens) {
		t.Errorf("%s: %s tokens %v\n%s %v", what, na, a.Tokens, nb, b.Tokens)
		return
	}
	for i := range a.LogProbs {
		if d := math.Abs(float64(a.LogProbs[i] - b.LogProbs[i])); d > tol {
			t.Errorf("%s: logprob %d %s %v %s %v", what, i, na, a.LogProbs[i], nb, b.LogProbs[i])
		}
	}
}

// SampleAll samples every prompt with a BatchSampler over be of slots
// slots and 64 positions, failing t on an error.
func SampleAll(t testing.TB, m *gpu.Model, be gpu.Backend, slots int, prompts [][]int32, ps []gpu.SamplingParams) []gpu.Completion {
	t.Helper()
	s, err := gpu.NewBatchSampler(m, be, 64, slots)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := s.SampleAll(prompts, ps)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// Close reports whether got matches want within tol relative to the
// largest |want|, and describes the mismatch otherwise.
func Close(got []float32, want []float64, tol float64) (bool, string) {
	if len(got) != len(want) {
		return false, fmt.Sprintf("length %d, want %d", len(got), len(want))
	}
	var maxWant, maxDiff float64
	worst := -1
	for i := range want {
		maxWant = max(maxWant, math.Abs(want[i]))
		d := math.Abs(float64(got[i]) - want[i])
		if math.IsNaN(d) {
			d = math.Inf(1)
		}
		if d > maxDiff {
			maxDiff, worst = d, i
		}
	}
	limit := tol * (1 + maxWant)
	if maxDiff <= limit {
		return true, ""
	}
	s := fmt.Sprintf("max abs diff %.3g at [%d] (limit %.3g)", maxDiff, worst, limit)
	shown := 0
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > limit || math.IsNaN(float64(got[i])) {
			s += fmt.Sprintf("\n  [%d] got %.7g want %.7g", i, got[i], want[i])
			if shown++; shown == 5 {
				break
			}
		}
	}
	return false, s
}

// suite carries the backend and helpers of one TestBackend run.
type suite struct {
	t *testing.T
	b gpu.Backend
	r *rand.Rand
}

// rand returns n normal values rounded to float32, in float64.
func (s *suite) rand(n int) []float64 {
	x := make([]float64, n)
	for i := range x {
		x[i] = float64(float32(s.r.NormFloat64()))
	}
	return x
}

func f32(x []float64) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(v)
	}
	return y
}

// up allocates a buffer holding x.
func (s *suite) up(x []float64) gpu.Buf {
	s.t.Helper()
	b, err := s.b.Alloc(len(x))
	if err != nil {
		s.t.Fatalf("alloc %d: %v", len(x), err)
	}
	s.b.Upload(b, f32(x))
	return b
}

// down reads n elements of b.
func (s *suite) down(b gpu.Buf, n int) []float32 {
	s.t.Helper()
	y := make([]float32, n)
	if err := s.b.Download(y, b); err != nil {
		s.t.Fatalf("download: %v", err)
	}
	return y
}

// expect compares buffer b with want.
func (s *suite) expect(what string, b gpu.Buf, want []float64, tol float64) {
	s.t.Helper()
	got := s.down(b, len(want))
	if ok, msg := Close(got, want, tol); !ok {
		s.t.Errorf("%s: %s", what, msg)
	}
}

// fdGrad returns dL/dx[which] for L = sum(f(xs) * r) by central
// differences in float64. f must not keep xs.
func fdGrad(f func(xs [][]float64) []float64, xs [][]float64, which int, r []float64) []float64 {
	const h = 1e-6
	x := xs[which]
	g := make([]float64, len(x))
	loss := func() float64 {
		out := f(xs)
		var l float64
		for i, v := range out {
			l += v * r[i]
		}
		return l
	}
	for i := range x {
		old := x[i]
		x[i] = old + h
		lp := loss()
		x[i] = old - h
		lm := loss()
		x[i] = old
		g[i] = (lp - lm) / (2 * h)
	}
	return g
}

func addTo(prior, g []float64) []float64 {
	y := make([]float64, len(g))
	for i := range g {
		y[i] = prior[i] + g[i]
	}
	return y
}
