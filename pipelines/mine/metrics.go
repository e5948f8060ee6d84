package mine

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"swerl/sinks/metrics"
)

// promMetrics are the mining counts on swerl's Prometheus registry.
type promMetrics struct {
	repos     prometheus.Counter
	commits   prometheus.Counter
	prs       prometheus.Counter
	instances prometheus.Counter
	rejected  *prometheus.CounterVec
}

var (
	promOnce sync.Once
	prom     *promMetrics
)

// promm returns the metrics, registering them on first use.
func promm() *promMetrics {
	promOnce.Do(func() {
		f := metrics.Factory
		prom = &promMetrics{
			repos:     f.Counter(prometheus.CounterOpts{Name: "swerl_mine_repos_total", Help: "Repositories scanned by swerl mine."}),
			commits:   f.Counter(prometheus.CounterOpts{Name: "swerl_mine_commits_scanned_total", Help: "First-parent commits read from git history."}),
			prs:       f.Counter(prometheus.CounterOpts{Name: "swerl_mine_prs_found_total", Help: "Merged pull requests found in history or events."}),
			instances: f.Counter(prometheus.CounterOpts{Name: "swerl_mine_instances_total", Help: "Instances kept and written."}),
			rejected:  f.CounterVec(prometheus.CounterOpts{Name: "swerl_mine_rejected_total", Help: "PRs, commits and input records not turned into instances, by reason."}, []string{"reason"}),
		}
	})
	return prom
}
