package checkpoint

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"swerl/gpu/arch"
	"swerl/gpu/hf"
	"swerl/gpu/tokenizer"
	"swerl/schemas"
	"swerl/sinks/parquetio/parquettest"
)

func testStore(t testing.TB) (*Store, *bytes.Buffer) {
	t.Helper()
	var logs bytes.Buffer
	s, err := Open(Config{
		Dir: t.TempDir(),
		Now: func() time.Time { return time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC) },
		Log: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return s, &logs
}

// writeModel writes a small but real model directory whose weights depend
// on seed.
func writeModel(seed float32) func(dir string) error {
	return func(dir string) error {
		a, err := hf.ParseArch([]byte(`{"model_type":"qwen2","hidden_size":8,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":` + fmt.Sprint(tokenizer.BuiltinVocabSize) + `,"tie_word_embeddings":true}`))
		if err != nil {
			return err
		}
		var ts []hf.Tensor
		for _, s := range a.Tensors() {
			d := make([]float32, arch.Numel(s.Shape))
			for i := range d {
				d[i] = seed + float32(i)
			}
			ts = append(ts, hf.Tensor{Name: s.Name, Shape: s.Shape, Data: d})
		}
		if _, err := hf.Save(dir, a, ts, hf.SaveOptions{DType: hf.BF16}); err != nil {
			return err
		}
		return tokenizer.Builtin().WriteDir(dir, tokenizer.BuiltinConfig)
	}
}

func publish(t *testing.T, s *Store, v int64) schemas.WeightVersion {
	t.Helper()
	row, err := s.Publish(schemas.WeightVersion{Version: v, Step: v * 10, Loss: 1 / float64(v+1),
		Offsets: []schemas.TopicOffset{{Topic: "swerl.samples", Partition: 0, Offset: v * 100}}}, writeModel(float32(v)))
	if err != nil {
		t.Fatal(err)
	}
	return row
}

func TestPublishIndexesVersions(t *testing.T) {
	s, _ := testStore(t)
	for v := int64(0); v < 3; v++ {
		publish(t, s, v)
	}
	rows, err := s.Versions()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 {
		t.Fatalf("%d index rows, want 3", len(rows))
	}
	for i, r := range rows {
		wantParent := int64(i) - 1
		if r.Version != int64(i) || r.Parent != wantParent || r.Step != int64(i)*10 || r.SchemaVersion != schemas.Version ||
			r.CreatedAt != "2025-03-01T12:00:00Z" || r.URI != "file://"+filepath.ToSlash(s.Path(int64(i))) ||
			len(r.Offsets) != 1 || r.Offsets[0].Offset != int64(i)*100 {
			t.Errorf("row %d = %+v", i, r)
		}
		// The hashes must agree with sha256sum run on the published files.
		if len(r.Files) != 4 {
			t.Errorf("row %d files %v, want config, weights and two tokenizer files", i, r.Files)
		}
		for _, f := range r.Files {
			out, err := exec.Command("sha256sum", filepath.Join(s.Path(r.Version), f.Path)).Output()
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Fields(string(out))[0]; got != f.SHA256 {
				t.Errorf("v%d %s: index sha256 %s, sha256sum %s", r.Version, f.Path, f.SHA256, got)
			}
		}
	}
	if _, err := hf.Load(s.Path(2)); err != nil {
		t.Errorf("published checkpoint does not load: %v", err)
	}
	if _, err := s.Publish(schemas.WeightVersion{Version: 2}, writeModel(0)); err == nil {
		t.Error("republishing version 2 succeeded")
	}
	got, err := s.LatestGood()
	if err != nil || got.Version != 2 {
		t.Errorf("LatestGood = v%d, %v; want v2", got.Version, err)
	}
	if r, err := s.Get(1); err != nil || r.Version != 1 {
		t.Errorf("Get(1) = %+v, %v", r, err)
	}
}

func TestLatestGoodSkipsCorrupt(t *testing.T) {
	tests := []struct {
		name    string
		damage  func(dir string) error
		wantMsg string
	}{
		{"flipped byte", func(dir string) error {
			p := filepath.Join(dir, hf.WeightsFile)
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			b[len(b)-1] ^= 0xff
			return os.WriteFile(p, b, 0o644)
		}, "does not match the index"},
		{"truncated", func(dir string) error { return os.Truncate(filepath.Join(dir, hf.WeightsFile), 100) }, "half-written"},
		{"missing file", func(dir string) error { return os.Remove(filepath.Join(dir, "tokenizer.json")) }, "tokenizer.json is missing"},
		{"missing directory", os.RemoveAll, "no such file"},
		{"extra file", func(dir string) error { return os.WriteFile(filepath.Join(dir, "junk"), nil, 0o644) }, "unexpected file junk"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, logs := testStore(t)
			for v := int64(0); v < 3; v++ {
				publish(t, s, v)
			}
			if err := tt.damage(s.Path(2)); err != nil {
				t.Fatal(err)
			}
			got, err := s.LatestGood()
			if err != nil || got.Version != 1 {
				t.Fatalf("LatestGood = v%d, %v; want v1", got.Version, err)
			}
			if !strings.Contains(logs.String(), "skipping a corrupt checkpoint") || !strings.Contains(logs.String(), tt.wantMsg) || !strings.Contains(logs.String(), "v000002") {
				t.Errorf("log does not explain the skip with %q:\n%s", tt.wantMsg, logs)
			}
		})
	}
}

