package vllmtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"swerl/internal/testenv"
)

// TestReapOrphans: a tracked process group whose test process is gone is
// killed, grandchildren included; one whose test process lives is left.
func TestReapOrphans(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	group := func(owner int) (*exec.Cmd, chan struct{}) {
		// sh and its sleep child share the group, as vLLM's API server and
		// its engine processes do.
		c := exec.Command("sh", "-c", "sleep 300 & wait")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		t.Cleanup(func() { syscall.Kill(-c.Process.Pid, syscall.SIGKILL); <-done })
		if err := os.MkdirAll(trackDir(), 0o755); err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(trackDir(), strconv.Itoa(c.Process.Pid))
		if err := os.WriteFile(f, []byte(strconv.Itoa(owner)), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(f) })
		return c, done
	}
	orphan, orphanDone := group(dead.Process.Pid)
	live, liveDone := group(os.Getpid())
	reapOrphans()
	testenv.Eventually(t, time.Minute, "the orphaned group killed", func() bool {
		select {
		case <-orphanDone:
			return syscall.Kill(-orphan.Process.Pid, 0) == syscall.ESRCH
		default:
			return false
		}
	})
	select {
	case <-liveDone:
		t.Fatal("the group of a live test process was killed")
	default:
	}
	if _, err := os.Stat(filepath.Join(trackDir(), strconv.Itoa(live.Process.Pid))); err != nil {
		t.Errorf("the live group's record is gone: %v", err)
	}
	if _, err := os.Stat(filepath.Join(trackDir(), strconv.Itoa(orphan.Process.Pid))); !os.IsNotExist(err) {
		t.Errorf("the orphan's record is left: %v", err)
	}
}
