package gpu_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/gputest"
)

func newSampler(t *testing.T, m *gpu.Model, maxSeq int) *gpu.Sampler {
	t.Helper()
	be := cpu.New()
	t.Cleanup(func() { be.Close() })
	s, err := gpu.NewSampler(m, be, maxSeq)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sharpModel(t *testing.T) *gpu.Model {
	t.Helper()
	m, err := gpu.NewModel(testConfig(false, true, nil), 5)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, 6) // larger weights: a peaked, non-trivial distribution
	return m
}

// TestSamplerCacheMatchesRecompute: decoding from the KV cache gives the
// same tokens and log-probs as recomputing the whole prefix every step.
func TestSamplerCacheMatchesRecompute(t *testing.T) {
	m := sharpModel(t)
	prompt := []int32{3, 1, 4, 1, 5, 9, 2, 6}
	for _, p := range []gpu.SamplingParams{
		{MaxTokens: 20},
		{Temperature: 1, Seed: 42, MaxTokens: 20},
		{Temperature: 0.7, TopP: 0.9, TopK: 10, Seed: 7, MaxTokens: 20},
	} {
		cached := newSampler(t, m, 40)
		plain := newSampler(t, m, 40)
		plain.NoCache = true
		a, err := cached.Sample(prompt, p)
		if err != nil {
			t.Fatal(err)
		}
		b, err := plain.Sample(prompt, p)
		if err != nil {
			t.Fatal(err)
		}
		gputest.SameCompletion(t, fmt.Sprintf("%+v", p), "cached", "recomputed", a, b, 1e-4)
		if len(a.Tokens) != 20 || a.FinishReason != "length" {
			t.Errorf("%+v: %d tokens, finish %q; want 20, length", p, len(a.Tokens), a.FinishReason)
		}
	}
}

// TestSamplerLogProbsMatchTrainer: the sampler's per-token log-probs are
// what the trainer computes for the same sequence, so GRPO ratios start at 1.
func TestSamplerLogProbsMatchTrainer(t *testing.T) {
	m := sharpModel(t)
	s := newSampler(t, m, 40)
	prompt := []int32{7, 7, 2}
	c, err := s.Sample(prompt, gpu.SamplingParams{Temperature: 1.3, TopK: 5, Seed: 1, MaxTokens: 15})
	if err != nil {
		t.Fatal(err)
	}
	be := cpu.New()
	defer be.Close()
	tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: 1, MaxSeq: 40})
	if err != nil {
		t.Fatal(err)
	}
	lp, err := tr.LogProbs([]gpu.Sequence{{Prompt: prompt, Completion: c.Tokens}})
	if err != nil {
		t.Fatal(err)
	}
	for i := range c.Tokens {
		if d := math.Abs(float64(lp[0][i] - c.LogProbs[i])); d > 1e-4 {
			t.Errorf("token %d: sampler logprob %v, trainer %v", i, c.LogProbs[i], lp[0][i])
		}
	}
}

