package agentless

import "swerl/sinks/metrics"

// The counts of an agentless run: Beam namespace swerl.agentless,
// Prometheus names swerl_agentless_*.
var (
	counts    = metrics.NewNamespace("swerl.agentless", "swerl_agentless_")
	cLocalize = counts.Counter("localize_answers", "localize_answers_total", "Localization samples answered by the policy.")
	cRepair   = counts.Counter("repair_answers", "repair_answers_total", "Repair samples answered by the policy.")
	cDropped  = counts.CounterVec("dropped", "dropped_total", "Repair candidates dropped, by reason.", "reason")
)
