package rl

import (
	"fmt"
	"io"
	"time"
)

// TimeSplit is where RL steps' wall time went. The parts add up to Total:
// Scoring is what the rollout phase spent beyond the engine sync and the
// policy's answers (scoring, Kafka, Beam, Parquet), LearnerOther what the
// learner step spent beyond its passes, optimizer and publish (assembling
// the batch, the step record, committing offsets, reading samples back).
type TimeSplit struct {
	Sync, Sampling, Scoring                  time.Duration
	FwdBwd, Optimizer, Publish, LearnerOther time.Duration
	Total                                    time.Duration
}

// Split returns the step's time split.
func (s StepStats) Split() TimeSplit {
	sec := func(x float64) time.Duration { return time.Duration(x * float64(time.Second)) }
	t := TimeSplit{Sync: s.SyncTime, Sampling: s.SampleTime, FwdBwd: sec(s.Learner.TimeFwdBwd),
		Optimizer: sec(s.Learner.TimeOptimizer), Publish: sec(s.Learner.TimePublish), Total: s.RolloutTime + s.TrainTime}
	// The samples' latencies are measured by the policy: with requests in
	// flight together they can add up to more than the phase's wall time.
	t.Sampling = min(t.Sampling, max(s.RolloutTime-s.SyncTime, 0))
	t.Scoring = max(s.RolloutTime-s.SyncTime-t.Sampling, 0)
	t.LearnerOther = max(s.TrainTime-t.FwdBwd-t.Optimizer-t.Publish, 0)
	return t
}

// Add accumulates o into t.
func (t *TimeSplit) Add(o TimeSplit) {
	t.Sync += o.Sync
	t.Sampling += o.Sampling
	t.Scoring += o.Scoring
	t.FwdBwd += o.FwdBwd
	t.Optimizer += o.Optimizer
	t.Publish += o.Publish
	t.LearnerOther += o.LearnerOther
	t.Total += o.Total
}

// Fprint writes the split as a table with each part's share of Total, and
// the learner device's idle time: Total less its passes and optimizer
// (with the in-process sampler, sampling ran on that device too).
func (t TimeSplit) Fprint(w io.Writer, steps int) {
	if t.Total <= 0 || steps == 0 {
		return
	}
	fmt.Fprintf(w, "  time of the %d RL steps (%v, %v a step):\n", steps, t.Total.Round(time.Millisecond), (t.Total / time.Duration(steps)).Round(time.Millisecond))
	for _, p := range []struct {
		what string
		d    time.Duration
	}{
		{"engine sync", t.Sync}, {"sampling", t.Sampling}, {"scoring and the data plane (Kafka, Beam, Parquet)", t.Scoring},
		{"forward-backward (π_old, objective)", t.FwdBwd}, {"optimizer", t.Optimizer}, {"publishing the version", t.Publish},
		{"learner, other", t.LearnerOther},
	} {
		fmt.Fprintf(w, "    %-52s %10v %5.1f%%\n", p.what, p.d.Round(time.Millisecond), 100*p.d.Seconds()/t.Total.Seconds())
	}
	idle := max(t.Total-t.FwdBwd-t.Optimizer, 0)
	fmt.Fprintf(w, "    %-52s %10v %5.1f%%\n", "learner device idle (in-process sampling counts here)", idle.Round(time.Millisecond), 100*idle.Seconds()/t.Total.Seconds())
}
