package gitio

import (
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// pipeBytes is the capacity growPipe asks for: Linux's default for an
// unprivileged process's maximum (/proc/sys/fs/pipe-max-size).
const pipeBytes = 1 << 20

// growPipe enlarges the pipe r reads from (a git process's output) from
// Linux's 64 KiB to pipeBytes, so git writes a blob or a run of answers
// without blocking each 64 KiB and the reader drains it in fewer wake-ups
// (bench/mine/README.md, "Choices in the code"). A failure (an older
// kernel, a lower limit) leaves the pipe as it was.
func growPipe(r io.Reader) {
	f, ok := r.(*os.File)
	if !ok {
		return
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// Control, not Fd: Fd would switch the file to blocking mode.
	rc.Control(func(fd uintptr) {
		unix.FcntlInt(fd, unix.F_SETPIPE_SZ, pipeBytes)
	})
}
