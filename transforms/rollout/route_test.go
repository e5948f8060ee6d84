package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"swerl/internal/engineapi"
	"swerl/internal/testenv"
	"swerl/sinks/weightsync"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// engineSrv is an OpenAI-compatible engine on a loopback port that can be
// killed (every connection closed, in-flight requests cut) and started
// again on the same address. Its completions are a function of the
// prompt, the seed and the choice index, as a seeded engine's are, so an
// answer shows which seed it was sampled with wherever it came from.
type engineSrv struct {
	addr     string
	gate     chan struct{} // non-nil: completions wait until it is closed
	mu       sync.Mutex
	adapters []string      // listed on /v1/models
	stall    bool          // /v1/models never answers (a machine that vanished)
	models   chan struct{} // non-nil: /v1/models waits until it is closed
	probing  atomic.Int64  // /v1/models requests held at models
	status   int           // non-zero: chat requests are answered with this status
	unlisted []string      // adapters held and not listed (as older SGLang)
	strict   bool          // a request naming a swerl adapter not held is answered 404 (as vLLM)
	named    []string      // the model of each chat request
	srv      *http.Server
	hits     atomic.Int64 // chat requests received
	waiting  atomic.Int64 // chat requests held at the gate
}

func startEngine(t *testing.T, addr string, gate chan struct{}) *engineSrv {
	t.Helper()
	return startEngineWith(t, addr, &engineSrv{gate: gate})
}

func startEngineWith(t *testing.T, addr string, s *engineSrv) *engineSrv {
	t.Helper()
	var ln net.Listener
	var err error
	// Restarting on the port just closed: the kernel may hold it briefly.
	testenv.Eventually(t, time.Minute, "listening again on "+addr, func() bool {
		ln, err = net.Listen("tcp", addr)
		return err == nil
	})
	s.addr = ln.Addr().String()
	s.srv = &http.Server{Handler: s}
	go s.srv.Serve(ln)
	t.Cleanup(s.kill)
	return s
}

func (s *engineSrv) url() string { return "http://" + s.addr + "/v1" }

// kill closes the listener and every connection at once, like a process
// that died: requests in flight get no answer.
func (s *engineSrv) kill() { s.srv.Close() }

func (s *engineSrv) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/v1/models":
		s.mu.Lock()
		stall := s.stall
		s.mu.Unlock()
		if stall {
			<-r.Context().Done()
			return
		}
		if s.models != nil {
			s.probing.Add(1)
			<-s.models
		}
		s.mu.Lock()
		data := []map[string]string{{"id": "m"}}
		for _, a := range s.adapters {
			data = append(data, map[string]string{"id": a})
		}
		s.mu.Unlock()
		json.NewEncoder(w).Encode(map[string]any{"data": data})
		return
	case "/v1/chat/completions":
	default:
		http.Error(w, "not found", 404)
		return
	}
	s.hits.Add(1)
	if s.status != 0 {
		http.Error(w, "engine error", s.status)
		return
	}
	req, ok := readChatRequest(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	s.named = append(s.named, req.Model)
	missing := s.strict && strings.HasPrefix(req.Model, "swerl-v") && !slices.Contains(s.adapters, req.Model) && !slices.Contains(s.unlisted, req.Model)
	s.mu.Unlock()
	if missing {
		http.Error(w, "The model `"+req.Model+"` does not exist.", 404)
		return
	}
	if s.gate != nil {
		s.waiting.Add(1)
		select {
		case <-s.gate:
		case <-r.Context().Done():
		}
		s.waiting.Add(-1)
	}
	var seed int64
	if req.Seed != nil {
		seed = *req.Seed
	}
	var choices []map[string]any
	for i := range *req.N {
		choices = append(choices, map[string]any{"index": i, "finish_reason": "stop",
			"message":  map[string]string{"role": "assistant", "content": answerOf(req.Messages[len(req.Messages)-1].Content, seed, i)},
			"logprobs": map[string]any{"content": []map[string]any{{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -0.5}, {"token": "c", "logprob": -0.5}}}})
	}
	json.NewEncoder(w).Encode(map[string]any{"model": req.Model, "choices": choices})
}

