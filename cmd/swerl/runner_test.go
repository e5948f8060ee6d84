package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/container/pool"

	"swerl/internal/gitio/gittest"
	"swerl/internal/testenv"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/parquetio"
	"swerl/transforms/agentless"
)

// TestMineAndTrainThroughJobServer runs `swerl mine` and `swerl train`
// twice each, in process (Prism's loopback workers) and through a
// standalone Beam job server (the SDK's prism command) whose workers an
// external worker pool starts (the SDK's worker pool, which the container
// boot loader runs in --worker_pool mode as deploy/ runs it beside Flink,
// here on a free port: runWorkerPool), and checks that
// the outputs and the summary counts are the same. The workers are the
// staged test binary itself (the default --worker_binary: the running
// executable), which TestMain turns into a Beam worker.
//
// By default it mines a small repository made here (CI runs it);
// SWERL_RUNNER_REPO=/path/to/clone mines a real one instead (the long
// version, e.g. a clone of pallets/flask).
func TestMineAndTrainThroughJobServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the prism and boot commands and runs two processes")
	}
	remote := startJobServer(t)

	repo := os.Getenv("SWERL_RUNNER_REPO")
	if repo == "" {
		repo = runnerRepo(t)
	}
	// Mine.
	mine := func(extra ...string) (string, []schemas.Instance) {
		out := filepath.Join(t.TempDir(), "out")
		so := cliOutput(t, append([]string{"mine", "--repo", repo, "--out", out, "--exclude-swebench=false", "--metrics-addr", ""}, extra...)...)
		rows, err := parquetio.ReadDir[schemas.Instance](filepath.Join(out, "instances"))
		if err != nil {
			t.Fatal(err)
		}
		sort.Slice(rows, func(i, j int) bool { return rows[i].ID < rows[j].ID })
		return so, rows
	}
	inSum, inRows := mine()
	jsSum, jsRows := mine(remote...)
	if len(inRows) == 0 || !reflect.DeepEqual(inRows, jsRows) {
		t.Errorf("mine: %d instances in process, %d through the job server; equal %v", len(inRows), len(jsRows), reflect.DeepEqual(inRows, jsRows))
	}
	if a, b := mineCounts(inSum), mineCounts(jsSum); a == "" || a != b {
		t.Errorf("mine summaries differ:\n%s\n%s", inSum, jsSum)
	}
	t.Logf("mine: %s", mineCounts(jsSum))

	// Train on the instances of a fixture with recorded completions.
	set := traintest.New(t, t.TempDir(), 6, 4, nil)
	train := func(extra ...string) (string, []schemas.Sample) {
		out := filepath.Join(t.TempDir(), "out")
		se := cliOutput(t, append([]string{"train", "--instances", set.InstancesPath, "--policy", "file:" + set.CompletionsPath, "--group-size", "4", "--out", out, "--metrics-addr", ""}, extra...)...)
		rows, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			// When the row was written, and how long the policy call took
			// (0 ms for a file policy, unless the machine is busy).
			rows[i].CreatedAt, rows[i].LatencyMS = "", 0
		}
		sort.Slice(rows, func(i, j int) bool {
			if rows[i].InstanceID != rows[j].InstanceID {
				return rows[i].InstanceID < rows[j].InstanceID
			}
			return rows[i].Index < rows[j].Index
		})
		return se, rows
	}
	inLog, inSamples := train()
	jsLog, jsSamples := train(remote...)
	if len(inSamples) != 24 || !reflect.DeepEqual(inSamples, jsSamples) {
		t.Errorf("train: %d samples in process, %d through the job server; equal %v", len(inSamples), len(jsSamples), reflect.DeepEqual(inSamples, jsSamples))
	}
	if a, b := trainCounts(inLog), trainCounts(jsLog); a == "" || a != b || !strings.Contains(a, "24 samples written") {
		t.Errorf("train summaries differ:\n%s\n%s", a, b)
	}
}

