package train

import (
	"context"
	"math"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/prometheus/client_golang/prometheus"

	"swerl/pipelines/beamrun"
	"swerl/sinks/metrics"
	"swerl/transforms/rollout"
)

// The counts of the train pipeline: Beam namespace swerl.train, Prometheus
// names swerl_train_*. Each DoFn counts through these (Beam metrics,
// Prometheus and the progress line at once; see package metrics); the end
// summary reads them from the pipeline result.
var (
	counts = metrics.NewNamespace("swerl.train", "swerl_train_")

	cRecords      = counts.Counter("records", "records_total", "Input records read by the train pipeline.")
	cInstances    = counts.Counter("instances", "instances_total", "Instances decoded and prompted.")
	cRollouts     = counts.Counter("rollouts", "rollouts_total", "Completions received from the policy.")
	cScored       = counts.Counter("scored", "scored_total", "Completions scored.")
	cFormatErrors = counts.Counter("format_errors", "format_errors_total", "Scored completions with a format error.")
	cGroups       = counts.CounterVec("groups", "groups_total",
		"Finished groups by outcome (complete, incomplete, zero_variance, dropped).", "outcome")
	cDeadLetters = counts.CounterVec("deadletters", "deadletters_total",
		"Records routed to the dead-letter outputs, by stage.", "stage")
	cSamples    = counts.Counter("samples", "samples_total", "Sample rows written.")
	cDuplicates = counts.Counter("duplicates", "duplicate_samples_total", "Samples not written again because their id was already written.")
	cFiles      = counts.Counter("files", "files_total", "Parquet files written (samples and dead-letters).")
	// cRewardMicro sums the rewards of the samples written, in millionths
	// (Beam counters are integers), for the summary's mean reward; it is
	// not exported to Prometheus (mReward is).
	cRewardMicro   = counts.Counter("reward_sum_micro", "", "")
	cPolicyVersion = counts.Max("policy_version", "policy_version", "Weight version of the newest policy response.")

	mReward = metrics.Factory.Histogram(prometheus.HistogramOpts{Name: "swerl_train_reward",
		Help:    "Rewards of scored completions (−1 is a format error).",
		Buckets: []float64{-1, -0.5, 0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 1}})
	mStaleness = metrics.Factory.Gauge(prometheus.GaugeOpts{Name: "swerl_train_policy_staleness",
		Help: "Versions between the newest announced policy version and the one that produced the latest rollouts."})
	mLag = metrics.Factory.Gauge(prometheus.GaugeOpts{Name: "swerl_train_consumer_lag",
		Help: "Input records known to be waiting behind the train pipeline's read position."})
)

// Outcomes of a finished group (label values of cGroups).
const (
	groupComplete     = "complete"
	groupIncomplete   = "incomplete"
	groupZeroVariance = "zero_variance"
	groupDropped      = "dropped"
)

// stats are what the DoFns of one run share in one process, found by run
// id in runs: the policy Run opened and the semaphore of its policy
// requests.
type stats struct {
	mu     sync.Mutex
	policy rollout.Policy // opened by Run, shared by the run's DoFns
	sem    chan struct{}  // bounds the run's policy requests; made by the first rolloutFn
}

// runs are the stats of this process's runs (beamrun.Registry: Run
// registers them, the DoFns look them up, Run's end releases them).
var runs = beamrun.NewRegistry[*stats]("train run")

// runStats returns the stats of run id, creating them when this process did
// not start the run (a remote worker).
func runStats(id string) *stats {
	s, _ := runs.LoadOrCreate(id, func() (*stats, error) { return &stats{}, nil })
	return s
}

func dropRun(id string) { runs.Release(id) }

// notePolicyVersion counts the version v of a policy response; newest is
// the newest version the policy knows (-1: unknown).
func notePolicyVersion(ctx context.Context, v, newest int64) {
	cPolicyVersion.Observe(ctx, v)
	if newest >= 0 && v >= 0 {
		mStaleness.Set(float64(max(newest-v, 0)))
	}
}

// summarize fills a Summary from the counts of a run. res is the pipeline
// result (nil when the run failed or was stopped: then the counts of this
// process are used, which miss the work of other worker processes).
func summarize(res beam.PipelineResult, since metrics.Baseline) (sum Summary, fromRunner bool) {
	c := counts.Totals(res, since)
	groups, dead := c.Counts(cGroups), c.Counts(cDeadLetters)
	out := Summary{
		Records: c.Count(cRecords), Instances: c.Count(cInstances), Rollouts: c.Count(cRollouts),
		Scored: c.Count(cScored), FormatErrors: c.Count(cFormatErrors),
		Groups:       groups[groupComplete] + groups[groupIncomplete],
		ZeroVariance: groups[groupZeroVariance], Incomplete: groups[groupIncomplete], DroppedGroups: groups[groupDropped],
		Samples: c.Count(cSamples), Duplicates: c.Count(cDuplicates), Files: c.Count(cFiles),
		PolicyVersion: -1,
	}
	for _, n := range dead {
		out.DeadLetters += n
	}
	if out.Samples > 0 {
		out.MeanReward = float64(c.Count(cRewardMicro)) / 1e6 / float64(out.Samples)
	}
	if v, seen := c.Max(cPolicyVersion); seen {
		out.PolicyVersion = v
	}
	return out, c.FromRunner()
}

func micro(r float64) int64 { return int64(math.Round(r * 1e6)) }
