package lineage_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"swerl/internal/testenv"
	"swerl/schemas"
	"swerl/sinks/lineage"
	"swerl/sinks/parquetio"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func answer(path, search, replace string) string {
	return "<think>fix it</think><solution>```go\n### " + path + "\n<<<<<<< SEARCH\n" + search + "\n=======\n" + replace + "\n>>>>>>> REPLACE\n```</solution>"
}

// writeOutputs writes a learner's and a train pipeline's outputs under out:
// two PR instances, one group each (sampled by version 0), one hunk task's
// group, version 1 trained on the first group and the hunk task's, version
// 2 on the second; one sample is in samples/ twice, one id of version 2's
// record is in no file.
func writeOutputs(t *testing.T, out string) {
	code := map[string]string{"pkg/a.go": "package pkg\n\nfunc A() int {\n\treturn 1\n}\n"}
	oracle := map[string]string{"pkg/a.go": "package pkg\n\nfunc A() int {\n\treturn 11\n}\n"}
	var insts []schemas.Instance
	for _, n := range []int{7, 9} {
		insts = append(insts, schemas.Instance{SchemaVersion: 1, ID: fmt.Sprintf("acme/app#%d", n), Repo: "acme/app", PRNumber: n,
			BaseCommit: fmt.Sprintf("base%d", n), MergeCommit: fmt.Sprintf("merge%d", n), PRTitle: fmt.Sprintf("fix %d", n),
			CodeContext: code, OracleNewContent: oracle, OraclePatch: "--- a/pkg/a.go\n+++ b/pkg/a.go\n"})
	}
	must(t, parquetio.WriteFile(filepath.Join(out, "instances", "instances-000000.parquet"), insts))

	mk := func(gid, inst string, i int, completion string, r float64, fe string) schemas.Sample {
		var s schemas.Sample
		s.SchemaVersion, s.ID, s.GroupID, s.InstanceID, s.GroupSize, s.Index = 1, fmt.Sprintf("%s/%d", gid, i), gid, inst, 3, i
		s.Prompt, s.Completion, s.Reward, s.FormatError, s.Advantage, s.Repo = "prompt of "+inst, completion, r, fe, r-0.5, "acme/app"
		s.CreatedAt = fmt.Sprintf("2026-01-01T00:00:0%dZ", i)
		return s
	}
	g7, g9, gh := "r1/acme/app#7", "r1/acme/app#9", "r1/acme/app#7/pkg/a.go:3"
	samples := []schemas.Sample{
		mk(g7, "acme/app#7", 0, answer("pkg/a.go", "\treturn 1", "\treturn 11"), 1, ""),
		mk(g7, "acme/app#7", 1, answer("pkg/a.go", "\treturn 1", "\treturn 12"), 0.6, ""),
		mk(g7, "acme/app#7", 2, "no tags", -1, "count of <think> is not 1"),
		mk(g9, "acme/app#9", 0, answer("pkg/a.go", "\treturn 1", "\treturn 11"), 1, ""),
		mk(gh, "acme/app#7/pkg/a.go:3", 0, answer("pkg/a.go", "\treturn 1", "\treturn 11"), 1, ""),
	}
	samples[4].Prompt += "\n```go\nfunc A() int {\n\treturn 1\n}\n```" // the window the hunk task shows
	dup := samples[3]
	dup.CreatedAt = "2026-01-02T00:00:00Z"
	must(t, parquetio.WriteFile(filepath.Join(out, "samples", "samples-000000.parquet"), samples[:2]))
	must(t, parquetio.WriteFile(filepath.Join(out, "samples", "samples-000001.parquet"), append(slices.Clone(samples[2:]), dup)))

	must(t, os.MkdirAll(filepath.Join(out, "trained"), 0o755))
	records := map[string]string{
		"v000000.json": `{"version":0,"step":0,"sft_next":0}`,
		"v000001.json": `{"version":1,"step":1,"samples":["r1/acme/app#7/0","r1/acme/app#7/1","r1/acme/app#7/2","r1/acme/app#7/pkg/a.go:3/0"],"dropped":["r0/old/0"],"sft_next":0,"finished":[{"id":"r1/acme/app#7","version":1}]}`,
		"v000002.json": `{"version":2,"step":2,"samples":["r1/acme/app#9/0","r1/acme/app#9/1"],"sft_next":0}`,
	}
	for name, body := range records {
		must(t, os.WriteFile(filepath.Join(out, "trained", name), []byte(body), 0o644))
	}
	var idx []schemas.WeightVersion
	for v := range 3 {
		idx = append(idx, schemas.WeightVersion{SchemaVersion: 1, Version: int64(v), Step: int64(v), Parent: int64(v) - 1, Loss: 0.5 / float64(v+1)})
	}
	must(t, parquetio.WriteFile(filepath.Join(out, "index.parquet"), idx))
}