// startJobServer builds the SDK's prism and boot commands, starts a
// standalone job server and a worker pool whose workers are this test
// binary, both stopped when the test ends, and returns the flags that send
// a swerl pipeline there.
func startJobServer(t *testing.T) []string {
	tools := t.TempDir()
	for _, c := range [][2]string{{"prism", "github.com/apache/beam/sdks/v2/go/cmd/prism"}, {"boot", "github.com/apache/beam/sdks/v2/go/container"}} {
		build := exec.Command("go", "build", "-o", filepath.Join(tools, c[0]), c[1])
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", c[1], err, out)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	jobPort, poolPort := freePort(t), freePort(t)
	startDaemon(t, filepath.Join(tools, "prism"), t.TempDir(), nil, "--job_port="+jobPort, "--serve_http=false")
	startDaemon(t, self, t.TempDir(), []string{workerPoolEnv + "=" + poolPort + " " + filepath.Join(tools, "boot")})
	waitPort(t, "localhost:"+jobPort)
	waitPort(t, "localhost:"+poolPort)
	return []string{"--runner=universal", "--endpoint=localhost:" + jobPort, "--environment_type=EXTERNAL", "--environment_config=localhost:" + poolPort}
}

// cliOutput runs the test binary as the swerl command and returns its output.
func cliOutput(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "SWERL_TEST_AS_CLI=1")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("swerl %s: %v\n%s", strings.Join(args, " "), err, buf.String())
		}
	case <-time.After(cliTimeout):
		cmd.Process.Kill()
		<-done
		t.Fatalf("swerl %s: still running after %s\n%s", strings.Join(args, " "), cliTimeout, buf.String())
	}
	return buf.String()
}

// mineCounts is a mine summary without its times and file names.
func mineCounts(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "mine: ") && strings.Contains(l, " instances in ") {
			l, _, _ = strings.Cut(l, " in ")
			keep = append(keep, l)
		} else if strings.HasPrefix(l, "  rejected ") || strings.HasPrefix(l, "  excluded ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

var trainSummary = regexp.MustCompile(`train: .* samples written .*, policy v-?\d+`)

// trainCounts is the train summary without its time.
func trainCounts(s string) string { return trainSummary.FindString(s) }

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return fmt.Sprint(ln.Addr().(*net.TCPAddr).Port)
}

// startDaemon starts a long-running process in dir, with env added to
// this one's, and kills it when the test ends; its output is logged if the
// test fails.
func startDaemon(t *testing.T, bin, dir string, env []string, args ...string) {
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	// Output to a file, and a process group: the worker pool's workers
	// outlive it otherwise, holding a pipe open.
	log, err := os.Create(filepath.Join(dir, "output.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		log.Close()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s output:\n%.4000s", filepath.Base(bin), b)
		}
	})
}

func waitPort(t *testing.T, addr string) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "a listener on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

// runnerRepo is a small repository with merge commits, a squash merge and
// a filtered PR.
func runnerRepo(t *testing.T) string {
	r := gittest.New(t)
	r.Git("remote", "add", "origin", "https://github.com/acme/portable.git")
	r.Commit("init", map[string]string{"calc/calc.go": "package calc\n\nfunc Add(a, b int) int { return a - b }\n", "README.md": "# portable\n"})
	for n := 1; n <= 6; n++ {
		r.PR(n, fmt.Sprintf("b%d", n), "work", map[string]string{fmt.Sprintf("calc/f%d.go", n): fmt.Sprintf("package calc\n\nfunc F%d() int { return %d }\n", n, n)}, fmt.Sprintf("Add F%d", n))
	}
	r.Commit("Fix Add (#7)", map[string]string{"calc/calc.go": "package calc\n\nfunc Add(a, b int) int { return a + b }\n"})
	r.PR(8, "docs", "docs", map[string]string{"README.md": "# portable\n\nMore.\n"}, "Better README")
	return r.Dir
}

// cliTimeout bounds one swerl command of the runner test.
const cliTimeout = 5 * time.Minute

// workerPoolEnv makes the test binary a Beam worker pool (TestMain): "PORT
// BOOT" serves on PORT and starts the boot loader BOOT for each worker the
// runner asks for.
const workerPoolEnv = "SWERL_TEST_WORKER_POOL"

