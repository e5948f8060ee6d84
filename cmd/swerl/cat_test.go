package main

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"swerl/internal/testenv"
	"swerl/schemas"
	"swerl/sinks/parquetio"
	"swerl/sinks/parquetio/parquettest"
	"swerl/transforms/reward"
)

// catFixtures writes one Parquet file per record type swerl writes.
func catFixtures(t *testing.T, dir string) []string {
	t.Helper()
	inst := schemas.Instance{SchemaVersion: 1, ID: "acme/w#7", Repo: "acme/w", PRNumber: 7,
		ProblemStatement: "crash on ünïcode 🦙\r\n\"quoted\"", LinkedIssues: []int{5},
		CodeContext:      map[string]string{"a.py": "def f():\n    return 1\n", "z/b.py": ""},
		OracleNewContent: map[string]string{"a.py": "def f():\n    return 2\n"},
		Stats:            schemas.ChangeStats{FilesChanged: 1, LinesAdded: 1, LinesDeleted: 1}}
	var s schemas.Sample
	s.SchemaVersion, s.ID, s.InstanceID, s.GroupID = 1, "acme/w#7@v0/0/1", "acme/w#7", "acme/w#7@v0/0"
	s.Completion, s.Reward, s.Advantage, s.PolicyVersion = "<think>x</think><solution></solution>", 0.25, -1.5, 3
	s.LogProbs = []float32{-0.5, -1.25}
	s.Similarities = map[string]float64{"a.py": 0.25}
	wv := schemas.WeightVersion{SchemaVersion: 1, Version: 2, Step: 20, Parent: 1, URI: "checkpoints/v000002",
		Files:   []schemas.FileHash{{Path: "model.safetensors", SHA256: "ab", Bytes: 10}},
		Offsets: []schemas.TopicOffset{{Topic: "swerl.samples", Partition: 0, Offset: 99}}}
	dl := schemas.DeadLetter{SchemaVersion: 1, Stage: "decode", Source: "in.jsonl:3", Reason: "bad json", Value: []byte("{oops")}
	files := []string{filepath.Join(dir, "i.parquet"), filepath.Join(dir, "s.parquet"), filepath.Join(dir, "w.parquet"), filepath.Join(dir, "d.parquet")}
	for i, err := range []error{
		parquetio.WriteFile(files[0], []schemas.Instance{inst, {SchemaVersion: 1, ID: "acme/w#8"}}),
		parquetio.WriteFile(files[1], []schemas.Sample{s}),
		parquetio.WriteFile(files[2], []schemas.WeightVersion{wv}),
		parquetio.WriteFile(files[3], []schemas.DeadLetter{dl}),
	} {
		if err != nil {
			t.Fatalf("%s: %v", files[i], err)
		}
	}
	return files
}

func catLines(t *testing.T, file string) []map[string]any {
	t.Helper()
	var out, errb bytes.Buffer
	if code := runMain(context.Background(), []string{"cat", file}, &out, &errb); code != 0 {
		t.Fatalf("swerl cat %s: exit %d: %s", file, code, errb.String())
	}
	return decodeLines(t, out.String())
}

func decodeLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var rows []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("bad JSON line %q: %v", line, err)
		}
		rows = append(rows, m)
	}
	return rows
}

func TestCatPrintsRecordsAsTheirWireForm(t *testing.T) {
	files := catFixtures(t, t.TempDir())
	rows := catLines(t, files[0])
	if len(rows) != 2 {
		t.Fatalf("got %d rows, want 2", len(rows))
	}
	if rows[0]["id"] != "acme/w#7" || rows[0]["problem_statement"] != "crash on ünïcode 🦙\r\n\"quoted\"" {
		t.Fatalf("row 0: %v", rows[0])
	}
	cc, _ := rows[0]["code_context"].(map[string]any)
	if cc["a.py"] != "def f():\n    return 1\n" {
		t.Fatalf("code_context printed as %#v, want text", rows[0]["code_context"])
	}
	var back schemas.Instance
	line, _ := json.Marshal(rows[0])
	if err := schemas.Decode(line, &back); err != nil || back.OracleNewContent["a.py"] != "def f():\n    return 2\n" {
		t.Fatalf("cat output does not decode as an Instance: %v %+v", err, back)
	}
}

