package parquetio_test

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"swerl/schemas"
	"swerl/sinks/parquetio"
)

func sampleInstances() []schemas.Instance {
	return []schemas.Instance{
		{
			SchemaVersion: schemas.Version, ID: "acme/widgets#12", Repo: "acme/widgets", PRNumber: 12,
			BaseCommit: "abc", MergeCommit: "def", ProblemStatement: "Fix ünïcode 🦙\r\nplease",
			LinkedIssues:     []int{3, 4},
			CodeContext:      map[string]string{"a.py": "x = 1\n", "b/c.go": "package c\n"},
			OracleNewContent: map[string]string{"a.py": "x = 2\n"},
			OraclePatch:      "--- a/a.py\n+++ b/a.py\n@@ -1 +1 @@\n-x = 1\n+x = 2\n",
			RelevantFiles:    []string{"b/c.go"},
			Language:         "python", Source: schemas.SourceGit,
			Stats: schemas.ChangeStats{FilesChanged: 1, LinesAdded: 1, LinesDeleted: 1, Hunks: 1, PatchBytes: 50},
		},
		{SchemaVersion: schemas.Version, ID: "acme/widgets#13", OracleNewContent: map[string]string{"new.py": ""}},
	}
}

func TestWriteReadRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.parquet")
	in := sampleInstances()
	if err := parquetio.WriteFile(path, in); err != nil {
		t.Fatal(err)
	}
	got, err := parquetio.ReadFile[schemas.Instance](path)
	if err != nil {
		t.Fatal(err)
	}
	// Parquet has no distinction between nil and empty maps or lists.
	for i := range got {
		if len(got[i].LinkedIssues) == 0 {
			got[i].LinkedIssues = in[i].LinkedIssues
		}
		if len(got[i].RelevantFiles) == 0 {
			got[i].RelevantFiles = in[i].RelevantFiles
		}
		if len(got[i].CodeContext) == 0 {
			got[i].CodeContext = in[i].CodeContext
		}
	}
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("round trip differs\ngot:  %+v\nwant: %+v", got, in)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("temporary files left behind: %v", ents)
	}
}

func TestDirWriterRotatesAndResumesNumbering(t *testing.T) {
	dir := t.TempDir()
	w := parquetio.NewDirWriter[schemas.Sample](dir, "samples", 3)
	var all []schemas.Sample
	for i := range 7 {
		s := schemas.Sample{Reward: float64(i) / 10, Similarities: map[string]float64{"a.py": 0.5}}
		s.ID = "g/" + string(rune('a'+i))
		all = append(all, s)
		if err := w.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(w.Files()); n != 2 {
		t.Fatalf("after 7 rows with 3 per file: %d files, want 2", n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// A temporary file from a crashed write must be ignored by readers.
	if err := os.WriteFile(filepath.Join(dir, ".samples-000009.parquet.tmp-123"), []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	w2 := parquetio.NewDirWriter[schemas.Sample](dir, "samples", 3)
	if err := w2.Write(schemas.Sample{Reward: 1}); err != nil {
		t.Fatal(err)
	}
	if err := w2.Close(); err != nil {
		t.Fatal(err)
	}
	if got := filepath.Base(w2.Files()[0]); got != "samples-000003.parquet" {
		t.Fatalf("restarted writer wrote %s, want samples-000003.parquet", got)
	}
	got, err := parquetio.ReadDir[schemas.Sample](dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 8 {
		t.Fatalf("read %d rows, want 8", len(got))
	}
	for i, s := range all {
		if got[i].ID != s.ID || got[i].Reward != s.Reward || got[i].Similarities["a.py"] != 0.5 {
			t.Fatalf("row %d: got %+v want %+v", i, got[i], s)
		}
	}
}

func TestReadFileErrorsNameTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.parquet")
	os.WriteFile(path, []byte("this is not parquet"), 0o644)
	_, err := parquetio.ReadFile[schemas.Instance](path)
	if err == nil || !strings.Contains(err.Error(), "bad.parquet") {
		t.Fatalf("want an error naming bad.parquet, got %v", err)
	}
}

func TestFileWriterRowGroupsAndAtomicity(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.parquet")
	w, err := parquetio.Create[schemas.Instance](path)
	if err != nil {
		t.Fatal(err)
	}
	in := sampleInstances()
	for i, r := range in {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("file visible before Close: %v", err)
	}
	if w.Rows() != int64(len(in)) {
		t.Fatalf("Rows() = %d", w.Rows())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if n := len(pf.RowGroups()); n != 2 {
		t.Errorf("%d row groups, want 2 (one Flush)", n)
	}
	got, err := parquetio.ReadFile[schemas.Instance](path)
	if err != nil || len(got) != len(in) || got[0].OraclePatch != in[0].OraclePatch || got[1].ID != in[1].ID {
		t.Fatalf("read back %d rows, %v", len(got), err)
	}
	// An aborted writer leaves nothing, not even its temporary file.
	w2, err := parquetio.Create[schemas.Instance](filepath.Join(dir, "y.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	w2.Write(in...)
	w2.Abort()
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("after Abort: %v", ents)
	}
}
