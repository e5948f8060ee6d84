package metrics

import (
	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/prometheus/client_golang/prometheus"
)

// Namespace declares the counts of one pipeline: its Beam metrics share a
// namespace, its Prometheus metrics a name prefix, and it keeps every
// counter it made, so that Mark takes them all and a new count cannot be
// left out of the progress line's baseline.
type Namespace struct {
	beam, prom string
	counters   []*Counter
	vecs       []*CounterVec
}

// NewNamespace returns the namespace of Beam metrics beam whose Prometheus
// names start with prom (as "swerl_mine_").
func NewNamespace(beam, prom string) *Namespace {
	return &Namespace{beam: beam, prom: prom}
}

// Counter declares the count name, exported to Prometheus as the prefix
// and prom with help; with prom "" it is not exported.
func (n *Namespace) Counter(name, prom, help string) *Counter {
	var o prometheus.CounterOpts
	if prom != "" {
		o = prometheus.CounterOpts{Name: n.prom + prom, Help: help}
	}
	c := NewCounter(n.beam, name, o)
	n.counters = append(n.counters, c)
	return c
}

// CounterVec declares the family name with one label, exported to
// Prometheus as the prefix and prom with help.
func (n *Namespace) CounterVec(name, prom, help, label string) *CounterVec {
	v := NewCounterVec(n.beam, name, prometheus.CounterOpts{Name: n.prom + prom, Help: help}, label)
	n.vecs = append(n.vecs, v)
	return v
}

// Max declares the maximum name, exported to Prometheus as the gauge
// named the prefix and prom with help.
func (n *Namespace) Max(name, prom, help string) *Max {
	return NewMax(n.beam, name, prometheus.GaugeOpts{Name: n.prom + prom, Help: help})
}

// Mark returns the live totals of every counter and family of n now.
func (n *Namespace) Mark() Baseline { return Mark(n.counters, n.vecs...) }

// Totals reads the counts of n from res, as RunTotals does.
func (n *Namespace) Totals(res beam.PipelineResult, since Baseline) Totals {
	return RunTotals(res, n.beam, since)
}