func TestCatRejectsNonParquet(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "x.parquet")
	os.WriteFile(bad, []byte("nope"), 0o644)
	var out, errb bytes.Buffer
	if code := runMain(context.Background(), []string{"cat", bad}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "x.parquet") {
		t.Fatalf("exit %d, stderr %q: want 1 and the file named", code, errb.String())
	}
}

// TestCatAgreesWithDuckDB reads every file swerl writes with DuckDB, an
// independent Parquet implementation, and requires the same rows as swerl cat.
func TestCatAgreesWithDuckDB(t *testing.T) {
	modules := testenv.NodeModules(t, "@duckdb/node-api")
	root := testenv.RepoRoot(t)
	script := filepath.Join(filepath.Dir(modules), "duckdb-rows.mjs")
	src, err := os.ReadFile(filepath.Join(root, "scripts", "duckdb-rows.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, src, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, file := range catFixtures(t, t.TempDir()) {
		cmd := exec.Command("node", script, file)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("duckdb on %s: %v\n%s", file, err, stderr.String())
		}
		want := decodeLines(t, string(out))
		got := catLines(t, file)
		if len(got) != len(want) {
			t.Fatalf("%s: swerl cat %d rows, duckdb %d", file, len(got), len(want))
		}
		for i := range got {
			if !sameJSON(normalize(got[i]), normalize(want[i])) {
				g, _ := json.Marshal(got[i])
				w, _ := json.Marshal(want[i])
				t.Errorf("%s row %d:\nswerl cat: %s\nduckdb:    %s", filepath.Base(file), i, g, w)
			}
		}
	}
}

// normalize maps the representational differences that are not data
// differences: an empty list or map vs null, and DuckDB's MAP-as-object.
func normalize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			return nil
		}
		out := map[string]any{}
		for k, e := range x {
			if n := normalize(e); n != nil {
				out[k] = n
			}
		}
		return out
	case []any:
		if len(x) == 0 {
			return nil
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalize(e)
		}
		return out
	case string:
		if x == "" {
			return nil
		}
	case bool:
		if !x {
			return nil
		}
	case float64:
		if x == 0 {
			return nil
		}
	}
	return v
}

func sameJSON(a, b any) bool {
	if fa, ok := a.(float64); ok {
		fb, ok := b.(float64)
		return ok && math.Abs(fa-fb) <= 1e-6*math.Max(1, math.Abs(fa))
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if !sameJSON(x[k], y[k]) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

// `swerl cat` and `swerl reward --in` on damaged Parquet files (a footer
// on which parquet-go panics, a truncated file) exit with an error naming
// the file, never a panic.
func TestDamagedParquetIsAnErrorNotAPanic(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.parquet")
	recs := []reward.Record{{ID: "a", Output: "x", OraclePatches: []string{"p"}, CodeContext: map[string]string{"a.py": "1"}},
		{ID: "b", Output: "y"}}
	if err := parquetio.WriteFile(good, recs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(good)
	if err != nil {
		t.Fatal(err)
	}
	damaged := map[string][]byte{"panicky.parquet": parquettest.PanickingMutation(t, b, 9), "truncated.parquet": b[:len(b)*2/3]}
	for name, data := range damaged {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{{"cat", p}, {"reward", "--in", p, "--out", filepath.Join(dir, "out-"+name)}} {
			var stdout, stderr bytes.Buffer
			code := runMain(context.Background(), args, &stdout, &stderr)
			if name == "truncated.parquet" && code == 0 || !strings.Contains(stderr.String(), name) && code != 0 || strings.Contains(stderr.String(), "goroutine ") {
				t.Errorf("swerl %s: exit %d, stderr %s", args[0], code, stderr.String())
			}
			t.Logf("swerl %s %s: exit %d: %s", args[0], name, code, strings.TrimSpace(stderr.String()))
		}
	}
}
