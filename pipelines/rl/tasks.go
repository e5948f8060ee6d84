package rl

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"swerl/gpu/tokenizer"
	"swerl/internal/atomicfile"
	"swerl/schemas"
	"swerl/transforms/prompt"
)

// Fitting keeps the tasks whose oracle answer is at most maxTokens tokens
// of the built-in tokenizer and whose chat prompt plus answer fit maxSeq,
// shortest answer first.
func Fitting(tasks []schemas.Instance, o prompt.Options, maxTokens, maxSeq int) []schemas.Instance {
	tok := tokenizer.Builtin()
	var out []schemas.Instance
	var lens []int
	for i := range tasks {
		p, err := prompt.Build(&tasks[i], o)
		if err != nil {
			continue
		}
		ans, err := prompt.OracleAnswer(&tasks[i], p.Files)
		if err != nil {
			continue
		}
		if o.Compact {
			ans = ShortenThought(ans, schemas.SortedPaths(tasks[i].OracleNewContent))
		}
		pt, at, err := tok.EncodeChat(p.System, p.User, ans)
		if err != nil {
			continue
		}
		a, q := len(at)+1, len(pt) // +1: the answer's eos token
		if a <= maxTokens && q+a <= maxSeq {
			out = append(out, tasks[i])
			lens = append(lens, a)
		}
	}
	idx := make([]int, len(out))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(x, y int) bool { return lens[idx[x]] < lens[idx[y]] })
	sorted := make([]schemas.Instance, len(out))
	for i, k := range idx {
		sorted[i] = out[k]
	}
	return sorted
}

// Split holds out n tasks for evaluation, in a seeded order; tasks of one
// instance stay on one side so evaluation never sees a trained-on change.
func Split(tasks []schemas.Instance, n int, seed uint64) (train, held []schemas.Instance) {
	parent := func(id string) string {
		if i := strings.Index(id, "/"); i >= 0 {
			if j := strings.Index(id[i+1:], "/"); j >= 0 {
				// owner/repo#N/path:line or owner/repo@sha/path:line
				return id[:i+1+j]
			}
		}
		return id
	}
	byParent := map[string][]schemas.Instance{}
	var parents []string
	for _, t := range tasks {
		p := parent(t.ID)
		if _, ok := byParent[p]; !ok {
			parents = append(parents, p)
		}
		byParent[p] = append(byParent[p], t)
	}
	sort.Strings(parents)
	rand.New(rand.NewPCG(seed, 0xe7a1)).Shuffle(len(parents), func(i, j int) { parents[i], parents[j] = parents[j], parents[i] })
	for _, p := range parents {
		if len(held) < n && len(held)+len(byParent[p]) <= max(n, 1) && len(parents) > 1 {
			held = append(held, byParent[p]...)
			continue
		}
		train = append(train, byParent[p]...)
	}
	return train, held
}

// WriteInstances writes instances as JSONL (the versioned wire form),
// atomically.
func WriteInstances(path string, ins []schemas.Instance) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	var b []byte
	for i := range ins {
		v, err := schemas.Encode(&ins[i])
		if err != nil {
			return fmt.Errorf("instance %s: %w", ins[i].ID, err)
		}
		b = append(append(b, v...), '\n')
	}
	return atomicfile.WriteFile(path, b)
}
