package beamrun

import (
	"fmt"
	"sync"
)

// Registry holds what the DoFns of one pipeline run share in this process
// (a policy, a semaphore, a progress tracker), keyed by run id. A DoFn is
// serialized with the pipeline, so it carries the run id, not the value.
//
// The lifecycle:
//
//   - the run's launcher Registers the value when it builds the pipeline
//     and defers the release func Register returns, so the value lives
//     exactly as long as the run;
//   - the DoFns look it up by run id (Lookup, Find) in Setup or per
//     element; on a runner whose workers are other processes there is none,
//     and a DoFn that can build its own does so with LoadOrCreate;
//   - the release at the run's end removes it (Release removes whatever
//     is held for an id).
//
// One mutex guards the map; it is held only to read or change it (and
// while LoadOrCreate's mk runs, so a value is made once), never while a
// value is used: values that change under concurrent use lock themselves.
// A Registry is safe for concurrent use; the zero value is not ready, use
// NewRegistry.
type Registry[T any] struct {
	what string // what a value is, for errors ("train run")

	mu  sync.Mutex
	m   map[string]entry[T]
	gen uint64
}

type entry[T any] struct {
	v   T
	gen uint64 // tells a registration from a later one under the same id
}

// NewRegistry returns an empty Registry; what names its values in errors
// ("agentless run state").
func NewRegistry[T any](what string) *Registry[T] {
	return &Registry[T]{what: what, m: map[string]entry[T]{}}
}

// Register makes v the value of run id, replacing any, until the returned
// release func is called; release removes v only, not a value registered
// under id after it, and may be called more than once.
func (r *Registry[T]) Register(id string, v T) (release func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	gen := r.gen
	r.m[id] = entry[T]{v: v, gen: gen}
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if e, ok := r.m[id]; ok && e.gen == gen {
			delete(r.m, id)
		}
	}
}

// Find returns the value of run id; ok is false when none is registered
// in this process.
func (r *Registry[T]) Find(id string) (v T, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.m[id]
	return e.v, ok
}

// Lookup returns the value of run id, or an error that names the run and
// says that this process holds none.
func (r *Registry[T]) Lookup(id string) (T, error) {
	v, ok := r.Find(id)
	if !ok {
		return v, fmt.Errorf("beamrun: no %s for run %q in this process (registered at pipeline construction; released at the run's end, or a worker of another process)", r.what, id)
	}
	return v, nil
}

// LoadOrCreate returns the value of run id, registering the one mk
// returns when there is none (a worker whose process did not launch the
// run). mk runs under the registry's lock, once per id; when it fails
// nothing is registered. Values made here live until Release (a worker's
// values live as long as it does).
func (r *Registry[T]) LoadOrCreate(id string, mk func() (T, error)) (T, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e, ok := r.m[id]; ok {
		return e.v, nil
	}
	v, err := mk()
	if err != nil {
		return v, err
	}
	r.gen++
	r.m[id] = entry[T]{v: v, gen: r.gen}
	return v, nil
}

// Release removes the value of run id, whoever registered it.
func (r *Registry[T]) Release(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, id)
}

// Len is the number of runs with a value.
func (r *Registry[T]) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}
