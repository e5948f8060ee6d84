package files_test

import (
	"context"
	"io"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"swerl/sinks/files"
	"swerl/sinks/files/filestest"
)

// roundTrip writes, lists, reads, aborts and removes files under root.
func roundTrip(t *testing.T, root string) {
	ctx := context.Background()
	a, b := files.Join(root, "d", "a.txt"), files.Join(root, "d", "b.bin")
	if err := files.WriteFile(ctx, a, []byte("alpha\n")); err != nil {
		t.Fatal(err)
	}
	w, err := files.Create(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("0123456789", 700_000) // 7 MB: more than one upload part
	io.WriteString(w, big)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	// An aborted writer leaves nothing.
	w, err = files.Create(ctx, files.Join(root, "d", "c.txt"))
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "never")
	w.Abort()
	got, err := files.List(ctx, files.Join(root, "d", "*"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{a, b}; !reflect.DeepEqual(got, want) {
		t.Fatalf("list %v, want %v", got, want)
	}
	if data, err := files.ReadFile(ctx, b); err != nil || string(data) != big {
		t.Fatalf("read back %d bytes, %v", len(data), err)
	}
	local, done, err := files.Local(ctx, a, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if data, err := files.ReadFile(ctx, local); err != nil || string(data) != "alpha\n" {
		t.Fatalf("local copy %q, %v", data, err)
	}
	done()
	if ok, err := files.Exists(ctx, a); !ok || err != nil {
		t.Fatalf("exists %v %v", ok, err)
	}
	if err := files.Remove(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := files.Remove(ctx, a); err != nil {
		t.Fatalf("removing a missing file: %v", err)
	}
	if ok, err := files.Exists(ctx, a); ok || err != nil {
		t.Fatalf("removed file exists %v %v", ok, err)
	}
	if _, err := files.ReadFile(ctx, a); err == nil {
		t.Fatal("read a removed file")
	}
	if err := files.RemoveAll(ctx, files.Join(root, "d")); err != nil {
		t.Fatal(err)
	}
	if got, err := files.List(ctx, files.Join(root, "d", "*")); len(got) != 0 || err != nil {
		t.Fatalf("after RemoveAll: %v %v", got, err)
	}
}

func TestLocal(t *testing.T) { roundTrip(t, t.TempDir()) }

func TestS3(t *testing.T) { roundTrip(t, filestest.S3(t, "bucket")+"/root") }

func TestJoinAndBase(t *testing.T) {
	for _, c := range []struct{ base, elem, join, name string }{
		{"s3://b/out", "instances/x.parquet", "s3://b/out/instances/x.parquet", "x.parquet"},
		{"gs://b", "x", "gs://b/x", "x"},
		{"/tmp/out", "x", filepath.Join("/tmp/out", "x"), "x"},
		{"rel", "a/b", filepath.Join("rel", "a/b"), "b"},
	} {
		if got := files.Join(c.base, c.elem); got != c.join || files.Base(got) != c.name {
			t.Errorf("Join(%q, %q) = %q base %q", c.base, c.elem, got, files.Base(got))
		}
	}
	if files.IsRemote("/a/b") || files.IsRemote("a/b://c") || !files.IsRemote("s3://b/k") {
		t.Error("IsRemote")
	}
}
