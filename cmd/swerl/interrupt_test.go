package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"swerl/internal/testenv"
	"swerl/pipelines/mine"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/parquetio"
)

// swerl learn --engine against an engine that accepts and never answers
// (issue 37): the learner trains on while the pushes hang (they run in the
// background), SIGTERM ends the process within seconds with a clean exit
// although a push is in flight with a 60s timeout, and a resumed learner
// goes on exactly: every sample trained once, the index contiguous.
// Before, the learner waited on the engine before its first step (the
// push of version 0, bounded by a 10-minute timeout) and SIGTERM did not
// reach that push.
func TestLearnStopsOnSIGTERMWithAHangingEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("swerl learn in a child process")
	}
	dir := t.TempDir()
	const G, batch, steps = 2, 2, 4
	want := writeSamples(t, filepath.Join(dir, "samples"), rand.New(rand.NewPCG(37, 3)), batch*steps, G)
	engine, accepted := testenv.HangingServer(t)
	out := filepath.Join(dir, "out")
	args := []string{"learn", "--model", tinyModel(t, dir), "--samples", filepath.Join(dir, "samples"), "--out", out,
		"--lora-rank", "4", "--batch-groups", fmt.Sprint(batch), "--max-staleness", "-1", "--max-seq", "64", "--lr", "1e-3",
		"--metrics-addr", "", "--engine", engine, "--engine-retries", "1"}
	c := startCLI(t, append(args, "--steps", "2")...)
	// Two steps are published while the engine holds the push of v0
	// (its timeout is the default 60s, the wait here at most 50s).
	c.waitAlive(t, 50*time.Second, "two versions published while the engine holds the push (else the learner waits for the engine)",
		func() bool { return indexRows(out) >= 3 && accepted() >= 1 })
	c.sigterm(t, "learn", "a push in flight")
	log := c.out.String()
	if testing.Verbose() {
		t.Logf("first run:\n%s", log)
	}
	if c.err != nil { // a death by the signal, or the grace period's exit 1
		t.Fatalf("learn after SIGTERM: %v, want a clean exit:\n%s", c.err, log)
	}
	for _, s := range []string{"push late", "interrupted"} {
		if !strings.Contains(log, s) {
			t.Errorf("the log lacks %q:\n%s", s, log)
		}
	}
	if n := indexRows(out); n != 3 {
		t.Fatalf("%d versions after the first run, want 3", n)
	}
	// The resumed learner trains the rest; its pushes to the hanging
	// engine give up after --engine-timeout and the retry, and it exits.
	resumed := append([]string{"learn", "--resume"}, args[3:]...)
	_, rlog := runCLI(t, append(resumed, "--engine-timeout", "300ms"), 0, 2*time.Minute)
	if testing.Verbose() {
		t.Logf("resumed run:\n%s", rlog)
	}
	if !strings.Contains(rlog, "deadline exceeded") || !strings.Contains(rlog, "trained 2 steps") {
		t.Errorf("the resumed learner's log lacks its engine timeouts or its 2 steps:\n%s", rlog)
	}
	checkTrained(t, out, want, 1+steps)
}