func TestSamplerParams(t *testing.T) {
	m := sharpModel(t)
	s := newSampler(t, m, 64)
	prompt := []int32{1, 2, 3}
	greedy, err := s.Sample(prompt, gpu.SamplingParams{MaxTokens: 12})
	if err != nil {
		t.Fatal(err)
	}
	// Top-k 1 at any temperature is greedy.
	k1, _ := s.Sample(prompt, gpu.SamplingParams{Temperature: 5, TopK: 1, Seed: 9, MaxTokens: 12})
	if !slices.Equal(greedy.Tokens, k1.Tokens) {
		t.Errorf("top-k 1 %v differs from greedy %v", k1.Tokens, greedy.Tokens)
	}
	// Tiny top-p keeps only the most likely token: greedy again.
	p0, _ := s.Sample(prompt, gpu.SamplingParams{Temperature: 1, TopP: 1e-9, Seed: 9, MaxTokens: 12})
	if !slices.Equal(greedy.Tokens, p0.Tokens) {
		t.Errorf("top-p 1e-9 %v differs from greedy %v", p0.Tokens, greedy.Tokens)
	}
	// Same seed, same completion; another seed at high temperature differs.
	hot := gpu.SamplingParams{Temperature: 3, Seed: 1, MaxTokens: 30}
	a, _ := s.Sample(prompt, hot)
	b, _ := s.Sample(prompt, hot)
	hot.Seed = 2
	c, _ := s.Sample(prompt, hot)
	if !slices.Equal(a.Tokens, b.Tokens) {
		t.Error("equal seeds gave different completions")
	}
	if slices.Equal(a.Tokens, c.Tokens) {
		t.Error("seeds 1 and 2 gave the same 30-token completion at temperature 3")
	}
	// A stop token ends the completion and is included.
	stop := greedy.Tokens[4]
	st, _ := s.Sample(prompt, gpu.SamplingParams{MaxTokens: 12, StopTokens: []int32{stop}})
	i := slices.Index(greedy.Tokens, stop)
	if st.FinishReason != "stop" || !slices.Equal(st.Tokens, greedy.Tokens[:i+1]) {
		t.Errorf("stop on %d: %v (%s), want %v", stop, st.Tokens, st.FinishReason, greedy.Tokens[:i+1])
	}
	// The context bound ends a completion too.
	full, _ := s.Sample(prompt, gpu.SamplingParams{})
	if len(full.Tokens) != 64-3 || full.FinishReason != "length" {
		t.Errorf("unbounded completion has %d tokens (%s), want %d", len(full.Tokens), full.FinishReason, 61)
	}
	refusesBad(t, m.Config.VocabSize, 64, func(prompt []int32, p gpu.SamplingParams) error {
		_, err := s.Sample(prompt, p)
		return err
	},
		badRequest{"negative temperature", prompt, gpu.SamplingParams{Temperature: -1}},
		badRequest{"top-p above 1", prompt, gpu.SamplingParams{TopP: 1.5}})
}

// badRequest is a request a sampler must refuse.
type badRequest struct {
	name   string
	prompt []int32
	p      gpu.SamplingParams
}

// refusesBad checks that submit refuses the requests every sampler of a
// model with vocabulary V and a context of maxSeq tokens refuses (an
// empty prompt, a token outside the vocabulary, a prompt that fills the
// context) and the sampler's own bad requests extra.
func refusesBad(t *testing.T, V, maxSeq int, submit func([]int32, gpu.SamplingParams) error, extra ...badRequest) {
	t.Helper()
	common := []badRequest{
		{"empty prompt", nil, gpu.SamplingParams{}},
		{"token outside vocabulary", []int32{1, int32(V)}, gpu.SamplingParams{}},
		{"prompt fills the context", make([]int32, maxSeq), gpu.SamplingParams{}},
	}
	for _, bad := range append(common, extra...) {
		if err := submit(bad.prompt, bad.p); err == nil {
			t.Errorf("%s: no error", bad.name)
		}
	}
}

// TestSamplerSetWeights: a new weight version changes what is sampled and
// matches a sampler built from it.
func TestSamplerSetWeights(t *testing.T) {
	m1 := sharpModel(t)
	m2, _ := gpu.NewModel(m1.Config, 99)
	randomize(m2, 100)
	s := newSampler(t, m1, 32)
	p := gpu.SamplingParams{MaxTokens: 10}
	a, _ := s.Sample([]int32{1}, p)
	if err := s.SetWeights(m2); err != nil {
		t.Fatal(err)
	}
	b, _ := s.Sample([]int32{1}, p)
	fresh, _ := newSampler(t, m2, 32).Sample([]int32{1}, p)
	if !slices.Equal(b.Tokens, fresh.Tokens) || slices.Equal(a.LogProbs, b.LogProbs) {
		t.Errorf("after SetWeights: %v, fresh sampler %v, before %v", b.Tokens, fresh.Tokens, a.Tokens)
	}
	other, _ := gpu.NewModel(gpu.TinyConfig(), 1)
	if err := s.SetWeights(other); err == nil {
		t.Error("SetWeights with another architecture: no error")
	}
}
