package mine

import (
	"context"
	"reflect"
	"sort"
	"strings"
	"testing"

	"swerl/schemas"
	"swerl/sinks/files"
	"swerl/sinks/files/filestest"
	"swerl/sinks/parquetio"
)

// TestMineToObjectStorage mines the same repository, with a GH Archive
// file, once to a local directory and once to an S3 bucket (an S3 server
// on loopback; the events read from the bucket too), and checks that the
// bucket holds the same instance files, rows, dead letters and JSONL, and
// that the summaries agree.
func TestMineToObjectStorage(t *testing.T) {
	r, want := history(t)
	ctx := context.Background()
	events := `{"type":"IssuesEvent","created_at":"2024-03-01T00:00:00Z","repo":{"name":"acme/widgets"},"payload":{"action":"opened","issue":{"number":10,"title":"Add subtracts","body":"1+2 is -1."}}}` + "\n{broken\n"
	localEvents := writeFile(t, events)
	bucket := filestest.S3(t, "swerl")
	if err := files.WriteFile(ctx, bucket+"/gharchive/2024-03-01-0.json", []byte(events)); err != nil {
		t.Fatal(err)
	}
	cfg := Config{Repos: []string{r.Dir}, Runner: "prism", MaxLines: 1000, RowsPerFile: 2, JSONL: true}
	local := cfg
	local.Out, local.Events = t.TempDir(), []string{localEvents}
	lsum, err := Run(ctx, local)
	if err != nil {
		t.Fatal(err)
	}
	remote := cfg
	remote.Out, remote.Events = bucket+"/run", []string{bucket + "/gharchive"}
	rsum, err := Run(ctx, remote)
	if err != nil {
		t.Fatal(err)
	}
	if len(rsum.Files) < 3 || len(rsum.Files) != len(lsum.Files) {
		t.Fatalf("%d files in the bucket, %d local", len(rsum.Files), len(lsum.Files))
	}
	for i := range rsum.Files {
		if !strings.HasPrefix(rsum.Files[i], bucket+"/run/instances/part-") || files.Base(rsum.Files[i]) != files.Base(lsum.Files[i]) {
			t.Errorf("file %s, local %s", rsum.Files[i], lsum.Files[i])
		}
	}
	got := readInstances(t, fetchAll(t, rsum.Files))
	wantRows := readInstances(t, lsum.Files)
	if !reflect.DeepEqual(got, wantRows) || len(got) != len(want) {
		t.Fatalf("%d instances from the bucket, %d local (want %d); equal %v", len(got), len(wantRows), len(want), reflect.DeepEqual(got, wantRows))
	}
	if got[0].ProblemStatement != "Add subtracts\n\n1+2 is -1." {
		t.Errorf("the bucket's event file was not read: problem statement %q", got[0].ProblemStatement)
	}
	if rsum.DeadLetters != bucket+"/run/deadletter/mine.parquet" {
		t.Fatalf("dead letters at %q", rsum.DeadLetters)
	}
	rdead, err := parquetio.ReadFile[schemas.DeadLetter](fetchAll(t, []string{rsum.DeadLetters})[0])
	if err != nil {
		t.Fatal(err)
	}
	ldead, err := parquetio.ReadFile[schemas.DeadLetter](lsum.DeadLetters)
	// The same rows, but for the event file's name.
	for i := range rdead {
		for _, d := range []*schemas.DeadLetter{&rdead[i], &ldead[i]} {
			for _, p := range []string{bucket + "/gharchive/2024-03-01-0.json", localEvents} {
				d.Source, d.Key, d.Reason = strings.ReplaceAll(d.Source, p, "EV"), strings.ReplaceAll(d.Key, p, "EV"), strings.ReplaceAll(d.Reason, p, "EV")
			}
		}
	}
	for _, d := range [][]schemas.DeadLetter{rdead, ldead} {
		sort.Slice(d, func(i, j int) bool { return d[i].Key < d[j].Key })
	}
	if err != nil || !reflect.DeepEqual(rdead, ldead) || len(ldead) != 2 || ldead[0].Key != "EV:2" {
		t.Errorf("dead letters: bucket %+v, local %+v (%v)", rdead, ldead, err)
	}
	rj, err := files.ReadFile(ctx, rsum.JSONL)
	if err != nil {
		t.Fatal(err)
	}
	lj, err := files.ReadFile(ctx, lsum.JSONL)
	if err != nil || string(rj) != string(lj) {
		t.Errorf("JSONL differs (%d and %d bytes, %v)", len(rj), len(lj), err)
	}
	if rsum.Instances != lsum.Instances || rsum.PRs != lsum.PRs || !reflect.DeepEqual(rsum.Rejected, lsum.Rejected) || rsum.Rejected["bad_record"] != 1 {
		t.Errorf("summaries differ:\n%s\n%s", rsum, lsum)
	}
	if left, err := files.List(ctx, bucket+"/run/instances/.staging/*"); len(left) != 0 || err != nil {
		t.Errorf("staging objects left: %v %v", left, err)
	}
	// A second run replaces the bucket's earlier output.
	remote.RowsPerFile = 500
	again, err := Run(ctx, remote)
	if err != nil {
		t.Fatal(err)
	}
	if len(again.Files) != 1 || !reflect.DeepEqual(readInstances(t, fetchAll(t, again.Files)), wantRows) {
		t.Errorf("rerun: files %v", again.Files)
	}
}

// fetchAll downloads files to local copies, removed at the end of the test.
func fetchAll(t *testing.T, paths []string) []string {
	t.Helper()
	var out []string
	for _, p := range paths {
		local, done, err := files.Local(context.Background(), p, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(done)
		out = append(out, local)
	}
	return out
}
