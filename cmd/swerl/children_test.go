package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"testing"
	"time"

	"swerl/internal/syncbuf"
	"swerl/internal/testenv"
)

// The tests start swerl commands two ways: in this process through runMain
// (startServe), or as a child process of this test binary (startCLI, see
// TestMain), when a test signals or kills it. Either way they wait for it
// through awaitReady, the one readiness check: a line of its output, and
// for a server its /health.

// serveLine is the line `swerl serve` writes once it listens; its group
// is the host:port.
var serveLine = regexp.MustCompile(`http://(127\.0\.0\.1:\d+)/v1`)

// readiness says when a started command is ready.
type readiness struct {
	what   string         // for errors: "serve's address line"
	line   *regexp.Regexp // matched against the output; group 1, if any, is returned
	health bool           // and GET http://<group 1>/health answers 200
	limit  time.Duration  // 0: a minute
}

// serveReady is readiness for `swerl serve`.
var serveReady = readiness{what: "swerl serve listening", line: serveLine, health: true}

// awaitReady polls out until r holds and returns the line's first group
// (the whole match when it has none). exited reports an error once the
// command has stopped, so a command that fails at start fails at once,
// with its output, not after the limit.
func awaitReady(r readiness, out *syncbuf.Buffer, exited func() error) (string, error) {
	limit := cmp.Or(r.limit, time.Minute)
	client := &http.Client{Timeout: 5 * time.Second}
	var got string
	var stopped error
	testenv.WaitFor(limit, func() bool {
		if stopped = exited(); stopped != nil {
			return true
		}
		m := r.line.FindStringSubmatch(out.String())
		if m == nil || r.health && !healthy(client, m[len(m)-1]) {
			return false
		}
		got = m[len(m)-1]
		return true
	})
	switch {
	case stopped != nil:
		return "", fmt.Errorf("%s: exited before it was ready: %v\n%s", r.what, stopped, out.String())
	case got == "":
		return "", fmt.Errorf("%s: not ready after %v:\n%.4000s", r.what, limit, out.String())
	}
	return got, nil
}

func healthy(c *http.Client, addr string) bool {
	resp, err := c.Get("http://" + addr + "/health")
	if err != nil {
		return false
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// ready waits for the child c as r says, failing the test when it is not.
func (c *cli) ready(t *testing.T, r readiness) string {
	t.Helper()
	got, err := awaitReady(r, c.out, func() error {
		select {
		case <-c.done:
			return fmt.Errorf("%s exited (%v)", c.cmd.Args[1], c.err)
		default:
			return nil
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// serveChild starts `swerl serve` on model as a child process on a free
// loopback port (or port, when given) and waits until it is ready.
func serveChild(t *testing.T, model, port string, extra ...string) (*cli, string) {
	t.Helper()
	if port == "" {
		port = "0"
	}
	c := startCLI(t, append([]string{"serve", "--model", model, "--addr", "127.0.0.1:" + port, "--metrics-addr", "", "--max-seq", "2048"}, extra...)...)
	return c, c.ready(t, serveReady)
}

// serveProcess starts `swerl serve args...` as a child process on a free
// loopback port and returns its address once ready; the process is killed
// at the end of the test.
func serveProcess(t *testing.T, args ...string) string {
	t.Helper()
	c := startCLI(t, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	return c.ready(t, serveReady)
}

// inProcess is a swerl command run through runMain in this process.
type inProcess struct {
	out    *syncbuf.Buffer // stderr
	cancel context.CancelFunc
	done   chan struct{} // closed when runMain returned; code is then its status
	code   int
}

// startInProcess runs `swerl args...` through runMain in a goroutine; the
// test's end cancels it.
func startInProcess(t *testing.T, args ...string) *inProcess {
	t.Helper()
	p := &inProcess{out: new(syncbuf.Buffer), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	t.Cleanup(cancel)
	go func() {
		p.code = runMain(ctx, args, io.Discard, p.out)
		close(p.done)
	}()
	return p
}

// readyErr waits for p as r says.
func (p *inProcess) readyErr(r readiness) (string, error) {
	return awaitReady(r, p.out, func() error {
		select {
		case <-p.done:
			return fmt.Errorf("exit %d", p.code)
		default:
			return nil
		}
	})
}

// stop cancels p and returns its exit status, or an error when it does not
// return within limit.
func (p *inProcess) stop(limit time.Duration) (int, error) {
	p.cancel()
	select {
	case <-p.done:
		return p.code, nil
	case <-time.After(limit):
		return 0, fmt.Errorf("did not stop within %v of the cancel", limit)
	}
}

// startServe starts `swerl serve` on model in this process on a loopback
// port with the extra flags, and returns the address once ready, the
// command's stderr, and stop, which cancels it and fails the test unless
// it exits 0 within 20 seconds.
func startServe(t *testing.T, model string, flags ...string) (addr string, stderr *syncbuf.Buffer, stop func()) {
	t.Helper()
	p := startInProcess(t, append([]string{"serve", "--model", model, "--addr", "127.0.0.1:0"}, flags...)...)
	addr, err := p.readyErr(serveReady)
	if err != nil {
		t.Fatal(err)
	}
	return addr, p.out, func() {
		t.Helper()
		code, err := p.stop(20 * time.Second)
		if err != nil || code != 0 {
			t.Fatalf("serve: exit %d, %v: %s", code, err, p.out.String())
		}
	}
}
