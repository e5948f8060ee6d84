package parquetio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"

	"swerl/internal/syncbuf"
	"swerl/schemas"
	"swerl/sinks/parquetio/parquettest"
)

// renameInFooter returns b with the first occurrence of column name old in
// its footer (the schema comes before the row groups) changed byte for
// byte to new, as a flipped byte does.
func renameInFooter(t *testing.T, b []byte, old, new string) []byte {
	t.Helper()
	if len(old) != len(new) {
		t.Fatal("same length only")
	}
	m := bytes.Clone(b)
	start := len(m) - 8 - int(binary.LittleEndian.Uint32(m[len(m)-8:]))
	i := bytes.Index(m[start:], []byte(old))
	if i < 0 {
		t.Fatalf("%q not in the footer", old)
	}
	copy(m[start+i:], new)
	return m
}

// readTyped reads the file at path as its row type (see rowTypeOfFile).
func readTyped(path string) error {
	switch rowTypeOfFile(filepath.Base(path)) {
	case "samples":
		_, err := ReadFile[schemas.Sample](path)
		return err
	case "instances":
		_, err := ReadFile[schemas.Instance](path)
		return err
	case "index":
		_, err := ReadFile[schemas.WeightVersion](path)
		return err
	case "deadletter":
		_, err := ReadFile[schemas.DeadLetter](path)
		return err
	}
	panic(path)
}

// A column name damaged in the footer (advantage → advanta>e, as flipped
// bytes did) is refused by the typed read and by ScanAny (swerl cat),
// naming the file, the column and the name found instead, for each
// record type swerl reads. Before, the file read with every row lacking
// the column.
func TestDamagedColumnNameIsRefused(t *testing.T) {
	files := validFiles(t)
	dir := t.TempDir()
	for _, tc := range []struct{ file, column, damaged string }{
		{"samples.parquet", "advantage", "advanta>e"},
		{"instances.parquet", "problem_statement", "problem_statemenu"},
		{"index.parquet", "mean_reward", "mean_rewarf"},
		{"deadletter.parquet", "reason", "reasoo"},
	} {
		path := filepath.Join(dir, tc.file)
		if err := os.WriteFile(path, renameInFooter(t, files[tc.file], tc.column, tc.damaged), 0o644); err != nil {
			t.Fatal(err)
		}
		for what, err := range map[string]error{
			"typed": readTyped(path),
			"any":   ScanAny(path, func(map[string]any) error { return nil }),
		} {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "column "+tc.column+" of a schemas.") ||
				!strings.Contains(err.Error(), tc.damaged) {
				t.Errorf("%s read of %s with %s renamed %s: %v", what, tc.file, tc.column, tc.damaged, err)
			}
		}
	}
}

// A column of the wrong type class is refused (DOUBLE read as an integer,
// a string or a boolean, a boolean as an integer); INT32 for INT64 is what
// other writers choose and reads. (A string column keeps its STRING
// logical type, which is what parquet-go reads it by.)
func TestWrongColumnTypeIsRefused(t *testing.T) {
	b := validFiles(t)["samples.parquet"]
	dir := t.TempDir()
	retype := func(column string, typ format.Type) string {
		path := filepath.Join(dir, column+"-"+typ.String()+".parquet")
		m := rewriteFooter(t, b, func(md *format.FileMetaData) {
			for i := range md.Schema {
				if md.Schema[i].Name == column {
					md.Schema[i].Type.V = typ
				}
			}
		})
		if err := os.WriteFile(path, m, 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		column string
		typ    format.Type
	}{{"advantage", format.Int64}, {"advantage", format.ByteArray}, {"advantage", format.Boolean}, {"group_complete", format.Int32}} {
		path := retype(tc.column, tc.typ)
		if _, err := ReadFile[schemas.Sample](path); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "column "+tc.column+" is "+tc.typ.String()) ||
			!strings.Contains(err.Error(), path) {
			t.Errorf("%s as %s: %v", tc.column, tc.typ, err)
		}
	}
	// group_size is INT64; an INT32 column reads (its pages are INT64
	// here, so the values are not checked, only that the schema passes).
	if err := checkRowType[schemas.Sample]("x.parquet", mustSchema(t, rewriteFooter(t, b, func(md *format.FileMetaData) {
		for i := range md.Schema {
			if md.Schema[i].Name == "group_size" {
				md.Schema[i].Type.V = format.Int32
			}
		}
	}))); err != nil {
		t.Errorf("INT32 for INT64: %v", err)
	}
}

