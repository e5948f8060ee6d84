package main

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/files"
	"swerl/sinks/files/filestest"
	"swerl/sinks/parquetio"
)

// TestTrainToObjectStorage runs `swerl train --out s3://…` against an S3
// server on loopback and checks that the bucket holds the sample rows of
// the same command with a local --out; and with --instances in the bucket
// too, both when the file is fed through the embedded broker (local out)
// and when the pipeline reads it (out in the bucket).
func TestTrainToObjectStorage(t *testing.T) {
	dir := t.TempDir()
	const n, g = 5, 3
	set := traintest.New(t, dir, n, g, nil)
	bucket := filestest.S3(t, "swerl")
	remoteInstances := bucket + "/in/" + filepath.Base(set.InstancesPath)
	if err := files.Upload(context.Background(), set.InstancesPath, remoteInstances); err != nil {
		t.Fatal(err)
	}
	ids := map[string][]string{}
	runs := []struct{ instances, out string }{
		{set.InstancesPath, filepath.Join(dir, "out")},
		{set.InstancesPath, bucket + "/run"},
		{remoteInstances, filepath.Join(dir, "out-fed")},
		{remoteInstances, bucket + "/run-read"},
	}
	for _, run := range runs {
		out := run.out
		se := trainFilePolicy(t, run.instances, set.CompletionsPath, g, out)
		if !strings.Contains(se, fmt.Sprintf("%d samples written", n*g)) {
			t.Fatalf("--out %s: summary:\n%s", out, se)
		}
		parts, err := files.List(context.Background(), files.Join(out, "samples", "*.parquet"))
		if err != nil || len(parts) == 0 {
			t.Fatalf("--out %s: parts %v, %v", out, parts, err)
		}
		for _, p := range parts {
			local, done, err := files.Local(context.Background(), p, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			rows, err := parquetio.ReadFile[schemas.Sample](local)
			done()
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range rows {
				ids[out] = append(ids[out], fmt.Sprintf("%s %v %v", s.ID, s.Reward, s.Advantage))
			}
		}
		sort.Strings(ids[out])
	}
	local := ids[filepath.Join(dir, "out")]
	if len(local) != n*g {
		t.Fatalf("local rows %v, want %d", local, n*g)
	}
	for _, run := range runs[1:] {
		if !reflect.DeepEqual(ids[run.out], local) {
			t.Errorf("--instances %s --out %s: rows %v\nlocal rows %v", run.instances, run.out, ids[run.out], local)
		}
	}
	// A missing instances file in the bucket is a usage error naming it.
	var so, se bytes.Buffer
	if code := runMain(context.Background(), []string{"train", "--instances", bucket + "/in/none.jsonl", "--policy", "file:" + set.CompletionsPath, "--out", filepath.Join(dir, "out-none"), "--metrics-addr", ""}, &so, &se); code == 0 || !strings.Contains(se.String(), "none.jsonl") {
		t.Errorf("missing instances: exit %d, %s", code, se.String())
	}
}
