package mine

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"swerl/pipelines/beamrun"
)

// Per-repository progress: when a run mines several repositories, Run
// writes a line to Config.Progress as each one finishes (its scan is done
// and every candidate it found is built). The scan and build DoFns report
// to the run's tracker in this process, found by the run's key (a DoFn is
// serialized, so it carries the key, not the tracker); on a runner whose
// workers are other processes they find none and the lines are not
// written. The counts are the build's: duplicates across the whole run
// are removed later, so a repository's instances may lose a few to
// deduplication, which the end summary counts.

// RepoProgress is one finished repository.
type RepoProgress struct {
	Repo        string
	PRs         int64 // pull requests found
	Instances   int64 // built and kept by the filters (before deduplication)
	DeadLetters int64 // repository faults: a failed clone, git errors, missing objects
	Elapsed     time.Duration
}

func (p RepoProgress) String() string {
	return fmt.Sprintf("mine: repo %s: %d PRs, %d instances, %d dead letters, %.1fs",
		p.Repo, p.PRs, p.Instances, p.DeadLetters, p.Elapsed.Seconds())
}

// repoTracker follows the repositories of one run. Safe for concurrent
// use; the nil tracker ignores everything.
type repoTracker struct {
	mu     sync.Mutex
	repos  map[string]*repoState // by lower-case name
	done   []RepoProgress        // finished, not yet taken
	notify chan struct{}         // a value when done has lines
}

type repoState struct {
	name                    string
	start                   time.Time
	scanned, finished       bool
	prs, cands, built, kept int64
	dead                    int64
}

// trackers are the trackers of this process's runs, by run key
// (beamrun.Registry: Run registers one for the run's life). A worker of
// another process finds none and reports nothing.
var trackers = beamrun.NewRegistry[*repoTracker]("mine repository tracker")

// trackRepos registers a tracker for tasks under key; stop removes it.
func trackRepos(key string, tasks []RepoTask) (t *repoTracker, stop func()) {
	t = &repoTracker{repos: map[string]*repoState{}, notify: make(chan struct{}, 1)}
	for _, task := range tasks {
		t.repos[strings.ToLower(task.Name)] = &repoState{name: task.Name}
	}
	return t, trackers.Register(key, t)
}

// trackerFor returns the tracker of run key in this process, or nil (the
// nil tracker ignores what it is told).
func trackerFor(key string) *repoTracker {
	if key == "" {
		return nil
	}
	t, _ := trackers.Find(key)
	return t
}

// update applies fn to repository repo's state (unknown repositories, such
// as one named only by an event file, are ignored) and moves it to done
// when it has finished.
func (t *repoTracker) update(repo string, fn func(s *repoState)) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.repos[strings.ToLower(repo)]
	if s == nil {
		return
	}
	fn(s)
	if s.finished || !s.scanned || s.built < s.cands {
		return
	}
	s.finished = true
	t.done = append(t.done, RepoProgress{Repo: s.name, PRs: s.prs, Instances: s.kept, DeadLetters: s.dead, Elapsed: time.Since(s.start)})
	select {
	case t.notify <- struct{}{}:
	default:
	}
}

func (t *repoTracker) scanStart(repo string) {
	t.update(repo, func(s *repoState) {
		if s.start.IsZero() {
			s.start = time.Now()
		}
	})
}

func (t *repoTracker) candidate(repo string, pr bool) {
	t.update(repo, func(s *repoState) {
		s.cands++
		if pr {
			s.prs++
		}
	})
}

func (t *repoTracker) deadLetter(repo string) { t.update(repo, func(s *repoState) { s.dead++ }) }

func (t *repoTracker) scanEnd(repo string) { t.update(repo, func(s *repoState) { s.scanned = true }) }

// built counts one built candidate: kept, or rejected (a dead letter when
// dead).
func (t *repoTracker) built(repo string, kept, dead bool) {
	t.update(repo, func(s *repoState) {
		s.built++
		if kept {
			s.kept++
		}
		if dead {
			s.dead++
		}
	})
}

// take returns the repositories finished since the last take.
func (t *repoTracker) take() []RepoProgress {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.done
	t.done = nil
	return out
}