// swerl run --policy against an engine that accepts and never answers:
// the round waits for its push (sinks/weightsync), and SIGTERM ends that wait
// and the process within seconds, with a clean exit. The run then resumes
// against a real engine (swerl serve) and finishes: every version once,
// every round's samples once.
func TestRunStopsOnSIGTERMWithAHangingEngine(t *testing.T) {
	if testing.Short() {
		t.Skip("swerl run in a child process")
	}
	root := t.TempDir()
	base := tinyModelAt(t, filepath.Join(root, "base"))
	engine, accepted := testenv.HangingServer(t)
	out := filepath.Join(root, "out")
	const steps, batch, group = 2, 2, 2
	args := []string{"run", "--repo", runRepo(t), "--out", out, "--model", base, "--sft-steps", "0", "--steps", fmt.Sprint(steps),
		"--batch", fmt.Sprint(batch), "--group-size", fmt.Sprint(group), "--max-tokens", "40", "--eval", "0", "--metrics-addr", "", "--seed", "3",
		"--lora-rank", "4"}
	c := startCLI(t, append(args, "--policy", engine)...)
	c.waitAlive(t, 2*time.Minute, "a push reaches the engine", func() bool { return accepted() >= 1 })
	c.sigterm(t, "run", "a push in flight")
	if c.err != nil || !strings.Contains(c.out.String(), "interrupted") {
		t.Fatalf("run after SIGTERM: %v, want a clean exit that says it was interrupted:\n%s", c.err, c.out.String())
	}
	addr := serveProcess(t, "--model", base, "--max-seq", "1024")
	_, log := runCLI(t, append(args, "--policy", "http://"+addr+"/v1", "--resume"), 0, 5*time.Minute)
	if testing.Verbose() {
		t.Logf("resumed run:\n%s", log)
	}
	if n := indexRows(out); n != 1+steps {
		t.Fatalf("%d versions, want %d:\n%s", n, 1+steps, log)
	}
	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, s := range samples {
		if ids[s.ID] {
			t.Fatalf("sample %s kept twice", s.ID)
		}
		ids[s.ID] = true
	}
	if len(samples) != steps*batch*group {
		t.Fatalf("%d samples, want %d", len(samples), steps*batch*group)
	}
}

// swerl train with a --policy server that accepts and never answers (its
// requests time out after 120s): SIGTERM ends it within seconds, with a
// clean exit, while rollout requests are in flight.
func TestTrainStopsOnSIGTERMWithAHangingPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("swerl train in a child process")
	}
	dir := t.TempDir()
	set := traintest.New(t, dir, 4, 2, nil)
	policy, accepted := testenv.HangingServer(t)
	c := startCLI(t, "train", "--instances", set.InstancesPath, "--policy", policy, "--group-size", "2", "--out", filepath.Join(dir, "out"), "--metrics-addr", "")
	c.waitAlive(t, 2*time.Minute, "a rollout request reaches the policy", func() bool { return accepted() >= 1 })
	c.sigterm(t, "train", "requests in flight")
	if c.err != nil || !strings.Contains(c.out.String(), "interrupted") {
		t.Fatalf("train after SIGTERM: %v, want a clean exit that says it was interrupted:\n%s", c.err, c.out.String())
	}
}

