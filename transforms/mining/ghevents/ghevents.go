// Package ghevents reads GH Archive hourly event files (the GitHub Events API
// shape, one JSON object a line, .json or .json.gz) and keeps what mining
// needs: pull requests (PullRequestEvent), issues (IssuesEvent and the issue
// of IssueCommentEvent) and conversation comments (IssueCommentEvent,
// PullRequestReviewCommentEvent).
//
// # Behavior
//
// Other event types are skipped without error. A line that is not JSON, or
// an event of a kept type whose payload lacks what it needs, is reported as
// a *LineError naming the file and line, and reading goes on: one bad line
// never loses the rest of an hour. Index aggregates records per repository;
// the latest state of a pull request or issue wins.
package ghevents

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Kinds of Record.
const (
	KindPR      = "pr"
	KindIssue   = "issue"
	KindComment = "comment"
)

// Record is one useful fact from one event. Exactly the fields of its Kind
// are set.
type Record struct {
	Kind      string `json:"kind"`
	Repo      string `json:"repo"`   // "owner/repo"
	Number    int    `json:"number"` // PR or issue number
	Title     string `json:"title,omitempty"`
	Body      string `json:"body,omitempty"`
	User      string `json:"user,omitempty"`
	CreatedAt string `json:"created_at,omitempty"` // the event's time
	// Pull requests:
	Merged      bool   `json:"merged,omitempty"`
	MergeCommit string `json:"merge_commit,omitempty"`
	BaseSHA     string `json:"base_sha,omitempty"`
	HeadSHA     string `json:"head_sha,omitempty"`
	// Comments: "issue_comment" or "review_comment".
	CommentKind string `json:"comment_kind,omitempty"`
}

// LineError is a line that could not be used.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("ghevents: %s:%d: %v", e.File, e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

type user struct {
	Login string `json:"login"`
}

type ref struct {
	SHA string `json:"sha"`
}

type issue struct {
	Number      *int            `json:"number"`
	Title       string          `json:"title"`
	Body        *string         `json:"body"`
	User        user            `json:"user"`
	PullRequest json.RawMessage `json:"pull_request"`
}

type event struct {
	Type      string `json:"type"`
	CreatedAt string `json:"created_at"`
	Actor     user   `json:"actor"`
	Repo      struct {
		Name string `json:"name"`
	} `json:"repo"`
	Payload struct {
		Action      string `json:"action"`
		Number      int    `json:"number"`
		PullRequest *struct {
			Number         *int    `json:"number"`
			Title          string  `json:"title"`
			Body           *string `json:"body"`
			User           user    `json:"user"`
			Merged         bool    `json:"merged"`
			MergedAt       *string `json:"merged_at"`
			MergeCommitSHA *string `json:"merge_commit_sha"`
			Base           ref     `json:"base"`
			Head           ref     `json:"head"`
		} `json:"pull_request"`
		Issue   *issue `json:"issue"`
		Comment *struct {
			Body string `json:"body"`
			User user   `json:"user"`
		} `json:"comment"`
	} `json:"payload"`
}

