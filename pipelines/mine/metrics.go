package mine

import "swerl/sinks/metrics"

// The counts of a mining run: Beam namespace swerl.mine, Prometheus names
// swerl_mine_*. Each DoFn counts through these (Beam metrics, Prometheus
// and the progress line at once; see package metrics); the end summary
// reads them from the pipeline result.
var (
	counts = metrics.NewNamespace("swerl.mine", "swerl_mine_")

	cRepos      = counts.Counter("repos", "repos_total", "Repositories scanned by swerl mine.")
	cCommits    = counts.Counter("commits", "commits_scanned_total", "Commits read from git history (all reachable from the mined refs).")
	cPRs        = counts.Counter("prs", "prs_found_total", "Merged pull requests found in history or events.")
	cCandidates = counts.Counter("candidates", "candidates_total", "PRs and commits that reached the file stage.")
	// cBuilt counts candidates built, kept or not (the progress line's
	// build rate).
	cBuilt    = counts.Counter("built", "built_total", "Candidates whose instance was built, kept or not.")
	cKept     = counts.Counter("instances", "instances_total", "Instances kept and written.")
	cRejected = counts.CounterVec("rejected", "rejected_total",
		"PRs, commits and input records not turned into instances, by reason.", "reason")
)