func answerOf(prompt string, seed int64, i int) string {
	return fmt.Sprintf("seed %d choice %d: %s", seed, i, prompt)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, 30*time.Second, what, cond)
}

// An engine that dies with requests in flight: every request is answered
// by the other engine with its own seed (the same completions a single
// engine gives), the dead engine leaves routing, and when it listens again
// on its address the health probe brings it back and it gets requests.
func TestHTTPPolicyEngineDiesAndRejoins(t *testing.T) {
	a := startEngine(t, "127.0.0.1:0", nil)
	hang := make(chan struct{})
	defer close(hang)
	b := startEngine(t, "127.0.0.1:0", hang)
	pol, err := Open(a.url() + "," + b.url() + "?route=round-robin&health=20ms&backoff=1ms&model=m")
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	p := pol.(*HTTPPolicy)
	m := engineSeries()
	// Which failure sees the death first depends on timing: a request's
	// cut connection (connect), or the health probe (probe), after which
	// the requests still waiting on it are abandoned.
	deathErrors := func() (n float64) {
		for _, reason := range []string{"connect", "probe", "abandoned"} {
			n += counterValue(m.errors.WithLabelValues(engineapi.BaseURL(b.url()), reason))
		}
		return n
	}
	errsBefore := deathErrors()

	const groups = 16
	results := make([]Response, groups)
	errs := make([]error, groups)
	var wg sync.WaitGroup
	for g := range groups {
		wg.Go(func() {
			results[g], errs[g] = pol.Complete(context.Background(), Request{InstanceID: fmt.Sprint(g), Prompt: fmt.Sprintf("task %d", g), N: 4, Seed: int64(1000 + g)})
		})
	}
	waitFor(t, "engine b holds requests", func() bool { return b.waiting.Load() >= 2 })
	b.kill()
	wg.Wait()
	for g := range groups {
		if errs[g] != nil {
			t.Fatalf("group %d: %v", g, errs[g])
		}
		if len(results[g].Completions) != 4 {
			t.Fatalf("group %d: %d completions", g, len(results[g].Completions))
		}
		for i, c := range results[g].Completions {
			if want := answerOf(fmt.Sprintf("task %d", g), int64(1000+g), i); c.Text != want {
				t.Fatalf("group %d choice %d: %q, want %q (the seed must go with the retry)", g, i, c.Text, want)
			}
		}
	}
	st := p.Engines()
	if st[1].Up || st[1].Errors == 0 || st[0].Errors != 0 || !st[0].Up {
		t.Fatalf("after the kill: %+v", st)
	}
	if got := deathErrors() - errsBefore; got < 1 {
		t.Fatalf("swerl_engine_errors_total{reason=connect|probe|abandoned} of the dead engine grew by %v", got)
	}
	// Dead: nothing goes to it while it is down.
	hitsB := b.hits.Load()
	for g := range 6 {
		if _, err := pol.Complete(context.Background(), Request{InstanceID: "x", Prompt: "p", N: 1, Seed: int64(g + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if b.hits.Load() != hitsB {
		t.Fatal("a dead engine got requests")
	}

	b2 := startEngine(t, b.addr, nil)
	waitFor(t, "the restarted engine rejoins", func() bool { return p.Engines()[1].Up })
	for g := range 8 {
		if _, err := pol.Complete(context.Background(), Request{InstanceID: "y", Prompt: "p", N: 1, Seed: int64(g + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	if b2.hits.Load() < 3 {
		t.Fatalf("the engine that came back got %d of 8 round-robin requests", b2.hits.Load())
	}
}

// A probe that was in flight when a request failed does not bring the
// engine back: its answer may predate the failure (the server answered
// /v1/models, then died), so the next probe decides.
func TestHTTPPolicyProbeInFlightDuringAFailure(t *testing.T) {
	a := startEngine(t, "127.0.0.1:0", nil)
	held := make(chan struct{})
	b := startEngineWith(t, "127.0.0.1:0", &engineSrv{models: held, status: http.StatusServiceUnavailable})
	pol, err := Open(a.url() + "," + b.url() + "?route=round-robin&health=0&backoff=1ms")
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	p := pol.(*HTTPPolicy)
	probed := make(chan struct{})
	go func() { p.probeAll(context.Background()); close(probed) }()
	waitFor(t, "the probe of b is in flight", func() bool { return b.probing.Load() == 1 })
	// Round-robin's first pick is the second engine, b: its 503 takes it out of routing and a answers.
	if _, err := pol.Complete(context.Background(), Request{Prompt: "p", N: 1, Seed: 3}); err != nil {
		t.Fatal(err)
	}
	if b.hits.Load() != 1 || p.Engines()[1].Up {
		t.Fatalf("b got %d requests and is up=%v, want 1 and out of routing", b.hits.Load(), p.Engines()[1].Up)
	}
	close(held)
	<-probed
	if p.Engines()[1].Up {
		t.Fatal("a probe sent before the failure brought the engine back")
	}
	p.probeAll(context.Background())
	if !p.Engines()[1].Up {
		t.Fatal("a probe sent after the failure did not bring the engine back")
	}
}

// A request that times out on one engine is answered by another; with
// every engine failing, the error names the engine and the attempts.
func TestHTTPPolicyTimeoutMovesOn(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	slow := startEngine(t, "127.0.0.1:0", hang)
	fast := startEngine(t, "127.0.0.1:0", nil)
	pol, err := Open(slow.url() + "," + fast.url() + "?timeout=1s&health=0&retries=3&backoff=1ms&route=round-robin")
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	for g := range 4 {
		r, err := pol.Complete(context.Background(), Request{Prompt: "p", N: 2, Seed: 7})
		if err != nil || r.Completions[1].Text != answerOf("p", 7, 1) {
			t.Fatalf("request %d: %+v %v", g, r, err)
		}
	}
	if slow.hits.Load() != 1 {
		t.Fatalf("the engine that timed out got %d requests, want 1 (then out of routing)", slow.hits.Load())
	}
	fast.kill()
	_, err = pol.Complete(context.Background(), Request{Prompt: "p", N: 1})
	if err == nil || !strings.Contains(err.Error(), "after 4 attempts") {
		t.Fatalf("every engine failing: %v", err)
	}
}

// least-loaded spreads requests in flight evenly; round-robin takes each
// engine in turn.
func TestHTTPPolicyRoutes(t *testing.T) {
	gate := make(chan struct{})
	a := startEngine(t, "127.0.0.1:0", gate)
	b := startEngine(t, "127.0.0.1:0", gate)
	c := startEngine(t, "127.0.0.1:0", gate)
	pol, err := Open(a.url() + "," + b.url() + "," + c.url() + "?health=0")
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	var wg sync.WaitGroup
	for range 9 {
		wg.Go(func() {
			if _, err := pol.Complete(context.Background(), Request{Prompt: "p", N: 1}); err != nil {
				t.Error(err)
			}
		})
	}
	waitFor(t, "9 requests in flight", func() bool { return a.waiting.Load()+b.waiting.Load()+c.waiting.Load() == 9 })
	if a.waiting.Load() != 3 || b.waiting.Load() != 3 || c.waiting.Load() != 3 {
		t.Fatalf("least-loaded: %d, %d, %d in flight, want 3 each", a.waiting.Load(), b.waiting.Load(), c.waiting.Load())
	}
	close(gate)
	wg.Wait()

	rr, _ := Open(a.url() + "," + b.url() + "?route=round-robin&health=0")
	defer rr.Close()
	a0, b0 := a.hits.Load(), b.hits.Load()
	for range 10 {
		if _, err := rr.Complete(context.Background(), Request{Prompt: "p", N: 1}); err != nil {
			t.Fatal(err)
		}
	}
	if a.hits.Load()-a0 != 5 || b.hits.Load()-b0 != 5 {
		t.Fatalf("round-robin: %d and %d of 10", a.hits.Load()-a0, b.hits.Load()-b0)
	}
	for spec, want := range map[string]string{
		a.url() + "?model=m," + b.url():                   "write them once",
		a.url() + "," + a.url() + "/":                     "listed twice",
		a.url() + ",ftp://x/v1":                           "not an http(s) URL",
		a.url() + "," + b.url() + "?route=random":         "route=",
		a.url() + "?follow=true&health=0":                 "follow=true",
		a.url() + "?route=round-robin&route=least-loaded": "route given 2 times",
	} {
		if _, err := Open(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", spec, err, want)
		}
	}
}

// An engine the weight sync did not bring to the newest version is out of
// routing while another holds it; it is used again when it is the only
// one up, and its answers carry the version it holds.
func TestHTTPPolicyPrefersEnginesWithTheNewestVersion(t *testing.T) {
	a := startEngine(t, "127.0.0.1:0", nil)
	b := startEngine(t, "127.0.0.1:0", nil)
	served := weightsync.NewTable()
	served.Set(a.url(), engineapi.ServedVersion{Version: 5, Adapter: engineapi.AdapterName(5)})
	served.Set(b.url(), engineapi.ServedVersion{Version: 4, Adapter: engineapi.AdapterName(4)})
	pol, _ := Open(a.url()+","+b.url()+"?route=round-robin&health=0&backoff=1ms", WithTable(served))
	defer pol.Close()
	for range 6 {
		r, err := pol.Complete(context.Background(), Request{Prompt: "p", N: 1})
		if err != nil || r.PolicyVersion != 5 {
			t.Fatalf("%+v %v", r, err)
		}
	}
	if b.hits.Load() != 0 {
		t.Fatalf("the lagging engine got %d requests", b.hits.Load())
	}
	a.kill()
	r, err := pol.Complete(context.Background(), Request{Prompt: "p", N: 1})
	if err != nil || r.PolicyVersion != 4 {
		t.Fatalf("with the newest engine dead: %+v %v", r, err)
	}
}

// follow=true: a worker with no weight sync of its own names the newest
// swerl adapter each engine lists, as another process's learner loads them.
func TestHTTPPolicyFollowsListedAdapters(t *testing.T) {
	a := startEngine(t, "127.0.0.1:0", nil)
	served := weightsync.NewTable()
	pol, err := Open(a.url()+"?follow=true&health=10ms&model=m", WithTable(served))
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	r, err := pol.Complete(context.Background(), Request{Prompt: "p", N: 1})
	if err != nil || r.PolicyVersion != -1 {
		t.Fatalf("before any adapter: %+v %v", r, err)
	}
	a.mu.Lock()
	a.adapters = []string{engineapi.AdapterName(3), engineapi.AdapterName(4), "other-lora"}
	a.mu.Unlock()
	waitFor(t, "the policy follows swerl-v000004", func() bool { sv, ok := served.Get(a.url()); return ok && sv.Version == 4 })
	r, err = pol.Complete(context.Background(), Request{Prompt: "p", N: 1})
	if err != nil || r.PolicyVersion != 4 {
		t.Fatalf("following: %+v %v", r, err)
	}
	// The engine restarts without its adapters: requests go back to the
	// base model instead of naming an adapter it no longer holds.
	a.mu.Lock()
	a.adapters = nil
	a.mu.Unlock()
	waitFor(t, "the policy stops naming swerl-v000004", func() bool { _, ok := served.Get(a.url()); return !ok })
	r, err = pol.Complete(context.Background(), Request{Prompt: "p", N: 1})
	if err != nil || r.PolicyVersion != -1 {
		t.Fatalf("after the adapters are gone: %+v %v", r, err)
	}
	// A learner that started over: its lower version is followed.
	a.mu.Lock()
	a.adapters = []string{engineapi.AdapterName(1)}
	a.mu.Unlock()
	waitFor(t, "the policy follows swerl-v000001", func() bool { sv, ok := served.Get(a.url()); return ok && sv.Version == 1 })
}

// With announcements in its table, follow=true names on each engine the newest
// adapter the learner announced that engine holds, though the engines list
// none: never on an engine it was not announced for, and an adapter an
// engine lists that is newer than its announced one wins.
func TestHTTPPolicyFollowsAnnouncedAdapters(t *testing.T) {
	a := startEngineWith(t, "127.0.0.1:0", &engineSrv{strict: true})
	b := startEngineWith(t, "127.0.0.1:0", &engineSrv{strict: true})
	ann := weightsync.NewTable()
	served := ann
	pol, err := Open(a.url()+","+b.url()+"?follow=true&health=10ms&model=m&route=round-robin", WithTable(ann))
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	complete := func() int64 {
		t.Helper()
		r, err := pol.Complete(context.Background(), Request{Prompt: "p", N: 1})
		if err != nil {
			t.Fatal(err)
		}
		return r.PolicyVersion
	}
	if v := complete(); v != -1 {
		t.Fatalf("nothing announced: version %d, want -1", v)
	}
	a.mu.Lock()
	a.unlisted = []string{engineapi.AdapterName(2), engineapi.AdapterName(3)}
	a.mu.Unlock()
	ann.Announce(a.url(), engineapi.ServedVersion{Version: 2, Adapter: engineapi.AdapterName(2)})
	ann.Announce(a.url(), engineapi.ServedVersion{Version: 3, Adapter: engineapi.AdapterName(3)})
	ann.Announce(a.url(), engineapi.ServedVersion{Version: 1, Adapter: engineapi.AdapterName(1)}) // late: ignored
	for range 4 {
		if v := complete(); v != 3 {
			t.Fatalf("a announced with v3: version %d, want 3 (routing prefers the newest)", v)
		}
	}
	b.mu.Lock()
	for _, m := range b.named {
		if m != "m" {
			t.Errorf("b was asked for %q, which it was never announced to hold", m)
		}
	}
	// b lists v5 and was announced v4 only: the newer, listed one wins.
	b.unlisted = []string{engineapi.AdapterName(4)}
	b.adapters = []string{engineapi.AdapterName(5)}
	b.mu.Unlock()
	ann.Announce(b.url(), engineapi.ServedVersion{Version: 4, Adapter: engineapi.AdapterName(4)})
	waitFor(t, "b's listed v5 is named", func() bool { sv, ok := served.Get(b.url()); return ok && sv.Version == 5 })
	for range 4 {
		if v := complete(); v != 5 {
			t.Fatalf("b lists v5: version %d, want 5", v)
		}
	}
	// An announcement newer than the listing wins on b.
	b.mu.Lock()
	b.unlisted = append(b.unlisted, engineapi.AdapterName(6))
	b.mu.Unlock()
	ann.Announce(b.url(), engineapi.ServedVersion{Version: 6, Adapter: engineapi.AdapterName(6)})
	if v := complete(); v != 6 {
		t.Fatalf("b announced with v6: version %d, want 6", v)
	}
}

// An engine that answers 404 to the adapter it was announced to hold (it
// restarted without it and lists nothing) is not asked for it again: the
// request is sent at once with the base model, and a newer announcement
// for it is followed.
func TestHTTPPolicyDropsAnAnnouncedAdapterOn404(t *testing.T) {
	a := startEngineWith(t, "127.0.0.1:0", &engineSrv{strict: true})
	ann := weightsync.NewTable()
	pol, err := Open(a.url()+"?follow=true&health=10ms&model=m", WithTable(ann))
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	ann.Announce(a.url(), engineapi.ServedVersion{Version: 7, Adapter: engineapi.AdapterName(7)})
	for range 2 {
		r, err := pol.Complete(context.Background(), Request{Prompt: "p", N: 1})
		if err != nil || r.PolicyVersion != -1 {
			t.Fatalf("an engine without the announced adapter: %+v %v, want the base (-1)", r, err)
		}
	}
	a.mu.Lock()
	if got := slices.Clone(a.named); !slices.Equal(got, []string{engineapi.AdapterName(7), "m", "m"}) {
		t.Errorf("requests named %q, want swerl-v000007 once, then the base", got)
	}
	a.unlisted = []string{engineapi.AdapterName(8)}
	a.mu.Unlock()
	ann.Announce(a.url(), engineapi.ServedVersion{Version: 8, Adapter: engineapi.AdapterName(8)})
	if r, err := pol.Complete(context.Background(), Request{Prompt: "p", N: 1}); err != nil || r.PolicyVersion != 8 {
		t.Fatalf("after v8 was announced: %+v %v", r, err)
	}
}

// counterValue reads a counter of the registry.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	return m.GetCounter().GetValue()
}

// An engine that stalls (its requests and probes hang: a machine that
// vanished behind open connections) leaves routing when its probe times
// out, and the requests waiting on it go to another engine at once, long
// before the request timeout; a 429 sends the attempt elsewhere without
// taking the busy engine out.
func TestHTTPPolicyAbandonsAStalledEngine(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	stalled := startEngineWith(t, "127.0.0.1:0", &engineSrv{gate: hang})
	ok := startEngine(t, "127.0.0.1:0", nil)
	pol, err := Open(stalled.url() + "," + ok.url() + "?route=round-robin&timeout=10m&health=50ms&backoff=1ms")
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	stalled.mu.Lock()
	stalled.stall = true
	stalled.mu.Unlock()
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			r, err := pol.Complete(context.Background(), Request{Prompt: "p", N: 1, Seed: int64(g + 1)})
			if err != nil || r.Completions[0].Text != answerOf("p", int64(g+1), 0) {
				t.Errorf("request %d: %+v %v", g, r, err)
			}
		})
	}
	wg.Wait()
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("the requests waited %v on the stalled engine", took)
	}
	if stalled.hits.Load() == 0 {
		t.Fatal("no request reached the stalled engine: the test shows nothing")
	}
	if n := counterValue(engineSeries().errors.WithLabelValues(engineapi.BaseURL(stalled.url()), "abandoned")); n < 1 {
		t.Fatalf("abandoned attempts counted: %v", n)
	}
}

// BenchmarkPick is the routing cost of one attempt over 4 engines, with
// the weight sync's versions to compare.
func BenchmarkPick(b *testing.B) {
	var urls []string
	served := weightsync.NewTable()
	for i := range 4 {
		u := fmt.Sprintf("http://10.0.0.%d:8000/v1", i+1)
		urls = append(urls, u)
		served.Set(u, engineapi.ServedVersion{Version: int64(i % 2), Adapter: engineapi.AdapterName(int64(i % 2))})
	}
	pol, err := Open(strings.Join(urls, ",")+"?health=0", WithTable(served))
	if err != nil {
		b.Fatal(err)
	}
	defer pol.Close()
	p := pol.(*HTTPPolicy)
	b.RunParallel(func(pb *testing.PB) {
		tried := map[*endpoint]bool{}
		for pb.Next() {
			e := p.pick(tried)
			e.release()
		}
	})
}

// Following, an engine the learner's push did not reach lists an older
// adapter: it stays out of routing while another holds the newest.
func TestHTTPPolicyFollowingLeavesALaggingEngineOut(t *testing.T) {
	a := startEngine(t, "127.0.0.1:0", nil)
	b := startEngine(t, "127.0.0.1:0", nil)
	served := weightsync.NewTable()
	a.adapters = []string{engineapi.AdapterName(2), engineapi.AdapterName(3)}
	b.adapters = []string{engineapi.AdapterName(2)}
	pol, err := Open(a.url()+","+b.url()+"?follow=true&health=20ms&route=round-robin", WithTable(served))
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	for range 6 {
		if r, err := pol.Complete(context.Background(), Request{Prompt: "p", N: 1}); err != nil || r.PolicyVersion != 3 {
			t.Fatalf("%+v %v", r, err)
		}
	}
	if b.hits.Load() != 0 {
		t.Fatalf("the lagging engine got %d requests", b.hits.Load())
	}
	// The push reaches it: it rejoins.
	b.mu.Lock()
	b.adapters = append(b.adapters, engineapi.AdapterName(3))
	b.mu.Unlock()
	waitFor(t, "the engine that caught up is followed", func() bool { sv, _ := served.Get(b.url()); return sv.Version == 3 })
	for range 6 {
		if r, err := pol.Complete(context.Background(), Request{Prompt: "p", N: 1}); err != nil || r.PolicyVersion != 3 {
			t.Fatalf("%+v %v", r, err)
		}
	}
	if b.hits.Load() != 3 {
		t.Fatalf("the engine that caught up got %d of 6 round-robin requests, want 3", b.hits.Load())
	}
}
