package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"swerl/internal/syncbuf"
	"swerl/schemas"
	"swerl/sinks/parquetio"
)

// TestMain lets the test binary run as the swerl command, so kill tests
// can SIGKILL a real child process: with SWERL_TEST_AS_CLI=1 it runs
// runMain on its arguments and exits. Started by a Beam worker pool as a
// staged worker binary (--worker=true …), it is a Beam worker, as swerl's
// main is.
func TestMain(m *testing.M) {
	if isBeamWorker(os.Args[1:]) {
		runBeamWorker(os.Args[1:])
		return
	}
	if spec := os.Getenv(workerPoolEnv); spec != "" {
		os.Exit(runWorkerPool(spec))
	}
	if os.Getenv("SWERL_TEST_AS_CLI") == "1" {
		// As main does: SIGINT and SIGTERM stop the command cleanly.
		os.Exit(runInterruptible(os.Args[1:], os.Stdout, os.Stderr, shutdownGrace))
	}
	os.Exit(m.Run())
}

// TestRunSurvivesKill kills `swerl run` with SIGKILL at random points and
// resumes it with --resume until it finishes, then checks that nothing was
// lost or trained twice: the index holds one version for every warm-start
// and RL step, contiguous from v0; samples/ holds exactly the samples of the
// RL steps, each once. SWERL_KILL_CYCLES sets the number of kills (default
// 3; the documented long run is 20), SWERL_KILL_SEED the random points.
func TestRunSurvivesKill(t *testing.T) {
	rng, cycles := killRNG(t, 1)
	repo := runRepo(t)
	out := filepath.Join(t.TempDir(), "out")
	const sft, batch, group = 4, 2, 2
	steps := max(6, 3*cycles) // enough steps that most kills land in a run
	args := []string{"run", "--repo", repo, "--out", out, "--sft-steps", strconv.Itoa(sft), "--sft-until", "0", "--steps", strconv.Itoa(steps),
		"--batch", strconv.Itoa(batch), "--group-size", strconv.Itoa(group), "--max-tokens", "200", "--eval", "1", "--metrics-addr", "", "--seed", "3"}
	run := func(resume bool, killAfter time.Duration) (killed bool, log string) {
		t.Helper()
		a := args
		if resume {
			a = append(append([]string(nil), args...), "--resume")
		}
		return runCLI(t, a, killAfter, 5*time.Minute)
	}
	// The first run is never killed before it has written its model and
	// instances (a run killed earlier starts again without --resume).
	started, finished := false, false
	for i := 0; i < cycles; i++ {
		killed, log := run(started, time.Duration(100+rng.IntN(1400))*time.Millisecond)
		if !killed {
			// Finished: a first run that beat its kill leaves nothing to
			// resume, and running again without --resume is refused.
			t.Logf("cycle %d: the run finished before its kill", i)
			finished = true
			break
		}
		if _, err := os.Stat(filepath.Join(out, "instances")); err == nil {
			if _, err := os.Stat(filepath.Join(out, "model", "config.json")); err == nil {
				started = true
			}
		}
		if testing.Verbose() {
			t.Logf("cycle %d killed:\n%s", i, log)
		}
	}
	if !finished {
		if _, log := run(started, 0); testing.Verbose() {
			t.Logf("final run:\n%s", log)
		}
	}

	versions, err := parquetio.ReadFile[schemas.WeightVersion](filepath.Join(out, "index.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 1+sft+steps {
		t.Fatalf("%d versions in the index, want %d (v0, %d warm-start steps, %d RL steps)", len(versions), 1+sft+steps, sft, steps)
	}
	for i, v := range versions {
		if v.Version != int64(i) {
			t.Fatalf("index row %d is version %d: not contiguous", i, v.Version)
		}
	}
	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != steps*batch*group {
		t.Fatalf("%d samples kept, want %d (%d RL steps × %d instances × %d completions)", len(samples), steps*batch*group, steps, batch, group)
	}
	perRound := map[string]int{}
	seen := map[string]bool{}
	for _, s := range samples {
		if seen[s.ID] {
			t.Fatalf("sample %s kept twice", s.ID)
		}
		seen[s.ID] = true
		perRound[s.GroupID[:len("r000001/")]]++
	}
	for r := 1; r <= steps; r++ {
		if n := perRound[fmt.Sprintf("r%06d/", r)]; n != batch*group {
			t.Fatalf("round %d kept %d samples, want %d (rounds: %v)", r, n, batch*group, perRound)
		}
	}
}

// cli is the test binary running as `swerl ARGS` in a child process.
type cli struct {
	cmd  *exec.Cmd
	out  *syncbuf.Buffer // read while the child writes it
	done chan struct{}   // closed when the child has exited; err is then its status
	err  error
}

// startCLI starts `swerl args...` as a child process (see TestMain) and
// kills it when the test ends.
func startCLI(t *testing.T, args ...string) *cli {
	t.Helper()
	c, err := newCLI(args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.cmd.Process.Kill() }) // an error once it exited
	return c
}

// newCLI starts `swerl args...` as a child process; the caller kills it.
func newCLI(args ...string) (*cli, error) {
	c := &cli{cmd: exec.Command(os.Args[0], args...), out: &syncbuf.Buffer{}, done: make(chan struct{})}
	c.cmd.Env = append(os.Environ(), "SWERL_TEST_AS_CLI=1")
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting swerl %s: %w", args[0], err)
	}
	go func() { c.err = c.cmd.Wait(); close(c.done) }()
	return c, nil
}

// kill sends SIGKILL and waits for the child; exited is true when it had
// already exited (err is then its exit status).
func (c *cli) kill() (exited bool, err error) {
	select {
	case <-c.done:
		return true, c.err
	default:
	}
	c.cmd.Process.Signal(syscall.SIGKILL)
	<-c.done
	if c.cmd.ProcessState.Exited() { // it exited on its own before the signal
		return true, c.err
	}
	return false, nil
}

// runCLI runs `swerl args...` in a child process and, when killAfter > 0,
// SIGKILLs it after that long unless it exited first; killed says which.
// It fails the test when the child fails or runs past limit.
func runCLI(t *testing.T, args []string, killAfter, limit time.Duration) (killed bool, log string) {
	t.Helper()
	c := startCLI(t, args...)
	var timer <-chan time.Time
	if killAfter > 0 {
		timer = time.After(killAfter)
	}
	select {
	case <-c.done:
		if c.err != nil {
			t.Fatalf("swerl %s failed: %v\n%s", args[0], c.err, c.out.String())
		}
		return false, c.out.String()
	case <-timer:
		c.cmd.Process.Signal(syscall.SIGKILL)
		<-c.done
		return true, c.out.String()
	case <-time.After(limit):
		c.cmd.Process.Kill()
		<-c.done
		t.Fatalf("swerl %s did not finish in %s:\n%s", args[0], limit, c.out.String())
	}
	return false, ""
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, s, err)
	}
	return n
}
