package parquetio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	kzstd "github.com/klauspost/compress/zstd"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/encoding/thrift"
	"github.com/parquet-go/parquet-go/format"

	"swerl/schemas"
	"swerl/sinks/parquetio/parquettest"
)

// validFiles writes one small file of each row type swerl reads and returns
// their bytes by name.
func validFiles(t testing.TB) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	out := map[string][]byte{}
	write := func(name string, err error) {
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	samples := []schemas.Sample{
		{Rollout: schemas.Rollout{ID: "g/0", GroupID: "g", InstanceID: "a/b#1", Completion: "<patch>x</patch>",
			CompletionTokens: []int32{1, 2, 3}, LogProbs: []float32{-0.5, -1, -2}},
			Reward: 0.5, Advantage: 1, Similarities: map[string]float64{"a.py": 0.5}},
		{Rollout: schemas.Rollout{ID: "g/1", GroupID: "g", InstanceID: "a/b#1"}, Reward: -1, FormatError: "no patch"},
	}
	for i := range samples {
		samples[i].Rollout.SchemaVersion = schemas.Version
	}
	write("samples.parquet", WriteFile(filepath.Join(dir, "samples.parquet"), samples))
	write("instances.parquet", WriteFile(filepath.Join(dir, "instances.parquet"), sampleInstancesInternal()))
	write("index.parquet", WriteFile(filepath.Join(dir, "index.parquet"), []schemas.WeightVersion{
		{SchemaVersion: schemas.Version, Version: 0, Parent: -1, URI: "file:///x/v000000",
			Files: []schemas.FileHash{{Path: "model.safetensors", SHA256: strings.Repeat("ab", 32), Bytes: 10}}},
		{SchemaVersion: schemas.Version, Version: 1, Parent: 0, Step: 10, Loss: 0.25},
	}))
	write("empty.parquet", WriteFile[schemas.Sample](filepath.Join(dir, "empty.parquet"), nil))
	write("deadletter.parquet", WriteFile(filepath.Join(dir, "deadletter.parquet"), []schemas.DeadLetter{
		{SchemaVersion: schemas.Version, Stage: "decode", Source: "swerl.samples@0:7", Key: "k", Reason: "bad JSON", Value: []byte("{")},
	}))
	// A streamed file: several row groups of 1 MiB pages.
	w, err := Create[schemas.Instance](filepath.Join(dir, "stream.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for i, in := range sampleInstancesInternal() {
		if err := w.Write(in); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			w.Flush()
		}
	}
	write("stream.parquet", w.Close())
	return out
}

func sampleInstancesInternal() []schemas.Instance {
	return []schemas.Instance{
		{SchemaVersion: schemas.Version, ID: "acme/widgets#12", Repo: "acme/widgets", PRNumber: 12,
			ProblemStatement: "Fix it", LinkedIssues: []int{3, 4},
			CodeContext:      map[string]string{"a.py": "x = 1\n", "b/c.go": "package c\n"},
			OracleNewContent: map[string]string{"a.py": "x = 2\n"}, RelevantFiles: []string{"b/c.go"}},
		{SchemaVersion: schemas.Version, ID: "acme/widgets#13"},
	}
}

// readers read an opened file as each row type swerl reads, by the name
// of the file validFiles gives that type.
var readers = map[string]func(name string, pf *parquet.File) error{
	"samples": func(name string, pf *parquet.File) error {
		return scanFile(name, pf, func([]schemas.Sample) error { return nil })
	},
	"instances": func(name string, pf *parquet.File) error {
		return scanFile(name, pf, func([]schemas.Instance) error { return nil })
	},
	"index": func(name string, pf *parquet.File) error {
		return scanFile(name, pf, func([]schemas.WeightVersion) error { return nil })
	},
	"deadletter": func(name string, pf *parquet.File) error {
		return scanFile(name, pf, func([]schemas.DeadLetter) error { return nil })
	},
}

// rowTypeOfFile is the row type a file of validFiles holds.
func rowTypeOfFile(name string) string {
	switch name {
	case "empty.parquet":
		return "samples"
	case "stream.parquet":
		return "instances"
	}
	return strings.TrimSuffix(name, ".parquet")
}

// readAll reads b as its own row type (by name, see rowTypeOfFile) and as
// maps, the way the readers do, and returns the errors joined; a panic
// fails the test (or the fuzzer). It also reads b as every other row
// type: those reads fail on the columns, and only an error that does not
// wrap ErrCorrupt naming the file is returned from them.
func readAll(name string, b []byte) error {
	var errs []error
	all := []func(*parquet.File) error{}
	if r, ok := readers[rowTypeOfFile(name)]; ok {
		all = append(all, func(pf *parquet.File) error { return r(name, pf) })
	}
	for _, k := range slices.Sorted(maps.Keys(readers)) {
		all = append(all, func(pf *parquet.File) error {
			if err := readers[k](name, pf); err != nil && (!errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), name)) {
				return fmt.Errorf("read as %s: %v", k, err) // not wrapped: the callers' checks fail on it
			}
			return nil
		})
	}
	all = append(all, func(pf *parquet.File) error { return scanAnyFile(name, pf, func(map[string]any) error { return nil }) })
	for _, read := range all {
		pf, err := openReaderAt(name, bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return err
		}
		errs = append(errs, read(pf))
	}
	return errors.Join(errs...)
}

