package gitio

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"swerl/internal/syncbuf"
)

// CatFile reads objects through one long-lived `git cat-file --batch`.
//
// Requests are pipelined: callers write their requests and queue for the
// answers, and one goroutine reads the answers in order and hands them
// out. Many goroutines sharing one CatFile keep git's input full, so git
// answers a run of requests per wake-up instead of one round trip each:
// round trips, not objects, were most of the time reads took.
type CatFile struct {
	repo   *Repo
	cmd    *exec.Cmd
	stderr syncbuf.Buffer // git's stderr: copied by stderrCopy, read when a request fails
	// stderrDone is closed when git's stderr has reached EOF (git exited):
	// a failure of the process itself waits for it, so that its error
	// carries all git said.
	stderrDone chan struct{}
	trees      *TreeCache

	mu    sync.Mutex // guards in and queue; held while writing requests
	in    io.WriteCloser
	queue chan *batch   // requests written, in order, whose answers are unread
	done  chan struct{} // closed when the reader goroutine ends

	errMu sync.Mutex
	err   error // sticky: the process failed or was closed
}

func (c *CatFile) sticky() error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	return c.err
}

// setErr records the first failure and returns the sticky error.
func (c *CatFile) setErr(err error) error {
	c.errMu.Lock()
	defer c.errMu.Unlock()
	if c.err == nil {
		c.err = err
	}
	return c.err
}

// batch is one caller's requests; the reader fills objs and errs and
// closes done after the last answer.
type batch struct {
	revs []string
	objs []*Object
	errs []error
	next int // answers read so far
	done chan struct{}
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
	c := &CatFile{repo: repo, cmd: cmd, queue: make(chan *batch, 1<<12), done: make(chan struct{}), stderrDone: make(chan struct{})}
	// git's stderr goes through a pipe of our own rather than exec's
	// copying goroutine, whose end only Wait (in Close) would tell.
	er, ew, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("gitio: %s: cat-file: %w", repo.Name, err)
	}
	cmd.Stderr = ew
	fail := func(err error) (*CatFile, error) {
		er.Close()
		ew.Close()
		return nil, fmt.Errorf("gitio: %s: cat-file: %w", repo.Name, err)
	}
	if c.in, err = cmd.StdinPipe(); err != nil {
		return fail(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return fail(err)
	}
	growPipe(out)
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	ew.Close() // git holds the write end now
	go func() {
		io.Copy(&c.stderr, er)
		er.Close()
		close(c.stderrDone)
	}()
	go c.readLoop(bufio.NewReaderSize(out, 1<<16))
	return c, nil
}

// Dir is the directory of the repository c reads.
func (c *CatFile) Dir() string { return c.repo.Dir }

// Close stops the process. Requests in flight are answered first.
func (c *CatFile) Close() error {
	c.mu.Lock()
	if c.in == nil {
		c.mu.Unlock()
		return nil
	}
	c.in.Close()
	c.in = nil
	close(c.queue)
	c.mu.Unlock()
	<-c.done
	failed := c.sticky()
	c.setErr(fmt.Errorf("gitio: %s: cat-file: closed", c.repo.Name))
	err := c.cmd.Wait()
	if err != nil && failed == nil {
		return fmt.Errorf("gitio: %s: cat-file: %w: %s", c.repo.Name, err, strings.TrimSpace(c.stderr.String()))
	}
	return nil
}

// Get reads the object named by rev (an object id, or any revision git
// understands such as "<commit>:<path>" or "<commit>^{tree}"). A rev that
// does not name an object returns an error wrapping ErrMissing.
func (c *CatFile) Get(rev string) (*Object, error) {
	objs, errs := c.GetMany([]string{rev})
	return objs[0], errs[0]
}

// GetMany reads many objects with one pipelined round trip: all requests
// are written while the answers are read. objs[i] and errs[i] answer
// revs[i] as Get would.
func (c *CatFile) GetMany(revs []string) (objs []*Object, errs []error) {
	objs, errs = make([]*Object, len(revs)), make([]error, len(revs))
	b := &batch{done: make(chan struct{})}
	var send []int
	for i, rev := range revs {
		if rev == "" || strings.ContainsAny(rev, "\n\r") {
			errs[i] = fmt.Errorf("gitio: %s: cat-file %q: %w", c.repo.Name, rev, ErrMissing)
			continue
		}
		send = append(send, i)
		b.revs = append(b.revs, rev)
	}
	if len(send) == 0 {
		return objs, errs
	}
	b.objs, b.errs = make([]*Object, len(send)), make([]error, len(send))
	n := 0
	for _, rev := range b.revs {
		n += len(rev) + 1
	}
	req := make([]byte, 0, n)
	for _, rev := range b.revs {
		req = append(req, rev...)
		req = append(req, '\n')
	}
	c.mu.Lock()
	err := c.sticky()
	if err == nil && c.in == nil {
		err = fmt.Errorf("gitio: %s: cat-file: closed", c.repo.Name)
	}
	if err != nil {
		c.mu.Unlock()
		for _, i := range send {
			errs[i] = err
		}
		return objs, errs
	}
	// Queue before writing: the reader must know whose answers arrive.
	// The queue is large; were it full, this waits for the reader, which
	// never takes this lock.
	c.queue <- b
	if _, werr := c.in.Write(req); werr != nil {
		c.setErr(c.failErr(werr))
	}
	c.mu.Unlock()
	<-b.done
	for k, i := range send {
		objs[i], errs[i] = b.objs[k], b.errs[k]
	}
	return objs, errs
}

