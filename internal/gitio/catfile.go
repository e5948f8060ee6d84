package gitio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// CatFile reads objects through one long-lived `git cat-file --batch`.
type CatFile struct {
	repo   *Repo
	mu     sync.Mutex
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
	err    error // sticky: the process failed
}

// Object is one object read by CatFile.
type Object struct {
	Hash string
	Type string // "blob", "tree", "commit" or "tag"
	Data []byte
}

// NewCatFile starts `git cat-file --batch` in repo. Close stops it.
func NewCatFile(ctx context.Context, repo *Repo) (*CatFile, error) {
	return NewCatFileEnv(ctx, repo, nil)
}

// NewCatFileEnv is NewCatFile with extra environment variables for git,
// such as GIT_ALTERNATE_OBJECT_DIRECTORIES to see objects written elsewhere.
func NewCatFileEnv(ctx context.Context, repo *Repo, env []string) (*CatFile, error) {
	cmd := exec.CommandContext(ctx, "git", "cat-file", "--batch")
	cmd.Dir = repo.Dir
	cmd.Env = append(gitEnv(), env...)
	c := &CatFile{repo: repo, cmd: cmd}
	cmd.Stderr = &c.stderr
	var err error
	if c.in, err = cmd.StdinPipe(); err != nil {
		return nil, fmt.Errorf("gitio: %s: cat-file: %w", repo.Name, err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("gitio: %s: cat-file: %w", repo.Name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("gitio: %s: cat-file: %w", repo.Name, err)
	}
	c.out = bufio.NewReaderSize(out, 1<<16)
	return c, nil
}

// Close stops the process.
func (c *CatFile) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.in == nil {
		return nil
	}
	c.in.Close()
	c.in = nil
	err := c.cmd.Wait()
	if err != nil && c.err == nil {
		return fmt.Errorf("gitio: %s: cat-file: %w: %s", c.repo.Name, err, strings.TrimSpace(c.stderr.String()))
	}
	return nil
}

// Get reads the object named by rev (an object id, or any revision git
// understands such as "<commit>:<path>" or "<commit>^{tree}"). A rev that
// does not name an object returns an error wrapping ErrMissing.
func (c *CatFile) Get(rev string) (*Object, error) {
	if rev == "" || strings.ContainsAny(rev, "\n\r") {
		return nil, fmt.Errorf("gitio: %s: cat-file %q: %w", c.repo.Name, rev, ErrMissing)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return nil, c.err
	}
	if c.in == nil {
		return nil, fmt.Errorf("gitio: %s: cat-file: closed", c.repo.Name)
	}
	if _, err := io.WriteString(c.in, rev+"\n"); err != nil {
		return nil, c.fail(err)
	}
	return c.read(rev)
}

// GetMany reads many objects with one pipelined round trip: all requests
// are written while the answers are read. objs[i] and errs[i] answer
// revs[i] as Get would.
func (c *CatFile) GetMany(revs []string) (objs []*Object, errs []error) {
	objs, errs = make([]*Object, len(revs)), make([]error, len(revs))
	var send []int
	for i, rev := range revs {
		if rev == "" || strings.ContainsAny(rev, "\n\r") {
			errs[i] = fmt.Errorf("gitio: %s: cat-file %q: %w", c.repo.Name, rev, ErrMissing)
			continue
		}
		send = append(send, i)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil && c.in == nil {
		c.err = fmt.Errorf("gitio: %s: cat-file: closed", c.repo.Name)
	}
	if c.err != nil {
		for _, i := range send {
			errs[i] = c.err
		}
		return objs, errs
	}
	var buf bytes.Buffer
	for _, i := range send {
		buf.WriteString(revs[i])
		buf.WriteByte('\n')
	}
	werr := make(chan error, 1)
	go func() {
		_, err := c.in.Write(buf.Bytes())
		werr <- err
	}()
	for k, i := range send {
		objs[i], errs[i] = c.read(revs[i])
		if c.err != nil {
			for _, j := range send[k+1:] {
				errs[j] = c.err
			}
			break
		}
	}
	if err := <-werr; err != nil && c.err == nil {
		c.fail(err)
	}
	return objs, errs
}

// read reads the answer to one request; the lock is held.
func (c *CatFile) read(rev string) (*Object, error) {
	header, err := c.out.ReadString('\n')
	if err != nil {
		return nil, c.fail(err)
	}
	header = strings.TrimSuffix(header, "\n")
	f := strings.Fields(header)
	if len(f) == 2 && (f[1] == "missing" || f[1] == "ambiguous") {
		return nil, fmt.Errorf("gitio: %s: %s %s: %w", c.repo.Name, rev, f[1], ErrMissing)
	}
	if len(f) != 3 {
		return nil, c.fail(fmt.Errorf("unexpected header %q", header))
	}
	size, err := strconv.Atoi(f[2])
	if err != nil || size < 0 {
		return nil, c.fail(fmt.Errorf("unexpected header %q", header))
	}
	data := make([]byte, size+1)
	if _, err := io.ReadFull(c.out, data); err != nil {
		return nil, c.fail(err)
	}
	return &Object{Hash: f[0], Type: f[1], Data: data[:size]}, nil
}

func (c *CatFile) fail(err error) error {
	c.err = fmt.Errorf("gitio: %s: cat-file: %w: %s", c.repo.Name, err, strings.TrimSpace(c.stderr.String()))
	return c.err
}

// Blob reads the content of a blob.
func (c *CatFile) Blob(hash string) ([]byte, error) {
	o, err := c.Get(hash)
	if err != nil {
		return nil, err
	}
	if o.Type != "blob" {
		return nil, fmt.Errorf("gitio: %s: %s is a %s, not a blob", c.repo.Name, hash, o.Type)
	}
	return o.Data, nil
}

// TreeEntry is one entry of a tree object.
type TreeEntry struct {
	Mode string // "100644", "100755", "120000" (symlink), "40000" (tree), "160000" (submodule)
	Name string
	Hash string
}

// IsTree reports whether the entry is a subdirectory.
func (e TreeEntry) IsTree() bool { return e.Mode == "40000" || e.Mode == "040000" }

// Tree reads a tree named by rev: a tree or commit id (its tree), or
// "<commit>:<dir>".
func (c *CatFile) Tree(rev string) ([]TreeEntry, error) {
	if !strings.Contains(rev, ":") {
		// "<rev>:<path>^{tree}" would name a path ending in "^{tree}".
		rev += "^{tree}"
	}
	o, err := c.Get(rev)
	if err != nil {
		return nil, err
	}
	if o.Type != "tree" {
		return nil, fmt.Errorf("gitio: %s: %s is a %s, not a tree", c.repo.Name, rev, o.Type)
	}
	entries, err := ParseTree(o.Data, len(o.Hash)/2)
	if err != nil {
		return nil, fmt.Errorf("gitio: %s: tree %s: %w", c.repo.Name, o.Hash, err)
	}
	return entries, nil
}

// ParseTree parses the binary form of a tree object whose object ids are
// hashLen bytes (20 for SHA-1, 32 for SHA-256).
func ParseTree(data []byte, hashLen int) ([]TreeEntry, error) {
	var out []TreeEntry
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		if sp <= 0 {
			return nil, fmt.Errorf("entry %d: no mode", len(out))
		}
		nul := bytes.IndexByte(data[sp+1:], 0)
		if nul < 0 {
			return nil, fmt.Errorf("entry %d: no name terminator", len(out))
		}
		name := string(data[sp+1 : sp+1+nul])
		rest := data[sp+1+nul+1:]
		if len(rest) < hashLen {
			return nil, fmt.Errorf("entry %d (%q): truncated object id", len(out), name)
		}
		out = append(out, TreeEntry{Mode: string(data[:sp]), Name: name, Hash: hex.EncodeToString(rest[:hashLen])})
		data = rest[hashLen:]
	}
	return out, nil
}

// DiffTrees lists the files that differ between the trees of from and to
// (commits or trees), like `git diff --raw --no-renames from to`, in path
// order. Identical subtrees are skipped without being read; the trees of
// one directory level are read in one pipelined round trip.
func (c *CatFile) DiffTrees(from, to string) ([]Change, error) {
	roots, errs := c.GetMany([]string{from + "^{tree}", to + "^{tree}"})
	for i, err := range errs {
		if err != nil {
			return nil, err
		}
		if roots[i].Type != "tree" {
			return nil, fmt.Errorf("gitio: %s: %s is a %s, not a tree", c.repo.Name, []string{from, to}[i], roots[i].Type)
		}
	}
	type pair struct{ a, b, prefix string }
	zero := strings.Repeat("0", len(roots[0].Hash))
	var out []Change
	level := []pair{{roots[0].Hash, roots[1].Hash, ""}}
	for len(level) > 0 {
		var need []string
		seen := map[string]bool{}
		for _, p := range level {
			for _, h := range []string{p.a, p.b} {
				if h != "" && !seen[h] {
					seen[h] = true
					need = append(need, h)
				}
			}
		}
		objs, errs := c.GetMany(need)
		trees := map[string]map[string]TreeEntry{}
		for i, h := range need {
			if errs[i] != nil {
				return nil, errs[i]
			}
			if objs[i].Type != "tree" {
				return nil, fmt.Errorf("gitio: %s: %s is a %s, not a tree", c.repo.Name, h, objs[i].Type)
			}
			es, err := ParseTree(objs[i].Data, len(h)/2)
			if err != nil {
				return nil, fmt.Errorf("gitio: %s: tree %s: %w", c.repo.Name, h, err)
			}
			m := make(map[string]TreeEntry, len(es))
			for _, e := range es {
				m[e.Name] = e
			}
			trees[h] = m
		}
		var next []pair
		for _, p := range level {
			ea, eb := trees[p.a], trees[p.b]
			visit := func(x, y TreeEntry, path string) {
				xt, yt := x.Hash != "" && x.IsTree(), y.Hash != "" && y.IsTree()
				if xt || yt {
					np := pair{prefix: path + "/"}
					if xt {
						np.a = x.Hash
					}
					if yt {
						np.b = y.Hash
					}
					next = append(next, np)
					// A file replaced by a directory (or the reverse) is also
					// a file change.
					switch {
					case xt && y.Hash != "" && !yt:
						x = TreeEntry{}
					case yt && x.Hash != "" && !xt:
						y = TreeEntry{}
					default:
						return
					}
				}
				out = append(out, change(x, y, path, zero))
			}
			for name, x := range ea {
				y, ok := eb[name]
				switch {
				case !ok:
					visit(x, TreeEntry{}, p.prefix+name)
				case x.Hash == y.Hash && x.Mode == y.Mode:
				default:
					visit(x, y, p.prefix+name)
				}
			}
			for name, y := range eb {
				if _, ok := ea[name]; !ok {
					visit(TreeEntry{}, y, p.prefix+name)
				}
			}
		}
		level = next
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// change is the raw change from x to y at path (an empty entry is absent).
func change(x, y TreeEntry, path, zero string) Change {
	ch := Change{Path: path, OldMode: "000000", NewMode: "000000", OldHash: zero, NewHash: zero}
	if x.Hash != "" {
		ch.OldMode, ch.OldHash = pad6(x.Mode), x.Hash
	}
	if y.Hash != "" {
		ch.NewMode, ch.NewHash = pad6(y.Mode), y.Hash
	}
	switch {
	case x.Hash == "":
		ch.Status = 'A'
	case y.Hash == "":
		ch.Status = 'D'
	case x.Mode != y.Mode && (x.Mode[0] != y.Mode[0] || len(x.Mode) != len(y.Mode)):
		ch.Status = 'T'
	default:
		ch.Status = 'M'
	}
	return ch
}

func pad6(m string) string {
	for len(m) < 6 {
		m = "0" + m
	}
	return m
}
