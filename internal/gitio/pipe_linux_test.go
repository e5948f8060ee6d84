package gitio

import (
	"io"
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// TestGrowPipe: a git process's output pipe holds pipeBytes after
// growPipe (where the system allows it), and reads still work.
func TestGrowPipe(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/fs/pipe-max-size")
	if err != nil {
		t.Skip(err)
	}
	if max, _ := strconv.Atoi(strings.TrimSpace(string(b))); max < pipeBytes {
		t.Skipf("pipe-max-size %d", max)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	growPipe(r)
	rc, _ := r.SyscallConn()
	var size int
	rc.Control(func(fd uintptr) { size, err = unix.FcntlInt(fd, unix.F_GETPIPE_SZ, 0) })
	if err != nil || size != pipeBytes {
		t.Fatalf("pipe holds %d bytes (%v), want %d", size, err, pipeBytes)
	}
	// A writer now fills more than the default 64 KiB without a reader.
	if n, err := w.Write(make([]byte, 256<<10)); err != nil || n != 256<<10 {
		t.Fatalf("write: %d, %v", n, err)
	}
	got := make([]byte, 256<<10)
	if n, err := io.ReadFull(r, got); err != nil || n != len(got) {
		t.Fatalf("read: %d, %v", n, err)
	}
}
