package train

import (
	"context"
	"math"
	"sync"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/prometheus/client_golang/prometheus"

	"swerl/sinks/metrics"
	"swerl/transforms/rollout"
)

// metricNS is the Beam namespace of the train pipeline's counts.
const metricNS = "swerl.train"

// The counts of the train pipeline. Each DoFn counts through these (Beam
// metrics, Prometheus and the progress line at once; see package
// metrics); the end summary reads them from the pipeline result.
var (
	cRecords = metrics.NewCounter(metricNS, "records", prometheus.CounterOpts{Name: "swerl_train_records_total",
		Help: "Input records read by the train pipeline."})
	cInstances = metrics.NewCounter(metricNS, "instances", prometheus.CounterOpts{Name: "swerl_train_instances_total",
		Help: "Instances decoded and prompted."})
	cRollouts = metrics.NewCounter(metricNS, "rollouts", prometheus.CounterOpts{Name: "swerl_train_rollouts_total",
		Help: "Completions received from the policy."})
	cScored = metrics.NewCounter(metricNS, "scored", prometheus.CounterOpts{Name: "swerl_train_scored_total",
		Help: "Completions scored."})
	cFormatErrors = metrics.NewCounter(metricNS, "format_errors", prometheus.CounterOpts{Name: "swerl_train_format_errors_total",
		Help: "Scored completions with a format error."})
	cGroups = metrics.NewCounterVec(metricNS, "groups", prometheus.CounterOpts{Name: "swerl_train_groups_total",
		Help: "Finished groups by outcome (complete, incomplete, zero_variance, dropped)."}, "outcome")
	cDeadLetters = metrics.NewCounterVec(metricNS, "deadletters", prometheus.CounterOpts{Name: "swerl_train_deadletters_total",
		Help: "Records routed to the dead-letter outputs, by stage."}, "stage")
	cSamples = metrics.NewCounter(metricNS, "samples", prometheus.CounterOpts{Name: "swerl_train_samples_total",
		Help: "Sample rows written."})
	cDuplicates = metrics.NewCounter(metricNS, "duplicates", prometheus.CounterOpts{Name: "swerl_train_duplicate_samples_total",
		Help: "Samples not written again because their id was already written."})
	cFiles = metrics.NewCounter(metricNS, "files", prometheus.CounterOpts{Name: "swerl_train_files_total",
		Help: "Parquet files written (samples and dead-letters)."})
	// cRewardMicro sums the rewards of the samples written, in millionths
	// (Beam counters are integers), for the summary's mean reward.
	cRewardMicro   = metrics.NewCounter(metricNS, "reward_sum_micro", prometheus.CounterOpts{})
	cPolicyVersion = metrics.NewMax(metricNS, "policy_version", prometheus.GaugeOpts{Name: "swerl_train_policy_version",
		Help: "Weight version of the newest policy response."})

	mReward = metrics.Factory.Histogram(prometheus.HistogramOpts{Name: "swerl_train_reward",
		Help:    "Rewards of scored completions (−1 is a format error).",
		Buckets: []float64{-1, -0.5, 0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 1}})
	mStaleness = metrics.Factory.Gauge(prometheus.GaugeOpts{Name: "swerl_train_policy_staleness",
		Help: "Versions between the newest announced policy version and the one that produced the latest rollouts."})
	mLag = metrics.Factory.Gauge(prometheus.GaugeOpts{Name: "swerl_train_consumer_lag",
		Help: "Input records known to be waiting behind the train pipeline's read position."})
)

// counters are the plain counts, for baselines.
var counters = []*metrics.Counter{cRecords, cInstances, cRollouts, cScored, cFormatErrors,
	cSamples, cDuplicates, cFiles, cRewardMicro}

// Outcomes of a finished group (label values of cGroups).
const (
	groupComplete     = "complete"
	groupIncomplete   = "incomplete"
	groupZeroVariance = "zero_variance"
	groupDropped      = "dropped"
)

// stats are what the DoFns of one run share in one process, found by run
// id: the policy Run opened.
type stats struct {
	mu     sync.Mutex
	policy rollout.Policy // opened by Run, shared by the run's DoFns
}

var (
	runsMu sync.Mutex
	runs   = map[string]*stats{}
)

// runStats returns the stats of run id, creating them when this process did
// not start the run (a remote worker).
func runStats(id string) *stats {
	runsMu.Lock()
	defer runsMu.Unlock()
	s := runs[id]
	if s == nil {
		s = &stats{}
		runs[id] = s
	}
	return s
}

func dropRun(id string) {
	runsMu.Lock()
	delete(runs, id)
	runsMu.Unlock()
}

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
	c := metrics.RunTotals(res, metricNS, since)
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