// Random footer mutations, the attack that found the panics: every one
// reads to an error naming the file or to rows, never to a panic. The
// count of mutations on which parquet-go alone panics is logged, to show
// that the test reaches what it guards against.
func TestFooterMutationsNeverPanic(t *testing.T) {
	captureWarnings(t) // a renamed optional column warns
	files := validFiles(t)
	rng := rand.New(rand.NewPCG(24, 1))
	n := 400
	if testing.Short() {
		n = 100
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		b := files[name]
		var raw, errs, contained int
		for range n {
			m := parquettest.MutateFooter(rng, b)
			if parquettest.ParquetGoPanics(m) {
				raw++
			}
			if err := readAll(name, m); err != nil {
				errs++
				if strings.Contains(err.Error(), "parquet-go panicked") {
					contained++
				}
				if !strings.Contains(err.Error(), name) {
					t.Fatalf("error does not name %s: %v", name, err)
				}
			}
		}
		t.Logf("%s: %d footer mutations, parquet-go alone panicked on %d; safe reader: %d errors (%d of them a panic recovered), no panic", name, n, raw, errs, contained)
	}
}

// Every valid file reads back through the checks.
func TestValidFilesPassTheChecks(t *testing.T) {
	for name, b := range validFiles(t) {
		pf, err := openReaderAt(name, bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var rows int
		if err := scanAnyFile(name, pf, func(map[string]any) error { rows++; return nil }); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if want := pf.NumRows(); int64(rows) != want {
			t.Fatalf("%s: %d rows, want %d", name, rows, want)
		}
	}
}

// A footer list that declares 2^31-1 elements made parquet-go allocate
// them (hundreds of GiB: fatal out of memory) before reading one; it is
// refused from the bytes.
func TestHugeFooterListIsRefusedBeforeAllocating(t *testing.T) {
	// FileMetaData { 1: version i32 = 1, 2: schema list<struct> of 2^31-1 } in a file.
	footer := []byte{0x15, 0x02, 0x19, 0xfc, 0xff, 0xff, 0xff, 0xff, 0x07, 0x00, 0x00}
	b := append([]byte("PAR1"), footer...)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(footer)))
	b = append(b, "PAR1"...)
	_, err := openReaderAt("huge.parquet", bytes.NewReader(b), int64(len(b)))
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "huge.parquet") || !strings.Contains(err.Error(), "list of 2147483647") {
		t.Fatalf("got %v", err)
	}
	// A footer length beyond the file is refused before it is allocated.
	b2 := bytes.Clone(b)
	binary.LittleEndian.PutUint32(b2[len(b2)-8:], 0xffffffff)
	if _, err := openReaderAt("long.parquet", bytes.NewReader(b2), int64(len(b2))); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "footer of 4294967295 bytes") {
		t.Fatalf("got %v", err)
	}
}

// Damaged page headers: a page that claims more bytes than its chunk, or
// a decompressed size over the bound, is refused before parquet-go reads
// (and allocates) it.
func TestDamagedPageHeaderIsRefused(t *testing.T) {
	b := validFiles(t)["samples.parquet"]
	pf, err := parquet.OpenFile(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	md := pf.Metadata().RowGroups[0].Columns[0].MetaData
	base := md.DataPageOffset
	if md.DictionaryPageOffset != 0 {
		base = md.DictionaryPageOffset
	}
	// PageHeader fields 1 (type, i32) then 2 (uncompressed size, i32):
	// rewrite field 2 to 2^31-1 (a varint of 5 bytes replaces a shorter
	// one, so re-encode the header with the new value).
	var hits int
	for delta := int64(0); delta < 64; delta++ {
		m := bytes.Clone(b)
		i := base + delta
		if m[i] == 0x15 { // field delta 1, type i32: the next field
			m[i+1] = 0xff // any varint continuation makes the size huge or the header invalid
			if _, err := openReaderAt("page.parquet", bytes.NewReader(m), int64(len(m))); err == nil {
				continue
			} else if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "page.parquet") {
				t.Fatalf("got %v", err)
			}
			hits++
		}
	}
	if hits == 0 {
		t.Fatal("no page header field was damaged")
	}
}

