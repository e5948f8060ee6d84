package gpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestPickerWalksSortedOrder: drawing from the whole distribution walks
// the tokens by decreasing logit, ties by id — the order of a stable sort,
// which the top-k/top-p path uses — so a seed draws the same token as a
// walk over the sorted vocabulary.
func TestPickerWalksSortedOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var pk picker
	for trial := range 2000 {
		V := 1 + r.IntN(300)
		l := make([]float32, V)
		for i := range l {
			l[i] = float32(math.Round(r.NormFloat64()*4) / 2) // many ties
		}
		temp := []float64{1, 0.7, 2}[trial%3]
		seed := uint64(trial)
		got, _ := pk.pick(l, SamplingParams{Temperature: temp}, rand.New(rand.NewPCG(seed, 3)))
		// Reference: stable sort, then the CDF walk with the same total.
		order := make([]int32, V)
		for i := range order {
			order[i] = int32(i)
		}
		slices.SortStableFunc(order, func(a, b int32) int {
			switch {
			case l[a] > l[b]:
				return -1
			case l[a] < l[b]:
				return 1
			}
			return 0
		})
		mx := float64(slices.Max(l))
		w := make([]float64, V)
		var z float64
		for i, v := range l {
			w[i] = math.Exp((float64(v) - mx) / temp)
			z += w[i]
		}
		u := rand.New(rand.NewPCG(seed, 3)).Float64() * z
		want := order[V-1]
		for _, tok := range order {
			if u -= w[tok]; u < 0 {
				want = tok
				break
			}
		}
		if got != want {
			t.Fatalf("trial %d: drew %d, the sorted walk draws %d", trial, got, want)
		}
	}
}