// readLoop reads the answers to the queued requests, in order, until the
// queue is closed and drained. After a failure every later request gets
// the failure.
func (c *CatFile) readLoop(out *bufio.Reader) {
	defer close(c.done)
	var failed error
	for b := range c.queue {
		for b.next < len(b.revs) {
			rev := b.revs[b.next]
			if failed == nil {
				b.objs[b.next], b.errs[b.next] = c.read(out, rev)
				if b.errs[b.next] != nil && !errors.Is(b.errs[b.next], ErrMissing) {
					// The stream cannot be followed any further: stop git,
					// so no writer waits on it, and fail what is queued.
					failed = c.setErr(b.errs[b.next])
					c.cmd.Process.Kill()
				}
			} else {
				b.errs[b.next] = failed
			}
			b.next++
		}
		close(b.done)
	}
}

// read reads the answer to one request.
func (c *CatFile) read(out *bufio.Reader, rev string) (*Object, error) {
	header, err := out.ReadString('\n')
	if err != nil {
		return nil, c.failErr(err)
	}
	header = strings.TrimSuffix(header, "\n")
	f := strings.Fields(header)
	if len(f) == 2 && (f[1] == "missing" || f[1] == "ambiguous") {
		return nil, fmt.Errorf("gitio: %s: %s %s: %w", c.repo.Name, rev, f[1], ErrMissing)
	}
	if len(f) != 3 {
		return nil, c.failErr(fmt.Errorf("unexpected header %q", header))
	}
	size, err := strconv.Atoi(f[2])
	if err != nil || size < 0 {
		return nil, c.failErr(fmt.Errorf("unexpected header %q", header))
	}
	data := make([]byte, size+1)
	if _, err := io.ReadFull(out, data); err != nil {
		return nil, c.failErr(err)
	}
	return &Object{Hash: f[0], Type: f[1], Data: data[:size]}, nil
}

// failErr describes a failure of the process, with what git said. When
// git is gone (its output ended, or its input is a broken pipe), that is
// once its stderr has ended too.
func (c *CatFile) failErr(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.EPIPE) {
		select {
		case <-c.stderrDone:
		case <-time.After(5 * time.Second): // a child of git holding stderr open
		}
	}
	return fmt.Errorf("gitio: %s: cat-file: %w: %s", c.repo.Name, err, strings.TrimSpace(c.stderr.String()))
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

// Git's file modes, as tree objects spell them. A Change pads them to six
// digits (a tree is "040000" there) and says ModeAbsent for no file.
const (
	ModeFile       = "100644"
	ModeExecutable = "100755"
	ModeSymlink    = "120000" // the blob holds the link's target, not content
	ModeGitlink    = "160000" // a submodule: the hash names a commit of another repository
	ModeTree       = "40000"
	ModeAbsent     = "000000"
)

// TreeEntry is one entry of a tree object.
type TreeEntry struct {
	Mode string // one of the Mode constants
	Name string
	Hash string
}

// IsTree reports whether the entry is a subdirectory.
func (e TreeEntry) IsTree() bool { return IsTreeMode(e.Mode) }

// IsFile reports whether the entry's blob is a file's content: not a
// directory, a symlink or a gitlink. That is ModeFile and ModeExecutable,
// and also the 100664 that trees written by very old gits hold.
func (e TreeEntry) IsFile() bool {
	return !e.IsTree() && e.Mode != ModeSymlink && !IsGitlink(e.Mode)
}

// IsTreeMode reports whether mode, padded or not, is a directory's.
func IsTreeMode(mode string) bool { return mode == ModeTree || mode == "0"+ModeTree }