// The zstd bound reads frame and block headers: a small frame of RLE
// blocks that would expand to gigabytes is over the bound, real output is
// under it and at least its size.
func TestZstdBound(t *testing.T) {
	enc, _ := kzstd.NewWriter(nil)
	plain := bytes.Repeat([]byte("swerl reads hostile files. "), 20000)
	frame := enc.EncodeAll(plain, nil)
	got, err := zstdBound(bytes.NewReader(frame), 0, int64(len(frame)))
	if err != nil || got < int64(len(plain)) || got > maxPageBytes {
		t.Fatalf("bound %d for %d bytes: %v", got, len(plain), err)
	}
	// A bomb: frame header without content size, then RLE blocks of 128 KiB.
	bomb := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x50} // magic, descriptor, 1 MiB window
	for i := range 4096 {
		last := uint32(0)
		if i == 4095 {
			last = 1
		}
		h := last | 1<<1 | (128<<10)<<3
		bomb = append(bomb, byte(h), byte(h>>8), byte(h>>16), 'x')
	}
	got, err = zstdBound(bytes.NewReader(bomb), 0, int64(len(bomb)))
	if err != nil || got <= maxPageBytes {
		t.Fatalf("bomb of %d bytes: bound %d, %v", len(bomb), got, err)
	}
	if _, err := zstdBound(bytes.NewReader(frame[:len(frame)/2]), 0, int64(len(frame)/2)); err == nil {
		t.Fatal("truncated frame accepted")
	}
}

// A file whose columns do not fit the row type is an error naming the
// file and the column, not a silent conversion or a panic.
func TestRowTypeMismatch(t *testing.T) {
	b := validFiles(t)["instances.parquet"]
	path := filepath.Join(t.TempDir(), "instances.parquet")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	type wrongType struct {
		ID int64 `parquet:"id"`
	}
	_, err := ReadFile[wrongType](path)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "instances.parquet") || !strings.Contains(err.Error(), "column id") {
		t.Fatalf("got %v", err)
	}
	type unrelated struct {
		Foo string `parquet:"foo"`
	}
	if _, err := ReadFile[unrelated](path); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "none of the columns") {
		t.Fatalf("got %v", err)
	}
	// A projection (fewer columns, same types) reads.
	type projection struct {
		ID   string `parquet:"id"`
		Repo string `parquet:"repo"`
	}
	rows, err := ReadFile[projection](path)
	if err != nil || len(rows) != 2 || rows[0].ID != "acme/widgets#12" {
		t.Fatalf("projection: %v %v", rows, err)
	}
}

// FuzzReadBytes reads arbitrary bytes as each row type swerl reads and as
// maps (`swerl cat`): never a panic, an unbounded allocation or a hang,
// and every error wraps ErrCorrupt and names the file. Seeds: valid files
// of each type, random footer byte mutations of them, and schema
// mutations (a column renamed or retyped, the footer still decoding; see
// also FuzzSchema).
func FuzzReadBytes(f *testing.F) {
	files := validFiles(f)
	rng := rand.New(rand.NewPCG(7, 7))
	for _, b := range files {
		f.Add(b)
		for range 3 {
			f.Add(parquettest.MutateFooter(rng, b))
		}
	}
	f.Add([]byte("PAR1PAR1PAR1"))
	for _, b := range files { // the schema as well as the bytes
		for range 3 {
			if m, _, ok := parquettest.MutateSchema(rng, b); ok {
				f.Add(m)
			}
		}
	}
	SetWarnings(slog.New(slog.DiscardHandler))
	defer SetWarnings(nil)
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := readAll("fuzz.parquet", b); err != nil {
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "fuzz.parquet") {
				t.Fatalf("error %v: does not wrap ErrCorrupt naming the file", err)
			}
		}
	})
}

// rewriteFooter returns b with its footer decoded, changed by edit and
// encoded again.
func rewriteFooter(t *testing.T, b []byte, edit func(*format.FileMetaData)) []byte {
	t.Helper()
	n := int(binary.LittleEndian.Uint32(b[len(b)-8:]))
	start := len(b) - 8 - n
	var md format.FileMetaData
	if err := thrift.Unmarshal(new(thrift.CompactProtocol), b[start:len(b)-8], &md); err != nil {
		t.Fatal(err)
	}
	edit(&md)
	footer, err := thrift.Marshal(new(thrift.CompactProtocol), &md)
	if err != nil {
		t.Fatal(err)
	}
	out := append(bytes.Clone(b[:start]), footer...)
	out = binary.LittleEndian.AppendUint32(out, uint32(len(footer)))
	return append(out, "PAR1"...)
}

// Rows cost time even when they cost no bytes: a footer that declares
// more rows than the file could hold, or a column outside any list with
// more values in a page than its row group has rows, is refused.
func TestRowAndValueCountsAreBounded(t *testing.T) {
	b := validFiles(t)["samples.parquet"]
	same := rewriteFooter(t, b, func(*format.FileMetaData) {})
	if err := readAll("same.parquet", same); err != nil {
		t.Fatalf("footer re-encoded unchanged: %v", err)
	}
	many := rewriteFooter(t, b, func(md *format.FileMetaData) { md.RowGroups[0].NumRows = 1 << 40 })
	if err := readAll("many.parquet", many); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "1099511627776 rows") {
		t.Fatalf("2^40 rows: %v", err)
	}
	// Two rows, but the file says one: the pages of columns outside lists
	// hold two values each, more than one row allows.
	fewer := rewriteFooter(t, b, func(md *format.FileMetaData) { md.RowGroups[0].NumRows = 1 })
	if err := readAll("fewer.parquet", fewer); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "2 values (at most 1)") {
		t.Fatalf("1 row declared for 2: %v", err)
	}
}
