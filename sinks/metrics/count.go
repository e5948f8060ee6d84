package metrics

import (
	"context"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	beammetrics "github.com/apache/beam/sdks/v2/go/pkg/beam/core/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// A pipeline counts what it does through Counter, CounterVec and Max,
// each update kept in three places at once:
//
//   - a Beam metric (namespace, name), which the runner sums over every
//     worker, wherever it runs, into the pipeline result: the end-of-run
//     summaries read it there (Read), so they are right on every runner;
//   - a Prometheus metric on Registry, for /metrics of the process that
//     does the work;
//   - a process-local total for the live progress line (Live), which
//     sees only the work done in this process.
//
// The context of an update is the one Beam passed to the DoFn method of
// the bundle doing the work (ProcessElement, FinishBundle, OnTimer), or
// one derived from it; goroutines the DoFn started may use it while the
// bundle lasts. Outside a bundle (a plain context) only Prometheus and
// the live total count.

// beamMu serialises updates of Beam metrics: the SDK creates a bundle's
// metric cells lazily, in maps that are not safe for concurrent use, and
// DoFns count from the goroutines they run work on.
var beamMu sync.Mutex

// Counter is one count of a pipeline.
type Counter struct {
	name string // Beam name
	beam beam.Counter
	prom prometheus.Counter // nil: not exported to Prometheus
	live atomic.Int64
}

// NewCounter returns the counter named name in Beam namespace ns,
// exported to Prometheus as prom (none when prom.Name is "").
func NewCounter(ns, name string, prom prometheus.CounterOpts) *Counter {
	c := &Counter{name: name, beam: beam.NewCounter(ns, name)}
	if prom.Name != "" {
		c.prom = Factory.Counter(prom)
	}
	return c
}

// Add counts n.
func (c *Counter) Add(ctx context.Context, n int64) {
	if n == 0 {
		return
	}
	c.live.Add(n)
	if c.prom != nil {
		c.prom.Add(float64(n))
	}
	beamMu.Lock()
	c.beam.Inc(ctx, n)
	beamMu.Unlock()
}

// Live is what this process has counted.
func (c *Counter) Live() int64 { return c.live.Load() }

// CounterVec is a family of counters told apart by one label: value v of
// the label is Beam counter name+"_"+v and Prometheus series
// prom{label="v"}.
type CounterVec struct {
	ns, name string
	prom     *prometheus.CounterVec

	mu sync.Mutex
	m  map[string]*Counter
}

// NewCounterVec returns the family name in Beam namespace ns, exported to
// Prometheus as prom with the label.
func NewCounterVec(ns, name string, prom prometheus.CounterOpts, label string) *CounterVec {
	return &CounterVec{ns: ns, name: name, prom: Factory.CounterVec(prom, []string{label}), m: map[string]*Counter{}}
}

// With returns the counter of label value v.
func (v *CounterVec) With(value string) *Counter {
	v.mu.Lock()
	defer v.mu.Unlock()
	c := v.m[value]
	if c == nil {
		c = &Counter{name: v.name + "_" + value, beam: beam.NewCounter(v.ns, v.name+"_"+value), prom: v.prom.WithLabelValues(value)}
		v.m[value] = c
	}
	return c
}

// Live is what this process has counted, by label value.
func (v *CounterVec) Live() map[string]int64 {
	v.mu.Lock()
	defer v.mu.Unlock()
	out := make(map[string]int64, len(v.m))
	for k, c := range v.m {
		out[k] = c.Live()
	}
	return out
}

// Max keeps the greatest value observed: a Beam distribution (its Max),
// a Prometheus gauge of the latest value, and the live maximum.
type Max struct {
	name string // Beam name
	beam beam.Distribution
	prom prometheus.Gauge
	live atomic.Int64
	seen atomic.Bool
}

// NewMax returns the maximum named name in Beam namespace ns, exported to
// Prometheus as the gauge prom.
func NewMax(ns, name string, prom prometheus.GaugeOpts) *Max {
	return &Max{name: name, beam: beam.NewDistribution(ns, name), prom: Factory.Gauge(prom)}
}

// Observe records v.
func (m *Max) Observe(ctx context.Context, v int64) {
	m.prom.Set(float64(v))
	for {
		old := m.live.Load()
		if m.seen.Load() && v <= old {
			break
		}
		if m.live.CompareAndSwap(old, v) {
			m.seen.Store(true)
			break
		}
	}
	beamMu.Lock()
	m.beam.Update(ctx, v)
	beamMu.Unlock()
}

// Live is the greatest value this process observed; ok is false when it
// observed none.
func (m *Max) Live() (v int64, ok bool) { return m.live.Load(), m.seen.Load() }

// Results are the Beam metrics of one namespace in a pipeline result.
type Results struct {
	counters map[string]int64
	max      map[string]int64
}

// Read returns the metrics of namespace ns that res reports (committed
// values where the runner commits, else attempted); ok is false when res
// is nil or reports none of them.
func Read(res beam.PipelineResult, ns string) (r Results, ok bool) {
	r = Results{counters: map[string]int64{}, max: map[string]int64{}}
	if res == nil {
		return r, false
	}
	defer func() {
		// A portable runner's result whose metrics could not be fetched
		// (the job was cancelled) panics in Metrics (Beam v2.77).
		if recover() != nil {
			r, ok = Results{counters: map[string]int64{}, max: map[string]int64{}}, false
		}
	}()
	q := res.Metrics().Query(func(s beammetrics.SingleResult) bool { return s.Namespace() == ns })
	for _, c := range q.Counters() {
		r.counters[c.Name()] += c.Result()
	}
	for _, d := range q.Distributions() {
		v := d.Result()
		if old, seen := r.max[d.Name()]; v.Count > 0 && (!seen || v.Max > old) {
			r.max[d.Name()] = v.Max
		}
	}
	return r, len(r.counters)+len(r.max) > 0
}

// Count is the total of c.
func (r Results) Count(c *Counter) int64 { return r.counters[c.name] }

// Counts is the total of every label value of v that was counted.
func (r Results) Counts(v *CounterVec) map[string]int64 {
	out := map[string]int64{}
	prefix := v.name + "_"
	for name, n := range r.counters {
		if len(name) > len(prefix) && name[:len(prefix)] == prefix {
			out[name[len(prefix):]] = n
		}
	}
	return out
}

// Max is the greatest value m observed; ok is false when none was.
func (r Results) Max(m *Max) (v int64, ok bool) {
	v, ok = r.max[m.name]
	return v, ok
}

// Baseline holds the live totals at some moment (the start of a run), so
// that a progress line shows what was counted since.
type Baseline struct {
	counters map[*Counter]int64
	vecs     map[*CounterVec]map[string]int64
}

// Mark returns the live totals of cs and vs now.
func Mark(cs []*Counter, vs ...*CounterVec) Baseline {
	b := Baseline{counters: map[*Counter]int64{}, vecs: map[*CounterVec]map[string]int64{}}
	for _, c := range cs {
		b.counters[c] = c.Live()
	}
	for _, v := range vs {
		b.vecs[v] = v.Live()
	}
	return b
}

// Since is what c counted in this process since the baseline.
func (b Baseline) Since(c *Counter) int64 { return c.Live() - b.counters[c] }

// SinceVec is what v counted in this process since the baseline, by
// label value (values with nothing new left out).
func (b Baseline) SinceVec(v *CounterVec) map[string]int64 {
	out := maps.Clone(v.Live())
	for k, n := range b.vecs[v] {
		out[k] -= n
	}
	maps.DeleteFunc(out, func(_ string, n int64) bool { return n == 0 })
	return out
}
