package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"swerl/internal/plot"
)

// stepRow is the part of a learner step record (trained/vNNNNNN.json)
// the report plots: the sampler–trainer mismatch and the objective's
// health.
type stepRow struct {
	Version         int64   `json:"version"`
	RolloutKL       float64 `json:"rollout_kl"`
	ISWeightMax     float64 `json:"is_weight_max"`
	ISTruncatedFrac float64 `json:"is_truncated_frac"`
	PPOClippedFrac  float64 `json:"ppo_clipped_frac"`
	GradNorm        float64 `json:"grad_norm"`
	Entropy         float64 `json:"entropy"`
	RolloutTokens   int     `json:"rollout_tokens"`
}

// loadSteps reads the step records under dir/trained, by version. A
// record that does not parse is an error naming it: the report must not
// plot a silent gap.
func loadSteps(dir string) ([]stepRow, error) {
	files, err := filepath.Glob(filepath.Join(dir, "trained", "v*.json"))
	if err != nil {
		return nil, err
	}
	var out []stepRow
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		var r stepRow
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Errorf("report: step record %s: %w", f, err)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// offPolicy plots, per version, the mismatch between the sampler's and
// the trainer's log-probabilities and what the correction and the clip
// did; nil when no step carried the sampler's log-probabilities.
func offPolicy(d *Data) *Figure {
	var xs, kl, wmax, trunc, clip, ent []float64
	for _, s := range d.Steps {
		if s.RolloutTokens == 0 {
			continue
		}
		xs = append(xs, float64(s.Version))
		kl = append(kl, s.RolloutKL)
		wmax = append(wmax, s.ISWeightMax)
		trunc = append(trunc, s.ISTruncatedFrac)
		clip = append(clip, s.PPOClippedFrac)
		ent = append(ent, s.Entropy)
	}
	if len(xs) == 0 {
		return nil
	}
	return &Figure{"off_policy", "The sampler–trainer mismatch of each step: rollout KL (mean of w − 1 − ln w, w = π_old/π_behav), the largest importance weight, the fraction of tokens the correction truncated or masked, the fraction the PPO clip acted on, and the sampled-token entropy. A rising rollout KL with a falling reward is the engine–trainer drift that collapses runs.",
		&plot.Chart{Title: "Off-policy statistics by version", XLabel: "version trained", YLabel: "",
			Series: []plot.Series{{Name: "rollout KL", X: xs, Y: kl}, {Name: "max weight", X: xs, Y: wmax}, {Name: "truncated frac", X: xs, Y: trunc},
				{Name: "PPO-clipped frac", X: xs, Y: clip}, {Name: "entropy", X: xs, Y: ent}}}}
}
