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
// order. Identical subtrees are skipped without being read.
func (c *CatFile) DiffTrees(from, to string) ([]Change, error) {
	a, err := c.Get(from + "^{tree}")
	if err != nil {
		return nil, err
	}
	b, err := c.Get(to + "^{tree}")
	if err != nil {
		return nil, err
	}
	var out []Change
	if err := c.diffTree(a.Hash, b.Hash, "", &out); err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func (c *CatFile) diffTree(a, b, prefix string, out *[]Change) error {
	if a == b {
		return nil
	}
	read := func(h string) (map[string]TreeEntry, error) {
		if h == "" {
			return nil, nil
		}
		es, err := c.Tree(h)
		if err != nil {
			return nil, err
		}
		m := make(map[string]TreeEntry, len(es))
		for _, e := range es {
			m[e.Name] = e
		}
		return m, nil
	}
	ea, err := read(a)
	if err != nil {
		return err
	}
	eb, err := read(b)
	if err != nil {
		return err
	}
	zero := strings.Repeat("0", len(ZeroHash))
	for name, x := range ea {
		y, ok := eb[name]
		switch {
		case !ok:
			if err := c.emit(x, TreeEntry{}, prefix+name, out, zero); err != nil {
				return err
			}
		case x.Hash == y.Hash && x.Mode == y.Mode:
		default:
			if err := c.emit(x, y, prefix+name, out, zero); err != nil {
				return err
			}
		}
	}
	for name, y := range eb {
		if _, ok := ea[name]; !ok {
			if err := c.emit(TreeEntry{}, y, prefix+name, out, zero); err != nil {
				return err
			}
		}
	}
	return nil
}

// emit records the change from x to y at path (an empty entry is absent),
// recursing into trees.
func (c *CatFile) emit(x, y TreeEntry, path string, out *[]Change, zero string) error {
	xt, yt := x.Hash != "" && x.IsTree(), y.Hash != "" && y.IsTree()
	if xt || yt {
		ta, tb := "", ""
		if xt {
			ta = x.Hash
		}
		if yt {
			tb = y.Hash
		}
		if err := c.diffTree(ta, tb, path+"/", out); err != nil {
			return err
		}
		// A file replaced by a directory (or the reverse) is also a file change.
		if xt && y.Hash != "" && !yt {
			x = TreeEntry{}
		} else if yt && x.Hash != "" && !xt {
			y = TreeEntry{}
		} else {
			return nil
		}
	}
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
	*out = append(*out, ch)
	return nil
}

func pad6(m string) string {
	for len(m) < 6 {
		m = "0" + m
	}
	return m
}