// swerl serve with a request in flight that never completes (a client
// that sent half its headers): SIGTERM ends the server within seconds,
// with a clean exit, instead of waiting for the request.
func TestServeStopsOnSIGTERMWithARequestInFlight(t *testing.T) {
	if testing.Short() {
		t.Skip("swerl serve in a child process")
	}
	base := tinyModelAt(t, filepath.Join(t.TempDir(), "base"))
	c := startCLI(t, "serve", "--addr", "127.0.0.1:0", "--model", base, "--metrics-addr", "")
	a := c.ready(t, serveReady)
	conn, err := net.Dial("tcp", a)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Expect: 100-continue: the server answers "100 Continue" when the
	// handler starts reading the body, which then never comes whole.
	if _, err := io.WriteString(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(line, "100 Continue") {
		t.Fatalf("want 100 Continue, got %q, %v", line, err)
	}
	if _, err := io.WriteString(conn, `{"model":`); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	select {
	case <-c.done:
		t.Logf("serve exited %s after SIGTERM", time.Since(sent).Round(time.Millisecond))
		if c.err != nil {
			t.Fatalf("serve after SIGTERM: %v, want a clean exit:\n%s", c.err, c.out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve still running 30s after SIGTERM with a request in flight:\n%s", c.out.String())
	}
}

// ignoreInterrupt is a command of the test binary only that ignores its
// context: it says when it was interrupted, then blocks until killed.
func init() {
	register(&command{name: "test-ignore-interrupt", summary: "(tests) block, ignoring interrupts", run: func(ctx context.Context, _ []string, _, stderr io.Writer) error {
		fmt.Fprintln(stderr, "ready")
		<-ctx.Done()
		fmt.Fprintln(stderr, "interrupted, ignoring it")
		select {}
	}})
}

// A command that does not stop on SIGTERM is ended shutdownGrace after the
// signal, with status 1 and a line that says so; a second signal ends it
// at once.
func TestInterruptGraceAndSecondSignal(t *testing.T) {
	if testing.Short() {
		t.Skip("child processes, 10s")
	}
	start := func() *cli {
		c := startCLI(t, "test-ignore-interrupt")
		c.ready(t, readiness{what: "the child's ready line", line: regexp.MustCompile(`(?m)^ready$`), limit: 30 * time.Second})
		return c
	}
	// A second signal once the first was handled: the default action.
	c := start()
	c.cmd.Process.Signal(syscall.SIGTERM)
	sent := time.Now()
	deadline := time.After(30 * time.Second)
	for tick := time.NewTicker(50 * time.Millisecond); ; {
		select {
		case <-c.done:
		case <-tick.C:
			c.cmd.Process.Signal(syscall.SIGTERM) // until the default action ends it
			continue
		case <-deadline:
			t.Fatalf("still running 30s after repeated SIGTERMs:\n%s", c.out.String())
		}
		tick.Stop()
		break
	}
	if ws, ok := c.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGTERM {
		t.Errorf("after two SIGTERMs: %v, want killed by the second", c.err)
	}
	t.Logf("a second SIGTERM ended it %s after the first", time.Since(sent).Round(time.Millisecond))
	// One signal, ignored: the grace period ends it.
	c = start()
	c.cmd.Process.Signal(syscall.SIGTERM)
	sent = time.Now()
	select {
	case <-c.done:
	case <-time.After(shutdownGrace + 10*time.Second):
		t.Fatalf("still running %s after SIGTERM:\n%s", shutdownGrace+10*time.Second, c.out.String())
	}
	took := time.Since(sent)
	if c.cmd.ProcessState.ExitCode() != 1 || !strings.Contains(c.out.String(), "after the interrupt; exiting") || took < shutdownGrace {
		t.Fatalf("exit %d after %s, want 1 after %s:\n%s", c.cmd.ProcessState.ExitCode(), took, shutdownGrace, c.out.String())
	}
}

// waitAlive waits until cond holds while the child runs, failing the test
// when the child exits first or limit passes.
func (c *cli) waitAlive(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, limit, what, func() bool {
		select {
		case <-c.done:
			t.Fatalf("%s exited before the signal, waiting until %s: %v\n%s", c.cmd.Args[1], what, c.err, c.out.String())
		default:
		}
		return cond()
	})
}

// sigterm sends SIGTERM to the child, which must exit within 10 s;
// inFlight says what was in flight, for the failure.
func (c *cli) sigterm(t *testing.T, name, inFlight string) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	sent := time.Now()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still running 30s after SIGTERM with %s:\n%s", name, inFlight, c.out.String())
	}
	t.Logf("%s exited %s after SIGTERM", name, time.Since(sent).Round(time.Millisecond))
}

// bigHistory makes a repository of n commits, each changing one of 20
// files (git fast-import: a second for thousands), so that mining it
// takes long enough to be interrupted while it is under way.
func bigHistory(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v: %s", err, out)
	}
	var b strings.Builder
	for i := 1; i <= n; i++ {
		body := fmt.Sprintf("package pkg\n\n// F returns %d.\nfunc F%d() int {\n\treturn %d\n}\n", i, i%20, i)
		msg := fmt.Sprintf("F%d returns %d\n\nIt must return %d.\n", i%20, i, i)
		fmt.Fprintf(&b, "commit refs/heads/main\ncommitter T <t@example.com> %d +0000\ndata %d\n%s", 1700000000+i, len(msg), msg)
		// fast-import chains the commits of a branch by itself.
		fmt.Fprintf(&b, "M 644 inline pkg/f%d.go\ndata %d\n%s\n", i%20, len(body), body)
	}
	cmd := exec.Command("git", "-C", dir, "fast-import", "--quiet")
	cmd.Stdin = strings.NewReader(b.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git fast-import: %v: %s", err, out)
	}
	for _, args := range [][]string{{"symbolic-ref", "HEAD", "refs/heads/main"}, {"remote", "add", "origin", "https://github.com/acme/big.git"}} {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	return dir
}

// mineChildRepo is the repository the tests of swerl mine in a child
// process mine: 3,000 commits, so that there is time to signal it.
func mineChildRepo(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("swerl mine in a child process")
	}
	testenv.Tool(t, "git", "apt-get install git")
	return bigHistory(t, 3000)
}

