package rl

import (
	"strings"
	"testing"
	"time"

	"swerl/gpu/learner"
)

// The split's parts add up to the step's wall time, and latencies that
// overlap (requests in flight together) never make sampling exceed the
// rollout phase.
func TestTimeSplit(t *testing.T) {
	s := StepStats{RolloutTime: 10 * time.Second, TrainTime: 4 * time.Second, SyncTime: time.Second, SampleTime: 6 * time.Second,
		Learner: learner.StepStats{TimeFwdBwd: 2, TimeOptimizer: 0.5, TimePublish: 1}}
	sp := s.Split()
	if sp.Scoring != 3*time.Second || sp.LearnerOther != 500*time.Millisecond || sp.Total != 14*time.Second {
		t.Errorf("split %+v", sp)
	}
	sum := sp.Sync + sp.Sampling + sp.Scoring + sp.FwdBwd + sp.Optimizer + sp.Publish + sp.LearnerOther
	if sum != sp.Total {
		t.Errorf("parts add up to %v, total %v", sum, sp.Total)
	}
	s.SampleTime = 30 * time.Second
	if sp := s.Split(); sp.Sampling != 9*time.Second || sp.Scoring != 0 {
		t.Errorf("overlapping latencies: sampling %v scoring %v, want 9s and 0", sp.Sampling, sp.Scoring)
	}
	var b strings.Builder
	var tot TimeSplit
	tot.Add(sp)
	tot.Add(sp)
	tot.Fprint(&b, 2)
	if !strings.Contains(b.String(), "time of the 2 RL steps (28s, 14s a step)") || !strings.Contains(b.String(), "learner device idle") {
		t.Errorf("table:\n%s", b.String())
	}
}