// runWorkerPool is the boot loader's --worker_pool (the SDK's pool
// package, which boot runs) on a port of the test's choosing: boot's own
// always listens on 50000, a port in Linux's ephemeral range that another
// process's connection can hold for as long as it lives (CI failed on it
// twice, once after waiting 30 s).
func runWorkerPool(spec string) int {
	portS, boot, _ := strings.Cut(spec, " ")
	port, err := strconv.Atoi(portS)
	if err != nil || boot == "" {
		fmt.Fprintf(os.Stderr, "%s=%q: want PORT BOOT\n", workerPoolEnv, spec)
		return 2
	}
	ctx := context.Background()
	server, err := pool.New(ctx, port, boot)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker pool:", err)
		return 1
	}
	defer server.Stop(ctx)
	if err := server.ServeAndWait(); err != nil {
		fmt.Fprintln(os.Stderr, "worker pool:", err)
		return 1
	}
	return 0
}

// TestAgentlessThroughJobServer runs `swerl agentless` in process (Prism)
// and through a standalone job server with an external worker pool (as
// TestMineAndTrainThroughJobServer), against a loopback chat server that
// answers localization with the gold file and repair with gold, noise and
// prose: the predictions and candidates are the same both ways, and every
// prediction is the gold patch. The remote workers open the policy
// themselves and write the outputs.
func TestAgentlessThroughJobServer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the prism and boot commands and runs two processes")
	}
	remote := startJobServer(t)
	const gold = "```python\n### pkg/util.py\n<<<<<<< SEARCH\n    return 1\n=======\n    return 2\n>>>>>>> REPLACE\n```"
	const noise = "```python\n### pkg/util.py\n<<<<<<< SEARCH\ndef f():\n=======\ndef g():\n>>>>>>> REPLACE\n```"
	url := testenv.ChatServer(t, func(prompt string, n int) ([]string, int) {
		if strings.Contains(prompt, "### Repository Structure ###") {
			return []string{"```\npkg/util.py\n```"}, 0
		}
		var texts []string
		for i := range n {
			texts = append(texts, []string{gold, noise, "no idea", gold}[i%4])
		}
		return texts, 0
	})

	r := gittest.New(t)
	r.Commit("base", map[string]string{"pkg/util.py": "def f():\n    return 1\n"})
	base := strings.TrimSpace(r.Git("rev-parse", "HEAD"))
	var rows strings.Builder
	for i := 1; i <= 4; i++ {
		fmt.Fprintf(&rows, `{"instance_id":"demo__demo-%d","repo":"demo/demo","base_commit":"%s","patch":"x","problem_statement":"f should return 2"}`+"\n", i, base)
	}
	in := filepath.Join(t.TempDir(), "rows.jsonl")
	if err := os.WriteFile(in, []byte(rows.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(extra ...string) (string, []byte, []agentless.Candidate) {
		out := filepath.Join(t.TempDir(), "out")
		so := cliOutput(t, append([]string{"agentless", "--instances", in, "--repo", r.Dir, "--policy", url,
			"--out", out, "--localize-samples", "2", "--repair-samples", "4", "--repair-batch", "2"}, extra...)...)
		preds, err := os.ReadFile(filepath.Join(out, "predictions.jsonl"))
		if err != nil {
			t.Fatalf("%v\n%s", err, so)
		}
		cands, err := parquetio.ReadFile[agentless.Candidate](filepath.Join(out, "candidates.parquet"))
		if err != nil {
			t.Fatal(err)
		}
		return so, preds, cands
	}
	inLog, inPreds, inCands := run()
	jsLog, jsPreds, jsCands := run(remote...)
	if !bytes.Equal(inPreds, jsPreds) || !reflect.DeepEqual(inCands, jsCands) {
		t.Errorf("in process and through the job server differ:\n%s\n%s", inPreds, jsPreds)
	}
	if n := strings.Count(string(jsPreds), `+    return 2`); n != 4 || len(jsCands) != 16 {
		t.Errorf("%d of 4 predictions are the gold patch, %d candidates (want 16):\n%s", n, len(jsCands), jsPreds)
	}
	for _, log := range []string{inLog, jsLog} {
		if !strings.Contains(log, "4 instances (4 with a patch, 0 failed, 0 bad rows)") {
			t.Errorf("summary does not account for the 4 instances:\n%s", log)
		}
	}
}
