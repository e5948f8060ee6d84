package gitio

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
)

// Commit is one commit of a first-parent history walk.
type Commit struct {
	Hash    string
	Parents []string
	Author  string
	Email   string
	Date    string // author date, strict ISO 8601
	Message string // the raw message (subject, blank line, body)
	// Changes are the files changed against the first parent (against the
	// empty tree for a root commit). Merge commits carry none.
	Changes []Change
}

// Subject is the first line of the message.
func (c *Commit) Subject() string {
	s, _, _ := strings.Cut(c.Message, "\n")
	return strings.TrimSpace(s)
}

// Change is one file changed between two trees, as `git diff --raw` reports
// it without rename detection.
type Change struct {
	Status  byte   // 'A' added, 'D' deleted, 'M' modified, 'T' type changed
	OldMode string // ModeAbsent when added
	NewMode string // ModeAbsent when deleted
	OldHash string // all zeros when added
	NewHash string // all zeros when deleted
	Path    string
}

// ZeroHash is the object id git shows for "no object".
const ZeroHash = "0000000000000000000000000000000000000000"

// LogFormat is the --format that ParseLog reads (with -z and --raw).
const LogFormat = "commit %H%x00%P%x00%an%x00%ae%x00%aI%x00%B"

// LogReader streams the commits of one `git log` process.
type LogReader struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	parser *LogParser
	closed bool
}

// Log starts `git log --first-parent -z` at rev (HEAD when empty) in repo;
// with raw, each non-merge commit carries its Changes (--raw --no-renames). Call Next until it returns false, then Close, which reports
// whether git failed (for example on a missing commit) after the commits it
// did produce.
func Log(ctx context.Context, repo *Repo, rev string, raw bool) (*LogReader, error) {
	args := []string{"--first-parent"}
	if raw {
		args = append(args, "--raw", "--no-renames", "--no-abbrev", "--no-ext-diff")
	}
	return startLog(ctx, repo, args, []string{rev})
}

// LogAll starts `git log -z` over every commit reachable from revs (HEAD
// when none), merged side branches included, without changes, in git's
// default order (newest committer date first, each commit once).
func LogAll(ctx context.Context, repo *Repo, revs ...string) (*LogReader, error) {
	return startLog(ctx, repo, nil, revs)
}

func startLog(ctx context.Context, repo *Repo, extra, revs []string) (*LogReader, error) {
	args := []string{"-c", "core.quotePath=false", "log", "--diff-merges=off", "-z", "--no-color", "--format=" + LogFormat}
	args = append(append(args, extra...), revArgs(revs)...)
	cmd := exec.CommandContext(ctx, "git", append(args, "--")...)
	cmd.Dir = repo.Dir
	cmd.Env = gitEnv()
	lr := &LogReader{cmd: cmd}
	cmd.Stderr = &lr.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("gitio: %s: git log: %w", repo.Name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("gitio: %s: git log: %w", repo.Name, err)
	}
	lr.parser = NewLogParser(out)
	return lr, nil
}

// Next returns the next commit, newest first; ok is false at the end or on
// a parse error (see Close).
func (l *LogReader) Next() (c *Commit, ok bool) { return l.parser.Next() }

// Close waits for git and returns the first error: a parse error, or git's
// exit status with its stderr.
func (l *LogReader) Close() error {
	if l.closed {
		return nil
	}
	l.closed = true
	// Drain so git is not blocked writing when we stop early.
	perr := l.parser.Err()
	if perr != nil || !l.parser.done {
		if l.cmd.Process != nil {
			l.cmd.Process.Kill()
		}
	}
	werr := l.cmd.Wait()
	if perr != nil {
		return fmt.Errorf("gitio: git log: %w", perr)
	}
	if werr != nil && l.parser.done {
		return fmt.Errorf("gitio: git log: %w: %s", werr, strings.TrimSpace(l.stderr.String()))
	}
	return nil
}