// ParseLine parses one GH Archive line. It returns no records and no error
// for event types mining does not use.
func ParseLine(line []byte) ([]Record, error) {
	var e event
	if err := json.Unmarshal(line, &e); err != nil {
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	switch e.Type {
	case "PullRequestEvent", "IssuesEvent", "IssueCommentEvent", "PullRequestReviewCommentEvent":
	default:
		return nil, nil
	}
	repo := e.Repo.Name
	if strings.Count(repo, "/") != 1 {
		return nil, fmt.Errorf("%s: repo.name %q is not owner/repo", e.Type, repo)
	}
	p := e.Payload
	switch e.Type {
	case "PullRequestEvent":
		pr := p.PullRequest
		if pr == nil {
			return nil, fmt.Errorf("PullRequestEvent without payload.pull_request")
		}
		n := p.Number
		if pr.Number != nil {
			n = *pr.Number
		}
		if n <= 0 {
			return nil, fmt.Errorf("PullRequestEvent without a PR number")
		}
		r := Record{Kind: KindPR, Repo: repo, Number: n, Title: pr.Title, Body: deref(pr.Body), User: pr.User.Login,
			CreatedAt: e.CreatedAt, BaseSHA: pr.Base.SHA, HeadSHA: pr.Head.SHA}
		r.Merged = pr.Merged || pr.MergedAt != nil && *pr.MergedAt != ""
		if r.Merged && pr.MergeCommitSHA != nil {
			r.MergeCommit = *pr.MergeCommitSHA
		}
		return []Record{r}, nil
	case "IssuesEvent", "IssueCommentEvent":
		is := p.Issue
		if is == nil || is.Number == nil || *is.Number <= 0 {
			return nil, fmt.Errorf("%s without payload.issue.number", e.Type)
		}
		var out []Record
		if len(is.PullRequest) == 0 || string(is.PullRequest) == "null" {
			out = append(out, Record{Kind: KindIssue, Repo: repo, Number: *is.Number, Title: is.Title, Body: deref(is.Body), User: is.User.Login, CreatedAt: e.CreatedAt})
		}
		if e.Type == "IssueCommentEvent" {
			if p.Comment == nil {
				return nil, fmt.Errorf("IssueCommentEvent without payload.comment")
			}
			out = append(out, Record{Kind: KindComment, CommentKind: "issue_comment", Repo: repo, Number: *is.Number, Body: p.Comment.Body, User: p.Comment.User.Login, CreatedAt: e.CreatedAt})
		}
		return out, nil
	default: // PullRequestReviewCommentEvent
		if p.Comment == nil || p.PullRequest == nil || p.PullRequest.Number == nil {
			return nil, fmt.Errorf("PullRequestReviewCommentEvent without payload.comment or payload.pull_request.number")
		}
		return []Record{{Kind: KindComment, CommentKind: "review_comment", Repo: repo, Number: *p.PullRequest.Number, Body: p.Comment.Body, User: p.Comment.User.Login, CreatedAt: e.CreatedAt}}, nil
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// Files expands paths (files or folders) into the event files they hold:
// every *.json and *.json.gz in a folder (not recursive), in name order.
func Files(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("ghevents: %w", err)
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		ents, err := os.ReadDir(p)
		if err != nil {
			return nil, fmt.Errorf("ghevents: %w", err)
		}
		var names []string
		for _, e := range ents {
			if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".json") || strings.HasSuffix(n, ".json.gz") || strings.HasSuffix(n, ".jsonl")) {
				names = append(names, filepath.Join(p, n))
			}
		}
		sort.Strings(names)
		out = append(out, names...)
	}
	return out, nil
}

// ReadFile reads one event file (gzip when its name ends in .gz or its
// content starts with the gzip magic) and calls fn for each record and
// each bad line (with a *LineError). It returns an error only when the file
// cannot be read at all or fn fails.
func ReadFile(path string, fn func(r Record, bad *LineError) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("ghevents: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<16)
	var r io.Reader = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return fmt.Errorf("ghevents: %s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	return Read(r, path, fn)
}

// Read reads JSON lines from r; name names the source in errors.
func Read(r io.Reader, name string, fn func(r Record, bad *LineError) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(bytes.TrimSpace(b)) > 0 {
			recs, perr := ParseLine(b)
			if perr != nil {
				if ferr := fn(Record{}, &LineError{File: name, Line: line, Err: perr}); ferr != nil {
					return ferr
				}
			}
			for _, rec := range recs {
				if ferr := fn(rec, nil); ferr != nil {
					return ferr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			// A truncated gzip stream: report the line, keep what was read.
			return fn(Record{}, &LineError{File: name, Line: line, Err: err})
		}
	}
}

// Index aggregates the records of one repository.
type Index struct {
	PRs      map[int]Record   // latest state of each PR
	Issues   map[int]Record   // latest state of each issue
	Comments map[int][]Record // comments on each issue or PR, by time
}

// NewIndex aggregates records (any order).
func NewIndex(recs []Record) *Index {
	sort.SliceStable(recs, func(i, j int) bool { return recs[i].CreatedAt < recs[j].CreatedAt })
	ix := &Index{PRs: map[int]Record{}, Issues: map[int]Record{}, Comments: map[int][]Record{}}
	for _, r := range recs {
		switch r.Kind {
		case KindPR:
			old, ok := ix.PRs[r.Number]
			if ok && old.Merged && !r.Merged {
				continue // a later non-merged state (e.g. edited) does not unmerge
			}
			ix.PRs[r.Number] = r
		case KindIssue:
			ix.Issues[r.Number] = r
		case KindComment:
			ix.Comments[r.Number] = append(ix.Comments[r.Number], r)
		}
	}
	return ix
}

// MergedByCommit maps merge commit ids to merged PRs.
func (ix *Index) MergedByCommit() map[string]Record {
	out := map[string]Record{}
	for _, r := range ix.PRs {
		if r.Merged && r.MergeCommit != "" {
			out[r.MergeCommit] = r
		}
	}
	return out
}

// ProblemStatement is the text of the linked issues (title, blank line,
// body, each), or "" when the index has none of them.
func (ix *Index) ProblemStatement(issues []int) string {
	var parts []string
	for _, n := range issues {
		if is, ok := ix.Issues[n]; ok {
			parts = append(parts, strings.TrimSpace(is.Title+"\n\n"+is.Body))
		}
	}
	return strings.Join(parts, "\n\n")
}
