package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/gpu/learner"
	"swerl/gpu/learner/learnertest"
	"swerl/gpu/modeldir"
	"swerl/internal/testenv"
	"swerl/pipelines/train"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/kafkaio/kafkaiotest"
	"swerl/sinks/parquetio"
)

// killRNG returns the random source of a kill test and its number of kills:
// SWERL_KILL_CYCLES (default 3; the documented long run is 20) and
// SWERL_KILL_SEED, both logged so a failure can be replayed. stream keeps
// the tests' random points apart for one seed. A -short run skips the
// test.
func killRNG(t *testing.T, stream uint64) (*rand.Rand, int) {
	t.Helper()
	if testing.Short() {
		t.Skip("kill test: seconds of child processes")
	}
	cycles := envInt(t, "SWERL_KILL_CYCLES", 3)
	seed := uint64(envInt(t, "SWERL_KILL_SEED", int(time.Now().UnixNano()%1e6)))
	t.Logf("SWERL_KILL_CYCLES=%d SWERL_KILL_SEED=%d", cycles, seed)
	return rand.New(rand.NewPCG(seed, stream)), cycles
}

// tinyModel writes the built-in tiny model to dir/model (tinyModelAt).
func tinyModel(t *testing.T, dir string) string {
	t.Helper()
	return tinyModelAt(t, filepath.Join(dir, "model"))
}

