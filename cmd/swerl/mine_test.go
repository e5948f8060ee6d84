package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"swerl/internal/gitio"
	"swerl/internal/gitio/gittest"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/kafkaio/kafkaiotest"
)

func TestMineCommand(t *testing.T) {
	r := gittest.New(t)
	r.Git("remote", "add", "origin", "https://github.com/acme/cli.git")
	r.Commit("init", map[string]string{"m.go": "package m\n\nfunc F() int { return 1 }\n"})
	r.PR(3, "fix", "fix F", map[string]string{"m.go": "package m\n\nfunc F() int { return 2 }\n"}, "Fix F\n\nCloses #1")
	r.Commit("tidy", map[string]string{"m.go": "package m\n\n// F is two.\nfunc F() int { return 2 }\n"})
	out := t.TempDir()
	jsonl := filepath.Join(out, "all.jsonl")
	broker := kafkaiotest.Start(t, kafkaio.BrokerOptions{Partitions: 2})
	var so, se bytes.Buffer
	code := runMain(context.Background(), []string{"mine", "--repo", r.Dir, "--out", out, "--commits", "--jsonl", jsonl, "--metrics-addr", "",
		"--brokers", strings.Join(broker.Addrs(), ","), "--topic-prefix", "t."}, &so, &se)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, so.String(), se.String())
	}
	if !strings.Contains(so.String(), "2 instances") || !strings.Contains(so.String(), "wrote "+jsonl) {
		t.Errorf("summary:\n%s", so.String())
	}
	if strings.Contains(se.String(), "level=INFO") {
		t.Errorf("runner chatter on stderr without -v:\n%s", se.String())
	}
	b, err := os.ReadFile(jsonl)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m["id"].(string))
	}
	if len(ids) != 2 || ids[0] != "acme/cli#3" || !strings.HasPrefix(ids[1], "acme/cli@") {
		t.Errorf("ids %v", ids)
	}
	// The same instances went to the instances topic, keyed by id.
	kc := broker.Config("t.")
	var keys []string
	if err := kafkaio.Scan(context.Background(), kafkaio.ReadConfig{Config: kc, Topic: kc.Topic(kafkaio.Instances)}, func(m kafkaio.Message) error {
		var inst schemas.Instance
		if err := schemas.Decode(m.Value, &inst); err != nil || inst.ID != string(m.Key) {
			t.Errorf("message %q: %v", m.Key, err)
		}
		keys = append(keys, string(m.Key))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(keys)
	if strings.Join(keys, " ") != strings.Join(ids, " ") {
		t.Errorf("topic keys %v, want %v", keys, ids)
	}
	// swerl cat reads what mine wrote.
	so.Reset()
	if code := runMain(context.Background(), []string{"cat", filepath.Join(out, "instances")}, &so, &se); code != 0 || strings.Count(so.String(), "\"oracle_patch\"") != 2 {
		t.Errorf("swerl cat: exit %d\n%.500s", code, so.String())
	}
	// Usage errors exit 2.
	for _, args := range [][]string{{"mine", "--max-files", "0"}, {"mine", "extra"}, {"import", "swebench"}, {"import", "other", "f"}} {
		if code := runMain(context.Background(), args, &so, &se); code != 2 {
			t.Errorf("%q: exit %d, want 2", args, code)
		}
	}
	if code := runMain(context.Background(), []string{"mine", "--repo", t.TempDir(), "--metrics-addr", ""}, &so, &se); code != 1 || !strings.Contains(se.String(), "not a git repository") {
		t.Errorf("non-repository: exit %d, %s", code, se.String())
	}
}

func TestImportCommand(t *testing.T) {
	r := gittest.New(t)
	base := r.Commit("init", map[string]string{"a.py": "x = 1\n"})
	head := r.Commit("fix", map[string]string{"a.py": "x = 2\n"})
	patch := r.Git("diff", base, head) + "\n"
	row, _ := json.Marshal(map[string]string{"instance_id": "o__r-7", "repo": "o/r", "base_commit": base, "patch": patch, "problem_statement": "x should be 2"})
	file := filepath.Join(t.TempDir(), "rows.jsonl")
	os.WriteFile(file, append(row, '\n'), 0o644)
	out := t.TempDir()
	var so, se bytes.Buffer
	if code := runMain(context.Background(), []string{"import", "swebench", file, "--repo", r.Dir, "--out", out}, &so, &se); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, so.String(), se.String())
	}
	if !strings.Contains(so.String(), "1 instances") {
		t.Errorf("summary %s", so.String())
	}
	inst := filepath.Join(out, "instances", "swebench.parquet")
	if _, err := os.Stat(inst); err != nil {
		t.Fatal(err)
	}
	// The round trip: eval's predictions name the row's instance_id, which
	// SWE-bench's harness matches (the file policy keys on the same id).
	answer := "```python\n### a.py\n<<<<<<< SEARCH\nx = 1\n=======\nx = 2\n>>>>>>> REPLACE\n```"
	line, _ := json.Marshal(map[string]any{"instance_id": "o__r-7", "completions": []string{answer}})
	comps := filepath.Join(t.TempDir(), "c.jsonl")
	os.WriteFile(comps, append(line, '\n'), 0o644)
	preds := filepath.Join(t.TempDir(), "preds.jsonl")
	so.Reset()
	se.Reset()
	if code := runMain(context.Background(), []string{"eval", "--instances", inst, "--policy", "file:" + comps, "--out", preds}, &so, &se); code != 0 {
		t.Fatalf("eval exit %d\n%s%s", code, so.String(), se.String())
	}
	b, err := os.ReadFile(preds)
	if err != nil {
		t.Fatal(err)
	}
	var pred struct {
		ID string `json:"instance_id"`
	}
	if err := json.Unmarshal(b, &pred); err != nil || pred.ID != "o__r-7" {
		t.Errorf("prediction %s: %v", b, err)
	}
}

