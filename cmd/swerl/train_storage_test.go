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
// the same command with a local --out.
func TestTrainToObjectStorage(t *testing.T) {
	dir := t.TempDir()
	const n, g = 5, 3
	set, err := traintest.Write(dir, n, g, nil)
	if err != nil {
		t.Fatal(err)
	}
	bucket := filestest.S3(t, "swerl")
	ids := map[string][]string{}
	for _, out := range []string{filepath.Join(dir, "out"), bucket + "/run"} {
		var so, se bytes.Buffer
		args := []string{"train", "--instances", set.InstancesPath, "--policy", "file:" + set.CompletionsPath,
			"--group-size", fmt.Sprint(g), "--out", out, "--metrics-addr", ""}
		if code := runMain(context.Background(), args, &so, &se); code != 0 {
			t.Fatalf("--out %s: exit %d\n%s", out, code, se.String())
		}
		if !strings.Contains(se.String(), fmt.Sprintf("%d samples written", n*g)) {
			t.Fatalf("--out %s: summary:\n%s", out, se.String())
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
	local, remote := ids[filepath.Join(dir, "out")], ids[bucket+"/run"]
	if len(local) != n*g || !reflect.DeepEqual(local, remote) {
		t.Fatalf("bucket rows %v\nlocal rows %v", remote, local)
	}
}
