package weightsync

import (
	"context"
	"sync"

	"swerl/internal/engineapi"
)

// Table records, per engine (keyed by engineapi.BaseURL, so any URL of a
// server names it), which weight version it holds, from three sources:
//
//   - held: what a Syncer of this process loaded there (Push sets it once
//     the engine confirmed the load), or, for a rollout policy with
//     follow=true, the newest swerl adapter the engine lists on
//     /v1/models (Set, Clear);
//   - announced: the newest adapter a learner in another process
//     announced the engine holds on the weights topic (Announce; older
//     announcements than the one recorded are ignored, since they can
//     arrive late);
//   - refused: the newest announced version the engine answered 404 to
//     (Refuse), which is never named there again;
//   - lost: the engine may no longer hold what it held (Lose): a request
//     to it found no server (a restarted engine has dropped every
//     adapter and reloaded weight), or it answered 404 to the held
//     adapter. A Syncer on the table loads the version again before the
//     next request to that engine (Restore); Set ends it.
//
// Named combines them into what a request to the engine names. A Syncer
// and the rollout policies of one process share one Table, so the next
// request after a push names the version pushed. The zero value is not
// usable; call NewTable. Safe for concurrent use: one mutex guards every
// engine's row, and no method waits for an engine.
type Table struct {
	mu sync.Mutex
	m  map[string]*row
	// restore loads again what an engine lost (Syncer.restore); nil
	// without a Syncer, when Lose does nothing.
	restore func(ctx context.Context, base string) error
}

// row is one engine's versions.
type row struct {
	held      engineapi.ServedVersion
	hasHeld   bool
	announced engineapi.ServedVersion
	hasAnn    bool
	refused   int64 // -1: none
	lost      bool
}

// NewTable returns an empty table.
func NewTable() *Table { return &Table{m: map[string]*row{}} }

// row returns base's row, made on first use; t.mu is held.
func (t *Table) row(base string) *row {
	r := t.m[base]
	if r == nil {
		r = &row{refused: -1}
		t.m[base] = r
	}
	return r
}

// Set records that the engine at base holds v (a push it confirmed, or the
// adapter it lists), newer or older than before: requests name it next.
// The engine's swerl_engine_policy_version gauge shows v.
func (t *Table) Set(base string, v engineapi.ServedVersion) {
	base = engineapi.BaseURL(base)
	t.mu.Lock()
	r := t.row(base)
	r.held, r.hasHeld, r.lost = v, true, false
	t.mu.Unlock()
	mNamed.WithLabelValues(base).Set(float64(v.Version))
}

// read returns a copy of the row of the engine at base (an empty one
// when none).
func (t *Table) read(base string) row {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.m[engineapi.BaseURL(base)]; r != nil {
		return *r
	}
	return row{refused: -1}
}

// Get returns what Set recorded for the engine at base.
func (t *Table) Get(base string) (engineapi.ServedVersion, bool) {
	r := t.read(base)
	return r.held, r.hasHeld
}

// Clear forgets what Set recorded for the engine at base (it lists no
// swerl adapter any more): requests name its own weights.
func (t *Table) Clear(base string) {
	base = engineapi.BaseURL(base)
	t.mu.Lock()
	if r := t.m[base]; r != nil {
		r.held, r.hasHeld = engineapi.ServedVersion{}, false
	}
	t.mu.Unlock()
	mNamed.WithLabelValues(base).Set(-1)
}

// Announce records that a learner announced the engine at base holds v.
// A version older than (or equal to) the one recorded is ignored.
func (t *Table) Announce(base string, v engineapi.ServedVersion) {
	base = engineapi.BaseURL(base)
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.row(base); !r.hasAnn || v.Version > r.announced.Version {
		r.announced, r.hasAnn = v, true
	}
}

// Announced returns the newest version the engine at base was announced
// to hold.
func (t *Table) Announced(base string) (engineapi.ServedVersion, bool) {
	r := t.read(base)
	return r.announced, r.hasAnn
}

// Named returns what a request to the engine at base names: the held
// version, or, when follow is set, the announced adapter if it is newer
// than the held one and the engine did not answer 404 to it (Refuse).
// ok is false when neither is known: the request names the engine's own
// weights.
func (t *Table) Named(base string, follow bool) (v engineapi.ServedVersion, ok bool) {
	r := t.read(base)
	if follow && r.hasAnn && r.announced.Adapter != "" && r.announced.Version > r.refused &&
		(!r.hasHeld || r.announced.Version > r.held.Version) {
		return r.announced, true
	}
	return r.held, r.hasHeld
}

// Refuse records that the engine at base answered 404 to a request that
// named v. It reports whether v is the adapter announced for that engine
// (then the request is sent again with what the engine lists, and v is
// not named there again), and whether this is news (the first 404 to v
// or a newer version). A 404 to anything else is the request's error.
func (t *Table) Refuse(base string, v engineapi.ServedVersion) (announced, news bool) {
	if v.Adapter == "" {
		return false, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.m[engineapi.BaseURL(base)]
	if r == nil || !r.hasAnn || r.announced != v {
		return false, false
	}
	if v.Version <= r.refused {
		return true, false
	}
	r.refused = v.Version
	return true, true
}

// Show sets the engine's swerl_engine_policy_version gauge to the version
// Named(base, follow) gives, -1 for the engine's own weights.
func (t *Table) Show(base string, follow bool) {
	v, ok := t.Named(base, follow)
	if !ok {
		v.Version = -1
	}
	mNamed.WithLabelValues(engineapi.BaseURL(base)).Set(float64(v.Version))
}

// Lose records that the engine at base may no longer hold what it held,
// and reports whether the table can restore it (a Syncer shares it):
// then the next Restore for that engine loads it again. Without a Syncer
// it does nothing and reports false.
func (t *Table) Lose(base string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.restore == nil {
		return false
	}
	t.row(engineapi.BaseURL(base)).lost = true
	return true
}

// Lost reports whether the engine at base was marked by Lose and not
// restored since.
func (t *Table) Lost(base string) bool {
	return t.read(base).lost
}

// found ends a Lose without a load: the engine still holds its version,
// or holds nothing the table could load again.
func (t *Table) found(base string) {
	t.mu.Lock()
	if r := t.m[engineapi.BaseURL(base)]; r != nil {
		r.lost = false
	}
	t.mu.Unlock()
}

// Restore makes an engine marked by Lose hold its version again, through
// the table's Syncer, before a request is sent to it; it returns nil at
// once for an engine that was not lost. An error (the engine does not
// answer yet, or refused the load) leaves it lost: the request fails that
// attempt, and the next one tries again.
func (t *Table) Restore(ctx context.Context, base string) error {
	t.mu.Lock()
	f := t.restore
	t.mu.Unlock()
	if f == nil || !t.Lost(base) {
		return nil
	}
	return f(ctx, engineapi.BaseURL(base))
}

// restoreWith makes f what Restore calls (a Syncer on the table).
func (t *Table) restoreWith(f func(ctx context.Context, base string) error) {
	t.mu.Lock()
	t.restore = f
	t.mu.Unlock()
}
