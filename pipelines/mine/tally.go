package mine

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"swerl/sinks/files"
	"swerl/sinks/metrics"
)

// The end summary's counts travel as pipeline data, not only as Beam
// metrics: every counting DoFn keeps its bundle's counts in a tally and
// emits them in FinishBundle; one writer sums them into a counts file
// that Run reads. Prism (v2.77) loses metric updates: when two bundles
// report a counter Prism has not yet resolved (its first sighting in the
// job), it keeps one pending payload per short id, so the second bundle's
// value replaces the first's before the lookup returns. Bundles that end
// at once are common under load (the finalize bundles of a run), and the
// summary then showed fewer instances than were written (182 of 323 and
// 480 of 707 on pallets/flask). Data is committed exactly once on every
// runner; the metrics stay for Prometheus and the runner's own UI.

// countRow is one count of one bundle.
type countRow struct {
	Name string
	N    int64
}

// Names of the counts in the counts file.
const (
	nRepos      = "repos"
	nCommits    = "commits"
	nPRs        = "prs"
	nCandidates = "candidates"
	nBuilt      = "built"
	nKept       = "instances"
	nRejected   = "rejected:" // + reason
)

// tally is a bundle's counts. Safe for concurrent use: build workers count
// from their goroutines.
type tally struct {
	mu sync.Mutex
	m  map[string]int64
}

// add counts n on the metric c (Beam, Prometheus and the live progress
// line) and in the tally under name.
func (t *tally) add(ctx context.Context, c *metrics.Counter, name string, n int64) {
	c.Add(ctx, n)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = map[string]int64{}
	}
	t.m[name] += n
}

// flush emits the tally, one row a name, keyed for the single counts
// writer, and empties it.
func (t *tally) flush(emit func(int, countRow)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	names := make([]string, 0, len(t.m))
	for n := range t.m {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		emit(0, countRow{n, t.m[n]})
	}
	clear(t.m)
}

// writeCountsFn sums every bundle's counts into the counts file.
type writeCountsFn struct {
	Path string
}

func (f *writeCountsFn) ProcessElement(ctx context.Context, _ int, rows func(*countRow) bool) error {
	sum := map[string]int64{}
	var r countRow
	for rows(&r) {
		sum[r.Name] += r.N
	}
	b, err := json.Marshal(sum)
	if err != nil {
		return err
	}
	return files.WriteFile(ctx, f.Path, b)
}

// readCounts reads the counts file into sum; ok is false when there is
// none (a run whose pipeline counted nothing).
func readCounts(ctx context.Context, path string, sum *Summary) (ok bool, err error) {
	if ok, err := files.Exists(ctx, path); err != nil || !ok {
		return false, err
	}
	m, err := readCountsFile(ctx, path)
	if err != nil {
		return false, err
	}
	sum.Repos, sum.Commits, sum.PRs = m[nRepos], m[nCommits], m[nPRs]
	sum.Candidates, sum.Instances = m[nCandidates], m[nKept]
	sum.Rejected = map[string]int64{}
	for name, n := range m {
		if reason, ok := strings.CutPrefix(name, nRejected); ok {
			sum.Rejected[reason] = n
		}
	}
	return true, nil
}

// readCountsFile reads what writeCountsFn wrote.
func readCountsFile(ctx context.Context, path string) (map[string]int64, error) {
	b, err := files.ReadFile(ctx, path)
	if err != nil {
		return nil, err
	}
	var m map[string]int64
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("mine: counts %s: %w", path, err)
	}
	return m, nil
}
