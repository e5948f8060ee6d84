package mine

import (
	"github.com/prometheus/client_golang/prometheus"

	"swerl/sinks/metrics"
)

// metricNS is the Beam namespace of the mining counts.
const metricNS = "swerl.mine"

// The counts of a mining run. Each DoFn counts through these (Beam
// metrics, Prometheus and the progress line at once; see package
// metrics); the end summary reads them from the pipeline result.
var (
	cRepos = metrics.NewCounter(metricNS, "repos", prometheus.CounterOpts{Name: "swerl_mine_repos_total",
		Help: "Repositories scanned by swerl mine."})
	cCommits = metrics.NewCounter(metricNS, "commits", prometheus.CounterOpts{Name: "swerl_mine_commits_scanned_total",
		Help: "Commits read from git history (all reachable from the mined refs)."})
	cPRs = metrics.NewCounter(metricNS, "prs", prometheus.CounterOpts{Name: "swerl_mine_prs_found_total",
		Help: "Merged pull requests found in history or events."})
	cCandidates = metrics.NewCounter(metricNS, "candidates", prometheus.CounterOpts{Name: "swerl_mine_candidates_total",
		Help: "PRs and commits that reached the file stage."})
	// cBuilt counts candidates built, kept or not (the progress line's
	// build rate).
	cBuilt = metrics.NewCounter(metricNS, "built", prometheus.CounterOpts{Name: "swerl_mine_built_total",
		Help: "Candidates whose instance was built, kept or not."})
	cKept = metrics.NewCounter(metricNS, "instances", prometheus.CounterOpts{Name: "swerl_mine_instances_total",
		Help: "Instances kept and written."})
	cRejected = metrics.NewCounterVec(metricNS, "rejected", prometheus.CounterOpts{Name: "swerl_mine_rejected_total",
		Help: "PRs, commits and input records not turned into instances, by reason."}, "reason")
)

// counters are the plain counts, for baselines.
var counters = []*metrics.Counter{cRepos, cCommits, cPRs, cCandidates, cBuilt, cKept}
