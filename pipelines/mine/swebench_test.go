package mine

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"swerl/internal/gitio/gittest"
	"swerl/schemas"
	"swerl/sinks/files"
	"swerl/sinks/files/filestest"
	"swerl/sinks/parquetio"
)

func TestImportSWEBench(t *testing.T) {
	r := gittest.New(t)
	base := r.Commit("init", map[string]string{"pkg/a.py": "def a():\n    return 1\n", "pkg/b.py": "from pkg import a\n", "docs/x.md": "x\n"})
	head := r.Commit("fix", map[string]string{"pkg/a.py": "def a():\n    return 2\n", "pkg/new.py": "N = 1\n", "docs/x.md!": ""})
	patch := r.Git("diff", base, head) + "\n"
	r.Git("reset", "-q", "--hard", base) // the fix is not in the clone's history any more
	rows := []SWEBenchRow{
		{InstanceID: "acme__tools-42", Repo: "acme/tools", BaseCommit: base, Patch: patch, ProblemStatement: "a() returns 1", HintsText: "bump it", TestPatch: "diff --git a/t b/t\n"},
		{InstanceID: "acme__tools-43", Repo: "acme/tools", BaseCommit: strings.Repeat("1", 40), Patch: patch, ProblemStatement: "x"},
		{InstanceID: "acme__tools-44", Repo: "acme/tools", BaseCommit: head, Patch: patch, ProblemStatement: "applies twice"},
	}
	var lines []string
	for _, row := range rows {
		b, _ := json.Marshal(row)
		lines = append(lines, string(b))
	}
	lines = append(lines, `{"instance_id": "broken"`, `{"instance_id": "acme__tools-x", "repo": "acme/tools", "base_commit": "a", "patch": "p"}`)
	file := writeFile(t, strings.Join(lines, "\n")+"\n")
	out := t.TempDir()
	objectsBefore := r.Git("count-objects", "-v")
	sum, err := ImportSWEBench(context.Background(), ImportConfig{File: file, Repo: r.Dir, Out: out})
	inst := onlyInstance(t, sum, err)
	if inst.ID != "acme__tools-42" || inst.PRNumber != 42 || inst.Source != schemas.SourceSWEBench || inst.BaseCommit != base || inst.ProblemStatement != "a() returns 1" || inst.PRBody != "bump it" {
		t.Errorf("instance %+v", inst)
	}
	want := map[string]string{"pkg/a.py": "def a():\n    return 2\n", "pkg/new.py": "N = 1\n", "docs/x.md": ""}
	if !reflect.DeepEqual(inst.OracleNewContent, want) {
		t.Errorf("oracle %q", inst.OracleNewContent)
	}
	if inst.CodeContext["pkg/a.py"] != "def a():\n    return 1\n" || !reflect.DeepEqual(inst.RelevantFiles, []string{"pkg/b.py"}) {
		t.Errorf("context %q relevant %v", inst.CodeContext, inst.RelevantFiles)
	}
	checkApplies(t, r.Dir, inst)
	if r.Git("count-objects", "-v") != objectsBefore || r.Git("status", "--porcelain") != "" {
		t.Error("import changed the clone")
	}
	wantRej := map[string]int64{"bad_record": 3, "missing_object": 1}
	if !reflect.DeepEqual(sum.Rejected, wantRej) {
		t.Errorf("rejected %v, want %v", sum.Rejected, wantRej)
	}
	dead, err := parquetio.ReadFile[schemas.DeadLetter](sum.DeadLetters)
	if err != nil || len(dead) != 4 {
		t.Fatalf("dead letters %v %v", dead, err)
	}
	for _, d := range dead {
		if d.Key == "" || d.Source != file {
			t.Errorf("dead letter %+v does not name its row", d)
		}
	}
	// The same rows from Parquet give the same instance.
	pq := filepath.Join(t.TempDir(), "rows.parquet")
	if err := parquetio.WriteFile(pq, rows[:1]); err != nil {
		t.Fatal(err)
	}
	sum2, err := ImportSWEBench(context.Background(), ImportConfig{File: pq, Repo: r.Dir, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if again := readInstances(t, sum2.Files); len(again) != 1 || !reflect.DeepEqual(again[0], inst) {
		t.Errorf("parquet import differs")
	}
	// Rows read from, and instances written to, an S3 bucket (a server on
	// loopback) give the same instance and dead letters.
	bucket := filestest.S3(t, "imports")
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := files.WriteFile(context.Background(), bucket+"/rows.jsonl", b); err != nil {
		t.Fatal(err)
	}
	sum3, err := ImportSWEBench(context.Background(), ImportConfig{File: bucket + "/rows.jsonl", Repo: r.Dir, Out: bucket + "/out"})
	if err != nil {
		t.Fatal(err)
	}
	if len(sum3.Files) != 1 || sum3.Files[0] != bucket+"/out/instances/swebench.parquet" || sum3.DeadLetters != bucket+"/out/deadletter/import.parquet" {
		t.Fatalf("wrote %v and %s", sum3.Files, sum3.DeadLetters)
	}
	if again := readInstances(t, fetchAll(t, sum3.Files)); len(again) != 1 || !reflect.DeepEqual(again[0], inst) {
		t.Errorf("import from and to the bucket differs")
	}
	dead3, err := parquetio.ReadFile[schemas.DeadLetter](fetchAll(t, []string{sum3.DeadLetters})[0])
	if err != nil || len(dead3) != 4 || dead3[0].Source != bucket+"/rows.jsonl" {
		t.Errorf("dead letters from the bucket %+v %v", dead3, err)
	}
}

func FuzzParseSWEBenchLine(f *testing.F) {
	f.Add([]byte(`{"instance_id":"a__b-1","repo":"a/b","base_commit":"abc","patch":"diff"}`))
	f.Add([]byte(`{"instance_id":"-","repo":"a/b","base_commit":"abc","patch":"diff"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		row, err := ParseSWEBenchLine(b)
		if err == nil {
			if n, err := SWEBenchNumber(row.InstanceID); err != nil || n <= 0 || row.Patch == "" {
				t.Fatalf("accepted %+v", row)
			}
		}
	})
}
