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
	remote := []string{"--runner=universal", "--endpoint=localhost:" + jobPort, "--environment_type=EXTERNAL", "--environment_config=localhost:" + poolPort}

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
	testenv.Eventually(t, 15*time.Second, "a listener on "+addr, func() bool {
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
const cliTimeout = 90 * time.Second

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
