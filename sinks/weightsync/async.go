package weightsync

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Async pushes versions to a Syncer's engines in the background, so that
// the learner never waits for an engine: Submit returns at once, and one
// goroutine pushes the newest version submitted. A version submitted while
// an older one is waiting for its turn replaces it (the skipped one is
// counted and logged: only the newest matters to the rollouts); a push
// still in flight when the next version is submitted is late (counted and
// logged; it is not cancelled, since the engine may be just slow, and the
// newest version is pushed after it). Each push is bounded as Push's are
// (Config.Timeout per request, the retries), so a hanging engine costs
// the engines' staleness, never the learner's steps.
//
// What the rollouts name stays exact: an engine holds a version (Held,
// OnHeld) only once it confirmed loading it, as with Push.
type Async struct {
	s      *Syncer
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{} // a job waits (buffered 1)
	done   chan struct{} // closed when the goroutine has ended

	mu       sync.Mutex
	next     *job          // the newest version submitted and not started; nil when none
	inflight *job          // the version being pushed; nil when none
	latest   int64         // the newest version submitted
	changed  chan struct{} // closed (and replaced) when next or inflight changes
}

// job is one version to push.
type job struct {
	version int64
	dir     string
	start   time.Time // when its push started
	late    bool      // a newer version was submitted while it was in flight
}

// Async starts pushing in the background until ctx is cancelled or Close
// is called; a cancelled ctx cancels the push in flight.
func (s *Syncer) Async(ctx context.Context) *Async {
	ctx, cancel := context.WithCancel(ctx)
	a := &Async{s: s, log: s.cfg.Log, ctx: ctx, cancel: cancel, wake: make(chan struct{}, 1), done: make(chan struct{}),
		latest: -1, changed: make(chan struct{})}
	go a.loop()
	return a
}

// Submit queues version (its folder dir, as for Push) and returns at once.
func (a *Async) Submit(version int64, dir string) {
	a.mu.Lock()
	if a.next != nil {
		mSkipped.Inc()
		a.log.Warn("weightsync: version superseded before its push started; skipped", "version", a.next.version, "newer", version)
	}
	if a.inflight != nil && !a.inflight.late {
		a.inflight.late = true
		mLate.Inc()
		a.log.Warn("weightsync: push late: an engine has not confirmed the previous version yet; the learner goes on and the newest version is pushed next",
			"version", a.inflight.version, "in_flight", time.Since(a.inflight.start).Round(time.Millisecond).String(), "newer", version)
	}
	a.next = &job{version: version, dir: dir}
	a.latest = max(a.latest, version)
	a.signal()
	a.mu.Unlock()
	a.behind()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Wait returns when every version submitted so far was pushed (or its push
// failed and was logged), or with ctx's error when ctx ends first, or with
// the Async's context error once it was cancelled or closed.
func (a *Async) Wait(ctx context.Context) error {
	for {
		if err := a.ctx.Err(); err != nil {
			return err // closed: what was waiting was dropped
		}
		a.mu.Lock()
		idle, ch := a.next == nil && a.inflight == nil, a.changed
		a.mu.Unlock()
		if idle {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-a.done:
			return a.ctx.Err()
		}
	}
}

// Close cancels the push in flight, drops the versions waiting, and
// returns when the goroutine has ended. Engines keep what they confirmed.
func (a *Async) Close() {
	a.cancel()
	<-a.done
}

// signal wakes the Waits; a.mu is held.
func (a *Async) signal() {
	close(a.changed)
	a.changed = make(chan struct{})
}

// behind sets the gauge of versions the engines lag behind the newest one
// submitted (an engine that holds none counts from -1).
func (a *Async) behind() {
	a.mu.Lock()
	latest := a.latest
	a.mu.Unlock()
	lag := int64(0)
	for _, st := range a.s.states { // the list never changes after New
		v, ok := a.s.Held(st.URL)
		if !ok {
			v.Version = -1
		}
		lag = max(lag, latest-v.Version)
	}
	mBehind.Set(float64(lag))
}

func (a *Async) loop() {
	defer close(a.done)
	for {
		select {
		case <-a.wake:
		case <-a.ctx.Done():
			return
		}
		for a.ctx.Err() == nil {
			a.mu.Lock()
			j := a.next
			if j != nil {
				j.start = time.Now()
			}
			a.next, a.inflight = nil, j
			a.mu.Unlock()
			if j == nil {
				break
			}
			err := a.s.Push(a.ctx, j.version, j.dir)
			a.mu.Lock()
			a.inflight = nil
			a.signal()
			a.mu.Unlock()
			a.behind()
			if a.ctx.Err() != nil {
				return // cancelled: not a failure of the engine
			}
			if err != nil {
				mFailed.Inc()
				a.log.Warn("weightsync: an engine did not load the new version; its rollouts stay on the version it holds", "version", j.version, "err", err.Error())
			} else if j.late {
				a.log.Info("weightsync: late push done", "version", j.version, "took", time.Since(j.start).Round(time.Millisecond).String())
			}
		}
	}
}
