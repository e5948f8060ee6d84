package train

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"swerl/schemas"
	"swerl/sinks/files"
	"swerl/sinks/files/filestest"
	"swerl/sinks/parquetio"
)

// TestScanInstancesInObjectStorage reads the same Parquet and JSONL
// instance files locally and from an S3 bucket on loopback: the same
// records, named by the path as given.
func TestScanInstancesInObjectStorage(t *testing.T) {
	dir := t.TempDir()
	insts := []schemas.Instance{
		{SchemaVersion: schemas.Version, ID: "acme/w#1", Repo: "acme/w", OraclePatch: "p1", CodeContext: map[string]string{"a.py": "x = 1\n"}},
		{SchemaVersion: schemas.Version, ID: "acme/w#2", Repo: "acme/w", OraclePatch: "p2"},
	}
	pq := filepath.Join(dir, "in.parquet")
	if err := parquetio.WriteFile(pq, insts); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for i := range insts {
		b, err := schemas.Encode(&insts[i])
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b), "")
	}
	jl := filepath.Join(dir, "in.jsonl")
	os.WriteFile(jl, []byte(strings.Join(lines, "\n")), 0o644)
	bucket := filestest.S3(t, "swerl")
	type rec struct {
		src, key string
		n        int
		value    string
	}
	scan := func(path string) []rec {
		var out []rec
		err := scanInstances(context.Background(), path, func(src string, n int, key string, value []byte) error {
			out = append(out, rec{strings.TrimPrefix(src, path), key, n, string(value)})
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return out
	}
	for _, local := range []string{pq, jl} {
		remote := bucket + "/" + filepath.Base(local)
		if err := files.Upload(context.Background(), local, remote); err != nil {
			t.Fatal(err)
		}
		want, got := scan(local), scan(remote)
		if len(want) != len(insts) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %v\nwant %v", remote, got, want)
		}
		for i, r := range got {
			if r.n != i || (strings.HasSuffix(local, ".parquet") && r.key != insts[i].ID) || !strings.HasPrefix(r.src, map[bool]string{true: "#", false: ":"}[strings.HasSuffix(local, ".parquet")]) {
				t.Errorf("%s record %d: %+v", remote, i, r)
			}
		}
	}
	if err := scanInstances(context.Background(), bucket+"/none.parquet", func(string, int, string, []byte) error { return nil }); err == nil || !strings.Contains(err.Error(), "none.parquet") {
		t.Errorf("missing file: %v", err)
	}
}
