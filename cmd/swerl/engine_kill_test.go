package main

import (
	"bytes"
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"swerl/internal/testenv"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/metrics"
	"swerl/sinks/parquetio"
	"swerl/transforms/rollout"
)

// engineSeries reads a swerl_engine_* series of this process's registry
// (the HTTP policy of an in-process swerl train counts there).
func engineSeries(t *testing.T, name, engine string) float64 {
	t.Helper()
	fams, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "engine" && l.GetValue() == engine {
					sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return sum
}

// trainSamples runs `swerl train` in this process over the instances with
// the policy spec and returns its samples by id; during, it calls while
// (when set) from another goroutine. extra flags override the defaults.
func trainSamples(t *testing.T, instances, spec, out string, during func(), extra ...string) map[string]schemas.Sample {
	t.Helper()
	args := append([]string{"train", "--instances", instances, "--policy", spec, "--group-size", "3", "--max-tokens", "160",
		"--seed", "11", "--concurrency", "2", "--out", out, "--metrics-addr", ""}, extra...)
	done := make(chan struct{})
	if during != nil {
		go func() { defer close(done); during() }()
	} else {
		close(done)
	}
	var stderr bytes.Buffer
	code := runMain(context.Background(), args, &bytes.Buffer{}, &stderr)
	<-done
	if code != 0 {
		t.Fatalf("train exit %d:\n%s", code, stderr.String())
	}
	rows, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	dead, _ := parquetio.ReadDir[schemas.DeadLetter](filepath.Join(out, "deadletter"))
	for _, d := range dead {
		t.Errorf("dead letter: %s %s", d.Key, d.Reason)
	}
	byID := map[string]schemas.Sample{}
	for _, s := range rows {
		if _, dup := byID[s.ID]; dup {
			t.Errorf("sample %s produced twice", s.ID)
		}
		byID[s.ID] = s
	}
	return byID
}

// TestTrainSurvivesEngineKill: `swerl train` over two `swerl serve`
// processes; one is SIGKILLed in the middle of the run, once it has been
// sent a random number (1-6, SWERL_KILL_SEED) of the run's requests. Every group is still produced exactly once, with the
// completions a run on the surviving engine alone gives (the seed goes
// with the retry), and no dead letters. Then the killed engine is
// started again on its port: a policy that saw it die routes to it again
// once its health probe answers.
func TestTrainSurvivesEngineKill(t *testing.T) {
	rng, _ := killRNG(t, 7)
	killAfter := 1 + rng.IntN(6) // engine b's requests before the SIGKILL: a random point of the run
	dir := t.TempDir()
	model := tinyModel(t, dir)
	const n, g = 16, 3
	set := traintest.New(t, dir, n, g, nil)
	_, addrA := serveChild(t, model, "")
	b, addrB := serveChild(t, model, "")
	urlA, urlB := "http://"+addrA+"/v1", "http://"+addrB+"/v1"

	start := time.Now()
	want := trainSamples(t, set.InstancesPath, urlA+"?health=0", filepath.Join(dir, "alone"), nil)
	alone := time.Since(start)
	if len(want) != n*g {
		t.Fatalf("the run on one engine: %d samples, want %d", len(want), n*g)
	}

	base := engineSeries(t, "swerl_engine_requests_total", "http://"+addrB)
	baseA := engineSeries(t, "swerl_engine_requests_total", "http://"+addrA)
	killedAt := -1.0
	start = time.Now()
	got := trainSamples(t, set.InstancesPath, urlA+","+urlB+"?route=round-robin&health=100ms&backoff=10ms", filepath.Join(dir, "both"), func() {
		// Polls every 2 ms, not at Eventually's growing intervals: the kill
		// must land right after the request count it was drawn for.
		for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			if r := engineSeries(t, "swerl_engine_requests_total", "http://"+addrB) - base; r >= float64(killAfter) {
				inFlight := engineSeries(t, "swerl_engine_in_flight", "http://"+addrB)
				b.kill()
				killedAt = r
				t.Logf("SIGKILL to engine b after %v requests, %v in flight", r, inFlight)
				return
			}
		}
	})
	if killedAt < 0 {
		t.Fatalf("engine b never got %d requests: the run did not use both engines", killAfter)
	}
	t.Logf("run on engine a alone: %v; on a and b, b killed: %v; requests a %v, b %v (%v before the kill); b's failed attempts: connect %v, abandoned %v",
		alone.Round(time.Millisecond), time.Since(start).Round(time.Millisecond),
		engineSeries(t, "swerl_engine_requests_total", "http://"+addrA)-baseA, engineSeries(t, "swerl_engine_requests_total", "http://"+addrB)-base, killedAt,
		engineErrors(t, "http://"+addrB, "connect"), engineErrors(t, "http://"+addrB, "abandoned"))
	if len(got) != len(want) {
		t.Fatalf("with an engine killed: %d samples, want %d", len(got), len(want))
	}
	ids := slices.Sorted(func(yield func(string) bool) {
		for id := range want {
			if !yield(id) {
				return
			}
		}
	})
	for _, id := range ids {
		w, ok := got[id]
		if !ok {
			t.Fatalf("sample %s missing after the kill", id)
		}
		if w.Completion != want[id].Completion {
			t.Fatalf("sample %s: %q, the run on one engine %q", id, w.Completion, want[id].Completion)
		}
	}

	// The engine comes back on its port and rejoins.
	pol, err := rollout.Open(urlA + "," + urlB + "?route=round-robin&health=50ms&backoff=10ms")
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	hp := pol.(*rollout.HTTPPolicy)
	waitUntil(t, "the dead engine leaves routing", func() bool { return !hp.Engines()[1].Up })
	_, port, _ := strings.Cut(addrB, ":")
	serveChild(t, model, port)
	waitUntil(t, "the restarted engine rejoins", func() bool { return hp.Engines()[1].Up })
	before := hp.Engines()[1].Requests
	for i := range 6 {
		r, err := pol.Complete(context.Background(), rollout.Request{InstanceID: "x", Prompt: "fix the bug", N: 1, MaxTokens: 8, Seed: int64(i + 1)})
		if err != nil || len(r.Completions) != 1 {
			t.Fatalf("after the restart: %+v %v", r, err)
		}
	}
	if got := hp.Engines()[1].Requests - before; got != 3 {
		t.Fatalf("the restarted engine got %d of 6 round-robin requests, want 3", got)
	}
}

// engineErrors reads swerl_engine_errors_total of one engine and reason.
func engineErrors(t *testing.T, engine, reason string) float64 {
	t.Helper()
	fams, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != "swerl_engine_errors_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["engine"] == engine && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// waitUntil polls cond until it holds, failing the test after a minute.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	testenv.Eventually(t, time.Minute, what, cond)
}
