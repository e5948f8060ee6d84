package weightsync

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"swerl/internal/engineapi"
	"swerl/internal/fakeengine"
	"swerl/internal/testenv"
	"swerl/sinks/metrics"
)

// Every request to an engine that never answers ends after Timeout, the
// listing of its adapters (GET /v1/models) as well as the load: Push
// reports the engine after its retries instead of waiting for it.
func TestHangingEngineTimesOut(t *testing.T) {
	url, accepted := testenv.HangingServer(t)
	s, got := newSyncer(t, Config{Engines: []Engine{{URL: url, Kind: engineapi.VLLM}}, Attempts: 2, Timeout: 300 * time.Millisecond})
	start := time.Now()
	err := s.Push(context.Background(), 1, writeVersion(t, t.TempDir(), 1, true))
	took := time.Since(start)
	// The list, then the load and its one retry: 3 × 300ms and a backoff
	// of at most 1ns (newSyncer). A generous bound for a loaded machine.
	if took > 5*time.Second {
		t.Errorf("Push took %s against a hanging engine with a 300ms timeout", took)
	}
	if err == nil || !strings.Contains(err.Error(), "after 2 attempts") || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("want a timeout after 2 attempts, got %v", err)
	}
	if n := accepted(); n < 2 {
		t.Errorf("%d connections accepted, want the list and two loads", n)
	}
	if _, ok := s.Held(url); ok || len(*got) != 0 {
		t.Fatalf("an engine that never answered holds nothing; hook calls %v", *got)
	}
}

// The default timeout bounds a request too (it was 10 minutes).
func TestDefaultTimeout(t *testing.T) {
	s, _ := newSyncer(t, Config{Engines: []Engine{{URL: "http://127.0.0.1:1", Kind: engineapi.VLLM}}})
	if s.cfg.Timeout != DefaultTimeout || DefaultTimeout > time.Minute {
		t.Fatalf("default timeout %s", s.cfg.Timeout)
	}
}

// Cancelling the context ends a push to a hanging engine at once, even
// with a long timeout and many retries, and Held answers while a push is
// stuck (it waited for the push before).
func TestPushToHangingEngineIsCancelled(t *testing.T) {
	url, accepted := testenv.HangingServer(t)
	s, _ := newSyncer(t, Config{Engines: []Engine{{URL: url, Kind: engineapi.VLLM}}, Attempts: 11, Timeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Push(ctx, 1, writeVersion(t, t.TempDir(), 1, true)) }()
	waitFor(t, func() bool { return accepted() >= 1 })
	held := make(chan bool, 1)
	go func() { _, ok := s.Held(url); held <- ok }()
	select {
	case ok := <-held:
		if ok {
			t.Error("holds a version it never confirmed")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Held waits for the push in flight")
	}
	start := time.Now()
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled push: %v", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("push ended %s after the cancel", took)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the push did not end after its context was cancelled")
	}
}

// waitFor polls cond until it holds, failing the test after 10s.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, time.Minute, "the engine accepts a connection", cond)
}

// gatedEngine is a vLLM server whose loads of the versions in stuck wait
// until release is closed (an engine slow to load one adapter).
type gatedEngine struct {
	*fakeengine.VLLM
	stuck   map[string]bool
	release chan struct{}
	started chan string // each stuck load, once it arrived
}

func (g *gatedEngine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/load_lora_adapter" {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body)) // for the vLLM server
		for name := range g.stuck {
			if bytes.Contains(body, []byte(`"`+name+`"`)) {
				g.started <- name
				<-g.release
			}
		}
	}
	g.VLLM.ServeHTTP(w, r)
}

// metricValue is the value of the counter or gauge name on metrics.Registry.
func metricValue(t *testing.T, name string) float64 {
	t.Helper()
	mfs, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			m := mf.GetMetric()[0]
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("%s is not on the registry", name)
	return 0
}

// Async: Submit never waits for an engine. While an engine is stuck
// loading version 1, versions 2 and 3 are submitted (the learner goes on):
// 2 is superseded by 3 before its turn and never sent, 1 is reported late,
// and once the engine answers, 3 is pushed. The engine holds, and the
// rollouts name, only what it confirmed: nothing while 1 is stuck, then
// 1, then 3.
func TestAsyncSkipsSupersededVersions(t *testing.T) {
	root := t.TempDir()
	g := &gatedEngine{VLLM: &fakeengine.VLLM{}, stuck: map[string]bool{engineapi.AdapterName(1): true}, release: make(chan struct{}), started: make(chan string, 1)}
	ts := serveTest(t, g)
	s, got := newSyncer(t, Config{Engines: []Engine{{URL: ts.URL + "/v1", Kind: engineapi.VLLM}}, Timeout: time.Minute})
	a := s.Async(context.Background())
	defer a.Close()
	a.Submit(1, writeVersion(t, root, 1, true))
	<-g.started
	start := time.Now()
	a.Submit(2, writeVersion(t, root, 2, true))
	a.Submit(3, writeVersion(t, root, 3, true))
	if took := time.Since(start); took > time.Second {
		t.Fatalf("Submit waited %s for a stuck engine", took)
	}
	if _, ok := s.Held(ts.URL); ok {
		t.Fatal("the engine holds a version it has not confirmed")
	}
	late, skipped := metricValue(t, "swerl_engine_push_late_total"), metricValue(t, "swerl_engine_push_skipped_total")
	if behind := metricValue(t, "swerl_engine_push_behind_versions"); behind != 4 { // v3 published, nothing held (-1)
		t.Errorf("behind %v versions, want 4", behind)
	}
	close(g.release)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := a.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if h, ok := s.Held(ts.URL); !ok || h.Version != 3 {
		t.Fatalf("held %+v %v, want version 3", h, ok)
	}
	var seq []int64
	for _, h := range *got {
		seq = append(seq, h.v.Version)
	}
	if len(seq) != 2 || seq[0] != 1 || seq[1] != 3 {
		t.Fatalf("versions held in turn %v, want [1 3]", seq)
	}
	for _, c := range g.Calls {
		if c.Body["lora_name"] == engineapi.AdapterName(2) {
			t.Fatalf("the superseded version 2 was sent: %v", c)
		}
	}
	if late < 1 || skipped < 1 {
		t.Errorf("late pushes %v, skipped versions %v: want both counted", late, skipped)
	}
	if behind := metricValue(t, "swerl_engine_push_behind_versions"); behind != 0 {
		t.Errorf("behind %v versions after the last push, want 0", behind)
	}
}

// Close ends an Async whose engine hangs at once: the push in flight is
// cancelled, whatever the timeout and retries.
func TestAsyncCloseCancelsAHangingPush(t *testing.T) {
	url, accepted := testenv.HangingServer(t)
	s, _ := newSyncer(t, Config{Engines: []Engine{{URL: url, Kind: engineapi.VLLM}}, Attempts: 11, Timeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	a := s.Async(ctx)
	a.Submit(1, writeVersion(t, t.TempDir(), 1, true))
	waitFor(t, func() bool { return accepted() >= 1 })
	wctx, wcancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer wcancel()
	if err := a.Wait(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on a hanging push: %v, want its context's deadline", err)
	}
	cancel() // the command's context: SIGTERM
	closed := make(chan struct{})
	start := time.Now()
	go func() { a.Close(); close(closed) }()
	select {
	case <-closed:
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("Close took %s", took)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not end a hanging push")
	}
	if err := a.Wait(context.Background()); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait after Close: %v", err)
	}
}
