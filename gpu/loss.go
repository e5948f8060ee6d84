package gpu

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Averaging says how per-token losses of a batch are averaged.
type Averaging int

const (
	// TokenMean divides the sum over all completion tokens of the batch by
	// their count (DAPO's token-level loss; long answers weigh more).
	TokenMean Averaging = iota
	// SequenceMean averages tokens within each sequence, then sequences
	// (the original GRPO loss).
	SequenceMean
)

// Objective selects the policy-gradient surrogate of Trainer.Step.
type Objective int

const (
	// ObjectiveGRPO is PPO's clipped token ratio with group advantages.
	ObjectiveGRPO Objective = iota
	// ObjectiveGSPO clips one length-normalized ratio per sequence,
	// s = exp(mean_t(ln π_θ − ln π_old)) (GSPO, arXiv 2507.18071).
	ObjectiveGSPO
	// ObjectiveCISPO is REINFORCE weighted by the capped, stop-gradient
	// token ratio sg(min(r_t, 1+ε_high)), so no token loses its gradient
	// to the clip (CISPO, MiniMax-M1, arXiv 2506.13585).
	ObjectiveCISPO
)

var objectiveNames = []string{"grpo", "gspo", "cispo"}

func (o Objective) String() string {
	if o >= 0 && int(o) < len(objectiveNames) {
		return objectiveNames[o]
	}
	return fmt.Sprintf("Objective(%d)", int(o))
}

// ParseObjective reads an objective's name: grpo, gspo or cispo.
func ParseObjective(s string) (Objective, error) {
	if i := slices.Index(objectiveNames, s); i >= 0 {
		return Objective(i), nil
	}
	return 0, fmt.Errorf("unknown objective %q (want one of %s)", s, strings.Join(objectiveNames, ", "))
}

// Correction selects how the behaviour importance weight
// w_t = π_old(y_t)/π_behav(y_t) corrects the loss of a sample whose
// sampler (an inference engine: other kernels, precision, or an older
// version) is not the trainer. The weight is a constant: no gradient
// flows through it.
type Correction int

const (
	// CorrectionOff trains as if the sampler were the trainer (c = 1).
	CorrectionOff Correction = iota
	// TokenTIS truncates each token's weight: c_t = min(w_t, cap).
	TokenTIS
	// TokenMIS keeps a token with c_t = w_t when low ≤ w_t ≤ cap and
	// leaves it out of the loss otherwise.
	TokenMIS
	// SeqTIS weighs every token of a sequence by W = min(Π_t w_t, cap).
	SeqTIS
	// SeqMIS weighs a sequence by W = Π_t w_t when low ≤ W ≤ cap and
	// leaves it out otherwise.
	SeqMIS
	// GeoMIS is SeqMIS on the geometric mean exp(mean_t ln w_t), which does
	// not grow or shrink with the sequence's length.
	GeoMIS
)

var correctionNames = []string{"off", "token-tis", "token-mis", "seq-tis", "seq-mis", "geo-mis"}

func (c Correction) String() string {
	if c >= 0 && int(c) < len(correctionNames) {
		return correctionNames[c]
	}
	return fmt.Sprintf("Correction(%d)", int(c))
}

// ParseCorrection reads a correction's name: off, token-tis, token-mis,
// seq-tis, seq-mis or geo-mis.
func ParseCorrection(s string) (Correction, error) {
	if i := slices.Index(correctionNames, s); i >= 0 {
		return Correction(i), nil
	}
	return 0, fmt.Errorf("unknown rollout correction %q (want one of %s)", s, strings.Join(correctionNames, ", "))
}