// tinyModelAt writes the built-in tiny model with seed 1, what `swerl
// model init` writes by default, to path and returns path.
func tinyModelAt(t *testing.T, path string) string {
	t.Helper()
	if _, err := modeldir.Init(path, "tiny", 1); err != nil {
		t.Fatal(err)
	}
	return path
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

// writeSamples writes groups groups of G samples (learnertest.Interleaved) as
// three Parquet files under dir and returns the ids.
func writeSamples(t *testing.T, dir string, rng *rand.Rand, groups, G int) []string {
	t.Helper()
	rows, ids := learnertest.Interleaved(rng, groups, G, 3*G, 5)
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
	rng, cycles := killRNG(t, 2)
	dir := t.TempDir()
	const G, batch = 2, 3
	steps := max(6, 4*cycles)
	want := writeSamples(t, filepath.Join(dir, "samples"), rng, batch*steps, G)
	out := filepath.Join(dir, "out")
	args := []string{"learn", "--model", tinyModel(t, dir), "--resume", "--samples", filepath.Join(dir, "samples"), "--out", out,
		"--batch-groups", fmt.Sprint(batch), "--max-staleness", "-1", "--max-seq", "64", "--lr", "1e-3", "--metrics-addr", ""}
	// A step takes tens of milliseconds, starting a learner some hundreds:
	// the window a kill falls in doubles after a run that published nothing.
	stalls, versions := 0, 0
	for i := 0; i < cycles; i++ {
		window := 400 << min(stalls, 3)
		killed, log := runCLI(t, args, time.Duration(50+rng.IntN(window))*time.Millisecond, 2*time.Minute)
		if testing.Verbose() {
			t.Logf("cycle %d (killed %v):\n%s", i, killed, log)
		}
		rows, _ := parquetio.ReadFile[schemas.WeightVersion](filepath.Join(out, "index.parquet"))
		if stalls++; len(rows) > versions {
			stalls = 0
		}
		versions = len(rows)
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
// --brokers` side by side on a broker of the test process and SIGKILLs each
// of them SWERL_KILL_CYCLES times at random points, restarting it (train
// resumes from its acknowledged positions, learn with --resume from its
// checkpoint and consumer group): train 1-5 s into each run until it has
// read every instance, learn 0-1.5 s after each run's first step. Then:
// train's samples/ holds every sample once, the learner's index is
// contiguous and its records name every sample exactly once (train, killed
// between producing a sample and acknowledging its instance, produces it
// to Kafka again; the learner trains 3 groups a step).
func TestTrainAndLearnSurviveKill(t *testing.T) {
	rng, cycles := killRNG(t, 2)
	trainRNG := rand.New(rand.NewPCG(rng.Uint64(), 3))
	r := newTrainLearnRig(t, max(6, 2*cycles), kafkaio.BrokerOptions{Partitions: 2})
	tr, le := startCLI(t, r.trainArgs...), startCLI(t, r.learnArgs...)
	trainDone := false
	errs := make(chan error, 2)
	go func() { // train's kills
		for i := 0; i < cycles; i++ {
			// A random kill point, on purpose: not a wait for a state.
			time.Sleep(time.Duration(1000+trainRNG.IntN(4000)) * time.Millisecond)
			exited, err := tr.kill()
			r.logf("train kill %d (exited %v):\n%s", i, exited, tr.out)
			switch {
			case err != nil:
				errs <- fmt.Errorf("swerl train failed: %v\n%s", err, tr.out)
				return
			case exited:
				trainDone = true
				errs <- nil
				return
			}
			if tr, err = newCLI(r.trainArgs...); err != nil {
				errs <- err
				return
			}
		}
		errs <- nil
	}()
	go func() { // learn's kills
		var err error
		le, err = killLearner(rng, cycles, r.lout, 1+r.steps, le, r.logf)
		errs <- err
	}()
	// Both loops end (a failed one at once, the other after its kills)
	// before the processes are touched here.
	err1, err2 := <-errs, <-errs
	if err := errors.Join(err1, err2); err != nil {
		tr.kill()
		le.kill()
		t.Fatal(err)
	}
	r.finish(tr, trainDone, le)
}

// indexRows is the number of rows of the index under out (0 without one).
func indexRows(out string) int {
	rows, err := parquetio.ReadFile[schemas.WeightVersion](filepath.Join(out, "index.parquet"))
	if err != nil {
		return 0
	}
	return len(rows)
}

// waitRows waits until the index under out has n rows, at most all, for up
// to two minutes.
func waitRows(out string, n, all int) error {
	if !testenv.WaitFor(2*time.Minute, func() bool { return indexRows(out) >= min(n, all) }) {
		return fmt.Errorf("the learner has not published v%d in two minutes", n-1)
	}
	return nil
}

// learnArgs are the flags of a Kafka learner in the kill tests: 3 groups a
// step, resuming when out has versions.
func learnArgs(brokers, model, out string) []string {
	return []string{"learn", "--brokers", brokers, "--model", model, "--resume", "--out", out, "--batch-groups", "3",
		"--max-staleness", "-1", "--max-seq", "64", "--metrics-addr", "", "--progress-every", "1m"}
}

// killLearner SIGKILLs the learner cycles times, each 0-1.5 s after the
// restarted learner published its first version (a restarted learner
// waits up to 6 s for its consumer group to drop the member killed
// before), and returns the learner running after the last kill.
func killLearner(rng *rand.Rand, cycles int, out string, all int, le *cli, logf func(string, ...any)) (*cli, error) {
	versions := 0
	for i := 0; i < cycles; i++ {
		if err := waitRows(out, max(versions, 1)+1, all); err != nil {
			return le, err
		}
		// A random kill point after the version, on purpose.
		time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
		exited, err := le.kill()
		logf("learn kill %d (exited %v):\n%s", i, exited, le.out)
		if exited {
			return le, fmt.Errorf("swerl learn exited (%v):\n%s", err, le.out)
		}
		versions = indexRows(out)
		if le, err = newCLI(le.cmd.Args[1:]...); err != nil {
			return le, err
		}
	}
	return le, nil
}

// TestLearnKafkaSurvivesKill kills a Kafka learner alone, while the samples
// topic fills at a steady pace (interleaved groups, some samples twice), so
// that every kill lands while the learner holds groups for its next step
// or incomplete ones; the pace spreads the samples over about 7 s a kill.
// Every sample is trained exactly once and the index is contiguous.
func TestLearnKafkaSurvivesKill(t *testing.T) {
	rng, cycles := killRNG(t, 2)
	const G, batch = 2, 3
	steps := max(6, 2*cycles)
	rows, want := learnertest.Interleaved(rng, batch*steps, G, 3*G, 5)
	b := kafkaiotest.Start(t, kafkaio.BrokerOptions{Partitions: 2})
	kc := b.Config("")
	w, err := kafkaio.NewWriter(kafkaio.WriteConfig{Config: kc, Topic: kc.Topic(kafkaio.Samples), BatchTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pace := time.Duration(cycles) * 7 * time.Second / time.Duration(len(rows))
	produced := make(chan error, 1)
	go func() {
		for i := range rows {
			v, err := kafkaio.Encode(&rows[i])
			if err == nil {
				err = w.WriteMessages(ctx, kafka.Message{Key: []byte(rows[i].GroupID), Value: v})
			}
			if err != nil {
				produced <- err
				return
			}
			time.Sleep(pace) // paces the producer on purpose, so kills land mid-stream
		}
		produced <- nil
	}()
	dir := t.TempDir()
	out := filepath.Join(dir, "learn")
	le := startCLI(t, learnArgs(b.Addrs()[0], tinyModel(t, dir), out)...)
	le, err = killLearner(rng, cycles, out, 1+steps, le, t.Logf)
	defer le.kill()
	if err != nil {
		t.Fatal(err)
	}
	if err := <-produced; err != nil {
		t.Fatal(err)
	}
	if err := waitRows(out, 1+steps, 1+steps); err != nil {
		t.Fatalf("%v:\n%s", err, le.out)
	}
	// Waits for something not to happen, which no condition can: a version
	// past the last within 2 s would be a group trained twice.
	time.Sleep(2 * time.Second)
	if exited, err := le.kill(); exited {
		t.Fatalf("swerl learn exited (%v):\n%s", err, le.out)
	}
	checkTrained(t, out, want, 1+steps)
}

// trainLearnRig is swerl train and swerl learn over a broker of the test
// process: steps×3 instances in the instances topic, train's rollouts from
// a slow policy server on loopback (250 ms a request, so that kills and
// outages land inside them; it wants the bearer key the children inherit
// from SWERL_API_KEY), the learner taking 3 groups of 2 a step.
type trainLearnRig struct {
	t                    *testing.T
	broker               *kafkaiotest.Broker
	steps, samples       int
	tout, lout           string
	trainArgs, learnArgs []string
	mu                   sync.Mutex
	logs                 []string
}

func newTrainLearnRig(t *testing.T, steps int, opts kafkaio.BrokerOptions) *trainLearnRig {
	t.Helper()
	dir := t.TempDir()
	const G, batch = 2, 3
	n := batch * steps
	set := traintest.New(t, dir, n, G, nil) // the instances (its completions file is not used)
	b := kafkaiotest.Start(t, opts)
	r := &trainLearnRig{t: t, broker: b, steps: steps, samples: n * G, tout: filepath.Join(dir, "train"), lout: filepath.Join(dir, "learn")}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := train.Feed(ctx, b.Config(""), set.InstancesPath, filepath.Join(dir, "deadletter")); err != nil {
		t.Fatal(err)
	}
	brokers := b.Addrs()[0]
	t.Setenv("SWERL_API_KEY", "kill-test-key")
	srv := httptest.NewServer(slowPolicy(t, "kill-test-key", 250*time.Millisecond))
	t.Cleanup(srv.Close)
	r.trainArgs = []string{"train", "--brokers", brokers, "--policy", srv.URL + "/v1?retries=50", "--group-size", fmt.Sprint(G),
		"--concurrency", "1", "--out", r.tout, "--metrics-addr", "", "--progress-every", "1m"}
	r.learnArgs = learnArgs(brokers, tinyModel(t, dir), r.lout)
	return r
}

func (r *trainLearnRig) logf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.logs = append(r.logs, fmt.Sprintf(format, args...))
}

// finish waits for train to end (unless trainDone), then for the learner's
// last step and 2 s more (a version past it would be a group trained
// twice), kills the learner and checks train's samples/ and the learner's
// index and records.
func (r *trainLearnRig) finish(tr *cli, trainDone bool, le *cli) {
	t := r.t
	t.Helper()
	defer func() {
		if testing.Verbose() || t.Failed() {
			for _, l := range r.logs {
				t.Log(l)
			}
			t.Logf("last train:\n%s\nlast learn:\n%s", tr.out, le.out)
		}
	}()
	if !trainDone {
		select {
		case <-tr.done:
			if err := tr.err; err != nil {
				t.Fatalf("swerl train failed: %v", err)
			}
		case <-time.After(5 * time.Minute):
			tr.kill()
			t.Fatal("swerl train did not finish in 5 minutes")
		}
	}
	if err := waitRows(r.lout, 1+r.steps, 1+r.steps); err != nil {
		le.kill()
		t.Fatal(err)
	}
	// Waits for something not to happen: no version past the last.
	time.Sleep(2 * time.Second)
	if exited, err := le.kill(); exited {
		t.Fatalf("swerl learn exited (%v)", err)
	}
	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(r.tout, "samples"))
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
	if len(want) != r.samples {
		t.Fatalf("train kept %d samples, want %d", len(want), r.samples)
	}
	checkTrained(t, r.lout, want, 1+r.steps)
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
		time.Sleep(delay) // a slow engine on purpose
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