func mustSchema(t *testing.T, b []byte) *parquet.Schema {
	t.Helper()
	pf, err := openReaderAt("x.parquet", bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pf.Schema()
}

// captureWarnings sends the readers' warnings to a buffer until the test
// ends.
func captureWarnings(t *testing.T) *syncbuf.Buffer {
	buf := new(syncbuf.Buffer)
	SetWarnings(slog.New(slog.NewTextHandler(buf, nil)))
	t.Cleanup(func() { SetWarnings(nil) })
	return buf
}

// An optional column (Sample's source, added after the first files) may
// be missing: the file reads, and the column the file has instead is
// reported as a warning naming the file. A Projection row type reads a
// few columns without warnings; a plain one warns once per file.
func TestOptionalAndUnknownColumns(t *testing.T) {
	warned := captureWarnings(t)
	files := validFiles(t)
	path := filepath.Join(t.TempDir(), "samples.parquet")
	if err := os.WriteFile(path, renameInFooter(t, files["samples.parquet"], "source", "sourcf"), 0o644); err != nil {
		t.Fatal(err)
	}
	rows, err := ReadFile[schemas.Sample](path)
	if err != nil || len(rows) != 2 || rows[0].Advantage != 1 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	if w := warned.String(); !strings.Contains(w, path) || !strings.Contains(w, "sourcf") || strings.Count(w, "\n") != 1 {
		t.Fatalf("warnings %q", w)
	}
	if err := ScanAny(path, func(map[string]any) error { return nil }); err != nil {
		t.Fatalf("ScanAny: %v", err)
	}
	before := warned.String()
	if _, err := ReadFile[projectionRow](path); err != nil {
		t.Fatal(err)
	}
	if w := strings.TrimPrefix(warned.String(), before); w != "" {
		t.Fatalf("a projection warned: %q", w)
	}
	// A file of another tool's rows is printed by ScanAny as it is.
	other := filepath.Join(t.TempDir(), "other.parquet")
	type otherRow struct {
		Name  string `parquet:"name"`
		Score int64  `parquet:"score"`
	}
	if err := WriteFile(other, []otherRow{{"a", 1}}); err != nil {
		t.Fatal(err)
	}
	if err := ScanAny(other, func(map[string]any) error { return nil }); err != nil {
		t.Fatalf("a file of no record: %v", err)
	}
}

type projectionRow struct {
	ID        string  `parquet:"id"`
	Advantage float64 `parquet:"advantage"`
}

func (projectionRow) ParquetProjection() {}

// requiredColumns lists the columns of row type T a file must hold.
func requiredColumns[T any]() [][]string {
	rt := rowTypeOf[T]()
	var out [][]string
	for _, p := range rt.schema.Columns() {
		if !rt.isOptional(p) {
			out = append(out, p)
		}
	}
	return out
}

// holdsRequired reports whether schema fs has every required column of
// the row type the file name stands for.
func holdsRequired(name string, fs *parquet.Schema) bool {
	var req [][]string
	switch rowTypeOfFile(name) {
	case "samples":
		req = requiredColumns[schemas.Sample]()
	case "instances":
		req = requiredColumns[schemas.Instance]()
	case "index":
		req = requiredColumns[schemas.WeightVersion]()
	case "deadletter":
		req = requiredColumns[schemas.DeadLetter]()
	}
	for _, p := range req {
		if _, ok := fs.Lookup(p...); !ok {
			return false
		}
	}
	return true
}

// checkSchemaMutation reads a schema mutation m of a valid file: never a
// panic, every error wraps ErrCorrupt naming the file, a file that reads
// as its own type still holds every column that type requires, and a
// renamed required column is named by the error.
func checkSchemaMutation(t *testing.T, name string, b []byte, m parquettest.SchemaMutation) {
	err := readAll(name, b)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name) {
			t.Fatalf("%s, %+v: error does not wrap ErrCorrupt naming the file: %v", name, m, err)
		}
		return
	}
	pf, oerr := openReaderAt(name, bytes.NewReader(b), int64(len(b)))
	if oerr != nil {
		t.Fatalf("%s, %+v: read, then did not open: %v", name, m, oerr)
	}
	if !holdsRequired(name, pf.Schema()) {
		t.Fatalf("%s, %+v: read as its row type without all its required columns", name, m)
	}
}

