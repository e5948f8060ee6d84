package checkpoint

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"swerl/gpu/hf"
	"swerl/schemas"
	"swerl/sinks/files"
	"swerl/sinks/files/filestest"
	"swerl/sinks/parquetio"
)

// TestObjectStore publishes the same versions to a local store and to one
// in an S3 bucket (an S3 server on loopback), and checks that the bucket's
// index rows equal the local ones but for the URI, that a store opened
// afresh on the bucket reads them, that Fetch gives a directory the model
// loader reads, that Keep prunes objects, that a corrupted object makes
// Verify and Fetch fail and LatestGood fall back, and that an unindexed
// leftover under a version's prefix is replaced by its publish.
func TestObjectStore(t *testing.T) {
	ctx := context.Background()
	bucket := filestest.S3(t, "ckpt")
	var logs bytes.Buffer
	now := func() time.Time { return time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC) }
	local, err := Open(Config{Dir: t.TempDir(), Now: now, Keep: 2, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := Open(Config{Dir: bucket + "/run/", Now: now, Keep: 2, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	// A publish that was interrupted after uploading part of version 3.
	leftover := bucket + "/run/checkpoints/v000003/stale.bin"
	if err := files.WriteFile(ctx, leftover, []byte("half")); err != nil {
		t.Fatal(err)
	}
	for v := int64(0); v < 4; v++ {
		publish(t, local, v)
		publish(t, remote, v)
	}
	if ok, err := files.Exists(ctx, leftover); ok || err != nil {
		t.Fatalf("the leftover of an interrupted publish is still there (%v)", err)
	}
	lrows, err := local.Versions()
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := Open(Config{Dir: bucket + "/run", ReadOnly: true, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rrows, err := fresh.Versions()
	if err != nil {
		t.Fatal(err)
	}
	if len(rrows) != 4 || len(lrows) != 4 {
		t.Fatalf("%d index rows in the bucket, %d local", len(rrows), len(lrows))
	}
	for i := range rrows {
		if want := bucket + "/run/checkpoints/" + VersionDir(int64(i)); rrows[i].URI != want {
			t.Errorf("v%d URI %q, want %q", i, rrows[i].URI, want)
		}
		r, l := rrows[i], lrows[i]
		r.URI, l.URI = "", ""
		if !reflect.DeepEqual(r, l) {
			t.Errorf("v%d: bucket row %+v, local %+v", i, r, l)
		}
	}
	// Keep 2 deleted v1's objects (v0 is the run's starting point).
	for v, want := range []bool{true, false, true, true} {
		got, err := files.List(ctx, fresh.Path(int64(v))+"/*")
		if err != nil || (len(got) > 0) != want {
			t.Errorf("v%d: %d objects (%v), want some: %v", v, len(got), err, want)
		}
	}
	if err := fresh.Verify(rrows[1]); err == nil {
		t.Error("pruned v1 verifies")
	}
	if got, err := fresh.LatestGood(); err != nil || got.Version != 3 {
		t.Fatalf("LatestGood = v%d, %v", got.Version, err)
	}
	dir, done, err := fresh.Fetch(3, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := hashDir(dir, false); err != nil || !reflect.DeepEqual(got, rrows[3].Files) {
		t.Errorf("fetched files %v (%v), index %v", got, err, rrows[3].Files)
	}
	if _, err := hf.Load(dir); err != nil {
		t.Errorf("fetched checkpoint does not load: %v", err)
	}
	done()

	// Corrupt one file of v3: same size, other bytes.
	bad := rrows[3].Files[0]
	data, err := files.ReadFile(ctx, fresh.Path(3)+"/"+bad.Path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := files.WriteFile(ctx, fresh.Path(3)+"/"+bad.Path, data); err != nil {
		t.Fatal(err)
	}
	if err := fresh.Verify(rrows[3]); err == nil || !strings.Contains(err.Error(), bad.Path) {
		t.Errorf("Verify of the corrupted v3: %v", err)
	}
	if _, _, err := fresh.Fetch(3, t.TempDir()); err == nil {
		t.Error("Fetch of the corrupted v3 succeeded")
	}
	if got, err := remote.LatestGood(); err != nil || got.Version != 2 || !strings.Contains(logs.String(), "skipping a corrupt checkpoint") {
		t.Errorf("LatestGood after corruption = v%d, %v; log %s", got.Version, err, logs.String())
	}
	if _, err := fresh.Publish(schemas.WeightVersion{Version: 9}, writeModel(9)); err == nil {
		t.Error("a read-only store published")
	}
}

// TestFetchRefusesPathsOutsideTheCheckpoint: the index is outside bytes;
// a file path in it that climbs out of the version folder is an error
// naming the path, and nothing is written outside the download folder.
func TestFetchRefusesPathsOutsideTheCheckpoint(t *testing.T) {
	ctx := context.Background()
	bucket := filestest.S3(t, "ckpt")
	s, err := Open(Config{Dir: bucket + "/run", Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	row := publish(t, s, 0)
	row.Files = append(row.Files, schemas.FileHash{Path: "../escaped", SHA256: "00", Bytes: 1})
	if err := files.Via(ctx, bucket+"/run/"+IndexFile, func(local string) error {
		return parquetio.WriteFile(local, []schemas.WeightVersion{row})
	}); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	if _, _, err := s.Fetch(0, parent); err == nil || !strings.Contains(err.Error(), "../escaped") {
		t.Fatalf("Fetch: %v", err)
	}
	if ents, err := os.ReadDir(parent); err != nil || len(ents) != 0 {
		t.Fatalf("left %v in the download folder (%v)", ents, err)
	}
}

// TestCopyFrom mirrors a local store into a bucket version by version, as
// a learner with a local --out would after each publish, refuses to mirror
// a damaged version, and copies the bucket's newest version back into a
// fresh local store that the model loader reads.
func TestCopyFrom(t *testing.T) {
	bucket := filestest.S3(t, "ckpt")
	discard := slog.New(slog.DiscardHandler)
	local, err := Open(Config{Dir: t.TempDir(), Log: discard})
	if err != nil {
		t.Fatal(err)
	}
	remote, err := Open(Config{Dir: bucket + "/run", Log: discard})
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(0); v < 3; v++ {
		want := publish(t, local, v)
		got, err := remote.CopyFrom(local, v)
		if err != nil {
			t.Fatal(err)
		}
		got.URI, got.CreatedAt, want.URI, want.CreatedAt = "", "", "", ""
		// An empty list column reads back as an empty slice.
		if len(got.Engines) == 0 && len(want.Engines) == 0 {
			got.Engines, want.Engines = nil, nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("v%d: mirrored row %+v, local %+v", v, got, want)
		}
	}
	// A damaged local v3 is not mirrored.
	row := publish(t, local, 3)
	if err := os.WriteFile(filepath.Join(local.Path(3), row.Files[0].Path), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := remote.CopyFrom(local, 3); err == nil || !strings.Contains(err.Error(), row.Files[0].Path) {
		t.Fatalf("mirroring a damaged version: %v", err)
	}
	if newest, _, err := remote.Newest(); err != nil || newest.Version != 2 {
		t.Fatalf("bucket's newest v%d, %v; want v2", newest.Version, err)
	}
	back, err := Open(Config{Dir: t.TempDir(), Log: discard})
	if err != nil {
		t.Fatal(err)
	}
	got, err := back.CopyFrom(remote, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := back.Verify(got); err != nil {
		t.Fatal(err)
	}
	if _, err := hf.Load(back.Path(2)); err != nil {
		t.Fatalf("the copy back does not load: %v", err)
	}
}