// IsGitlink reports whether mode is a submodule pointer's, which has no
// content in this repository.
func IsGitlink(mode string) bool { return mode == ModeGitlink }

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
	roots, rootTrees, err := c.readTrees([]string{from + "^{tree}", to + "^{tree}"})
	if err != nil {
		return nil, err
	}
	type pair struct{ a, b, prefix string }
	zero := strings.Repeat("0", len(roots[0]))
	var out []Change
	level := []pair{{roots[0], roots[1], ""}}
	trees := map[string][]TreeEntry{roots[0]: rootTrees[0], roots[1]: rootTrees[1]}
	for len(level) > 0 {
		var need []string
		for _, p := range level {
			for _, h := range []string{p.a, p.b} {
				if _, ok := trees[h]; h != "" && !ok {
					trees[h] = nil
					need = append(need, h)
				}
			}
		}
		_, es, err := c.readTrees(need)
		if err != nil {
			return nil, err
		}
		for i, h := range need {
			trees[h] = es[i]
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
			pairEntries(ea, eb, func(x, y TreeEntry) {
				name := x.Name
				if x.Hash == "" {
					name = y.Name
				}
				visit(x, y, p.prefix+name)
			})
		}
		level = next
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// pairEntries calls fn for each entry of a and b that differs between
// them: (x, y) for the same name in both, with another id or mode; (x,
// empty) for a name only in a; (empty, y) for one only in b. A file and a
// directory of the same name come as two calls, a deletion and an
// addition, which is how DiffTrees reports them either way.
//
// Git writes tree entries in its tree order, so the two lists are merged
// in one pass; a list out of that order (a damaged or hand-made tree)
// is paired through a map instead. Merging, rather than indexing both
// trees by name for every diff, was a twentieth of swerl mine's CPU.
func pairEntries(a, b []TreeEntry, fn func(x, y TreeEntry)) {
	if !inTreeOrder(a) || !inTreeOrder(b) {
		pairByName(a, b, fn)
		return
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		c := 0
		switch {
		case i == len(a):
			c = 1
		case j == len(b):
			c = -1
		default:
			c = compareEntries(a[i], b[j])
		}
		switch {
		case c < 0:
			fn(a[i], TreeEntry{})
			i++
		case c > 0:
			fn(TreeEntry{}, b[j])
			j++
		default:
			if a[i].Hash != b[j].Hash || a[i].Mode != b[j].Mode {
				fn(a[i], b[j])
			}
			i++
			j++
		}
	}
}

// pairByName is pairEntries for lists in any order. Entries are keyed as
// in tree order (a directory's name with a "/"), so it pairs as the merge
// does.
func pairByName(a, b []TreeEntry, fn func(x, y TreeEntry)) {
	key := func(e TreeEntry) string {
		if e.IsTree() {
			return e.Name + "/"
		}
		return e.Name
	}
	inB := make(map[string]TreeEntry, len(b))
	for _, e := range b {
		inB[key(e)] = e
	}
	inA := make(map[string]bool, len(a))
	for _, x := range a {
		inA[key(x)] = true
		y, ok := inB[key(x)]
		switch {
		case !ok:
			fn(x, TreeEntry{})
		case x.Hash != y.Hash || x.Mode != y.Mode:
			fn(x, y)
		}
	}
	for _, y := range b {
		if !inA[key(y)] {
			fn(TreeEntry{}, y)
		}
	}
}

// compareEntries orders entries as git sorts a tree: by name, a
// directory's name compared as if it ended in "/".
func compareEntries(x, y TreeEntry) int {
	n := min(len(x.Name), len(y.Name))
	if c := strings.Compare(x.Name[:n], y.Name[:n]); c != 0 {
		return c
	}
	cx, cy := entryEnd(x, n), entryEnd(y, n)
	switch {
	case cx < cy:
		return -1
	case cx > cy:
		return 1
	}
	return 0
}

// entryEnd is the byte of e's tree-order key at i, the length of the
// shorter name: the next byte of the name, '/' at the end of a
// directory's, 0 at the end of a file's.
func entryEnd(e TreeEntry, i int) byte {
	switch {
	case i < len(e.Name):
		return e.Name[i]
	case e.IsTree():
		return '/'
	}
	return 0
}

// inTreeOrder reports whether es is strictly in git's tree order.
func inTreeOrder(es []TreeEntry) bool {
	for i := 1; i < len(es); i++ {
		if compareEntries(es[i-1], es[i]) >= 0 {
			return false
		}
	}
	return true
}

// change is the raw change from x to y at path (an empty entry is absent).
func change(x, y TreeEntry, path, zero string) Change {
	ch := Change{Path: path, OldMode: ModeAbsent, NewMode: ModeAbsent, OldHash: zero, NewHash: zero}
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
