// Package gcpace makes a batch job collect garbage less often while its
// heap is small, with memory still bounded.
//
// Go's default (GOGC=100) starts a collection when the heap has grown by
// the size of the live heap. A job whose live heap is a few tens of MiB of
// caches and runner state, and which allocates hundreds of MiB in passing
// (file contents, diffs, encoded records), then collects every few tens of
// MiB allocated and spends a tenth of its CPU marking the same caches.
// Start raises GOGC and caps the total with a memory limit of
// max(floor, 2×live + slack): below the floor the job collects less often;
// above it, never more often than the default would, since the limit
// follows the live heap up (a fixed limit under a live heap that outgrew
// it would make the collector run back to back).
//
// The limit is recomputed after every collection, from a finalizer that
// re-arms itself. Start does nothing when GOGC or GOMEMLIMIT is set in the
// environment (the user's settings win) or while another Pace runs (the
// settings are the process's: two would restore each other's).
package gcpace

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// slack is added to twice the live heap for what the limit counts besides
// heap objects: stacks, runtime metadata, fragmentation.
const slack = 64 << 20

// Pace is a running pacer; Stop restores the previous settings.
type Pace struct {
	floor      int64
	oldPercent int
	oldLimit   int64
	stopped    atomic.Bool
	mu         sync.Mutex
	limit      int64
	samples    []metrics.Sample // read by adjust: in Start, then on the finalizer goroutine
}

// active is set while a Pace runs.
var active atomic.Bool

// Start sets GOGC to percent and the memory limit to max(floor, 2×live +
// slack) until Stop. It returns nil (and changes nothing) when the
// environment sets GOGC or GOMEMLIMIT, or another Pace runs.
func Start(percent int, floor int64) *Pace {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" || !active.CompareAndSwap(false, true) {
		return nil
	}
	p := &Pace{floor: floor, samples: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	p.oldLimit = debug.SetMemoryLimit(-1)
	p.adjust()
	p.oldPercent = debug.SetGCPercent(percent)
	p.arm()
	return p
}

// Limit is the memory limit in force.
func (p *Pace) Limit() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.limit
}

// Stop restores GOGC and the memory limit of before Start. Stop of a nil
// Pace does nothing.
func (p *Pace) Stop() {
	if p == nil || p.stopped.Swap(true) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	debug.SetGCPercent(p.oldPercent)
	debug.SetMemoryLimit(p.oldLimit)
	active.Store(false)
}

// limitFor is the memory limit for a live heap of live bytes.
func limitFor(live, floor int64) int64 { return max(floor, 2*live+slack) }

// adjust sets the limit from the live heap of the last collection.
func (p *Pace) adjust() {
	metrics.Read(p.samples)
	var live int64
	if v := p.samples[0].Value; v.Kind() == metrics.KindUint64 {
		live = int64(v.Uint64())
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped.Load() {
		return
	}
	p.limit = limitFor(live, p.floor)
	debug.SetMemoryLimit(p.limit)
}

type sentinel struct {
	_ *int
	_ [8]byte
}

// arm sets a finalizer on a fresh object: it runs after the collection
// that finds the object garbage, adjusts the limit and arms the next one.
func (p *Pace) arm() {
	s := new(sentinel) // holds a pointer: never in a tiny-allocator block
	runtime.SetFinalizer(s, func(*sentinel) {
		if p.stopped.Load() {
			return
		}
		p.adjust()
		p.arm()
	})
}