// GRPOParams configure the clipped surrogate objective.
type GRPOParams struct {
	// ClipLow is ε: ratios below 1-ClipLow are clipped. Default 0.2.
	ClipLow float64
	// ClipHigh is ε_high for clip-higher (DAPO): ratios above 1+ClipHigh
	// are clipped. Default: ClipLow.
	ClipHigh float64
	// KLCoef weighs the k3 estimate of KL(π_θ || π_ref) per token; 0 (the
	// default) turns the KL term off and reference log-probs are unused.
	KLCoef float64
	// Averaging of per-token losses. Default TokenMean.
	Averaging Averaging
	// MinTokenProb, when positive, leaves out of the loss every completion
	// token the sampler drew with a probability below it (by the old
	// log-probs; sequences without them are not filtered), and in a sample
	// with a negative advantage every token after the first such one: the
	// rest of that sample follows a prefix the policy would not write. Such
	// tokens carry the largest gradients of a batch (1 − p of a token drawn
	// at p ≈ 1e-5 against ≈ 0.001 for the tokens a memorizing model is sure
	// of) and, on the built-in model, reinforcing or punishing these
	// sampling accidents broke the policy (see README). The left-out tokens
	// still count in TokenMean's denominator. 0 (the default) keeps all.
	MinTokenProb float64
	// PositiveOnly trains on the samples with a positive advantage only:
	// a negative advantage counts as 0 (the KL term stays), and the
	// sample's tokens still count in TokenMean's denominator. The group
	// baseline is unchanged, so this is GRPO's reinforcing half; with a
	// 0/1 reward it is rejection-sampling fine-tuning weighted by
	// advantage (RAFT). A negative sample of a model that imitates its
	// answers is mostly a correct answer up to a slip, and pushing all of
	// it down unlearns the correct part; on the built-in model this half
	// alone gained more than full GRPO over a frozen control on two of
	// three seeds, and less on the third (docs/experiments.md).
	PositiveOnly bool
	// Objective is the surrogate: GRPO's token clip (the default), GSPO or
	// CISPO.
	Objective Objective
	// Correction corrects for the sampler not being the trainer, by the
	// weight w_t = π_old(y_t)/π_behav(y_t) of each token that has the
	// sampler's log-probs (Sequence.BehavLogProbs). Default off.
	Correction Correction
	// ISCap is the upper bound C of the weight: truncation's cap (TIS) and
	// the mask's upper bound (MIS). Default 2.
	ISCap float64
	// ISLow is the mask's lower bound (MIS only): weights below it are
	// left out. Default 1/ISCap.
	ISLow float64
	// ISVeto masks a whole sequence when any of its tokens has a weight
	// below it (the sampler drew a token the trainer finds all but
	// impossible: a broken sample rather than drift), whatever the
	// correction except off. Default 1e-4; negative disables.
	ISVeto float64
}

func (p GRPOParams) isCap() float64 {
	if p.ISCap == 0 {
		return 2
	}
	return p.ISCap
}

func (p GRPOParams) isLow() float64 {
	if p.ISLow == 0 {
		return 1 / p.isCap()
	}
	return p.ISLow
}

func (p GRPOParams) isVeto() float64 {
	if p.ISVeto == 0 {
		return 1e-4
	}
	return p.ISVeto
}

func (p GRPOParams) clipLow() float64 {
	if p.ClipLow == 0 {
		return 0.2
	}
	return p.ClipLow
}

func (p GRPOParams) clipHigh() float64 {
	if p.ClipHigh == 0 {
		return p.clipLow()
	}
	return p.ClipHigh
}

