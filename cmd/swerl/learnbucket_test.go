package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"swerl/gpu/hf"
	"swerl/sinks/checkpoint"
	"swerl/sinks/files"
	"swerl/sinks/files/filestest"
	"swerl/sinks/parquetio"
)

// TestLearnToObjectStorage runs `swerl learn --out s3://…` (an S3 server
// on loopback): every version lands in the bucket's store with its step
// record, a second run without --resume is refused, and a resumed run
// starts from the bucket's newest version (its offsets), so it trains only
// the group added since and publishes v4 there, record included.
func TestLearnToObjectStorage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	bucket := filestest.S3(t, "swerl")
	out := bucket + "/learn"
	model := tinyModel(t, dir)
	var so, se bytes.Buffer
	samples := pairGroups(4)
	file := filepath.Join(dir, "samples.parquet")
	if err := parquetio.WriteFile(file, samples[:6]); err != nil {
		t.Fatal(err)
	}
	args := []string{"learn", "--model", model, "--samples", file, "--out", out, "--batch-groups", "1",
		"--max-staleness", "-1", "--max-seq", "128", "--metrics-addr", "", "--lr", "1e-3"}
	if code := runMain(ctx, args, &so, &se); code != 0 {
		t.Fatalf("learn exit %d: %s", code, se.String())
	}
	st, err := checkpoint.Open(checkpoint.Config{Dir: out, ReadOnly: true, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := st.LatestGood(); err != nil || v.Version != 3 || v.Step != 3 || v.URI != out+"/checkpoints/v000003" {
		t.Fatalf("bucket's latest %+v, %v", v, err)
	}
	for v := range 4 {
		if ok, err := files.Exists(ctx, fmt.Sprintf("%s/trained/v%06d.json", out, v)); !ok && v > 0 || err != nil {
			t.Errorf("record of v%d in the bucket: %v %v", v, ok, err)
		}
	}
	se.Reset()
	if code := runMain(ctx, args, &so, &se); code != 1 || !strings.Contains(se.String(), "--resume") {
		t.Errorf("rerun without --resume: exit %d: %s", code, se.String())
	}
	if err := parquetio.WriteFile(file, samples); err != nil {
		t.Fatal(err)
	}
	se.Reset()
	// With a KL term, so the resumed learner loads the reference v0 too.
	args = append(args[:1], append([]string{"--resume", "--steps", "2", "--kl-coef", "0.01"}, args[3:]...)...)
	if code := runMain(ctx, args, &so, &se); code != 0 {
		t.Fatalf("resume exit %d: %s", code, se.String())
	}
	if !strings.Contains(se.String(), "trained 1 steps (1 groups, 2 samples") {
		t.Errorf("resumed summary, want the new group only: %s", se.String())
	}
	v, err := st.LatestGood()
	if err != nil || v.Version != 4 || v.Step != 4 || v.Parent != 3 {
		t.Fatalf("bucket's latest after resume %+v, %v", v, err)
	}
	if ok, err := files.Exists(ctx, out+"/trained/v000004.json"); !ok || err != nil {
		t.Errorf("record of v4 in the bucket: %v %v", ok, err)
	}
	if !strings.Contains(se.String(), "learner: resuming") || strings.Contains(se.String(), "version 0 is missing") {
		t.Errorf("the resumed run did not find v3 and the reference v0 locally: %s", se.String())
	}
	local, done, err := st.Fetch(4, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer done()
	if _, err := hf.Load(local); err != nil {
		t.Errorf("v4 from the bucket does not load: %v", err)
	}
}
