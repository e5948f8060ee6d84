package gitio

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"os/exec"
	"strings"
)

// Graph is the commit graph reachable from one revision: parents and
// generation numbers, enough to compute merge bases without a git process
// per query. It holds about 60 bytes per commit.
type Graph struct {
	index   map[string]int32
	hashes  []string
	parents [][]int32
	gen     []int32
}

// ReadGraph reads the graph reachable from rev (HEAD when empty) with one
// `git rev-list --parents --topo-order --reverse`. Parents the repository
// lacks (a shallow or damaged clone) are left out; merge bases through them
// are then not found.
func ReadGraph(ctx context.Context, repo *Repo, rev string) (*Graph, error) {
	if rev == "" {
		rev = "HEAD"
	}
	cmd := exec.CommandContext(ctx, "git", "rev-list", "--parents", "--topo-order", "--reverse", rev, "--")
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
	g := &Graph{index: map[string]int32{}}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		g.add(f[0], f[1:])
	}
	serr := sc.Err()
	werr := cmd.Wait()
	if serr != nil {
		return g, fmt.Errorf("gitio: %s: rev-list: %w", repo.Name, serr)
	}
	if werr != nil {
		return g, fmt.Errorf("gitio: %s: rev-list: %w: %s", repo.Name, werr, strings.TrimSpace(stderr.String()))
	}
	return g, nil
}

// add appends a commit whose known parents were added before it.
func (g *Graph) add(h string, parents []string) {
	id := int32(len(g.hashes))
	g.index[h] = id
	g.hashes = append(g.hashes, h)
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
