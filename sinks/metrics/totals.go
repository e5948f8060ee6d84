package metrics

import "github.com/apache/beam/sdks/v2/go/pkg/beam"

// Totals are the counts of one run, for its summary: the pipeline
// result's where the runner reports them, else what this process counted
// since the run began (which misses the work of other worker processes).
type Totals struct {
	res        Results
	fromRunner bool
	since      Baseline
}

// RunTotals reads the counts of namespace ns from res (nil when the run
// failed or was stopped), falling back to what this process counted since
// the baseline since.
func RunTotals(res beam.PipelineResult, ns string, since Baseline) Totals {
	r, ok := Read(res, ns)
	return Totals{res: r, fromRunner: ok, since: since}
}

// FromRunner reports whether the totals are the runner's.
func (t Totals) FromRunner() bool { return t.fromRunner }

// Count is the total of c.
func (t Totals) Count(c *Counter) int64 {
	if t.fromRunner {
		return t.res.Count(c)
	}
	return t.since.Since(c)
}

// Counts is the total of every label value of v that was counted.
func (t Totals) Counts(v *CounterVec) map[string]int64 {
	if t.fromRunner {
		return t.res.Counts(v)
	}
	return t.since.SinceVec(v)
}

// Max is the greatest value m observed; ok is false when none was.
// Without the runner's totals it is this process's greatest since it
// started, as a Max has no baseline.
func (t Totals) Max(m *Max) (v int64, ok bool) {
	if t.fromRunner {
		return t.res.Max(m)
	}
	return m.Live()
}
