package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"swerl/gpu/learner"
	"swerl/gpu/modeldir"
	"swerl/pipelines/train"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/parquetio"
)

// killRNG returns the random source of a kill test and its number of kills:
// SWERL_KILL_CYCLES (default 3; the documented long run is 20) and
// SWERL_KILL_SEED, both logged so a failure can be replayed.
func killRNG(t *testing.T) (*rand.Rand, int) {
	t.Helper()
	if testing.Short() {
		t.Skip("kill test: seconds of child processes")
	}
	cycles := envInt(t, "SWERL_KILL_CYCLES", 3)
	seed := uint64(envInt(t, "SWERL_KILL_SEED", int(time.Now().UnixNano()%1e6)))
	t.Logf("SWERL_KILL_CYCLES=%d SWERL_KILL_SEED=%d", cycles, seed)
	return rand.New(rand.NewPCG(seed, 2)), cycles
}

func tinyModel(t *testing.T, dir string) string {
	t.Helper()
	m := filepath.Join(dir, "model")
	if _, err := modeldir.Init(m, "tiny", 1); err != nil {
		t.Fatal(err)
	}
	return m
}

// checkTrained checks the learner's output root after its last run: the
// index is contiguous from v0 with versions rows, and the records of its
// versions (learner.StepRecord) name every sample of want exactly once.
func checkTrained(t *testing.T, out string, want []string, versions int) {
	t.Helper()
	rows, err := parquetio.ReadFile[schemas.WeightVersion](filepath.Join(out, "index.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rows {
		if r.Version != int64(i) {
			t.Fatalf("index row %d is v%d: not contiguous", i, r.Version)
		}
	}
	if len(rows) != versions {
		t.Errorf("%d versions in the index, want %d", len(rows), versions)
	}
	trained := map[string]int64{}
	for _, r := range rows[1:] {
		rec, err := learner.ReadRecord(out, r.Version)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range rec.Samples {
			if v, dup := trained[id]; dup {
				t.Errorf("sample %s trained in v%d and again in v%d", id, v, r.Version)
			}
			trained[id] = r.Version
		}
	}
	for _, id := range want {
		if _, ok := trained[id]; !ok {
			t.Errorf("sample %s never trained", id)
		}
	}
	if len(trained) != len(want) {
		t.Errorf("%d samples trained, want %d", len(trained), len(want))
	}
}

// writeSamples writes groups groups of G samples as Parquet files under dir,
// the members of a group spread over the next groups and some rows twice
// (the train pipeline's output after its own crash), and returns the ids.
func writeSamples(t *testing.T, dir string, rng *rand.Rand, groups, G int) []string {
	t.Helper()
	type member struct{ g, i int }
	var order []member
	for g := range groups {
		for i := range G {
			order = append(order, member{g, i})
		}
	}
	for i := range order {
		j := min(len(order)-1, i+rng.IntN(3*G))
		order[i], order[j] = order[j], order[i]
	}
	var rows []schemas.Sample
	var ids []string
	for k, m := range order {
		gid := fmt.Sprintf("r/o/r#%d@0", m.g)
		s := schemas.Sample{Rollout: schemas.Rollout{SchemaVersion: schemas.Version, ID: fmt.Sprintf("%s/%d", gid, m.i),
			InstanceID: fmt.Sprintf("o/r#%d", m.g), GroupID: gid, GroupSize: G, Index: m.i, PolicyVersion: -1,
			Prompt: "fix it", Completion: fmt.Sprint("edit ", m.i), FinishReason: "stop"},
			Reward: float64(m.i), Advantage: float64(m.i) - float64(G-1)/2, GroupComplete: true}
		rows = append(rows, s)
		ids = append(ids, s.ID)
		if k%5 == 2 {
			rows = append(rows, s)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for f, n := 0, 0; n < len(rows); f++ {
		end := min(len(rows), n+len(rows)/3+1)
		if err := parquetio.WriteFile(filepath.Join(dir, fmt.Sprintf("part-%03d.parquet", f)), rows[n:end]); err != nil {
			t.Fatal(err)
		}
		n = end
	}
	return ids
}

// TestLearnOfflineSurvivesKill kills `swerl learn --samples` with SIGKILL
// at random points and resumes it until it finishes: every sample is
// trained exactly once (the records of the index's versions), the index is
// contiguous, and a resumed run goes on after what it trained instead of
// starting the files again.
func TestLearnOfflineSurvivesKill(t *testing.T) {
	rng, cycles := killRNG(t)
	dir := t.TempDir()
	const G, batch = 2, 3
	steps := max(6, 2*cycles)
	want := writeSamples(t, filepath.Join(dir, "samples"), rng, batch*steps, G)
	out := filepath.Join(dir, "out")
	args := []string{"learn", "--model", tinyModel(t, dir), "--resume", "--samples", filepath.Join(dir, "samples"), "--out", out,
		"--batch-groups", fmt.Sprint(batch), "--max-staleness", "-1", "--max-seq", "64", "--lr", "1e-3", "--metrics-addr", ""}
	for i := 0; i < cycles; i++ {
		// A step takes tens of milliseconds: most kills land in one.
		killed, log := runCLI(t, args, time.Duration(50+rng.IntN(400))*time.Millisecond, 2*time.Minute)
		if testing.Verbose() {
			t.Logf("cycle %d (killed %v):\n%s", i, killed, log)
		}
		if !killed {
			t.Logf("cycle %d: the run finished before its kill", i)
			break
		}
	}
	if _, log := runCLI(t, args, 0, 2*time.Minute); testing.Verbose() {
		t.Logf("final run:\n%s", log)
	}
	checkTrained(t, out, want, 1+steps)
}

// TestTrainAndLearnSurviveKill runs `swerl train --brokers` and `swerl learn
// --brokers` side by side on a broker of the test process and kills one of
// them with SIGKILL at random points, restarting it (train resumes from its
// acknowledged positions, learn with --resume from its checkpoint and
// consumer group), until train has read every instance and the learner has
// trained every group (several a step). Then: train's samples/ holds every
// sample once, the learner's index is contiguous and its records name every
// sample exactly once, though train, killed between writing a sample and
// acknowledging its instance, produces some samples to Kafka twice.
func TestTrainAndLearnSurviveKill(t *testing.T) {
	rng, cycles := killRNG(t)
	dir := t.TempDir()
	const G, batch = 2, 3
	steps := max(6, cycles)
	n := batch * steps
	set, err := traintest.Write(dir, n, G, nil) // the instances (its completions file is not used)
	if err != nil {
		t.Fatal(err)
	}
	b, err := kafkaio.StartBroker(kafkaio.BrokerOptions{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	kc := b.Config("")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := train.Feed(ctx, kc, set.InstancesPath, filepath.Join(dir, "deadletter")); err != nil {
		t.Fatal(err)
	}
	brokers := b.Addrs()[0]
	tout, lout := filepath.Join(dir, "train"), filepath.Join(dir, "learn")
	// A policy server on loopback that takes its time (so that kills land
	// inside train's rollouts) and wants the API key the children inherit.
	t.Setenv("SWERL_API_KEY", "kill-test-key")
	srv := httptest.NewServer(slowPolicy(t, "kill-test-key", 250*time.Millisecond))
	defer srv.Close()
	trainArgs := []string{"train", "--brokers", brokers, "--policy", srv.URL + "/v1?retries=50", "--group-size", fmt.Sprint(G),
		"--concurrency", "1", "--out", tout, "--metrics-addr", "", "--progress-every", "1m"}
	learnArgs := []string{"learn", "--brokers", brokers, "--model", tinyModel(t, dir), "--resume", "--out", lout,
		"--batch-groups", fmt.Sprint(batch), "--max-staleness", "-1", "--max-seq", "64", "--metrics-addr", "", "--progress-every", "1m"}

	tr, le := startCLI(t, trainArgs...), startCLI(t, learnArgs...)
	trainDone := false
	var logs []string
	for i := 0; i < cycles; i++ {
		// Train and learn by turns, train while it runs.
		time.Sleep(time.Duration(300+rng.IntN(3000)) * time.Millisecond)
		if !trainDone && i%2 == 0 {
			exited, err := tr.kill()
			logs = append(logs, fmt.Sprintf("cycle %d: train (exited %v):\n%s", i, exited, tr.out))
			if err != nil {
				t.Fatalf("swerl train failed: %v\n%s", err, tr.out)
			}
			if trainDone = exited; !exited {
				tr = startCLI(t, trainArgs...)
			}
			continue
		}
		exited, err := le.kill()
		logs = append(logs, fmt.Sprintf("cycle %d: learn (exited %v):\n%s", i, exited, le.out))
		if exited {
			t.Fatalf("swerl learn exited (%v):\n%s", err, le.out)
		}
		le = startCLI(t, learnArgs...)
	}
	if !trainDone {
		select {
		case err := <-tr.done:
			if err != nil {
				t.Fatalf("swerl train failed: %v\n%s", err, tr.out)
			}
		case <-time.After(5 * time.Minute):
			t.Fatalf("swerl train did not finish:\n%s", tr.out)
		}
	}
	// The learner streams on: wait for its last step, then a little more
	// (a version past it would be a group trained twice), and kill it.
	index := filepath.Join(lout, "index.parquet")
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		rows, err := parquetio.ReadFile[schemas.WeightVersion](index)
		if err == nil && len(rows) >= 1+steps {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the learner published %d versions in 5 minutes, want %d:\n%s", len(rows), 1+steps, le.out)
		}
	}
	time.Sleep(2 * time.Second)
	if exited, err := le.kill(); exited {
		t.Fatalf("swerl learn exited (%v):\n%s", err, le.out)
	}
	if testing.Verbose() {
		for _, l := range logs {
			t.Log(l)
		}
		t.Logf("last learn:\n%s", le.out)
	}

	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(tout, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	seen := map[string]bool{}
	for _, s := range samples {
		if seen[s.ID] {
			t.Errorf("train kept sample %s twice", s.ID)
		}
		seen[s.ID] = true
		want = append(want, s.ID)
	}
	if len(want) != n*G {
		t.Fatalf("train kept %d samples, want %d", len(want), n*G)
	}
	checkTrained(t, lout, want, 1+steps)
}

// slowPolicy is an OpenAI-compatible chat-completions endpoint that answers
// after delay with n completions differing by index (unscorable answers:
// their reward is a format error), and 401 without the bearer key.
func slowPolicy(t *testing.T, key string, delay time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		var req struct {
			N int `json:"n"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.N < 1 {
			http.Error(w, fmt.Sprintf("bad request (n %d): %v", req.N, err), http.StatusBadRequest)
			return
		}
		time.Sleep(delay)
		type msg struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		}
		type choice struct {
			Index        int    `json:"index"`
			Message      msg    `json:"message"`
			FinishReason string `json:"finish_reason"`
		}
		var resp struct {
			Choices []choice `json:"choices"`
		}
		for i := range req.N {
			resp.Choices = append(resp.Choices, choice{Index: i, FinishReason: "stop",
				Message: msg{Role: "assistant", Content: fmt.Sprintf("<think>attempt %d</think>", i)}})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(&resp)
	})
}
