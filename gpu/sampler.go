package gpu

import (
	"math"
	"math/rand/v2"
	"slices"
)

// SamplingParams control one completion.
type SamplingParams struct {
	// Temperature divides the logits; 0 means greedy (argmax). Default 0.
	Temperature float64
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches TopP (nucleus sampling); 0 or 1 keeps all. Default 0.
	TopP float64
	// TopK keeps the K most likely tokens; 0 keeps all. Default 0.
	TopK int
	// Seed of the sampling random stream: equal seeds, weights and prompts
	// give equal completions. Default 0.
	Seed uint64
	// MaxTokens bounds the completion length; 0 means until the context
	// (the Sampler's max sequence) is full.
	MaxTokens int
	// StopTokens end the completion; the stop token is included in Tokens.
	StopTokens []int32
}

// Completion is a sampled continuation of a prompt.
type Completion struct {
	Tokens []int32
	// LogProbs[t] is log π(Tokens[t] | prefix) under the model's raw
	// distribution: temperature 1, no top-p or top-k truncation. That is
	// the quantity the Trainer recomputes, so GRPO ratios against these
	// old log-probs are exactly 1 at unchanged weights whatever the
	// sampling parameters.
	LogProbs     []float32
	FinishReason string // "stop" (a stop token) or "length"
}

// Sampler generates one completion at a time: a BatchSampler of one
// slot (one prefill pass over the prompt, then one single-token pass per
// generated token from the KV cache). It keeps its own copy of the weights
// on the backend (see SetWeights). A Sampler is not safe for concurrent
// use.
type Sampler struct {
	b *BatchSampler

	// NoCache recomputes the whole prefix for every token instead of
	// using the KV cache (for benchmarks and the cache's own tests).
	NoCache bool
}

// NewSampler returns a sampler for sequences of up to maxSeq tokens
// (prompt + completion), initialised with m's weights.
func NewSampler(m *Model, be Backend, maxSeq int) (*Sampler, error) {
	b, err := NewBatchSampler(m, be, maxSeq, 1)
	if err != nil {
		return nil, err
	}
	return &Sampler{b: b}, nil
}

// SetWeights replaces the sampler's weights with m's (a new policy
// version). m must have the sampler's configuration.
func (s *Sampler) SetWeights(m *Model) error { return s.b.SetWeights(m) }

// Sample generates a completion of prompt.
func (s *Sampler) Sample(prompt []int32, p SamplingParams) (Completion, error) {
	s.b.noCache = s.NoCache
	c, err := s.b.SampleAll([][]int32{prompt}, []SamplingParams{p})
	if err != nil {
		return Completion{}, err
	}
	return c[0], nil
}

// picker draws next tokens; its buffers are reused from token to token.
type picker struct {
	exps  []float64 // exp(logit - max) by token id
	probs []float64 // truncated sampling: weights in decreasing-logit order
	order []int32
}

// pick draws the next token from the logits l and returns it with its
// temperature-1 log-probability.
func (pk *picker) pick(l []float32, p SamplingParams, rng *rand.Rand) (int32, float32) {
	V := len(l)
	if cap(pk.exps) < V {
		pk.exps, pk.probs, pk.order = make([]float64, V), make([]float64, V), make([]int32, V)
	}
	mx := math.Inf(-1)
	best := 0
	for i, v := range l {
		if float64(v) > mx {
			mx, best = float64(v), i
		}
	}
	e := pk.exps[:V]
	var z float64
	for i, v := range l {
		e[i] = math.Exp(float64(v) - mx)
		z += e[i]
	}
	lse := mx + math.Log(z)
	logp := func(t int) float32 { return float32(float64(l[t]) - lse) }
	if p.Temperature == 0 {
		return int32(best), logp(best)
	}
	if (p.TopK == 0 || p.TopK >= V) && (p.TopP == 0 || p.TopP == 1) {
		// The whole distribution, walked in the order of the truncated
		// case below (decreasing logit, ties by id) so that a seed draws
		// the tokens it drew when every draw sorted the vocabulary; a
		// heap yields that order lazily, and a peaked distribution is
		// crossed after a few tokens instead of a sort of all V.
		if p.Temperature != 1 {
			z = 0
			for i, v := range l {
				e[i] = math.Exp((float64(v) - mx) / p.Temperature)
				z += e[i]
			}
		}
		u := rng.Float64() * z
		h := logitHeap{l: l, ids: pk.order[:V]}
		h.init()
		t := best
		for len(h.ids) > 0 {
			t = int(h.pop())
			u -= e[t]
			if u < 0 {
				break
			}
		}
		return int32(t), logp(t)
	}
	// Tokens by decreasing logit, ties by id, for top-k and top-p.
	order := pk.order[:V]
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
	keep := V
	if p.TopK > 0 {
		keep = min(keep, p.TopK)
	}
	probs := pk.probs[:keep]
	var sum float64
	for i, t := range order[:keep] {
		probs[i] = math.Exp((float64(l[t]) - mx) / p.Temperature)
		sum += probs[i]
	}
	if p.TopP > 0 && p.TopP < 1 {
		var acc float64
		for i := range probs {
			acc += probs[i] / sum
			if acc >= p.TopP {
				keep = i + 1
				break
			}
		}
		probs = probs[:keep]
		sum = 0
		for _, q := range probs {
			sum += q
		}
	}
	u := rng.Float64() * sum
	for i, q := range probs {
		u -= q
		if u < 0 {
			return order[i], logp(int(order[i]))
		}
	}
	t := order[len(probs)-1]
	return t, logp(int(t))
}

// logitHeap is a binary heap of token ids whose top is the highest logit,
// the lowest id among equal logits.
type logitHeap struct {
	l   []float32
	ids []int32
}

func (h *logitHeap) before(a, b int32) bool {
	return h.l[a] > h.l[b] || h.l[a] == h.l[b] && a < b
}

// init fills the heap with every token id.
func (h *logitHeap) init() {
	for i := range h.ids {
		h.ids[i] = int32(i)
	}
	for i := len(h.ids)/2 - 1; i >= 0; i-- {
		h.down(i)
	}
}

// pop removes and returns the top id.
func (h *logitHeap) pop() int32 {
	top := h.ids[0]
	n := len(h.ids) - 1
	h.ids[0] = h.ids[n]
	h.ids = h.ids[:n]
	h.down(0)
	return top
}

func (h *logitHeap) down(i int) {
	ids := h.ids
	for {
		c := 2*i + 1
		if c >= len(ids) {
			return
		}
		if c+1 < len(ids) && h.before(ids[c+1], ids[c]) {
			c++
		}
		if !h.before(ids[c], ids[i]) {
			return
		}
		ids[i], ids[c] = ids[c], ids[i]
		i = c
	}
}
