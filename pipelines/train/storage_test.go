package train_test

import (
	"context"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"swerl/pipelines/train"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/files"
	"swerl/sinks/files/filestest"
	"swerl/sinks/parquetio"
	"swerl/transforms/scoring"
)

// readRemote reads every part file matching glob (local or in a bucket),
// sorted by key.
func readRemote[T any](t *testing.T, glob string, key func(*T) string) (rows []T, parts []string) {
	t.Helper()
	ctx := context.Background()
	parts, err := files.List(ctx, glob)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		local, done, err := files.Local(ctx, p, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		got, err := parquetio.ReadFile[T](local)
		done()
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, got...)
	}
	sort.Slice(rows, func(i, j int) bool { return key(&rows[i]) < key(&rows[j]) })
	return rows, parts
}

// TestRunToObjectStorage trains the same instances once into a local
// directory and once into an S3 bucket (an S3 server on loopback), checks
// that the bucket holds the same sample and dead-letter rows, and that a
// rerun into the bucket by a fresh process (the written ids forgotten)
// finds every sample there by listing the bucket and writes nothing new.
func TestRunToObjectStorage(t *testing.T) {
	dir := t.TempDir()
	const n, g = 6, 3
	set := traintest.New(t, dir, n, g, map[int]string{2: `{"schema_version":1,"id":"broken`})
	bucket := filestest.S3(t, "swerl")
	cfg := train.Config{Instances: set.InstancesPath, Policy: "file:" + set.CompletionsPath, RowsPerFile: 4, Spec: scoring.Spec{GroupSize: g}}
	local, remote := cfg, cfg
	local.Out, remote.Out = filepath.Join(dir, "out"), bucket+"/run"
	lsum, err := train.Run(context.Background(), local)
	if err != nil {
		t.Fatal(err)
	}
	rsum, err := train.Run(context.Background(), remote)
	if err != nil {
		t.Fatal(err)
	}
	if lsum.Samples == 0 || lsum.DeadLetters != 1 || rsum.Samples != lsum.Samples || rsum.DeadLetters != lsum.DeadLetters || rsum.Files != lsum.Files {
		t.Fatalf("summaries: local %+v, bucket %+v", lsum, rsum)
	}
	sampleKey := func(s *schemas.Sample) string { return s.ID }
	lrows, _ := readRemote(t, filepath.Join(local.Out, "samples", "*.parquet"), sampleKey)
	rrows, rparts := readRemote(t, remote.Out+"/samples/*.parquet", sampleKey)
	// The runs differ only in when and how fast the policy answered.
	for _, rows := range [][]schemas.Sample{lrows, rrows} {
		for i := range rows {
			rows[i].LatencyMS, rows[i].CreatedAt = 0, ""
		}
	}
	if len(lrows) != int(lsum.Samples) || !reflect.DeepEqual(rrows, lrows) {
		t.Fatalf("%d sample rows in the bucket, %d local; equal %v", len(rrows), len(lrows), reflect.DeepEqual(rrows, lrows))
	}
	for _, p := range rparts {
		if !strings.HasPrefix(p, bucket+"/run/samples/samples-") {
			t.Errorf("sample part %s", p)
		}
	}
	deadKey := func(d *schemas.DeadLetter) string { return d.Source }
	ldead, _ := readRemote(t, filepath.Join(local.Out, "deadletter", "*.parquet"), deadKey)
	rdead, _ := readRemote(t, remote.Out+"/deadletter/*.parquet", deadKey)
	for _, d := range [][]schemas.DeadLetter{ldead, rdead} {
		for i := range d {
			d[i].CreatedAt = ""
		}
	}
	if len(ldead) != 1 || !reflect.DeepEqual(rdead, ldead) {
		t.Fatalf("dead letters: bucket %+v, local %+v", rdead, ldead)
	}

	train.ForgetWritten()
	again, err := train.Run(context.Background(), remote)
	if err != nil {
		t.Fatal(err)
	}
	if again.Samples != 0 || again.Duplicates != lsum.Samples {
		t.Fatalf("rerun into the bucket: %+v", again)
	}
	if rows, parts := readRemote(t, remote.Out+"/samples/*.parquet", sampleKey); len(parts) != len(rparts) || len(rows) != len(lrows) {
		t.Fatalf("rerun left %d parts, %d rows (want %d, %d)", len(parts), len(rows), len(rparts), len(lrows))
	}
}

// TestRemoteOutNeedsFileInput: Kafka positions are local files, so a run
// that reads the instances topic refuses an object-store Out up front.
func TestRemoteOutNeedsFileInput(t *testing.T) {
	_, err := train.Run(context.Background(), train.Config{Policy: "file:x", Out: "s3://bucket/run"})
	if err == nil || !strings.Contains(err.Error(), "s3://bucket/run") {
		t.Fatalf("err %v", err)
	}
}