func TestLatestGoodEmpty(t *testing.T) {
	s, _ := testStore(t)
	if _, err := s.LatestGood(); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("LatestGood on an empty store: %v", err)
	}
	publish(t, s, 5)
	os.RemoveAll(s.Path(5))
	if _, err := s.LatestGood(); !errors.Is(err, ErrNoCheckpoint) {
		t.Errorf("LatestGood with only a corrupt version: %v", err)
	}
}

// TestCrashPoints recreates on disk the state a crash leaves at each step
// of Publish and checks that the store stays consistent.
func TestCrashPoints(t *testing.T) {
	s, logs := testStore(t)
	publish(t, s, 1)
	cp := filepath.Join(s.Dir(), CheckpointsDir)

	// 1. Crash while writing the temporary directory.
	tmp := filepath.Join(cp, ".tmp-v000002-123")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(tmp, "config.json"), []byte("{"), 0o644)
	// 2. Crash after the rename, before the index: an unindexed directory.
	if err := writeModel(99)(filepath.Join(cp, "v000002")); err != nil {
		t.Fatal(err)
	}
	// 3. Crash while writing the new index: a temporary index file.
	os.WriteFile(filepath.Join(s.Dir(), ".index.parquet.tmp-456"), []byte("PAR1 partial"), 0o644)

	s2, err := Open(Config{Dir: s.Dir(), Log: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("temporary directory survived Open: %v", err)
	}
	if got, err := s2.LatestGood(); err != nil || got.Version != 1 {
		t.Fatalf("LatestGood after crashes = v%d, %v; want v1 (the unindexed v2 was never published)", got.Version, err)
	}
	row, err := s2.Publish(schemas.WeightVersion{Version: 2}, writeModel(2))
	if err != nil {
		t.Fatalf("publishing over the unindexed directory: %v", err)
	}
	if err := s2.Verify(row); err != nil {
		t.Fatal(err)
	}
	if row.Parent != 1 {
		t.Errorf("parent = %d, want 1", row.Parent)
	}
	// A failing writer leaves no directory and no row.
	if _, err := s2.Publish(schemas.WeightVersion{Version: 3}, func(string) error { return errors.New("disk full") }); err == nil || !strings.Contains(err.Error(), "disk full") {
		t.Errorf("Publish with a failing writer: %v", err)
	}
	if _, err := os.Stat(s2.Path(3)); !os.IsNotExist(err) {
		t.Error("failed publish left a directory")
	}
	ents, _ := os.ReadDir(cp)
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tmp-") {
			t.Errorf("failed publish left %s", e.Name())
		}
	}
	rows, _ := s2.Versions()
	if len(rows) != 2 {
		t.Errorf("%d rows after the failed publish, want 2", len(rows))
	}
}

func TestCorruptIndexIsAnError(t *testing.T) {
	s, _ := testStore(t)
	publish(t, s, 0)
	os.WriteFile(filepath.Join(s.Dir(), IndexFile), []byte("not parquet"), 0o644)
	if _, err := s.LatestGood(); err == nil || !strings.Contains(err.Error(), IndexFile) {
		t.Errorf("LatestGood with a corrupt index: %v", err)
	}
}