// Validate names the first invalid field.
func (p GRPOParams) Validate() error {
	switch {
	case p.ClipLow < 0 || p.ClipLow >= 1:
		return fmt.Errorf("gpu: GRPOParams.ClipLow %v outside [0,1)", p.ClipLow)
	case p.ClipHigh < 0:
		return fmt.Errorf("gpu: GRPOParams.ClipHigh %v is negative", p.ClipHigh)
	case p.KLCoef < 0:
		return fmt.Errorf("gpu: GRPOParams.KLCoef %v is negative", p.KLCoef)
	case p.MinTokenProb < 0 || p.MinTokenProb >= 1:
		return fmt.Errorf("gpu: GRPOParams.MinTokenProb %v outside [0,1)", p.MinTokenProb)
	case p.Averaging != TokenMean && p.Averaging != SequenceMean:
		return fmt.Errorf("gpu: GRPOParams.Averaging %d is unknown", p.Averaging)
	case p.Objective < ObjectiveGRPO || p.Objective > ObjectiveCISPO:
		return fmt.Errorf("gpu: GRPOParams.Objective %d is unknown", p.Objective)
	case p.Correction < CorrectionOff || p.Correction > GeoMIS:
		return fmt.Errorf("gpu: GRPOParams.Correction %d is unknown", p.Correction)
	case p.ISCap < 0 || p.ISCap != 0 && p.ISCap <= 1:
		return fmt.Errorf("gpu: GRPOParams.ISCap %v, want > 1", p.ISCap)
	case p.ISLow < 0 || p.ISLow >= p.isCap():
		return fmt.Errorf("gpu: GRPOParams.ISLow %v outside [0, ISCap %v)", p.ISLow, p.isCap())
	case math.IsNaN(p.ISVeto) || p.ISVeto >= 1:
		return fmt.Errorf("gpu: GRPOParams.ISVeto %v, want < 1", p.ISVeto)
	}
	return nil
}

// TokenLoss is the objective's value on one sequence's completion tokens.
type TokenLoss struct {
	Loss  float64   // sum over tokens of weight*loss_t (see PolicyLoss)
	DLogp []float64 // d Loss / d logp_t
	KL    float64   // sum of k3 estimates against the reference
	// Clipped counts the tokens the PPO clip acted on: GRPO's tokens whose
	// ratio was clipped (gradient 0), every token of a GSPO sequence whose
	// ratio was clipped, CISPO's tokens whose weight was capped.
	Clipped  int
	Masked   int // tokens left out by MinTokenProb (loss and gradient 0)
	RatioMax float64
	// Entropy is the sum over tokens of −ln π_old(y_t): with y drawn from
	// the policy, its mean is an unbiased estimate of the policy's
	// per-token entropy.
	Entropy float64
	// Rollout measures the sampler–trainer mismatch over the tokens with
	// behaviour log-probs.
	Rollout RolloutStats
}

// RolloutStats are sums over tokens of the behaviour weight
// w = π_old/π_behav and what the correction did with it, so that
// micro-batches and steps add up; Means turns them into the statistics a
// step reports.
type RolloutStats struct {
	Tokens    int     // tokens with behaviour log-probs
	K3        float64 // Σ w − 1 − ln w (≥ 0; 0 when π_old = π_behav)
	Diff      float64 // Σ |ln π_old − ln π_behav|
	DiffMax   float64
	Weight    float64 // Σ w, before truncation
	WeightMax float64
	// Truncated counts the tokens whose weight the correction capped
	// or masked (a vetoed or masked sequence counts all its tokens).
	Truncated int
}

// Add accumulates o into s.
func (s *RolloutStats) Add(o RolloutStats) {
	s.Tokens += o.Tokens
	s.K3 += o.K3
	s.Diff += o.Diff
	s.DiffMax = math.Max(s.DiffMax, o.DiffMax)
	s.Weight += o.Weight
	s.WeightMax = math.Max(s.WeightMax, o.WeightMax)
	s.Truncated += o.Truncated
}

// Means returns the mean k3, the mean |Δ ln π|, the mean weight and the
// fraction truncated over the tokens counted (all 0 without tokens).
func (s RolloutStats) Means() (k3, diff, weight, truncated float64) {
	if s.Tokens == 0 {
		return 0, 0, 0, 0
	}
	n := float64(s.Tokens)
	return s.K3 / n, s.Diff / n, s.Weight / n, float64(s.Truncated) / n
}

