package beamrun

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
)

// TestAsyncDeliversEveryResultOnce: every submitted item's result comes
// out exactly once, with its own event time, and never more than the
// pool's slots run at once; Wait leaves nothing in flight.
func TestAsyncDeliversEveryResultOnce(t *testing.T) {
	const slots, items = 3, 200
	a := NewAsync[int](slots, nil)
	var running, peak atomic.Int64
	got := map[int]beam.EventTime{}
	out := func(ts beam.EventTime, r int) {
		if _, dup := got[r]; dup {
			t.Fatalf("result %d delivered twice", r)
		}
		got[r] = ts
	}
	for i := range items {
		a.Submit(beam.EventTime(1000+i), func() int {
			notePeak(&running, &peak)
			time.Sleep(time.Duration(i%3) * 100 * time.Microsecond) // work of uneven length, on purpose
			running.Add(-1)
			return i
		}, out)
	}
	a.Wait(out)
	if a.inflight != 0 || len(got) != items {
		t.Fatalf("%d in flight, %d of %d results", a.inflight, len(got), items)
	}
	for r, ts := range got {
		if ts != beam.EventTime(1000+r) {
			t.Fatalf("result %d came with event time %d", r, ts)
		}
	}
	if p := peak.Load(); p > slots || p < 2 {
		t.Fatalf("peak concurrency %d, want 2..%d", p, slots)
	}
}

// TestAsyncSharedSlots: two pools sharing one slot channel never run more
// than its capacity between them.
func TestAsyncSharedSlots(t *testing.T) {
	sem := make(chan struct{}, 2)
	a, b := NewAsync[int](0, sem), NewAsync[int](0, sem)
	var running, peak atomic.Int64
	work := func() int {
		notePeak(&running, &peak)
		time.Sleep(200 * time.Microsecond) // work that overlaps, on purpose
		running.Add(-1)
		return 0
	}
	n := 0
	out := func(beam.EventTime, int) { n++ }
	for range 50 {
		a.Submit(0, work, out)
		b.Submit(0, work, out)
	}
	a.Wait(out)
	b.Wait(out)
	if n != 100 || peak.Load() > 2 {
		t.Fatalf("%d results, peak %d running (2 slots)", n, peak.Load())
	}
}

// notePeak counts one more item running and raises peak to the count.
func notePeak(running, peak *atomic.Int64) {
	n := running.Add(1)
	for {
		p := peak.Load()
		if n <= p || peak.CompareAndSwap(p, n) {
			return
		}
	}
}
