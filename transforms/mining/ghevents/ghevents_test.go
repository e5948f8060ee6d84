package ghevents

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"swerl/internal/testenv"
)

var eventTypes = map[string]string{
	"pull_request":                "PullRequestEvent",
	"issues":                      "IssuesEvent",
	"issue_comment":               "IssueCommentEvent",
	"pull_request_review_comment": "PullRequestReviewCommentEvent",
	"push":                        "PushEvent",
}

// examples loads the real GitHub webhook payloads of
// @octokit/webhooks-examples, by webhook name.
func examples(t *testing.T) map[string][]map[string]any {
	dir := testenv.NodeModules(t, "@octokit/webhooks-examples")
	b, err := os.ReadFile(filepath.Join(dir, "@octokit/webhooks-examples/api.github.com/index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx []struct {
		Name     string           `json:"name"`
		Examples []map[string]any `json:"examples"`
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	out := map[string][]map[string]any{}
	for _, e := range idx {
		if _, ok := eventTypes[e.Name]; ok {
			out[e.Name] = e.Examples
		}
	}
	return out
}

// archiveLine wraps a webhook payload the way GH Archive stores the event.
func archiveLine(t *testing.T, name string, ex map[string]any, i int) []byte {
	payload := map[string]any{}
	for k, v := range ex {
		if k != "repository" && k != "sender" && k != "installation" && k != "organization" && k != "enterprise" {
			payload[k] = v
		}
	}
	repo, _ := ex["repository"].(map[string]any)
	sender, _ := ex["sender"].(map[string]any)
	line, err := json.Marshal(map[string]any{
		"id": i, "type": eventTypes[name], "public": true, "created_at": "2024-05-01T10:00:00Z",
		"actor":   map[string]any{"login": sender["login"]},
		"repo":    map[string]any{"name": repo["full_name"]},
		"payload": payload,
	})
	if err != nil {
		t.Fatal(err)
	}
	return line
}

func TestReadArchiveFromWebhookExamples(t *testing.T) {
	ex := examples(t)
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	type want struct {
		kind   string
		number int
		title  string
		merged bool
	}
	var wants []want
	i := 0
	for _, name := range []string{"pull_request", "issues", "issue_comment", "pull_request_review_comment", "push"} {
		if len(ex[name]) == 0 && name != "push" {
			t.Fatalf("no %s examples in the package", name)
		}
		list := ex[name]
		if name == "pull_request" {
			// The examples hold no merged PR: merge a copy of each closed one
			// the way GitHub reports it (merged, merged_at, merge_commit_sha).
			for _, e := range ex[name] {
				if e["action"] != "closed" {
					continue
				}
				var c map[string]any
				b, _ := json.Marshal(e)
				json.Unmarshal(b, &c)
				pr := c["pull_request"].(map[string]any)
				pr["merged"], pr["merged_at"], pr["merge_commit_sha"] = true, "2024-05-01T10:00:00Z", strings.Repeat("ab", 20)
				list = append(list, c)
			}
		}
		for _, e := range list {
			gz.Write(archiveLine(t, name, e, i))
			gz.Write([]byte("\n"))
			i++
			switch name {
			case "pull_request":
				pr := e["pull_request"].(map[string]any)
				merged, _ := pr["merged"].(bool)
				wants = append(wants, want{KindPR, int(pr["number"].(float64)), pr["title"].(string), merged})
			case "issues", "issue_comment":
				is := e["issue"].(map[string]any)
				if _, isPR := is["pull_request"]; !isPR {
					wants = append(wants, want{KindIssue, int(is["number"].(float64)), is["title"].(string), false})
				}
				if name == "issue_comment" {
					wants = append(wants, want{KindComment, int(is["number"].(float64)), "", false})
				}
			case "pull_request_review_comment":
				pr := e["pull_request"].(map[string]any)
				wants = append(wants, want{KindComment, int(pr["number"].(float64)), "", false})
			}
		}
		if name == "issues" {
			gz.Write([]byte("{\"type\": \"IssuesEvent\", \"repo\": {\"name\": \"a/b\"}, \"payload\": {}}\n"))
			gz.Write([]byte("this is not json\n"))
			i += 2
		}
	}
	gz.Close()
	path := filepath.Join(t.TempDir(), "2024-05-01-10.json.gz")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var got []Record
	var bad []*LineError
	if err := ReadFile(path, func(r Record, b *LineError) error {
		if b != nil {
			bad = append(bad, b)
		} else {
			got = append(got, r)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(wants) {
		t.Fatalf("got %d records, want %d", len(got), len(wants))
	}
	mergedSeen := false
	for k, w := range wants {
		g := got[k]
		if g.Kind != w.kind || g.Number != w.number || w.title != "" && g.Title != w.title || g.Merged != w.merged {
			t.Errorf("record %d = %+v, want %+v", k, g, w)
		}
		if g.Repo == "" || !strings.Contains(g.Repo, "/") {
			t.Errorf("record %d has repo %q", k, g.Repo)
		}
		if g.Merged {
			mergedSeen = true
			if g.MergeCommit == "" || g.BaseSHA == "" || g.HeadSHA == "" {
				t.Errorf("merged PR without commits: %+v", g)
			}
		}
	}
	if !mergedSeen {
		t.Error("no merged pull request among the examples")
	}
	if len(bad) != 2 {
		t.Fatalf("bad lines %v, want 2", bad)
	}
	for _, b := range bad {
		if !strings.Contains(b.Error(), "2024-05-01-10.json.gz:") {
			t.Errorf("bad line error %q does not name file:line", b)
		}
	}
	ix := NewIndex(got)
	if len(ix.MergedByCommit()) == 0 || len(ix.Issues) == 0 {
		t.Errorf("index %+v", ix)
	}
}

func TestIndexAndProblemStatement(t *testing.T) {
	recs := []Record{
		{Kind: KindPR, Repo: "a/b", Number: 5, Title: "Fix", Merged: true, MergeCommit: "m", CreatedAt: "2024-01-02"},
		{Kind: KindPR, Repo: "a/b", Number: 5, Title: "Fix (edited)", CreatedAt: "2024-01-03"},
		{Kind: KindIssue, Repo: "a/b", Number: 3, Title: "Crash", Body: "It crashes.", CreatedAt: "2024-01-01"},
		{Kind: KindIssue, Repo: "a/b", Number: 4, Title: "Slow", Body: "", CreatedAt: "2024-01-01"},
	}
	ix := NewIndex(recs)
	if pr := ix.MergedByCommit()["m"]; pr.Number != 5 {
		t.Errorf("merged PR lost by a later edit: %+v", ix.PRs)
	}
	if got := ix.ProblemStatement([]int{3, 4, 9}); got != "Crash\n\nIt crashes.\n\nSlow" {
		t.Errorf("ProblemStatement = %q", got)
	}
}

func TestFilesAndErrors(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"b.json", "a.json.gz", "skip.txt"} {
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
	}
	got, err := Files([]string{dir})
	if err != nil || len(got) != 2 || !strings.HasSuffix(got[0], "a.json.gz") {
		t.Errorf("Files = %v, %v", got, err)
	}
	if _, err := Files([]string{filepath.Join(dir, "nope")}); err == nil {
		t.Error("missing path accepted")
	}
	// A truncated gzip stream keeps the lines before the cut.
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	gz.Write([]byte(`{"type":"IssuesEvent","repo":{"name":"a/b"},"payload":{"issue":{"number":1,"title":"t"}}}` + "\n"))
	gz.Write(bytes.Repeat([]byte("x"), 5000))
	gz.Close()
	p := filepath.Join(dir, "cut.json.gz")
	os.WriteFile(p, buf.Bytes()[:buf.Len()-20], 0o644)
	n, nbad := 0, 0
	err = ReadFile(p, func(r Record, b *LineError) error {
		if b != nil {
			nbad++
		} else {
			n++
		}
		return nil
	})
	if err != nil || n != 1 || nbad == 0 {
		t.Errorf("truncated file: %d records, %d bad, err %v", n, nbad, err)
	}
	stop := errors.New("stop")
	if err := Read(strings.NewReader("x\n"), "f", func(Record, *LineError) error { return stop }); !errors.Is(err, stop) {
		t.Errorf("callback error lost: %v", err)
	}
}

func FuzzParseLine(f *testing.F) {
	f.Add([]byte(`{"type":"PullRequestEvent","repo":{"name":"a/b"},"payload":{"number":1,"pull_request":{"number":1,"title":"t","merged":true,"merge_commit_sha":"abc"}}}`))
	f.Add([]byte(`{"type":"IssueCommentEvent","repo":{"name":"a/b"},"payload":{"issue":{"number":2,"pull_request":{}},"comment":{"body":"x"}}}`))
	f.Add([]byte(`{"type":"PullRequestReviewCommentEvent","repo":{"name":"a/b"},"payload":{"pull_request":{"number":3},"comment":{"body":"x"}}}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, line []byte) {
		recs, err := ParseLine(line)
		if err != nil && recs != nil {
			t.Fatal("records with an error")
		}
		for _, r := range recs {
			if r.Number <= 0 || strings.Count(r.Repo, "/") != 1 || r.Kind == "" {
				t.Fatalf("bad record %+v", r)
			}
		}
	})
}