// PolicyInput is one sequence's completion tokens for PolicyLoss.
type PolicyInput struct {
	Adv float64 // the sequence's advantage
	// Logp is ln π_θ(y_t): the values the gradient is taken with respect to.
	Logp []float64
	// Old is ln π_old(y_t), the proximal policy of the PPO ratio, a
	// constant. nil: Logp itself, detached (ratio 1): with one optimizer
	// update per batch, the step's own forward pass is the trainer's
	// policy at the start of the step, so it is π_old recomputed.
	Old []float64
	// Behav is ln π_behav(y_t) as the sampler reported it. nil: no
	// behaviour weight (c = 1) and no rollout statistics.
	Behav []float64
	// Ref is ln π_ref(y_t) of the frozen reference; read only when
	// KLCoef > 0.
	Ref []float64
	// Weight is each token's averaging factor (1/tokens of the batch, or
	// 1/(n·sequences) with SequenceMean).
	Weight float64
}

// GRPOLoss is PolicyLoss for the given objective without a behaviour
// correction, old standing for π_old (nil: on-policy).
func GRPOLoss(p GRPOParams, adv float64, logp, old, ref []float64, weight float64) TokenLoss {
	return PolicyLoss(p, PolicyInput{Adv: adv, Logp: logp, Old: old, Ref: ref, Weight: weight})
}

// PolicyLoss computes one sequence's loss and its gradient with respect
// to Logp. With r_t = π_θ(y_t)/π_old(y_t), c_t the behaviour correction
// (see Correction), ε_low, ε_high the clip range and A the advantage:
//
//	GRPO:  ℓ_t = −c_t · min(r_t A, clip(r_t, 1−ε_low, 1+ε_high) A)
//	GSPO:  ℓ   = −c̄ · min(s A, clip(s, 1−ε_low, 1+ε_high) A) · m,  s = exp(mean_t ln r_t)
//	CISPO: ℓ_t = −c_t · sg(min(r_t, 1+ε_high)) · A · ln π_θ(y_t)
//
// each term times Weight, plus β·k3 against the reference per token when
// KLCoef > 0. For GSPO, m is the number of tokens in the loss (so the
// sequence weighs as its tokens do under either averaging) and c̄ the
// mean of its tokens' corrections (the sequence weight itself for the
// sequence-level corrections). Tokens left out by MinTokenProb or masked
// by the correction carry no loss and no gradient.
func PolicyLoss(p GRPOParams, in PolicyInput) TokenLoss {
	logp, adv, weight := in.Logp, in.Adv, in.Weight
	n := len(logp)
	out := TokenLoss{DLogp: make([]float64, n)}
	if p.PositiveOnly && adv < 0 {
		adv = 0
	}
	old := in.Old
	if old == nil {
		old = logp
	}
	// keep[t]: the token is in the loss (MinTokenProb decides on the
	// sampler's log-probs where there are any).
	keep := make([]bool, n)
	drawn := in.Behav
	if drawn == nil {
		drawn = in.Old
	}
	minLogp, cut := math.Inf(-1), n
	if p.MinTokenProb > 0 && drawn != nil {
		minLogp = math.Log(p.MinTokenProb)
		if adv < 0 {
			for t, o := range drawn {
				if o < minLogp {
					cut = t + 1
					break
				}
			}
		}
	}
	for t := range logp {
		keep[t] = t < cut && (drawn == nil || drawn[t] >= minLogp)
		if !keep[t] {
			out.Masked++
		}
		out.Entropy -= old[t]
	}
	c := correct(p, old, in.Behav, &out.Rollout)
	lo, hi := 1-p.clipLow(), 1+p.clipHigh()
	switch p.Objective {
	case ObjectiveGSPO:
		var sum, cs float64
		m := 0
		for t := range logp {
			if keep[t] {
				sum += logp[t] - old[t]
				cs += c[t]
				m++
			}
		}
		if m > 0 {
			s := math.Exp(sum / float64(m))
			cbar := cs / float64(m)
			out.RatioMax = s
			sc := math.Min(math.Max(s, lo), hi)
			scale := weight * float64(m)
			if s*adv <= sc*adv {
				out.Loss -= scale * cbar * s * adv
				// d s / d logp_t = s/m for each token in the loss.
				for t := range logp {
					if keep[t] {
						out.DLogp[t] = -weight * cbar * s * adv
					}
				}
			} else {
				out.Loss -= scale * cbar * sc * adv
				out.Clipped += m
			}
		}
	default:
		for t, lp := range logp {
			if !keep[t] {
				continue
			}
			r := math.Exp(lp - old[t])
			out.RatioMax = math.Max(out.RatioMax, r)
			var l, g float64
			if p.Objective == ObjectiveCISPO {
				rw := math.Min(r, hi)
				if r > hi {
					out.Clipped++
				}
				l, g = -c[t]*rw*adv*lp, -c[t]*rw*adv
			} else {
				rc := math.Min(math.Max(r, lo), hi)
				if unclipped, clipped := r*adv, rc*adv; unclipped <= clipped {
					// The unclipped term is the minimum: its gradient flows.
					l, g = -c[t]*unclipped, -c[t]*adv*r
				} else {
					l = -c[t] * clipped
					out.Clipped++
				}
			}
			out.Loss += weight * l
			out.DLogp[t] = weight * g
		}
	}
	if p.KLCoef > 0 {
		for t, lp := range logp {
			if !keep[t] {
				continue
			}
			d := in.Ref[t] - lp
			k3 := math.Exp(d) - d - 1
			out.KL += k3
			out.Loss += weight * p.KLCoef * k3
			out.DLogp[t] += weight * p.KLCoef * (1 - math.Exp(d))
		}
	}
	return out
}

