package train

import (
	"runtime"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// async runs a DoFn's work items on goroutines, at most cap(sem) at once,
// and hands their results back on the bundle's goroutine, where the DoFn
// emits them (Beam's emitters are not safe for concurrent use).
//
// A Prism stage runs each bundle on one goroutine, and a bounded Kafka or
// file read is a single bundle, so without this the decode, rollout and
// reward of a whole run would share one core.
//
// The DoFn calls submit from ProcessElement and wait from FinishBundle,
// so a bundle completes only once every result is out; results come out in
// the order they finish, each with the event time of its input.
type async[R any] struct {
	sem      chan struct{}
	results  chan timed[R]
	inflight int
}

// timed is a result with the event time of the element it came from.
type timed[R any] struct {
	ts beam.EventTime
	r  R
}

// newAsync returns an async that runs at most n items at once; sem, when
// not nil, is a slot pool shared with other DoFn instances instead.
func newAsync[R any](n int, sem chan struct{}) *async[R] {
	if sem == nil {
		sem = make(chan struct{}, max(n, 1))
	}
	return &async[R]{sem: sem, results: make(chan timed[R], cap(sem))}
}

// cpuSlots is the size of a pool of CPU-bound work: one slot a core.
func cpuSlots() int { return runtime.GOMAXPROCS(0) }

// submit starts work for the element of event time ts once a slot is free
// (handing finished results to out while it waits), then hands out every
// result that is ready.
func (a *async[R]) submit(ts beam.EventTime, work func() R, out func(beam.EventTime, R)) {
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

// wait hands out the results of every item still in flight.
func (a *async[R]) wait(out func(beam.EventTime, R)) {
	for a.inflight > 0 {
		t := <-a.results
		a.inflight--
		out(t.ts, t.r)
	}
}