// TestMineReposFile: --repos names repositories one a line, by URL too; a
// malformed line is an error naming the file and line.
func TestMineReposFile(t *testing.T) {
	r := gittest.New(t)
	r.Commit("init", map[string]string{"m.go": "package m\n\nfunc F() int { return 1 }\n"})
	r.Commit("Fix F (#4)", map[string]string{"m.go": "package m\n\nfunc F() int { return 2 }\n"})
	list := filepath.Join(t.TempDir(), "repos.txt")
	missing := "file://" + t.TempDir() + "/gone/missing.git"
	os.WriteFile(list, []byte("# repositories\n\nfile://"+r.Dir+"\n"+missing+"\n"), 0o644)
	var so, se bytes.Buffer
	if code := runMain(context.Background(), []string{"mine", "--repos", list, "--out", t.TempDir(), "--metrics-addr", ""}, &so, &se); code != 0 {
		t.Fatalf("exit %d\n%s%s", code, so.String(), se.String())
	}
	if !strings.Contains(so.String(), "2 repos") || !strings.Contains(so.String(), "1 instances") {
		t.Errorf("summary:\n%s", so.String())
	}
	// A progress line a repository on stderr; stdout keeps the summary.
	if !strings.Contains(se.String(), "mine: repo "+gitio.NameFromURL("file://"+r.Dir)+": 1 PRs, 1 instances, 0 dead letters, ") ||
		!strings.Contains(se.String(), "mine: repo gone/missing: 0 PRs, 0 instances, 1 dead letters, ") || strings.Contains(so.String(), "mine: repo ") {
		t.Errorf("per-repository progress:\nstderr %s\nstdout %s", se.String(), so.String())
	}
	os.WriteFile(list, []byte("ok/path\ntwo words\n"), 0o644)
	se.Reset()
	if code := runMain(context.Background(), []string{"mine", "--repos", list, "--metrics-addr", ""}, &so, &se); code == 0 || !strings.Contains(se.String(), list+":2") {
		t.Errorf("bad line: exit %d, %s", code, se.String())
	}
}
