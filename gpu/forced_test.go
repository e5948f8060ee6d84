package gpu_test

import (
	"math"
	"slices"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
)

// TestForcedTokensScoreAsTheTrainer: tokens forced into a completion are
// taken as given (a stop token among them does not stop), scored with
// the log-probabilities the trainer computes for the same sequence, and
// sampling goes on after them; TopLogProbs lists each step's most likely
// tokens in order, the taken token's log-probability among them when its
// rank is within the list.
func TestForcedTokensScoreAsTheTrainer(t *testing.T) {
	m := sharpModel(t)
	V := m.Config.VocabSize
	prompt := []int32{3, 1, 4}
	forced := []int32{1, 5, 9, 2, 6}
	p := gpu.SamplingParams{Temperature: 1, Seed: 7, MaxTokens: len(forced) + 4, Forced: forced,
		StopTokens: []int32{forced[1]}, TopLogProbs: 5}
	s := newBatchSampler(t, m, 64, 2)
	cs, err := s.SampleAll([][]int32{prompt}, []gpu.SamplingParams{p})
	if err != nil {
		t.Fatal(err)
	}
	c := cs[0]
	if len(c.Tokens) <= len(forced) || !slices.Equal(c.Tokens[:len(forced)], forced) {
		t.Fatalf("tokens %v, want the forced %v first and more after", c.Tokens, forced)
	}
	if len(c.Top) != len(c.Tokens) || len(c.Ranks) != len(c.Tokens) {
		t.Fatalf("%d tops and %d ranks for %d tokens", len(c.Top), len(c.Ranks), len(c.Tokens))
	}
	be := cpu.New()
	defer be.Close()
	tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: 1, MaxSeq: 64})
	if err != nil {
		t.Fatal(err)
	}
	lp, err := tr.LogProbs([]gpu.Sequence{{Prompt: prompt, Completion: c.Tokens}})
	if err != nil {
		t.Fatal(err)
	}
	for k, tok := range c.Tokens {
		if d := math.Abs(float64(lp[0][k] - c.LogProbs[k])); d > 1e-4 {
			t.Errorf("token %d: sampler logprob %v, trainer %v", k, c.LogProbs[k], lp[0][k])
		}
		top := c.Top[k]
		if len(top) != 5 {
			t.Fatalf("step %d: %d top tokens, want 5", k, len(top))
		}
		var sum float64
		for i, e := range top {
			if e.ID < 0 || int(e.ID) >= V || i > 0 && e.LogProb > top[i-1].LogProb {
				t.Fatalf("step %d: top %v not in decreasing order", k, top)
			}
			sum += math.Exp(float64(e.LogProb))
			if e.ID == tok && e.LogProb != c.LogProbs[k] {
				t.Errorf("step %d: top lists the token at %v, the completion at %v", k, e.LogProb, c.LogProbs[k])
			}
		}
		if sum > 1+1e-5 {
			t.Errorf("step %d: top probabilities sum to %v", k, sum)
		}
		in := slices.IndexFunc(top, func(e gpu.TokenLogProb) bool { return e.ID == tok })
		if r := int(c.Ranks[k]); (r <= 5) != (in >= 0) || in >= 0 && r != in+1 {
			t.Errorf("step %d: rank %d, index in top %d", k, r, in)
		}
	}
	// Forced tokens must fit the context with the prompt.
	if _, err := s.Submit(prompt, gpu.SamplingParams{Forced: make([]int32, 62)}); err == nil {
		t.Error("3 prompt and 62 forced tokens fit a context of 64")
	}
	if _, err := s.Submit(prompt, gpu.SamplingParams{Forced: []int32{int32(V)}}); err == nil {
		t.Error("a forced token outside the vocabulary was accepted")
	}
}