// Schema mutations (names, types, repetitions, child counts, logical
// types, elements dropped; the footer re-encoded so that it decodes): a
// file missing a required column is never read as its type. A renamed
// required column is named in the error.
func TestSchemaMutations(t *testing.T) {
	captureWarnings(t) // renamed optional columns warn
	files := validFiles(t)
	rng := rand.New(rand.NewPCG(37, 4))
	n := 150
	if testing.Short() {
		n = 40
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		var refused, renamed int
		for range n {
			b, m, ok := parquettest.MutateSchema(rng, files[name])
			if !ok {
				t.Fatalf("%s: no schema to mutate", name)
			}
			checkSchemaMutation(t, name, b, m)
			if m.Op == "rename" && m.Leaf && name != "empty.parquet" {
				err := readAll(name, b)
				if err != nil {
					refused++
				}
				if err != nil && strings.Contains(err.Error(), "missing") && !strings.Contains(err.Error(), m.Name) {
					t.Errorf("%s, %+v: the error does not name the column: %v", name, m, err)
				}
				renamed++
			}
		}
		t.Logf("%s: %d schema mutations, %d renamed columns (%d refused)", name, n, renamed, refused)
	}
}

// FuzzSchema applies n schema mutations drawn from seed to one of the
// valid files (picked by which): see checkSchemaMutation. The long run:
//
//	go test ./sinks/parquetio -run '^$' -fuzz '^FuzzSchema$' -fuzztime 100000x -parallel 1
func FuzzSchema(f *testing.F) {
	files := validFiles(f)
	names := slices.Sorted(maps.Keys(files))
	for i := range names {
		f.Add(uint8(i), uint64(i), uint8(1))
		f.Add(uint8(i), uint64(i)+100, uint8(3))
	}
	SetWarnings(slog.New(slog.DiscardHandler))
	defer SetWarnings(nil)
	f.Fuzz(func(t *testing.T, which uint8, seed uint64, n uint8) {
		name := names[int(which)%len(names)]
		b := files[name]
		rng := rand.New(rand.NewPCG(seed, 1))
		var m parquettest.SchemaMutation
		for range 1 + int(n)%4 {
			mb, mm, ok := parquettest.MutateSchema(rng, b)
			if !ok {
				break
			}
			b, m = mb, mm
		}
		checkSchemaMutation(t, name, b, m)
	})
}

// The columns a file must hold are those every file of each record has
// held since schema_version 1: a field added to a record later must be
// listed in its OptionalColumns, or files written before it would be
// refused. Adding a field fails this test until it is listed (or, with a
// schema_version bump, the list here changes on purpose).
func TestRequiredColumnsAreTheFirstSchemas(t *testing.T) {
	rollout := []string{"schema_version", "id", "instance_id", "group_id", "group_size", "index", "policy_version", "prompt",
		"prompt_tokens.list.element", "completion", "completion_tokens.list.element", "logprobs.list.element", "finish_reason",
		"latency_ms", "created_at"}
	for name, tc := range map[string]struct {
		got  [][]string
		want []string
	}{
		"Rollout": {requiredColumns[schemas.Rollout](), rollout},
		"Sample": {requiredColumns[schemas.Sample](), append(slices.Clone(rollout), "reward", "format_error",
			"similarities.key_value.key", "similarities.key_value.value", "advantage", "group_mean", "group_std", "group_complete", "repo")},
		"Instance": {requiredColumns[schemas.Instance](), []string{"schema_version", "id", "repo", "pr_number", "base_commit",
			"merge_commit", "created_at", "problem_statement", "pr_title", "pr_body", "linked_issues.list.element",
			"code_context.key_value.key", "code_context.key_value.value", "oracle_new_content.key_value.key",
			"oracle_new_content.key_value.value", "oracle_patch", "relevant_files.list.element", "language",
			"stats.files_changed", "stats.lines_added", "stats.lines_deleted", "stats.hunks", "stats.patch_bytes", "source"}},
		"WeightVersion": {requiredColumns[schemas.WeightVersion](), []string{"schema_version", "version", "step", "parent", "uri",
			"files.list.element.path", "files.list.element.sha256", "files.list.element.bytes", "created_at", "loss", "kl",
			"mean_reward", "tokens", "samples", "offsets.list.element.topic", "offsets.list.element.partition",
			"offsets.list.element.offset"}},
		"DeadLetter": {requiredColumns[schemas.DeadLetter](), []string{"schema_version", "stage", "source", "key", "reason", "value", "created_at"}},
	} {
		var got []string
		for _, p := range tc.got {
			got = append(got, strings.Join(p, "."))
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s: required columns %q, want %q: list a new field in OptionalColumns", name, got, want)
		}
	}
}
