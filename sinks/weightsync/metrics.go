package weightsync

import (
	"github.com/prometheus/client_golang/prometheus"

	"swerl/sinks/metrics"
)

// The weight sync's Prometheus metrics: what each engine holds, what
// requests to it name (Table), and the pushes of an Async that fell
// behind the learner.
var (
	mHeld = metrics.Factory.GaugeVec(prometheus.GaugeOpts{
		Name: "swerl_engine_held_version", Help: "Newest weight version each engine confirmed it loaded (absent: none yet).",
	}, []string{"engine"})
	mNamed = metrics.Factory.GaugeVec(prometheus.GaugeOpts{
		Name: "swerl_engine_policy_version", Help: "The weight version requests to an engine name: the adapter the weight sync loaded or following found (-1: the engine's own weights).",
	}, []string{"engine"})
	mLate = metrics.Factory.Counter(prometheus.CounterOpts{
		Name: "swerl_engine_push_late_total", Help: "Pushes still in flight when the learner published the next version (the learner went on without waiting).",
	})
	mSkipped = metrics.Factory.Counter(prometheus.CounterOpts{
		Name: "swerl_engine_push_skipped_total", Help: "Versions never pushed because a newer one was published while the push before them was in flight.",
	})
	mFailed = metrics.Factory.Counter(prometheus.CounterOpts{
		Name: "swerl_engine_push_failed_total", Help: "Background pushes that some engine refused or did not answer after the retries.",
	})
	mBehind = metrics.Factory.Gauge(prometheus.GaugeOpts{
		Name: "swerl_engine_push_behind_versions", Help: "Versions between the newest the learner published and the newest every engine confirmed (0: in step).",
	})
)