// LogParser parses the output of
//
//	git log --raw -z --no-renames --no-abbrev --format=LogFormat
//
// from r, one commit at a time.
type LogParser struct {
	r       *bufio.Reader
	pending string // a "commit …" token already read
	err     error
	done    bool
	offset  int64
}

// NewLogParser returns a parser reading r.
func NewLogParser(r io.Reader) *LogParser {
	return &LogParser{r: bufio.NewReaderSize(r, 1<<16)}
}

// Err returns the parse error that stopped Next, if any.
func (p *LogParser) Err() error { return p.err }

func (p *LogParser) token() (string, bool) {
	b, err := p.r.ReadString(0)
	p.offset += int64(len(b))
	if err == io.EOF {
		if b != "" && strings.TrimSpace(b) != "" {
			p.err = fmt.Errorf("byte %d: truncated record %.40q", p.offset, b)
		}
		p.done = true
		return "", false
	}
	if err != nil {
		p.err = err
		return "", false
	}
	return b[:len(b)-1], true
}

// Next returns the next commit; ok is false at the end of the input or on a
// parse error (Err tells which).
func (p *LogParser) Next() (*Commit, bool) {
	if p.err != nil || p.done {
		return nil, false
	}
	head := p.pending
	p.pending = ""
	if head == "" {
		for {
			t, ok := p.token()
			if !ok {
				return nil, false
			}
			if t = strings.TrimLeft(t, "\n"); t != "" {
				head = t
				break
			}
		}
	}
	hash, ok := strings.CutPrefix(head, "commit ")
	if !ok || !isHex(hash) {
		p.err = fmt.Errorf("byte %d: want \"commit <hash>\", got %.60q", p.offset, head)
		return nil, false
	}
	var f [5]string
	for i := range f {
		t, ok := p.token()
		if !ok {
			if p.err == nil {
				p.err = fmt.Errorf("byte %d: commit %s: truncated header", p.offset, hash)
			}
			return nil, false
		}
		f[i] = t
	}
	c := &Commit{Hash: hash, Author: f[1], Email: f[2], Date: f[3], Message: f[4]}
	if f[0] != "" {
		c.Parents = strings.Fields(f[0])
		for _, par := range c.Parents {
			if !isHex(par) {
				p.err = fmt.Errorf("byte %d: commit %s: bad parent %.60q", p.offset, hash, par)
				return nil, false
			}
		}
	}
	for {
		t, ok := p.token()
		if !ok {
			if p.err != nil {
				return nil, false
			}
			return c, true
		}
		t = strings.TrimLeft(t, "\n")
		switch {
		case t == "":
			continue
		case strings.HasPrefix(t, "commit "):
			p.pending = t
			return c, true
		case strings.HasPrefix(t, ":"):
			ch, err := parseRaw(t)
			if err != nil {
				p.err = fmt.Errorf("byte %d: commit %s: %w", p.offset, hash, err)
				return nil, false
			}
			path, ok := p.token()
			if !ok {
				if p.err == nil {
					p.err = fmt.Errorf("byte %d: commit %s: raw entry without a path", p.offset, hash)
				}
				return nil, false
			}
			ch.Path = path
			c.Changes = append(c.Changes, ch)
		default:
			p.err = fmt.Errorf("byte %d: commit %s: unexpected %.60q", p.offset, hash, t)
			return nil, false
		}
	}
}

// parseRaw parses ":100644 100644 <old> <new> M".
func parseRaw(t string) (Change, error) {
	f := strings.Fields(t[1:])
	if len(f) != 5 || len(f[4]) == 0 || !isHex(f[2]) || !isHex(f[3]) || len(f[0]) != 6 || len(f[1]) != 6 {
		return Change{}, fmt.Errorf("bad raw diff entry %.80q", t)
	}
	return Change{Status: f[4][0], OldMode: f[0], NewMode: f[1], OldHash: f[2], NewHash: f[3]}, nil
}

func isHex(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
