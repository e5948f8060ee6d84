package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteFileReplaces(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "a.json")
	if err := WriteFile(p, []byte("one")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(p, []byte("two")); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(p)
	if err != nil || string(got) != "two" {
		t.Fatalf("content = %q, %v; want two", got, err)
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want only a.json", len(ents))
	}
}

func TestAbortLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "b")
	f, err := Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("partial"))
	if !IsTemp(f.Name()) {
		t.Errorf("IsTemp(%q) = false", f.Name())
	}
	f.Abort()
	if err := f.Commit(); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 0 {
		t.Fatalf("directory holds %d entries after Abort, want 0", len(ents))
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("target exists after Abort: %v", err)
	}
}

// A committed file is 0644 whatever the umask: CreateTemp's 0600 would keep
// other users (an inference engine, a report server) from reading it.
func TestCommittedFileIsWorldReadable(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	p := filepath.Join(t.TempDir(), "x.json")
	if err := WriteFile(p, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != FileMode {
		t.Fatalf("mode %o, want %o", got, FileMode)
	}
}
