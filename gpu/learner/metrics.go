package learner

import (
	"github.com/prometheus/client_golang/prometheus"

	"swerl/sinks/metrics"
)

var (
	mSteps = metrics.Factory.Counter(prometheus.CounterOpts{
		Name: "swerl_learn_steps_total", Help: "Optimizer steps taken by the learner (GRPO and SFT).",
	})
	mSamples = metrics.Factory.CounterVec(prometheus.CounterOpts{
		Name: "swerl_learn_samples_total", Help: "Samples consumed by the learner, by outcome (trained, stale, skipped, truncated, incomplete).",
	}, []string{"outcome"})
	mLoss = metrics.Factory.Gauge(prometheus.GaugeOpts{
		Name: "swerl_learn_loss", Help: "Objective value of the last optimizer step.",
	})
	mReward = metrics.Factory.Gauge(prometheus.GaugeOpts{
		Name: "swerl_learn_mean_reward", Help: "Mean reward of the samples of the last step.",
	})
	mVersion = metrics.Factory.Gauge(prometheus.GaugeOpts{
		Name: "swerl_learn_weight_version", Help: "Last weight version the learner published.",
	})
	mTokensPerSec = metrics.Factory.Gauge(prometheus.GaugeOpts{
		Name: "swerl_learn_tokens_per_second", Help: "Completion tokens per second of the last step (train and publish).",
	})
	mOffPolicy = metrics.Factory.GaugeVec(prometheus.GaugeOpts{
		Name: "swerl_learn_step_stat", Help: "Statistics of the last optimizer step, by name: the sampler–trainer mismatch (rollout_kl, rollout_logprob_diff_max, rollout_logprob_diff_mean, is_weight_mean, is_weight_max, is_truncated_frac) and ppo_clipped_frac, grad_norm, entropy (see the step record).",
	}, []string{"stat"})
)

// gauge sets the step-statistics gauges.
func (st StepStats) gauge() {
	for name, v := range map[string]float64{
		"rollout_kl": st.RolloutKL, "rollout_logprob_diff_max": st.RolloutLogprobDiffMax, "rollout_logprob_diff_mean": st.RolloutLogprobDiffMean,
		"is_weight_mean": st.ISWeightMean, "is_weight_max": st.ISWeightMax, "is_truncated_frac": st.ISTruncatedFrac,
		"ppo_clipped_frac": st.PPOClippedFrac, "grad_norm": st.GradNorm, "entropy": st.Entropy,
	} {
		mOffPolicy.WithLabelValues(name).Set(v)
	}
}
