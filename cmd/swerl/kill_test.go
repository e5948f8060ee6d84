package main

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

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
	if os.Getenv("SWERL_TEST_AS_CLI") == "1" {
		os.Exit(runMain(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
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
	if testing.Short() {
		t.Skip("kill test: seconds of child processes")
	}
	cycles := envInt(t, "SWERL_KILL_CYCLES", 3)
	seed := uint64(envInt(t, "SWERL_KILL_SEED", int(time.Now().UnixNano()%1e6)))
	t.Logf("SWERL_KILL_CYCLES=%d SWERL_KILL_SEED=%d", cycles, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	repo := runRepo(t)
	out := filepath.Join(t.TempDir(), "out")
	const sft, batch, group = 4, 2, 2
	steps := max(6, cycles) // enough steps that most kills land in a run
	args := []string{"run", "--repo", repo, "--out", out, "--sft-steps", strconv.Itoa(sft), "--sft-until", "0", "--steps", strconv.Itoa(steps),
		"--batch", strconv.Itoa(batch), "--group-size", strconv.Itoa(group), "--max-tokens", "200", "--eval", "1", "--metrics-addr", "", "--seed", "3"}
	run := func(resume bool, killAfter time.Duration) (killed bool, log string) {
		t.Helper()
		a := args
		if resume {
			a = append(append([]string(nil), args...), "--resume")
		}
		cmd := exec.Command(os.Args[0], a...)
		cmd.Env = append(os.Environ(), "SWERL_TEST_AS_CLI=1")
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = &buf, &buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		var timer <-chan time.Time
		if killAfter > 0 {
			timer = time.After(killAfter)
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("swerl run failed: %v\n%s", err, buf.String())
			}
			return false, buf.String()
		case <-timer:
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			return true, buf.String()
		case <-time.After(5 * time.Minute):
			cmd.Process.Kill()
			t.Fatalf("swerl run did not finish in 5 minutes:\n%s", buf.String())
		}
		return false, ""
	}
	// The first run is never killed before it has written its model and
	// instances (a run killed earlier starts again without --resume).
	started := false
	for i := 0; i < cycles; i++ {
		killed, log := run(started, time.Duration(200+rng.IntN(2500))*time.Millisecond)
		if !killed {
			t.Logf("cycle %d: the run finished before its kill", i)
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
	if _, log := run(started, 0); testing.Verbose() {
		t.Logf("final run:\n%s", log)
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
