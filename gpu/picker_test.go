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
		order := stableOrder(l)
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

// TestSortDesc: the radix sort orders ids as a stable sort by decreasing
// logit does, with -0 and +0 tied, over vocabularies with and without
// ties, of one sign or both, with infinities, up to a Qwen-sized 151,936.
func TestSortDesc(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 5))
	var pk picker
	for trial, V := range []int{1, 2, 17, 256, 257, 4096, 151936} {
		l := make([]float32, V)
		for i := range l {
			switch trial % 3 {
			case 0:
				l[i] = float32(r.NormFloat64() * 8)
			case 1:
				l[i] = float32(math.Round(r.NormFloat64()*3)) / 4 // ties, ±0
			default:
				l[i] = 3 + float32(r.Float64()) // one sign and exponent
			}
		}
		if V > 4 {
			l[0], l[1], l[2], l[3] = float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.Copysign(0, -1)), 0
		}
		pk.pick(l, SamplingParams{}, nil) // sizes the buffers
		got := slices.Clone(pk.sortDesc(l))
		want := stableOrder(l)
		if !slices.Equal(got, want) {
			t.Fatalf("V=%d: radix order differs from the stable sort", V)
		}
	}
}

// stableOrder is the reference order of the picker: token ids by
// decreasing logit, ties by id, from a stable comparison sort.
func stableOrder(l []float32) []int32 {
	order := make([]int32, len(l))
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
	return order
}
