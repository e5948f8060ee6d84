package beamrun

import (
	"runtime"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// Async runs a DoFn's work items on goroutines, at most cap(sem) at once,
// and hands their results back on the bundle's goroutine, where the DoFn
// emits them (Beam's emitters are not safe for concurrent use).
//
// A Prism stage runs each bundle on one goroutine, and a bounded Kafka or
// file read is a single bundle, so without this the decode, rollout and
// reward of a whole `swerl train` run (or the policy calls of `swerl
// agentless`) would share one core.
//
// The DoFn calls Submit from ProcessElement and Wait from FinishBundle,
// so a bundle completes only once every result is out; results come out in
// the order they finish, each with the event time of its input.
type Async[R any] struct {
	sem      chan struct{}
	results  chan timed[R]
	inflight int
}

// timed is a result with the event time of the element it came from.
type timed[R any] struct {
	ts beam.EventTime
	r  R
}

// NewAsync returns an Async that runs at most n items at once; sem, when
// not nil, is a slot pool shared with other DoFn instances instead.
func NewAsync[R any](n int, sem chan struct{}) *Async[R] {
	if sem == nil {
		sem = make(chan struct{}, max(n, 1))
	}
	return &Async[R]{sem: sem, results: make(chan timed[R], cap(sem))}
}

// CPUSlots is the size of a pool of CPU-bound work: one slot a core.
func CPUSlots() int { return runtime.GOMAXPROCS(0) }

// Submit starts work for the element of event time ts once a slot is free
// (handing finished results to out while it waits), then hands out every
// result that is ready.
func (a *Async[R]) Submit(ts beam.EventTime, work func() R, out func(beam.EventTime, R)) {
	for acquired := false; !acquired; {
		select {
		case a.sem <- struct{}{}:
			acquired = true
		case t := <-a.results:
			a.inflight--
			out(t.ts, t.r)
		}
	}
	a.inflight++
	go func() {
		r := work()
		<-a.sem
		a.results <- timed[R]{ts, r}
	}()
	for {
		select {
		case t := <-a.results:
			a.inflight--
			out(t.ts, t.r)
		default:
			return
		}
	}
}

// Wait hands out the results of every item still in flight.
func (a *Async[R]) Wait(out func(beam.EventTime, R)) {
	for a.inflight > 0 {
		t := <-a.results
		a.inflight--
		out(t.ts, t.r)
	}
}
