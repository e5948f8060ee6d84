package gpu

import (
	"fmt"
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

// Sampler generates completions with a KV cache: one prefill pass over
// the prompt, then one single-token pass per generated token. It keeps its
// own copy of the weights on the backend (see SetWeights). A Sampler is not
// safe for concurrent use.
type Sampler struct {
	be     Backend
	cfg    Config
	d      dims
	maxSeq int

	params   Params[Buf]
	paramBuf Buf
	cos, sin Buf
	acts     acts
	actBuf   Buf

	logits []float32
	probs  []float64
	order  []int32

	// NoCache recomputes the whole prefix for every token instead of
	// using the KV cache (for benchmarks and the cache's own tests).
	NoCache bool
}

// NewSampler returns a sampler for sequences of up to maxSeq tokens
// (prompt + completion), initialised with m's weights.
func NewSampler(m *Model, be Backend, maxSeq int) (*Sampler, error) {
	if maxSeq <= 0 || maxSeq > m.Config.MaxPositionEmbeddings {
		return nil, fmt.Errorf("gpu: sampler max sequence %d outside 1..%d (max_position_embeddings)", maxSeq, m.Config.MaxPositionEmbeddings)
	}
	s := &Sampler{be: be, cfg: m.Config, d: dimsOf(m.Config), maxSeq: maxSeq}
	var err error
	if s.paramBuf, err = be.Alloc(len(m.arena)); err != nil {
		return nil, fmt.Errorf("gpu: allocate sampler weights: %w", err)
	}
	if err := s.SetWeights(m); err != nil {
		return nil, err
	}
	s.params = bindParams(m.Config, func(off, n int) Buf { return be.Slice(s.paramBuf, off, n) })
	if s.cos, s.sin, err = uploadRope(be, m.Config, maxSeq); err != nil {
		return nil, err
	}
	d, P := s.d, maxSeq
	s.actBuf, _, err = allocArena(be, func(a *arena) {
		// One layer's worth of activations for up to P rows, and the KV
		// cache of every layer.
		s.acts = acts{
			res: []Buf{a.take(P * d.C)}, ln1: []Buf{a.take(P * d.C)}, rstd1: []Buf{a.take(P)},
			q: []Buf{a.take(P * d.QC)}, k: a.takeL(d.L, P*d.KVC), v: a.takeL(d.L, P*d.KVC),
			att: []Buf{a.take(d.NH * P * P)}, atty: []Buf{a.take(P * d.QC)}, resMid: []Buf{a.take(P * d.C)},
			ln2: []Buf{a.take(P * d.C)}, rstd2: []Buf{a.take(P)},
			gate: []Buf{a.take(P * d.I)}, up: []Buf{a.take(P * d.I)}, swi: []Buf{a.take(P * d.I)},
			lnf: a.take(P * d.C), rstdf: a.take(P), logits: a.take(d.V), proj: a.take(P * d.C),
		}
	})
	if err != nil {
		return nil, err
	}
	s.logits = make([]float32, d.V)
	s.probs = make([]float64, d.V)
	s.order = make([]int32, d.V)
	return s, be.Err()
}

// SetWeights replaces the sampler's weights with m's (a new policy
// version). m must have the sampler's configuration.
func (s *Sampler) SetWeights(m *Model) error {
	if m.Config.HiddenSize != s.cfg.HiddenSize || m.Config.NumHiddenLayers != s.cfg.NumHiddenLayers ||
		m.Config.VocabSize != s.cfg.VocabSize || len(m.arena) != s.paramBuf.Len() {
		return fmt.Errorf("gpu: SetWeights: model shape differs from the sampler's")
	}
	s.be.Upload(s.paramBuf, m.arena)
	return s.be.Err()
}

// Sample generates a completion of prompt.
func (s *Sampler) Sample(prompt []int32, p SamplingParams) (Completion, error) {
	var c Completion
	if len(prompt) == 0 || len(prompt) >= s.maxSeq {
		return c, fmt.Errorf("gpu: prompt of %d tokens, want 1..%d", len(prompt), s.maxSeq-1)
	}
	for i, t := range prompt {
		if t < 0 || int(t) >= s.d.V {
			return c, fmt.Errorf("gpu: prompt token %d at %d outside the vocabulary of %d", t, i, s.d.V)
		}
	}
	if p.Temperature < 0 || p.TopP < 0 || p.TopP > 1 || p.TopK < 0 || p.MaxTokens < 0 {
		return c, fmt.Errorf("gpu: bad sampling parameters %+v", p)
	}
	rng := rand.New(rand.NewPCG(p.Seed, 0x73616d706c65))
	limit := s.maxSeq - len(prompt)
	if p.MaxTokens > 0 {
		limit = min(limit, p.MaxTokens)
	}
	seq := append([]int32(nil), prompt...)
	pos := 0 // tokens already in the cache
	for len(c.Tokens) < limit {
		if err := s.logitsFor(seq, &pos); err != nil {
			return c, err
		}
		tok, lp := s.pick(p, rng)
		c.Tokens = append(c.Tokens, tok)
		c.LogProbs = append(c.LogProbs, lp)
		seq = append(seq, tok)
		if slices.Contains(p.StopTokens, tok) {
			c.FinishReason = "stop"
			return c, nil
		}
	}
	c.FinishReason = "length"
	return c, nil
}

// logitsFor leaves in s.logits the next-token logits after seq, feeding
// the tokens not yet in the cache.
func (s *Sampler) logitsFor(seq []int32, pos *int) error {
	if s.NoCache {
		*pos = 0
	}
	fresh := seq[*pos:]
	st := step{B: 1, T: len(fresh), pos0: *pos, cached: true}
	forward(s.be, s.d, &s.params, &s.acts, s.cos, s.sin, st, fresh, nil, true)
	*pos = len(seq)
	return s.be.Download(s.logits, s.acts.logits)
}

// pick draws the next token from s.logits and returns it with its
// temperature-1 log-probability.
func (s *Sampler) pick(p SamplingParams, rng *rand.Rand) (int32, float32) {
	l := s.logits
	mx := math.Inf(-1)
	best := 0
	for i, v := range l {
		if float64(v) > mx {
			mx, best = float64(v), i
		}
	}
	var z float64
	for _, v := range l {
		z += math.Exp(float64(v) - mx)
	}
	lse := mx + math.Log(z)
	logp := func(t int) float32 { return float32(float64(l[t]) - lse) }
	if p.Temperature == 0 {
		return int32(best), logp(best)
	}
	// Tokens by decreasing logit, ties by id, for top-k and top-p.
	order := s.order[:len(l)]
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
	keep := len(order)
	if p.TopK > 0 {
		keep = min(keep, p.TopK)
	}
	probs := s.probs[:keep]
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