// A reader opening the store read-only must not remove the temporary
// directory of a publish in progress, nor publish itself.
func TestReadOnlyLeavesPublishInProgress(t *testing.T) {
	s, logs := testStore(t)
	publish(t, s, 1)
	tmp := filepath.Join(s.Dir(), CheckpointsDir, ".tmp-v000002-77")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(Config{Dir: s.Dir(), Log: slog.New(slog.NewTextHandler(logs, nil)), ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Fatalf("read-only Open removed a publish in progress: %v", err)
	}
	if got, err := ro.LatestGood(); err != nil || got.Version != 1 {
		t.Fatalf("LatestGood = v%d, %v", got.Version, err)
	}
	if _, err := ro.Publish(schemas.WeightVersion{Version: 5}, writeModel(1)); err == nil {
		t.Fatal("a read-only store published")
	}
	if _, err := Open(Config{Dir: filepath.Join(t.TempDir(), "absent"), ReadOnly: true}); err != nil {
		t.Fatalf("read-only Open of an absent store: %v", err)
	}
}

// TestKeepPrunesOldVersions: after six publishes the first version, the
// pinned ones and the newest Keep keep their files (Keep 1 still keeps
// two), the others are gone, and the index still has every row; LatestGood
// is the newest and a pruned version no longer verifies.
func TestKeepPrunesOldVersions(t *testing.T) {
	for _, tc := range []struct {
		keep   int
		pin    []int64
		onDisk []int64
	}{
		{keep: 3, onDisk: []int64{0, 3, 4, 5}},
		{keep: 1, onDisk: []int64{0, 4, 5}},
		{keep: 2, pin: []int64{2}, onDisk: []int64{0, 2, 4, 5}}, // a KL reference
	} {
		s, err := Open(Config{Dir: t.TempDir(), Keep: tc.keep, Pin: tc.pin, Log: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		for v := int64(0); v < 6; v++ {
			publish(t, s, v)
		}
		for v := int64(0); v < 6; v++ {
			_, err := os.Stat(s.Path(v))
			if want := slices.Contains(tc.onDisk, v); (err == nil) != want {
				t.Errorf("keep %d pin %v: v%d on disk: %v, want %v", tc.keep, tc.pin, v, err == nil, want)
			}
		}
		rows, err := s.Versions()
		if err != nil || len(rows) != 6 {
			t.Fatalf("keep %d: %d index rows (%v), want 6", tc.keep, len(rows), err)
		}
		if err := s.Verify(rows[1]); err == nil {
			t.Errorf("keep %d: pruned v1 verifies", tc.keep)
		}
		if got, err := s.LatestGood(); err != nil || got.Version != 5 {
			t.Errorf("keep %d: LatestGood = v%d, %v", tc.keep, got.Version, err)
		}
	}
}

// A published checkpoint is readable by other users whatever the umask and
// whatever modes its writer chose: directories 0755, files 0644, the index
// too (an inference engine may run as another user).
func TestPublishedModesAreWorldReadable(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	s, _ := testStore(t)
	write := func(dir string) error {
		if err := writeModel(1)(dir); err != nil {
			return err
		}
		sub := filepath.Join(dir, "extra")
		if err := os.Mkdir(sub, 0o700); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(sub, "notes.txt"), []byte("private?"), 0o600)
	}
	if _, err := s.Publish(schemas.WeightVersion{Version: 0}, write); err != nil {
		t.Fatal(err)
	}
	var checked int
	err := filepath.WalkDir(s.Path(0), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		want := fs.FileMode(0o644)
		if d.IsDir() {
			want = 0o755
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %o, want %o", p, got, want)
		}
		checked++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 5 {
		t.Fatalf("walked only %d entries", checked)
	}
	fi, err := os.Stat(filepath.Join(s.Dir(), IndexFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o644 {
		t.Errorf("%s: mode %o, want 644", IndexFile, got)
	}
}

// FuzzIndex reads arbitrary bytes as a store's index.parquet through every
// method that reads it: never a panic (a damaged index killed a running
// `swerl serve`), and every error names the index. Seeds: a real index of
// two published versions, footer byte mutations and schema mutations
// (a column renamed or retyped) of it.
func FuzzIndex(f *testing.F) {
	s, _ := testStore(f)
	for v := range int64(2) {
		if _, err := s.Publish(schemas.WeightVersion{Version: v}, writeModel(float32(v))); err != nil {
			f.Fatal(err)
		}
	}
	index := filepath.Join(s.Dir(), IndexFile)
	good, err := os.ReadFile(index)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	rng := rand.New(rand.NewPCG(24, 24))
	for range 8 {
		f.Add(parquettest.MutateFooter(rng, good))
		if m, _, ok := parquettest.MutateSchema(rng, good); ok {
			f.Add(m)
		}
	}
	f.Add(parquettest.PanickingMutation(f, good, 3))
	f.Add([]byte("PAR1"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := os.WriteFile(index, b, 0o644); err != nil {
			t.Fatal(err)
		}
		rows, err := s.Versions()
		if err != nil {
			if !strings.Contains(err.Error(), IndexFile) {
				t.Fatalf("error does not name the index: %v", err)
			}
		} else if !slices.IsSortedFunc(rows, func(a, b schemas.WeightVersion) int { return cmp.Compare(a.Version, b.Version) }) {
			t.Fatal("rows not in version order")
		}
		if _, err := s.LatestGood(); err != nil && !errors.Is(err, ErrNoCheckpoint) && !strings.Contains(err.Error(), IndexFile) {
			t.Fatalf("LatestGood: error does not name the index: %v", err)
		}
		s.Get(1)
	})
}