func TestVersionJoinsRecordToSamplesAndPRs(t *testing.T) {
	out := t.TempDir()
	writeOutputs(t, out)
	p := lineage.Dirs(out, "", "")
	st, err := lineage.Version(context.Background(), p, 1)
	must(t, err)
	var ids []string
	for _, s := range st.Samples {
		ids = append(ids, s.ID)
		if s.Instance == nil || s.Instance.ID != "acme/app#7" || s.Instance.MergeCommit != "merge7" || s.Instance.PRNumber != 7 {
			t.Fatalf("%s joined to %+v", s.ID, s.Instance)
		}
	}
	if want := []string{"r1/acme/app#7/0", "r1/acme/app#7/1", "r1/acme/app#7/2", "r1/acme/app#7/pkg/a.go:3/0"}; !slices.Equal(ids, want) {
		t.Fatalf("samples %v, want the record's %v", ids, want)
	}
	if st.Index == nil || st.Index.Parent != 0 || len(st.Missing) != 0 || !slices.Equal(st.Dropped, []string{"r0/old/0"}) {
		t.Fatalf("step %+v", st)
	}
	right, wrong, malformed := st.Samples[0], st.Samples[1], st.Samples[2]
	if right.OracleDiff != "" || !strings.Contains(right.AnswerPatch, "+\treturn 11") {
		t.Fatalf("the oracle's answer: diff %q, patch %q", right.OracleDiff, right.AnswerPatch)
	}
	if !strings.Contains(wrong.OracleDiff, "-\treturn 11\n+\treturn 12") {
		t.Fatalf("a wrong answer's diff against the oracle: %q", wrong.OracleDiff)
	}
	if hunk := st.Samples[3]; hunk.Task == nil || hunk.Task.ID != "acme/app#7/pkg/a.go:3" || hunk.Task.CodeContext["pkg/a.go"] != "func A() int {\n\treturn 1\n}\n" ||
		hunk.OracleDiff != "" || !strings.Contains(hunk.AnswerPatch, "+\treturn 11") {
		t.Fatalf("the hunk task: %+v", hunk)
	}
	if malformed.FormatError == "" || malformed.AnswerPatch != "" || malformed.Reward != -1 {
		t.Fatalf("malformed: %+v", malformed)
	}

	st, err = lineage.Version(context.Background(), p, 2)
	must(t, err)
	if len(st.Samples) != 1 || st.Samples[0].Copies != 2 || !slices.Equal(st.Missing, []string{"r1/acme/app#9/1"}) {
		t.Fatalf("version 2: %d samples (copies %d), missing %v", len(st.Samples), st.Samples[0].Copies, st.Missing)
	}
	st, err = lineage.Sample(context.Background(), p, "r1/acme/app#7/pkg/a.go:3/0")
	must(t, err)
	if st.Version != 1 || len(st.Samples) != 1 || st.Samples[0].Instance.ID != "acme/app#7" {
		t.Fatalf("--sample: %+v", st)
	}
	if _, err := lineage.Sample(context.Background(), p, "r0/old/0"); !errors.Is(err, lineage.ErrNotTrained) || !strings.Contains(err.Error(), "dropped") {
		t.Fatalf("a dropped sample: %v", err)
	}
	if _, err := lineage.Sample(context.Background(), p, "nope/0"); !errors.Is(err, lineage.ErrNotTrained) {
		t.Fatalf("an unknown sample: %v", err)
	}
	if _, err := lineage.Version(context.Background(), p, 5); err == nil || !strings.Contains(err.Error(), "version 5") {
		t.Fatalf("a version without a record: %v", err)
	}
	must(t, os.WriteFile(filepath.Join(out, "trained", "v000003.json"), []byte(`{"version":4}`), 0o644))
	if _, err := lineage.Version(context.Background(), p, 3); err == nil || !strings.Contains(err.Error(), "v000003.json") {
		t.Fatalf("a record of another version: %v", err)
	}
}

// The documented DuckDB query gives the join Version gives.
func TestLineageQueryAgreesWithDuckDB(t *testing.T) {
	modules := testenv.NodeModules(t, "@duckdb/node-api")
	root := testenv.RepoRoot(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "swerl-out")
	writeOutputs(t, out)
	src, err := os.ReadFile(filepath.Join(root, "scripts", "duckdb-query.mjs"))
	must(t, err)
	script := filepath.Join(filepath.Dir(modules), "duckdb-query.mjs")
	must(t, os.WriteFile(script, src, 0o644))
	cmd := exec.Command("node", script, filepath.Join(root, "sinks", "report", "queries", "lineage.sql"))
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	res, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	type row struct {
		Version     int64   `json:"version"`
		SampleID    string  `json:"sample_id"`
		InstanceID  *string `json:"instance_id"`
		Repo        *string `json:"repo"`
		PRNumber    *int    `json:"pr_number"`
		MergeCommit *string `json:"merge_commit"`
		Reward      *float64
		Parent      *int64 `json:"parent"`
	}
	got := map[int64][]row{}
	for _, line := range strings.Split(strings.TrimSpace(string(res)), "\n") {
		var r row
		must(t, json.Unmarshal([]byte(line), &r))
		got[r.Version] = append(got[r.Version], r)
	}
	if len(got) != 2 || len(got[1]) != 4 || len(got[2]) != 2 {
		t.Fatalf("DuckDB rows by version: %v", got)
	}
	for _, v := range []int64{1, 2} {
		st, err := lineage.Version(context.Background(), lineage.Dirs(out, "", ""), v)
		must(t, err)
		byID := map[string]row{}
		for _, r := range got[v] {
			byID[r.SampleID] = r
		}
		for _, s := range st.Samples {
			r, ok := byID[s.ID]
			if !ok || r.InstanceID == nil || *r.InstanceID != s.InstanceID || r.MergeCommit == nil || *r.MergeCommit != s.Instance.MergeCommit ||
				*r.PRNumber != s.Instance.PRNumber || *r.Repo != s.Instance.Repo || r.Parent == nil || *r.Parent != st.Index.Parent {
				t.Fatalf("version %d sample %s: DuckDB %+v, Go %+v", v, s.ID, r, s.Instance)
			}
			delete(byID, s.ID)
		}
		for _, id := range st.Missing {
			if r, ok := byID[id]; !ok || r.InstanceID != nil {
				t.Fatalf("version %d: the missing sample %s in DuckDB: %+v", v, id, r)
			}
			delete(byID, id)
		}
		if len(byID) != 0 {
			t.Fatalf("version %d: DuckDB has rows Go does not: %v", v, byID)
		}
	}
}
