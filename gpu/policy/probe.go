package policy

import (
	"context"
	"fmt"
	"time"

	"swerl/transforms/rollout"
)

// probeText is the prompt Probe continues: a line of code, tokens any
// vocabulary has.
const probeText = "def main():\n    return 1\n"

// probeInstance is the instance id of Probe's request; the test hook
// afterCompletion ignores it (a Reload inside the hook probes).
const probeInstance = "\x00swerl-probe"

// Probe runs the version p serves forward on a short fixed prompt (a few
// greedy tokens) and returns an error when a log-probability is NaN or
// infinite. Finite weights can still overflow float32 in the forward pass
// (weights of 3e38 do): such a model samples every answer empty. The error
// names the tensor holding the largest magnitude, the first suspect.
// Whoever installs new weights probes them before they replace the ones
// serving.
func (p *Policy) Probe(ctx context.Context) error { return p.probe(ctx, p.cur.Load()) }

// probe is Probe of version st, served or about to be.
func (p *Policy) probe(ctx context.Context, st *state) error {
	prompt := st.tok.Encode(probeText)
	if len(prompt) == 0 {
		prompt = []int32{0}
	}
	// A context shorter than the prompt still gets probed.
	prompt = prompt[:max(1, min(len(prompt), st.maxSeq/2))]
	resp, err := p.sample(ctx, st, rollout.Request{InstanceID: probeInstance, N: 1, MaxTokens: 4, Temperature: 1e-9, Seed: 1},
		prompt, Params{}, time.Now())
	if err != nil {
		return fmt.Errorf("policy: probe of %s: %w", st.dir, err)
	}
	for _, c := range resp.Completions {
		for i, lp := range c.LogProbs {
			if lp-lp != 0 { // NaN or ±Inf
				name, mag := st.model.Largest()
				return fmt.Errorf("policy: %s: a forward pass on a probe prompt gives a log-probability of %v at token %d: the weights overflow float32 (the largest, %.3g, is in tensor %q)",
					st.dir, lp, i, mag, name)
			}
		}
	}
	return nil
}
