package gpu

import (
	"math"
	"math/rand/v2"
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
	// Forced are the first tokens of the completion, taken as given
	// instead of sampled (teacher forcing): each is scored, its
	// log-probability and, with TopLogProbs, its step's most likely
	// tokens recorded, and a stop token among them does not stop. They
	// count toward MaxTokens. swerl serve scores a prompt this way (echo,
	// prompt_logprobs): the prompt's first token as the prompt, the rest
	// forced, with the sampler's own numerics.
	Forced []int32
	// TopLogProbs, when positive, records at every step the TopLogProbs
	// most likely tokens (temperature-1 log-probabilities, by decreasing
	// logit, ties by id) in Completion.Top and the rank of the token taken
	// in Completion.Ranks.
	TopLogProbs int
}

// TokenLogProb is a token id and its temperature-1 log-probability.
type TokenLogProb struct {
	ID      int32
	LogProb float32
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
	// Top[t] are the SamplingParams.TopLogProbs most likely tokens of step
	// t and Ranks[t] the rank of Tokens[t] among all tokens (1 for the
	// most likely: one plus the tokens of a strictly larger logit); both
	// nil unless TopLogProbs is positive.
	Top   [][]TokenLogProb
	Ranks []int32
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
	exps       []float64 // exp(logit - max) by token id
	probs      []float64 // truncated sampling: weights in decreasing-logit order
	order, tmp []int32   // token ids being sorted
	keys, tmpK []uint32  // their sort keys
}

// pick draws the next token from the logits l and returns it with its
// temperature-1 log-probability.
func (pk *picker) pick(l []float32, p SamplingParams, rng *rand.Rand) (int32, float32) {
	V := len(l)
	if cap(pk.exps) < V {
		pk.exps, pk.probs = make([]float64, V), make([]float64, V)
		pk.order, pk.tmp, pk.keys, pk.tmpK = make([]int32, V), make([]int32, V), make([]uint32, V), make([]uint32, V)
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
		// the tokens it drew when every draw sorted the vocabulary.
		if p.Temperature != 1 {
			z = 0
			for i, v := range l {
				e[i] = math.Exp((float64(v) - mx) / p.Temperature)
				z += e[i]
			}
		}
		u := rng.Float64() * z
		t := best
		for _, id := range pk.sortDesc(l) {
			t = int(id)
			u -= e[t]
			if u < 0 {
				break
			}
		}
		return int32(t), logp(t)
	}
	// Tokens by decreasing logit, ties by id, for top-k and top-p.
	order := pk.sortDesc(l)
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

// logProbOf is the temperature-1 log-probability of token t under the
// logits l.
func (pk *picker) logProbOf(l []float32, t int32) float32 {
	mx := math.Inf(-1)
	for _, v := range l {
		mx = max(mx, float64(v))
	}
	var z float64
	for _, v := range l {
		z += math.Exp(float64(v) - mx)
	}
	return float32(float64(l[t]) - (mx + math.Log(z)))
}

// top returns the n most likely tokens of the logits l (by decreasing
// logit, ties by id) with their temperature-1 log-probabilities, and the
// rank of token t: one plus the tokens whose logit is strictly larger.
func (pk *picker) top(l []float32, n int, t int32) ([]TokenLogProb, int32) {
	mx := math.Inf(-1)
	for _, v := range l {
		mx = max(mx, float64(v))
	}
	var z float64
	rank := int32(1)
	for _, v := range l {
		z += math.Exp(float64(v) - mx)
		if v > l[t] {
			rank++
		}
	}
	lse := mx + math.Log(z)
	// A partial insertion sort: n is small (swerl serve caps it at 20).
	n = min(n, len(l))
	out := make([]TokenLogProb, 0, n)
	better := func(a, b int32) bool { return l[a] > l[b] || l[a] == l[b] && a < b }
	for i := range l {
		id := int32(i)
		if len(out) == n && !better(id, out[n-1].ID) {
			continue
		}
		if len(out) < n {
			out = append(out, TokenLogProb{})
		}
		j := len(out) - 1
		for ; j > 0 && better(id, out[j-1].ID); j-- {
			out[j] = out[j-1]
		}
		out[j] = TokenLogProb{ID: id}
	}
	for i := range out {
		out[i].LogProb = float32(float64(l[out[i].ID]) - lse)
	}
	return out, rank
}

// sortDesc returns the token ids of the logits l by decreasing logit,
// ties by increasing id (-0 and +0 tie), the order of a stable sort: an
// LSD radix sort over the logits' bits mapped to keys whose unsigned order
// is the reverse float order, 8 bits a pass, skipping the passes where
// every key has the same byte (the sign and exponent bytes of logits in
// a narrow range). Linear in the vocabulary, where a comparison sort or
// a heap walked down to a draw deep in a flat distribution is V log V.
func (pk *picker) sortDesc(l []float32) []int32 {
	V := len(l)
	order, tmp, keys, tmpK := pk.order[:V], pk.tmp[:V], pk.keys[:V], pk.tmpK[:V]
	for i, v := range l {
		b := math.Float32bits(v)
		switch {
		case b == 1<<31: // -0
			b = 1 << 31
		case b>>31 != 0:
			b = ^b
		default:
			b |= 1 << 31
		}
		// b ascends with the float; its complement descends.
		keys[i] = ^b
		order[i] = int32(i)
	}
	for shift := 0; shift < 32; shift += 8 {
		var cnt [256]int
		for _, k := range keys {
			cnt[k>>shift&255]++
		}
		if cnt[keys[0]>>shift&255] == V {
			continue
		}
		sum := 0
		for d, c := range cnt {
			cnt[d] = sum
			sum += c
		}
		for i, k := range keys {
			d := k >> shift & 255
			tmpK[cnt[d]], tmp[cnt[d]] = k, order[i]
			cnt[d]++
		}
		keys, tmpK = tmpK, keys
		order, tmp = tmp, order
	}
	return order
}