// Ctrl-C of swerl mine while it mines: a clean stop (exit 0, as every
// command's interrupt) that says what was interrupted, what is left and
// how to go on, without the runner's internals; the output is not marked
// finished, so swerl run --resume would mine again.
func TestMineInterruptSaysWhatItStopped(t *testing.T) {
	repo := mineChildRepo(t)
	out := filepath.Join(t.TempDir(), "out")
	c := startCLI(t, "mine", "--repo", repo, "--out", out, "--commits", "--progress-every", "20ms", "--metrics-addr", "")
	// Mining is under way once a progress line counts a built instance.
	built := regexp.MustCompile(`mine: repos \d+/\d+, .* built [1-9]`)
	c.ready(t, readiness{what: "a progress line with instances built", line: built, limit: 2 * time.Minute})
	if err := c.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("swerl mine still running 30s after SIGINT:\n%s", c.out.String())
	}
	log := c.out.String()
	if c.err != nil {
		t.Fatalf("swerl mine after SIGINT: %v, want exit 0:\n%s", c.err, log)
	}
	if !strings.Contains(log, "swerl mine: interrupted while mining; "+filepath.Join(out, "instances")+" is not complete") ||
		!strings.Contains(log, "run the same command again") {
		t.Errorf("the interrupt does not say what it stopped and how to go on:\n%s", log)
	}
	for _, internal := range []string{"rpc error", "failed to get metrics", "caused by", "context canceled"} {
		if strings.Contains(log, internal) {
			t.Errorf("the interrupt prints the runner's %q:\n%s", internal, log)
		}
	}
	if ok, _, err := mine.Finished(context.Background(), out); ok || err != nil {
		t.Errorf("an interrupted mining output reads as finished (%v, %v)", ok, err)
	}
}

// smallDisk mounts a tmpfs of size (mount's syntax: "512k") on a new
// folder, unmounted when the test ends; it skips where mounting is not
// allowed, except under CI=true, whose machine allows it.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount tmpfs: %v: %s", err, out)
		}
		t.Skipf("mounting a small tmpfs is not allowed here (%v: %s)", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	return dir
}

// swerl mine with --out on a disk too small: exit 1 with an error that
// names the file and says the disk is full, in one line, not the runner's
// plan; nothing reads as a finished output; once space is freed (the tmpfs
// grown) the same command mines to the end.
func TestMineOnAFullDisk(t *testing.T) {
	repo := mineChildRepo(t)
	disk := smallDisk(t, "256k")
	out := filepath.Join(disk, "out")
	args := []string{"mine", "--repo", repo, "--out", out, "--commits", "--metrics-addr", ""}
	c := startCLI(t, args...)
	<-c.done
	log := c.out.String()
	var last string
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		if strings.HasPrefix(l, "swerl mine: ") {
			last = l
		}
	}
	if c.err == nil || !strings.Contains(last, "no space left on device") || !strings.Contains(last, out) || strings.Contains(last, "DataSource") {
		t.Fatalf("swerl mine on a full disk: %v, last line %q; want exit 1 and one line naming the file and the full disk:\n%s", c.err, last, log)
	}
	t.Logf("on the full disk: %s", last)
	if ok, _, _ := mine.Finished(context.Background(), out); ok {
		t.Fatal("the output of a run that hit a full disk reads as finished")
	}
	if b, err := exec.Command("mount", "-o", "remount,size=64m", disk).CombinedOutput(); err != nil {
		t.Fatalf("growing the tmpfs: %v: %s", err, b)
	}
	_, log = runCLI(t, args, 0, 5*time.Minute)
	if ok, n, err := mine.Finished(context.Background(), out); !ok || n == 0 || err != nil {
		t.Fatalf("after space was freed: finished %v with %d instances (%v):\n%s", ok, n, err, log)
	}
	ins, err := parquetio.ReadDir[schemas.Instance](filepath.Join(out, "instances"))
	if err != nil || len(ins) == 0 {
		t.Fatalf("reading the instances back: %d, %v", len(ins), err)
	}
}
