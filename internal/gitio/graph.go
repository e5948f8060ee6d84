package gitio

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
)

// Graph is the commit graph reachable from some revisions: parents,
// generation numbers and who committed when, enough to compute merge bases
// and to tell the commits of one rebase apart without a git process per
// query. It holds about 75 bytes per commit.
type Graph struct {
	index   map[string]int32
	hashes  []string
	parents [][]int32
	gen     []int32
	// time is the committer time (Unix seconds); committer indexes
	// committers, the committer identities (email) seen, interned.
	time       []int64
	committer  []int32
	committers []string
	ids        map[string]int32
}

// graphFormat is the `git log` format ReadGraph parses: hash, parents,
// committer time and committer email, tab-separated.
const graphFormat = "%H %P%x09%ct%x09%ce"

// ReadGraph reads the graph reachable from revs (HEAD when none, or for an
// empty one) with one `git log --topo-order --reverse`. Parents the
// repository lacks (a shallow or damaged clone) are left out; merge bases
// through them are then not found.
func ReadGraph(ctx context.Context, repo *Repo, revs ...string) (*Graph, error) {
	args := []string{"log", "--topo-order", "--reverse", "--no-color", "--format=" + graphFormat}
	cmd := exec.CommandContext(ctx, "git", append(append(args, revArgs(revs)...), "--")...)
	cmd.Dir = repo.Dir
	cmd.Env = gitEnv()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("gitio: %s: rev-list: %w", repo.Name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("gitio: %s: rev-list: %w", repo.Name, err)
	}
	g := &Graph{index: map[string]int32{}, ids: map[string]int32{}}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	var serr error
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		hp, rest, _ := strings.Cut(line, "\t")
		ts, who, ok := strings.Cut(rest, "\t")
		f := strings.Fields(hp)
		t, terr := strconv.ParseInt(ts, 10, 64)
		if !ok || len(f) == 0 || !isHex(f[0]) || terr != nil {
			serr = fmt.Errorf("unexpected line %.80q", line)
			cmd.Process.Kill()
			break
		}
		g.add(f[0], f[1:], t, who)
	}
	if serr == nil {
		serr = sc.Err()
	}
	werr := cmd.Wait()
	if serr != nil {
		return g, fmt.Errorf("gitio: %s: rev-list: %w", repo.Name, serr)
	}
	if werr != nil {
		return g, fmt.Errorf("gitio: %s: rev-list: %w: %s", repo.Name, werr, strings.TrimSpace(stderr.String()))
	}
	return g, nil
}

// revArgs is revs for git's command line, HEAD for none or "".
func revArgs(revs []string) []string {
	var out []string
	for _, r := range revs {
		if r != "" {
			out = append(out, r)
		}
	}
	if len(out) == 0 {
		out = []string{"HEAD"}
	}
	return out
}

// add appends a commit whose known parents were added before it.
func (g *Graph) add(h string, parents []string, t int64, committer string) {
	id := int32(len(g.hashes))
	g.index[h] = id
	g.hashes = append(g.hashes, h)
	who, ok := g.ids[committer]
	if !ok {
		who = int32(len(g.committers))
		g.ids[committer] = who
		g.committers = append(g.committers, committer)
	}
	g.time = append(g.time, t)
	g.committer = append(g.committer, who)
	var ps []int32
	gen := int32(1)
	for _, p := range parents {
		pi, ok := g.index[p]
		if !ok {
			continue
		}
		ps = append(ps, pi)
		if g.gen[pi]+1 > gen {
			gen = g.gen[pi] + 1
		}
	}
	g.parents = append(g.parents, ps)
	g.gen = append(g.gen, gen)
}

// Len is the number of commits in the graph.
func (g *Graph) Len() int { return len(g.hashes) }

// Has reports whether the graph holds commit h.
func (g *Graph) Has(h string) bool { _, ok := g.index[h]; return ok }

// Time returns the committer time (Unix seconds) of commit h.
func (g *Graph) Time(h string) (int64, bool) {
	i, ok := g.index[h]
	if !ok {
		return 0, false
	}
	return g.time[i], true
}

