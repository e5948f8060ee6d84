// Package groups assembles GRPO groups (the G samples of one prompt, whose
// advantages are relative to each other: transforms/advantage) from a
// stream of members that may arrive split, interleaved with the members of
// other groups, more than once, or not at all.
//
// Every stage that assembles groups does it with an Assembler:
//
//   - the learner (gpu/learner) assembles the samples it reads into the
//     whole groups a step trains on;
//   - `swerl replay --rescore` (cmd/swerl) assembles the samples it reads
//     back from a topic to re-score each group together;
//   - the train pipeline's group stage (pipelines/train) merges the parts
//     of a group that reached it split. Its pending groups live in Beam's
//     keyed state, not in memory (the runner owns them across workers and
//     bundles), and a group leaves that state when its members are counted
//     or its event-time timeout fires; the stage then hands the group's
//     members to an Assembler and Takes it.
//
// What they share is here: members are keyed by group (Config.Key); a
// pending group holds its members in arrival order; a member whose
// identity (Config.ID) its pending group already holds is a duplicate, is
// reported and not added (the first copy stays); a group leaves complete
// from Add once Config.Full says so, or as it is from Take (a timeout) or
// Flush (the end of the input); Flush and Pending go in the order the
// groups' first members arrived.
//
// Where the stages differ is their Config: when a group is full (the
// learner: the first member's group_size, a size ≤ 0 meaning the member
// alone; replay: the last member's, a size ≤ 0 never; the train stage:
// its own count, so never here), what identifies a member (a sample id; a
// member index; nothing, replay keeps every record), and whether a group
// ends when a member of another one follows it (Config.EndsAtNext: the
// learner's groups that the train pipeline emitted incomplete).
//
// An Assembler keeps no clock (timeouts are the caller's, who Takes the
// group) and is not safe for concurrent use.
package groups

import (
	"iter"
	"slices"
)

// Config says how an Assembler reads its members.
type Config[T any] struct {
	// Key is the group a member belongs to (its group id). Required.
	Key func(*T) string
	// ID, when set, is a member's identity within its group: a member
	// whose pending group holds one with the same ID is a duplicate. Nil:
	// every member is added.
	ID func(*T) string
	// Full, when set, reports whether a pending group's members (the one
	// just added last) make it complete; Add asks it after every member it
	// adds. Nil: a group leaves only by EndsAtNext, Take or Flush.
	Full func(members []T) bool
	// EndsAtNext, when set, reports whether a pending group, given its
	// first member, ends as it is when a member of another group follows
	// its last one: its producer writes all it will ever have of it
	// together (the train pipeline's groups emitted incomplete). Such a
	// group leaves from the Add of that next member, before that member's
	// own group.
	EndsAtNext func(first *T) bool
}

// Group is a group's key and its members in arrival order.
type Group[T any] struct {
	Key     string
	Members []T
	// Full is whether the group left complete (Config.Full); false when it
	// left by EndsAtNext, Take or Flush.
	Full bool

	seq  uint64              // arrival order of the first member
	seen map[string]struct{} // member ids (Config.ID)
}

// Assembler collects members into groups (see the package comment).
type Assembler[T any] struct {
	cfg     Config[T]
	pending map[string]*Group[T]
	last    string // key of the member added last
	seq     uint64
}

// New returns an empty Assembler; it panics when cfg has no Key.
func New[T any](cfg Config[T]) *Assembler[T] {
	if cfg.Key == nil {
		panic("groups: Config.Key is nil")
	}
	return &Assembler[T]{cfg: cfg, pending: map[string]*Group[T]{}}
}

// Add takes member m and returns the groups that it ended, in order: the
// group of the previous member when m belongs to another group and
// Config.EndsAtNext ends it, then m's own group when m makes it full. dup
// reports that m's group is pending and holds a member with m's ID; m is
// then not added, and changes nothing.
func (a *Assembler[T]) Add(m T) (done []*Group[T], dup bool) {
	key := a.cfg.Key(&m)
	g := a.pending[key]
	var id string
	if a.cfg.ID != nil {
		id = a.cfg.ID(&m)
		if g != nil {
			if _, ok := g.seen[id]; ok {
				return nil, true
			}
		}
	}
	if a.cfg.EndsAtNext != nil && a.last != "" && a.last != key {
		if p := a.pending[a.last]; p != nil && a.cfg.EndsAtNext(&p.Members[0]) {
			done = append(done, a.take(a.last))
		}
	}
	a.last = key
	if g == nil {
		a.seq++
		g = &Group[T]{Key: key, seq: a.seq}
		if a.cfg.ID != nil {
			g.seen = map[string]struct{}{}
		}
		a.pending[key] = g
	}
	g.Members = append(g.Members, m)
	if a.cfg.ID != nil {
		g.seen[id] = struct{}{}
	}
	if a.cfg.Full != nil && a.cfg.Full(g.Members) {
		g.Full = true
		done = append(done, a.take(key))
	}
	return done, false
}

// Take removes the pending group key and returns it as it is (a timeout);
// ok is false when no group key is pending.
func (a *Assembler[T]) Take(key string) (g *Group[T], ok bool) {
	if a.pending[key] == nil {
		return nil, false
	}
	return a.take(key), true
}

func (a *Assembler[T]) take(key string) *Group[T] {
	g := a.pending[key]
	delete(a.pending, key)
	g.seen = nil
	return g
}

// Flush removes every pending group and returns them as they are, in the
// order their first members arrived (the end of the input).
func (a *Assembler[T]) Flush() []*Group[T] {
	out := a.sorted()
	for _, g := range out {
		a.take(g.Key)
	}
	return out
}

// Pending yields the pending groups in the order their first members
// arrived; the caller must not change them, nor the Assembler while it
// ranges.
func (a *Assembler[T]) Pending() iter.Seq[*Group[T]] {
	return func(yield func(*Group[T]) bool) {
		for _, g := range a.sorted() {
			if !yield(g) {
				return
			}
		}
	}
}

// Len is the number of pending groups.
func (a *Assembler[T]) Len() int { return len(a.pending) }

func (a *Assembler[T]) sorted() []*Group[T] {
	out := make([]*Group[T], 0, len(a.pending))
	for _, g := range a.pending {
		out = append(out, g)
	}
	slices.SortFunc(out, func(x, y *Group[T]) int {
		switch {
		case x.seq < y.seq:
			return -1
		case x.seq > y.seq:
			return 1
		}
		return 0
	})
	return out
}
