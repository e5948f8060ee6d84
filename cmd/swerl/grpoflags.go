package main

import (
	"flag"
	"strings"

	"swerl/gpu"
)

// grpoFlags are the RL objective's flags, defined once for learn and run:
// the clip, the KL term, the averaging and filters, the surrogate, and the
// off-policy correction of samples whose sampler is not the trainer.
type grpoFlags struct {
	clipLow, clipHigh, kl, minTokenProb float64
	averaging                           string
	positiveOnly, maskTruncated         bool
	loss, correction                    string
	isCap, isLow, isVeto                float64
}

// grpoDefaults are the defaults a command gives the flags whose default
// is deliberately its own: learn's are plain GRPO with DAPO's token
// averaging; run's are what made the built-in model learn.
type grpoDefaults struct {
	clipHigh, minTokenProb float64
	positiveOnly           bool
	// why is added to the help of those flags.
	why string
}

var (
	learnGRPO = grpoDefaults{}
	runGRPO   = grpoDefaults{clipHigh: 0.28, minTokenProb: 0.05, positiveOnly: true,
		why: "; swerl run's default is the one that made the built-in model learn (docs/run.md, docs/experiments.md)"}
)

func addGRPOFlags(fs *flag.FlagSet, d grpoDefaults) *grpoFlags {
	f := &grpoFlags{}
	section(fs, "GRPO objective and off-policy corrections")
	defer endSection(fs)
	fs.Float64Var(&f.clipLow, "clip-eps", 0.2, "ε of the clipped surrogate")
	fs.Float64Var(&f.clipHigh, "clip-eps-high", d.clipHigh, "ε_high for clip-higher (0: same as --clip-eps)"+d.why)
	fs.Float64Var(&f.kl, "kl-coef", 0, "weight of the k3 KL to the frozen reference: version 0, or in swerl run the version RL starts from after the warm start (0: off)")
	fs.StringVar(&f.averaging, "averaging", "token", "loss averaging: token (DAPO) or sequence (GRPO)")
	fs.BoolVar(&f.positiveOnly, "positive-only", d.positiveOnly, "train only on samples with a positive advantage (GRPO's reinforcing half: negative advantages count as 0)"+d.why)
	fs.Float64Var(&f.minTokenProb, "min-token-prob", d.minTokenProb, "leave out of the loss tokens sampled with a lower probability, and a negative sample's tokens after the first of them (0: off)"+d.why)
	fs.BoolVar(&f.maskTruncated, "mask-truncated", false, "leave completions cut at the token limit out of the loss (DAPO's overlong filtering)")
	fs.StringVar(&f.loss, "loss", "grpo", "policy objective: grpo (PPO's token clip), gspo (one length-normalized ratio clipped per sequence) or cispo (REINFORCE with a capped, stop-gradient ratio: no token loses its gradient)")
	fs.StringVar(&f.correction, "rollout-correction", "auto", "correct for the sampler not being the trainer by w = π_old/π_behav: off, token-tis, token-mis, seq-tis, seq-mis or geo-mis (TIS truncates w at --rollout-cap, MIS masks outside [--rollout-low, --rollout-cap]; seq: the product over the sequence, geo: its geometric mean); auto: token-tis for samples from an inference engine (learn; run with --policy http://…), off for run's in-process sampler")
	fs.Float64Var(&f.isCap, "rollout-cap", 2, "upper bound of the importance weight (truncation cap, mask bound); > 1")
	fs.Float64Var(&f.isLow, "rollout-low", 0, "lower bound of the masking corrections (0: 1/--rollout-cap)")
	fs.Float64Var(&f.isVeto, "rollout-veto", 1e-4, "mask a sample whose any token has a weight below this (the sampler drew a token the trainer finds all but impossible); 0 or negative: off")
	return f
}

// params returns the objective the flags describe; engine says whether
// the samples come from an inference engine (auto's choice).
func (f *grpoFlags) params(engine bool) (gpu.GRPOParams, error) {
	p := gpu.GRPOParams{ClipLow: f.clipLow, ClipHigh: f.clipHigh, KLCoef: f.kl, MinTokenProb: f.minTokenProb, PositiveOnly: f.positiveOnly}
	switch f.averaging {
	case "token":
		p.Averaging = gpu.TokenMean
	case "sequence":
		p.Averaging = gpu.SequenceMean
	default:
		return p, usagef("--averaging %q: want token or sequence", f.averaging)
	}
	var err error
	if p.Objective, err = gpu.ParseObjective(f.loss); err != nil {
		return p, usagef("--loss: %v", err)
	}
	c := f.correction
	if c == "auto" {
		c = "off"
		if engine {
			c = "token-tis"
		}
	}
	if p.Correction, err = gpu.ParseCorrection(c); err != nil {
		return p, usagef("--rollout-correction: %v", err)
	}
	p.ISCap, p.ISLow, p.ISVeto = f.isCap, f.isLow, f.isVeto
	if f.isVeto == 0 {
		p.ISVeto = -1 // GRPOParams: 0 is the default 1e-4
	}
	if err := p.Validate(); err != nil {
		return p, usagef("%s", strings.NewReplacer("gpu: ", "", "GRPOParams.ClipLow", "--clip-eps", "GRPOParams.ClipHigh", "--clip-eps-high",
			"GRPOParams.KLCoef", "--kl-coef", "GRPOParams.MinTokenProb", "--min-token-prob", "GRPOParams.ISCap", "--rollout-cap",
			"GRPOParams.ISLow", "--rollout-low", "GRPOParams.ISVeto", "--rollout-veto").Replace(err.Error()))
	}
	return p, nil
}