// Parents returns the parents of h that the graph holds.
func (g *Graph) Parents(h string) []string {
	i, ok := g.index[h]
	if !ok {
		return nil
	}
	out := make([]string, len(g.parents[i]))
	for k, p := range g.parents[i] {
		out[k] = g.hashes[p]
	}
	return out
}

// SameCommitter reports whether a and b were committed by the same
// committer (email) in the same second, as the commits that one rebase
// (GitHub's "Rebase and merge" among them) writes are.
func (g *Graph) SameCommitter(a, b string) bool {
	ai, ok1 := g.index[a]
	bi, ok2 := g.index[b]
	return ok1 && ok2 && g.time[ai] == g.time[bi] && g.committer[ai] == g.committer[bi]
}

// FirstParentLine returns a test for the commits on the first-parent
// chains of tips (those the graph holds); it holds a bool per commit.
func (g *Graph) FirstParentLine(tips ...string) func(h string) bool {
	line := make([]bool, len(g.hashes))
	for _, t := range tips {
		i, ok := g.index[t]
		for ok && !line[i] {
			line[i] = true
			ok = len(g.parents[i]) > 0
			if ok {
				i = g.parents[i][0]
			}
		}
	}
	return func(h string) bool {
		i, ok := g.index[h]
		return ok && line[i]
	}
}

// MergeBase returns a best common ancestor of a and b, as `git merge-base a
// b` does (when there are several, the one with the highest generation,
// ties broken by hash), or ok=false when they share no ancestor in the graph.
func (g *Graph) MergeBase(a, b string) (string, bool) {
	ai, ok1 := g.index[a]
	bi, ok2 := g.index[b]
	if !ok1 || !ok2 {
		return "", false
	}
	if ai == bi {
		return a, true
	}
	const (
		p1 = 1 << iota
		p2
		stale
		result
	)
	flags := map[int32]uint8{ai: p1, bi: p2}
	q := &genQueue{gen: g.gen}
	heap.Push(q, ai)
	heap.Push(q, bi)
	var results []int32
	anyLive := func() bool {
		for _, c := range q.items {
			if flags[c]&stale == 0 {
				return true
			}
		}
		return false
	}
	for q.Len() > 0 && anyLive() {
		c := heap.Pop(q).(int32)
		f := flags[c] & (p1 | p2 | stale)
		if f == p1|p2 {
			if flags[c]&result == 0 {
				flags[c] |= result
				results = append(results, c)
			}
			f |= stale
		}
		for _, p := range g.parents[c] {
			if flags[p]&f == f {
				continue
			}
			flags[p] |= f
			if !q.has(p) {
				heap.Push(q, p)
			}
		}
	}
	if len(results) == 0 {
		return "", false
	}
	best := results[0]
	for _, r := range results[1:] {
		// Results that are ancestors of another result are not "best"; with
		// a generation-ordered walk the first result found has the highest
		// generation, and any result above it cannot be its ancestor.
		if g.gen[r] > g.gen[best] || g.gen[r] == g.gen[best] && g.hashes[r] < g.hashes[best] {
			best = r
		}
	}
	return g.hashes[best], true
}

// genQueue is a max-heap of commits by generation with membership.
type genQueue struct {
	gen   []int32
	items []int32
	in    map[int32]bool
}

func (q *genQueue) has(c int32) bool { return q.in[c] }
func (q *genQueue) Len() int         { return len(q.items) }
func (q *genQueue) Less(i, j int) bool {
	return q.gen[q.items[i]] > q.gen[q.items[j]] || q.gen[q.items[i]] == q.gen[q.items[j]] && q.items[i] > q.items[j]
}
func (q *genQueue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *genQueue) Push(x any) {
	if q.in == nil {
		q.in = map[int32]bool{}
	}
	q.in[x.(int32)] = true
	q.items = append(q.items, x.(int32))
}
func (q *genQueue) Pop() any {
	x := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	delete(q.in, x)
	return x
}
