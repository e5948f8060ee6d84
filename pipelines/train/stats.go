package train

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"swerl/sinks/metrics"
	"swerl/transforms/rollout"
)

// Prometheus metrics of the train pipeline, registered once per process.
var (
	mRecords = metrics.Factory.Counter(prometheus.CounterOpts{Name: "swerl_train_records_total",
		Help: "Input records read by the train pipeline."})
	mRollouts = metrics.Factory.Counter(prometheus.CounterOpts{Name: "swerl_train_rollouts_total",
		Help: "Completions received from the policy."})
	mReward = metrics.Factory.Histogram(prometheus.HistogramOpts{Name: "swerl_train_reward",
		Help:    "Rewards of scored completions (−1 is a format error).",
		Buckets: []float64{-1, -0.5, 0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 1}})
	mFormatErrors = metrics.Factory.Counter(prometheus.CounterOpts{Name: "swerl_train_format_errors_total",
		Help: "Scored completions with a format error."})
	mGroups = metrics.Factory.CounterVec(prometheus.CounterOpts{Name: "swerl_train_groups_total",
		Help: "Finished groups by outcome (complete, incomplete, zero_variance, dropped)."}, []string{"outcome"})
	mDeadLetters = metrics.Factory.CounterVec(prometheus.CounterOpts{Name: "swerl_train_deadletters_total",
		Help: "Records routed to the dead-letter outputs, by stage."}, []string{"stage"})
	mSamples = metrics.Factory.Counter(prometheus.CounterOpts{Name: "swerl_train_samples_total",
		Help: "Sample rows written."})
	mPolicyVersion = metrics.Factory.Gauge(prometheus.GaugeOpts{Name: "swerl_train_policy_version",
		Help: "Weight version of the newest policy response."})
	mStaleness = metrics.Factory.Gauge(prometheus.GaugeOpts{Name: "swerl_train_policy_staleness",
		Help: "Versions between the newest announced policy version and the one that produced the latest rollouts."})
	mLag = metrics.Factory.Gauge(prometheus.GaugeOpts{Name: "swerl_train_consumer_lag",
		Help: "Input records known to be waiting behind the train pipeline's read position."})
)

// stats are the counters of one run. DoFns find them by run id; under a
// loopback runner they run in this process and update the Summary.
type stats struct {
	records, instances, rollouts, scored, formatErrors atomic.Int64
	groups, zeroVar, incomplete, dropped               atomic.Int64
	samples, dups, dead, files, fed                    atomic.Int64
	rewardSumMicro                                     atomic.Int64 // sum of written rewards × 1e6
	policyVersion                                      atomic.Int64

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
		s.policyVersion.Store(-1)
		runs[id] = s
	}
	return s
}

func dropRun(id string) {
	runsMu.Lock()
	delete(runs, id)
	runsMu.Unlock()
}

func (s *stats) notePolicyVersion(v int64, newest int64) {
	for {
		old := s.policyVersion.Load()
		if v <= old || s.policyVersion.CompareAndSwap(old, v) {
			break
		}
	}
	mPolicyVersion.Set(float64(v))
	if newest >= 0 && v >= 0 {
		mStaleness.Set(float64(max(newest-v, 0)))
	}
}

func (s *stats) summary() Summary {
	out := Summary{
		Records: s.records.Load(), Instances: s.instances.Load(), Rollouts: s.rollouts.Load(),
		Scored: s.scored.Load(), FormatErrors: s.formatErrors.Load(), Groups: s.groups.Load(),
		ZeroVariance: s.zeroVar.Load(), Incomplete: s.incomplete.Load(), DroppedGroups: s.dropped.Load(),
		Samples: s.samples.Load(), Duplicates: s.dups.Load(), DeadLetters: s.dead.Load(),
		Files: s.files.Load(), Fed: s.fed.Load(), PolicyVersion: s.policyVersion.Load(),
	}
	if out.Samples > 0 {
		out.MeanReward = float64(s.rewardSumMicro.Load()) / 1e6 / float64(out.Samples)
	}
	return out
}

func micro(r float64) int64 { return int64(math.Round(r * 1e6)) }
