package rollout

import (
	"sync"

	"swerl/internal/engineapi"
)

// Announced records, per engine (keyed by engineapi.BaseURL), the newest
// adapter the learner announced that engine holds (the engines of a
// schemas.WeightVersion on the weights topic). A policy with follow=true
// opened WithAnnounced names it on that engine when it is newer than what
// the engine lists on /v1/models, so a worker follows a learner in
// another process even on engines that do not list their adapters. The
// caller fills it (pipelines/train.FollowWeights reads the topic into it). Safe
// for concurrent use.
type Announced struct {
	mu sync.Mutex
	m  map[string]engineapi.ServedVersion
}

// NewAnnounced returns an empty table.
func NewAnnounced() *Announced { return &Announced{m: map[string]engineapi.ServedVersion{}} }

// Hold records that the engine at base (any URL engineapi.BaseURL reduces
// to it) was announced to hold v. An older version than the one recorded
// is ignored: announcements of a version can arrive after newer ones.
func (a *Announced) Hold(base string, v engineapi.ServedVersion) {
	base = engineapi.BaseURL(base)
	a.mu.Lock()
	defer a.mu.Unlock()
	if old, ok := a.m[base]; !ok || v.Version > old.Version {
		a.m[base] = v
	}
}

// Get returns the newest version the engine at base was announced to hold.
func (a *Announced) Get(base string) (engineapi.ServedVersion, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.m[engineapi.BaseURL(base)]
	return v, ok
}
