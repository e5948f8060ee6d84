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
)
