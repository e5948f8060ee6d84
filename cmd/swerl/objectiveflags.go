package main

import (
	"flag"
	"strings"

	"swerl/gpu"
)

// objectiveFlags are the RL objective's flags shared by learn and run:
// the surrogate and the off-policy correction of samples whose sampler is
// not the trainer.
type objectiveFlags struct {
	loss, correction string
	isCap, isLow     float64
	isVeto           float64
}

func addObjectiveFlags(fs *flag.FlagSet) *objectiveFlags {
	f := &objectiveFlags{}
	fs.StringVar(&f.loss, "loss", "grpo", "policy objective: grpo (PPO's token clip), gspo (one length-normalized ratio clipped per sequence) or cispo (REINFORCE with a capped, stop-gradient ratio: no token loses its gradient)")
	fs.StringVar(&f.correction, "rollout-correction", "auto", "correct for the sampler not being the trainer by w = π_old/π_behav: off, token-tis, token-mis, seq-tis, seq-mis or geo-mis (TIS truncates w at --rollout-cap, MIS masks outside [--rollout-low, --rollout-cap]; seq: the product over the sequence, geo: its geometric mean); auto: token-tis for samples from an inference engine (learn; run with --policy http://…), off for run's in-process sampler")
	fs.Float64Var(&f.isCap, "rollout-cap", 2, "upper bound of the importance weight (truncation cap, mask bound); > 1")
	fs.Float64Var(&f.isLow, "rollout-low", 0, "lower bound of the masking corrections (0: 1/--rollout-cap)")
	fs.Float64Var(&f.isVeto, "rollout-veto", 1e-4, "mask a sample whose any token has a weight below this (the sampler drew a token the trainer finds all but impossible); 0 or negative: off")
	return f
}

// apply sets p's objective and correction; engine says whether the samples
// come from an inference engine (auto's choice).
func (f *objectiveFlags) apply(p *gpu.GRPOParams, engine bool) error {
	var err error
	if p.Objective, err = gpu.ParseObjective(f.loss); err != nil {
		return usagef("--loss: %v", err)
	}
	c := f.correction
	if c == "auto" {
		c = "off"
		if engine {
			c = "token-tis"
		}
	}
	if p.Correction, err = gpu.ParseCorrection(c); err != nil {
		return usagef("--rollout-correction: %v", err)
	}
	if f.isVeto == 0 {
		f.isVeto = -1 // GRPOParams: 0 is the default 1e-4
	}
	p.ISCap, p.ISLow, p.ISVeto = f.isCap, f.isLow, f.isVeto
	if err := p.Validate(); err != nil {
		return usagef("%s", strings.NewReplacer("gpu: ", "", "GRPOParams.ISCap", "--rollout-cap", "GRPOParams.ISLow", "--rollout-low", "GRPOParams.ISVeto", "--rollout-veto").Replace(err.Error()))
	}
	return nil
}
