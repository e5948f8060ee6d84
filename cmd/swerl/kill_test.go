package main

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"swerl/internal/syncbuf"
	"swerl/internal/testenv"
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

// runPhases are the phases of `swerl run` in the order they run, each begun
// by the first output line holding its marker ("": the process's start).
// The evaluation before RL ends the warm-start phase (its line is printed
// once it is done); publishing a version ends every RL round.
var runPhases = []struct{ name, begins string }{
	{"mining", ""},
	{"model write", "training tasks,"},
	{"warm start and evaluation before RL", "warm start of at most"},
	{"RL rounds and publishes", "eval start:"},
	{"final evaluation", "step LAST/"}, // the last step's line (LAST: --steps)
	{"summary", "eval end:"},
}

// phaseMarker is phase i's marker for a run of steps RL steps.
func phaseMarker(i, steps int) string {
	return strings.Replace(runPhases[i].begins, "LAST", strconv.Itoa(steps), 1)
}

// runResult is what a finished `swerl run` leaves that another run with the
// same seed must match.
type runResult struct {
	lastStep string    // the final step line, without its samples/s (a time)
	rewards  []float64 // each RL step's mean reward (run.json)
	versions int       // rows of index.parquet
	newest   string    // sha256 of the newest version's model.safetensors
}

var samplesPerSecond = regexp.MustCompile(`  [0-9.]+ samples/s`)