// correct returns the behaviour correction c_t of each token and adds the
// weights' statistics to st. Without behaviour log-probs every c_t is 1.
func correct(p GRPOParams, old, behav []float64, st *RolloutStats) []float64 {
	n := len(old)
	c := make([]float64, n)
	for t := range c {
		c[t] = 1
	}
	if behav == nil {
		return c
	}
	lw, ws := make([]float64, n), make([]float64, n)
	var sum float64
	veto := false
	for t := range old {
		lw[t] = old[t] - behav[t]
		ws[t] = math.Exp(lw[t])
		w := ws[t]
		sum += lw[t]
		st.Tokens++
		// w − 1 − ln w, with expm1 so that it stays exact near w = 1.
		st.K3 += math.Expm1(lw[t]) - lw[t]
		st.Diff += math.Abs(lw[t])
		st.DiffMax = math.Max(st.DiffMax, math.Abs(lw[t]))
		st.Weight += w
		st.WeightMax = math.Max(st.WeightMax, w)
		if w < p.isVeto() {
			veto = true
		}
	}
	if p.Correction == CorrectionOff {
		return c
	}
	capW, low := p.isCap(), p.isLow()
	maskAll := func() []float64 {
		clear(c)
		st.Truncated += n
		return c
	}
	if veto {
		return maskAll()
	}
	switch p.Correction {
	case TokenTIS, TokenMIS:
		for t := range c {
			w := ws[t]
			switch {
			case w > capW && p.Correction == TokenTIS:
				c[t] = capW
				st.Truncated++
			case (w > capW || w < low) && p.Correction == TokenMIS:
				c[t] = 0
				st.Truncated++
			default:
				c[t] = w
			}
		}
	case SeqTIS, SeqMIS, GeoMIS:
		// In log space: a product of hundreds of token ratios overflows.
		lW := sum
		if p.Correction == GeoMIS && n > 0 {
			lW = sum / float64(n)
		}
		W := math.Exp(lW)
		switch {
		case p.Correction == SeqTIS && lW > math.Log(capW):
			W = capW
			st.Truncated += n
		case p.Correction != SeqTIS && (lW > math.Log(capW) || lW < math.Log(low)):
			return maskAll()
		}
		for t := range c {
			c[t] = W
		}
	}
	return c
}
