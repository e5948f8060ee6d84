package gpu_test

import (
	"slices"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
)

// residualNorm adds gpu.ResidualNorm to hidden as two ops, counting the
// calls.
type residualNorm struct {
	hidden
	calls *int
}

func (b residualNorm) AddRMSNormForward(sum, out, rstd, a, x, w gpu.Buf, N, C int, eps float32) {
	*b.calls++
	b.Add(sum, a, x, N*C)
	b.RMSNormForward(out, rstd, sum, w, N, C, eps)
}

// TestResidualNorm: on a ResidualNorm backend the trainer adds and
// normalizes once a layer (the attention residual and the MLP's input
// norm) and the batch sampler twice a layer but the last (the MLP's
// input norm, and the next layer's), and both compute exactly what they
// compute without it.
func TestResidualNorm(t *testing.T) {
	cbe := cpu.New()
	defer cbe.Close()
	c := gpu.TinyConfig()
	calls := 0
	var losses [2][]float64
	var outs [2][]gpu.Completion
	prompts := [][]int32{{1, 2, 3}, {4, 5}, {6}}
	ps := []gpu.SamplingParams{{MaxTokens: 6}, {Temperature: 1, TopK: 20, Seed: 3, MaxTokens: 5}, {MaxTokens: 4}}
	for i, be := range []gpu.Backend{hidden{cbe}, residualNorm{hidden{cbe}, &calls}} {
		m, err := gpu.NewModel(c, 3)
		if err != nil {
			t.Fatal(err)
		}
		tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: 2, MaxSeq: 16, LR: 1e-2})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			met, err := tr.Step(twoSequences())
			if err != nil {
				t.Fatal(err)
			}
			losses[i] = append(losses[i], met.Loss)
		}
		if i == 1 && calls != 2*c.NumHiddenLayers {
			t.Errorf("two training steps made %d fused calls, want %d (one a layer a step)", calls, 2*c.NumHiddenLayers)
		}
		calls = 0
		s, err := gpu.NewBatchSampler(m, be, 32, 3)
		if err != nil {
			t.Fatal(err)
		}
		if outs[i], err = s.SampleAll(prompts, ps); err != nil {
			t.Fatal(err)
		}
		if L := c.NumHiddenLayers; i == 1 && (calls == 0 || calls%(2*L-1) != 0) {
			t.Errorf("sampling made %d fused calls, want a multiple of %d (2L-1 a step)", calls, 2*L-1)
		}
	}
	if !slices.Equal(losses[0], losses[1]) {
		t.Errorf("losses %v without ResidualNorm, %v with", losses[0], losses[1])
	}
	for i := range outs[0] {
		if !slices.Equal(outs[0][i].Tokens, outs[1][i].Tokens) || !slices.Equal(outs[0][i].LogProbs, outs[1][i].LogProbs) {
			t.Errorf("request %d: sampled %v without ResidualNorm, %v with", i, outs[0][i].Tokens, outs[1][i].Tokens)
		}
	}
}