// readRunResult reads a finished run's result from its output folder and
// the log of its last process, and checks what holds of any run: an index
// contiguous from v0 and the samples of every RL step kept once.
func readRunResult(t *testing.T, out, log string, steps, batch, group int) runResult {
	t.Helper()
	var r runResult
	for _, l := range strings.Split(log, "\n") {
		if strings.HasPrefix(l, fmt.Sprintf("step %d/%d ", steps, steps)) {
			r.lastStep = samplesPerSecond.ReplaceAllString(l, "")
		}
	}
	if r.lastStep == "" {
		t.Fatalf("no line of step %d/%d in the log:\n%s", steps, steps, log)
	}
	b, err := os.ReadFile(filepath.Join(out, "run.json"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		History []struct {
			Step       int
			MeanReward float64
		}
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	for i, h := range st.History {
		if h.Step != i+1 {
			t.Fatalf("run.json's history: entry %d is step %d", i, h.Step)
		}
		r.rewards = append(r.rewards, h.MeanReward)
	}
	versions, err := parquetio.ReadFile[schemas.WeightVersion](filepath.Join(out, "index.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range versions {
		if v.Version != int64(i) {
			t.Fatalf("index row %d is version %d: not contiguous", i, v.Version)
		}
	}
	r.versions = len(versions)
	w, err := os.ReadFile(filepath.Join(out, "checkpoints", fmt.Sprintf("v%06d", len(versions)-1), "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	r.newest = fmt.Sprintf("%x", sha256.Sum256(w))
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
	return r
}

// TestRunResumesFromAnyKillPoint sweeps kill points over the whole timeline
// of `swerl run`: an uninterrupted run times its phases (runPhases); then
// each kill point, a phase and a random offset into it, is a run in its own
// --out SIGKILLed there and resumed with --resume to the end. Each must end
// as the uninterrupted run did: the same final step line, RL rewards and
// version count, and the same bytes of the newest checkpoint (the run is
// deterministic at a seed on CPU). SWERL_KILL_POINTS sets the number of
// points (default 3, in distinct phases; the documented long run is 24),
// SWERL_KILL_SEED the draw.
func TestRunResumesFromAnyKillPoint(t *testing.T) {
	if testing.Short() {
		t.Skip("kill test: seconds of child processes")
	}
	points := envInt(t, "SWERL_KILL_POINTS", 3)
	seed := uint64(envInt(t, "SWERL_KILL_SEED", int(time.Now().UnixNano()%1e6)))
	t.Logf("SWERL_KILL_POINTS=%d SWERL_KILL_SEED=%d", points, seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	repo := runRepo(t)
	const sft, steps, batch, group = killSFT, killSteps, killBatch, killGroup
	args := func(out string) []string { return killRunArgs(repo, out) }

	// The uninterrupted run, timing where each phase begins.
	out := filepath.Join(t.TempDir(), "ref")
	t0 := time.Now()
	c := startCLI(t, args(out)...)
	begins := make([]time.Duration, len(runPhases)+1)
	for i := 1; i < len(runPhases); i++ {
		m := phaseMarker(i, steps)
		testenv.Eventually(t, 5*time.Minute, "the line "+m, func() bool { return strings.Contains(c.out.String(), m) })
		begins[i] = time.Since(t0)
	}
	<-c.done
	if c.err != nil {
		t.Fatalf("the uninterrupted run failed: %v\n%s", c.err, c.out.String())
	}
	begins[len(runPhases)] = time.Since(t0)
	want := readRunResult(t, out, c.out.String(), steps, batch, group)
	if want.versions != 1+sft+steps {
		t.Fatalf("%d versions, want %d (v0, %d warm-start steps, %d RL steps)", want.versions, 1+sft+steps, sft, steps)
	}
	for i, p := range runPhases {
		t.Logf("phase %-38s from %6.2fs, %6.2fs long", p.name, begins[i].Seconds(), (begins[i+1] - begins[i]).Seconds())
	}

	// The kill points: in CI a few, each in another phase; more in any.
	phases := rng.Perm(len(runPhases))
	for k := 0; k < points; k++ {
		phase := phases[k%len(phases)]
		if k >= len(phases) {
			phase = rng.IntN(len(runPhases))
		}
		// A random point in the phase as the uninterrupted run timed it
		// (a loaded machine stretches it: a kill may land later).
		delay := time.Duration(rng.Float64() * float64(begins[phase+1]-begins[phase]))
		t.Run(fmt.Sprintf("%d-%s", k, strings.ReplaceAll(runPhases[phase].name, " ", "-")), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			c := startCLI(t, args(out)...)
			if m := phaseMarker(phase, steps); m != "" {
				testenv.Eventually(t, 5*time.Minute, "the line "+m, func() bool {
					select {
					case <-c.done:
						return true
					default:
					}
					return strings.Contains(c.out.String(), m)
				})
			}
			time.Sleep(delay) // the random kill point, not a synchronization
			if exited, err := c.kill(); exited {
				if err != nil {
					t.Fatalf("the run failed before its kill: %v\n%s", err, c.out.String())
				}
				t.Logf("the run finished before its kill %v into %s", delay, runPhases[phase].name)
			} else {
				t.Logf("killed %v into %s", delay, runPhases[phase].name)
			}
			killedLog := c.out.String()
			_, log := runCLI(t, append(args(out), "--resume"), 0, 5*time.Minute)
			if testing.Verbose() {
				t.Logf("killed run:\n%s\nresumed run:\n%s", killedLog, log)
			}
			if !strings.Contains(killedLog, "eval start:") && strings.Contains(log, "mined ") && !strings.Contains(log, "starting fresh") {
				t.Errorf("a run killed before its first version mined again without saying it starts fresh:\n%s", log)
			}
			got := readRunResult(t, out, log, steps, batch, group)
			if got.lastStep != want.lastStep {
				t.Errorf("last step line\n  %s\nwant (uninterrupted)\n  %s", got.lastStep, want.lastStep)
			}
			if !slices.Equal(got.rewards, want.rewards) {
				t.Errorf("RL rewards %v, want %v", got.rewards, want.rewards)
			}
			if got.versions != want.versions || got.newest != want.newest {
				t.Errorf("%d versions, newest model sha256 %s; want %d, %s", got.versions, got.newest, want.versions, want.newest)
			}
		})
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

// swerl run with --out on a disk that fills part way (about half of what
// the run writes): it fails with an error naming the file and the full
// disk; once space is freed (the tmpfs grown) --resume goes on to the end
// and ends as a run that never hit it: nothing half-written was read back
// as valid.
func TestRunOnAFullDiskResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("swerl run in child processes")
	}
	repo := runRepo(t)
	const sft, steps, batch, group = killSFT, killSteps, killBatch, killGroup
	args := func(out string) []string { return killRunArgs(repo, out) }
	ref := filepath.Join(t.TempDir(), "ref")
	_, log := runCLI(t, args(ref), 0, 5*time.Minute)
	want := readRunResult(t, ref, log, steps, batch, group)

	disk := smallDisk(t, "6m") // the run writes about 12 MB
	out := filepath.Join(disk, "out")
	c := startCLI(t, args(out)...)
	<-c.done
	log = c.out.String()
	if c.err == nil || !strings.Contains(log, "no space left on device") || !strings.Contains(log, out) {
		t.Fatalf("swerl run on a full disk: %v; want exit 1 with an error naming the file and the full disk:\n%s", c.err, log)
	}
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "no space left on device") {
			t.Logf("on the full disk: %s", l)
		}
	}
	if b, err := exec.Command("mount", "-o", "remount,size=64m", disk).CombinedOutput(); err != nil {
		t.Fatalf("growing the tmpfs: %v: %s", err, b)
	}
	_, log = runCLI(t, append(args(out), "--resume"), 0, 5*time.Minute)
	got := readRunResult(t, out, log, steps, batch, group)
	if got.lastStep != want.lastStep || !slices.Equal(got.rewards, want.rewards) || got.versions != want.versions || got.newest != want.newest {
		t.Fatalf("resumed after the full disk: %+v\nwant (a run that never hit it) %+v\n%s", got, want, log)
	}
}

// The swerl run the kill tests interrupt: a warm start of killSFT steps,
// then killSteps RL steps of killBatch instances × killGroup samples.
const killSFT, killSteps, killBatch, killGroup = 4, 3, 2, 2

// killRunArgs is that run's command line on repo into out.
func killRunArgs(repo, out string) []string {
	return []string{"run", "--repo", repo, "--out", out, "--sft-steps", strconv.Itoa(killSFT), "--sft-until", "0", "--steps", strconv.Itoa(killSteps),
		"--batch", strconv.Itoa(killBatch), "--group-size", strconv.Itoa(killGroup), "--max-tokens", "200", "--eval", "1", "--metrics-addr", "", "--seed", "3"}
}
