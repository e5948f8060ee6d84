package gitio

import (
	"fmt"
	"strings"
	"sync"
)

// TreeCache keeps the parsed trees of one repository, and the root tree of
// each commit, by object id. Objects are immutable, so an entry is never
// stale. Mining reads the same trees over and over (every pull request
// diffs two commits that share most directories with their neighbours in
// history, and lists the directories around its files): on a 5,000-commit
// history three reads in five were trees, and most had been read before.
// Each cat-file read costs git a pack lookup and an inflate and both
// processes a pipe round trip; a hit costs a map lookup.
//
// The cache holds at most about maxBytes of entries, evicting arbitrary
// ones. It is safe for concurrent use and may serve many repositories:
// entries are kept by repository directory and object id, so a damaged
// clone lacking an object still reports it missing when another
// repository has it.
type TreeCache struct {
	mu    sync.Mutex
	trees map[objKey][]TreeEntry
	roots map[objKey]string // commit → tree id
	bytes int
	max   int
}

type objKey struct{ repo, id string }

// NewTreeCache returns an empty cache of at most about maxBytes.
func NewTreeCache(maxBytes int) *TreeCache {
	return &TreeCache{trees: map[objKey][]TreeEntry{}, roots: map[objKey]string{}, max: maxBytes}
}

// treeBytes estimates the memory a cached tree takes.
func treeBytes(id string, es []TreeEntry) int {
	n := len(id) + 80
	for _, e := range es {
		n += len(e.Mode) + len(e.Name) + len(e.Hash) + 48
	}
	return n
}

func (t *TreeCache) tree(repo, id string) ([]TreeEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	es, ok := t.trees[objKey{repo, id}]
	return es, ok
}

func (t *TreeCache) root(repo, commit string) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id, ok := t.roots[objKey{repo, commit}]
	return id, ok
}

// put adds a tree and, when commit is not empty, records it as the root
// tree of commit.
func (t *TreeCache) put(repo, commit, id string, es []TreeEntry) {
	n := treeBytes(id, es)
	t.mu.Lock()
	defer t.mu.Unlock()
	if commit != "" && commit != id {
		k := objKey{repo, commit}
		if _, ok := t.roots[k]; !ok {
			t.roots[k] = id
			t.bytes += rootBytes(commit, id)
		}
	}
	k := objKey{repo, id}
	if _, ok := t.trees[k]; ok || n > t.max/4 {
		return
	}
	for old, es := range t.trees {
		if t.bytes+n <= t.max {
			break
		}
		delete(t.trees, old)
		t.bytes -= treeBytes(old.id, es)
	}
	for old, v := range t.roots {
		if t.bytes+n <= t.max {
			break
		}
		delete(t.roots, old)
		t.bytes -= rootBytes(old.id, v)
	}
	t.trees[k] = es
	t.bytes += n
}

func rootBytes(commit, id string) int { return len(commit) + len(id) + 80 }

// UseTrees makes c read trees through cache (nil: no cache).
func (c *CatFile) UseTrees(cache *TreeCache) { c.trees = cache }

// readTrees returns the parsed trees named by revs: tree ids, or commit
// ids and "<commit>^{tree}" for a commit's root tree. Trees in the cache
// are not read; the others are read in one pipelined round trip and
// cached. ids[i] is the tree id of revs[i]. The returned entries are
// shared: callers must not modify them.
func (c *CatFile) readTrees(revs []string) (ids []string, trees [][]TreeEntry, err error) {
	ids, trees = make([]string, len(revs)), make([][]TreeEntry, len(revs))
	repo := c.repo.Dir
	var need []string
	var at []int
	for i, rev := range revs {
		if c.trees != nil {
			id := strings.TrimSuffix(rev, "^{tree}")
			if root, ok := c.trees.root(repo, id); ok {
				id = root
			}
			if es, ok := c.trees.tree(repo, id); ok {
				ids[i], trees[i] = id, es
				continue
			}
		}
		at = append(at, i)
		if !strings.Contains(rev, ":") && !strings.HasSuffix(rev, "^{tree}") {
			rev += "^{tree}"
		}
		need = append(need, rev)
	}
	if len(need) == 0 {
		return ids, trees, nil
	}
	objs, errs := c.GetMany(need)
	for k, i := range at {
		if errs[k] != nil {
			return nil, nil, errs[k]
		}
		o := objs[k]
		if o.Type != "tree" {
			return nil, nil, fmt.Errorf("gitio: %s: %s is a %s, not a tree", c.repo.Name, revs[i], o.Type)
		}
		es, err := ParseTree(o.Data, len(o.Hash)/2)
		if err != nil {
			return nil, nil, fmt.Errorf("gitio: %s: tree %s: %w", c.repo.Name, o.Hash, err)
		}
		ids[i], trees[i] = o.Hash, es
		if c.trees != nil {
			commit := strings.TrimSuffix(revs[i], "^{tree}")
			if !isObjectID(commit) {
				commit = "" // a ref such as HEAD can move: only ids are kept
			}
			c.trees.put(repo, commit, o.Hash, es)
		}
	}
	return ids, trees, nil
}

// Lookup finds the entry at path (slash-separated, relative to the root)
// in the tree of commit, reading each directory on the way through the
// cache. A path that does not exist returns an error wrapping ErrMissing.
// The empty path and "." name the root tree itself (Mode ModeTree).
func (c *CatFile) Lookup(commit, path string) (TreeEntry, error) {
	ids, trees, err := c.readTrees([]string{commit})
	if err != nil {
		return TreeEntry{}, err
	}
	cur := TreeEntry{Mode: ModeTree, Name: "", Hash: ids[0]}
	es := trees[0]
	path = strings.Trim(path, "/")
	if path == "" || path == "." {
		return cur, nil
	}
	parts := strings.Split(path, "/")
	for i, name := range parts {
		found := false
		for _, e := range es {
			if e.Name == name {
				cur, found = e, true
				break
			}
		}
		if !found {
			return TreeEntry{}, fmt.Errorf("gitio: %s: %s:%s: %w", c.repo.Name, commit, path, ErrMissing)
		}
		if i == len(parts)-1 {
			break
		}
		if !cur.IsTree() {
			return TreeEntry{}, fmt.Errorf("gitio: %s: %s:%s: %s is not a directory: %w", c.repo.Name, commit, path, strings.Join(parts[:i+1], "/"), ErrMissing)
		}
		_, sub, err := c.readTrees([]string{cur.Hash})
		if err != nil {
			return TreeEntry{}, err
		}
		es = sub[0]
	}
	return cur, nil
}

// ReadDir returns the entries of directory dir ("" or "." for the root) in
// the tree of commit, through the cache. The entries are shared: callers
// must not modify them.
func (c *CatFile) ReadDir(commit, dir string) ([]TreeEntry, error) {
	e, err := c.Lookup(commit, dir)
	if err != nil {
		return nil, err
	}
	if !e.IsTree() {
		return nil, fmt.Errorf("gitio: %s: %s:%s is not a directory: %w", c.repo.Name, commit, dir, ErrMissing)
	}
	_, trees, err := c.readTrees([]string{e.Hash})
	if err != nil {
		return nil, err
	}
	return trees[0], nil
}

// isObjectID reports whether s is a full SHA-1 or SHA-256 object id in
// lower-case hex (what git prints), not a ref or an abbreviation.
func isObjectID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
