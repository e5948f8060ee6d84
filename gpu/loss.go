package gpu

import (
	"fmt"
	"math"
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
	// three seeds, and less on the third (README).
	PositiveOnly bool
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
	}
	return nil
}

// TokenLoss is the objective's value on one sequence's completion tokens.
type TokenLoss struct {
	Loss     float64   // sum over tokens of weight*loss_t (see GRPOLoss)
	DLogp    []float64 // d Loss / d logp_t
	KL       float64   // sum of k3 estimates
	Clipped  int       // tokens whose ratio was clipped (gradient 0)
	Masked   int       // tokens left out by MinTokenProb (loss and gradient 0)
	RatioMax float64
}

// GRPOLoss computes, for one sequence with advantage adv, the per-token
// GRPO loss
//
//	loss_t = -min(r_t A, clip(r_t, 1-ε, 1+ε_high) A) + β k3_t,
//	r_t = exp(logp_t - old_t),  k3_t = exp(ref_t - logp_t) - (ref_t - logp_t) - 1,
//
// each multiplied by weight (the averaging factor), summed, with its
// gradient with respect to logp_t. old nil means on-policy (old = logp,
// ratio 1); ref is read only when p.KLCoef > 0.
func GRPOLoss(p GRPOParams, adv float64, logp, old, ref []float64, weight float64) TokenLoss {
	lo, hi := 1-p.clipLow(), 1+p.clipHigh()
	out := TokenLoss{DLogp: make([]float64, len(logp))}
	if p.PositiveOnly && adv < 0 {
		adv = 0
	}
	minLogp, cut := math.Inf(-1), len(logp)
	if p.MinTokenProb > 0 && old != nil {
		minLogp = math.Log(p.MinTokenProb)
		if adv < 0 {
			for t, o := range old {
				if o < minLogp {
					cut = t + 1
					break
				}
			}
		}
	}
	for t, lp := range logp {
		if t >= cut || old != nil && old[t] < minLogp {
			out.Masked++
			continue
		}
		o := lp
		if old != nil {
			o = old[t]
		}
		r := math.Exp(lp - o)
		out.RatioMax = math.Max(out.RatioMax, r)
		rc := math.Min(math.Max(r, lo), hi)
		unclipped, clipped := r*adv, rc*adv
		var l, g float64
		if unclipped <= clipped {
			// The unclipped term is the minimum: its gradient flows.
			l, g = -unclipped, -adv*r
		} else {
			l = -clipped
			out.Clipped++
		}
		if p.KLCoef > 0 {
			d := ref[t] - lp
			k3 := math.Exp(d) - d - 1
			out.KL += k3
			l += p.KLCoef * k3
			g += p.KLCoef * (1 - math.Exp(d))
		}
		out.Loss += weight * l
		out.DLogp[t] = weight * g
	}
	return out
}
