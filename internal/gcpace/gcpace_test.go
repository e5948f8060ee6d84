package gcpace

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"swerl/internal/testenv"
)

func TestLimitFor(t *testing.T) {
	for _, c := range []struct{ live, floor, want int64 }{
		{0, 256 << 20, 256 << 20},
		{50 << 20, 256 << 20, 256 << 20},
		{96 << 20, 256 << 20, 256 << 20},
		{200 << 20, 256 << 20, 400<<20 + slack},
		{1 << 30, 0, 2<<30 + slack},
	} {
		if got := limitFor(c.live, c.floor); got != c.want {
			t.Errorf("limitFor(%d, %d) = %d, want %d", c.live, c.floor, got, c.want)
		}
	}
}

func TestEnvironmentWins(t *testing.T) {
	t.Setenv("GOGC", "100")
	if p := Start(300, 1<<30); p != nil {
		p.Stop()
		t.Fatal("Start changed the pace though GOGC is set")
	}
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "1GiB")
	if p := Start(300, 1<<30); p != nil {
		p.Stop()
		t.Fatal("Start changed the pace though GOMEMLIMIT is set")
	}
}

// waitLimit collects until the pacer's limit satisfies ok.
func waitLimit(t *testing.T, p *Pace, ok func(int64) bool, what string) {
	t.Helper()
	// Each check collects: the pacer follows the heap from a finalizer,
	// which runs on its own goroutine after a collection.
	testenv.Eventually(t, time.Minute, "the limit: "+what, func() bool {
		runtime.GC()
		return ok(p.Limit())
	})
}

func TestLimitFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetGCPercent(100)
	debug.SetGCPercent(before)
	const floor = 96 << 20
	p := Start(250, floor)
	if p == nil {
		t.Fatal("Start did nothing")
	}
	if got := debug.SetGCPercent(250); got != 250 {
		t.Errorf("GOGC = %d under the pacer, want 250", got)
	}
	if q := Start(400, 1<<30); q != nil {
		q.Stop()
		t.Fatal("a second Start while one runs changed the pace")
	}
	waitLimit(t, p, func(l int64) bool { return l == floor }, "the floor with a small heap")
	// A live heap of 128 MiB: the limit must follow it up, past the floor,
	// after a collection (and only through the re-armed finalizer).
	live := make([][]byte, 128)
	for i := range live {
		live[i] = make([]byte, 1<<20)
		live[i][0] = 1
	}
	waitLimit(t, p, func(l int64) bool { return l >= 2*(128<<20) }, "followed a 128 MiB live heap")
	runtime.KeepAlive(live)
	live = nil
	waitLimit(t, p, func(l int64) bool { return l == floor }, "came back to the floor")
	p.Stop()
	if got := debug.SetGCPercent(before); got != before {
		t.Errorf("GOGC = %d after Stop, want %d", got, before)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<63-1 {
		t.Errorf("memory limit %d after Stop, want none", got)
	}
	// Stopping twice is harmless, and a later pacer starts.
	p.Stop()
	q := Start(150, floor)
	if q == nil {
		t.Fatal("Start after Stop did nothing")
	}
	q.Stop()
	debug.SetGCPercent(before)
	var nilPace *Pace
	nilPace.Stop()
}
