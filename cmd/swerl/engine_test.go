package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"swerl/gpu"
	"swerl/gpu/modeldir"
	"swerl/gpu/peft"
	"swerl/internal/engineapi"
	"swerl/schemas"
	"swerl/sinks/parquetio"
	"swerl/sinks/weightsync"
	"swerl/transforms/rollout"
)

// writeAdapter writes a rank-4 PEFT adapter on every module of base's
// architecture, with values drawn from seed (B nonzero, so merging it
// changes the model), and returns its folder.
func writeAdapter(t *testing.T, cfg gpu.Config, base, dir string, seed uint64) {
	t.Helper()
	const r = 4
	rng := rand.New(rand.NewPCG(seed, 7))
	a := &peft.Adapter{Config: peft.AdapterConfig{PeftType: "LORA", R: r, LoraAlpha: 8, TargetModules: peft.Modules, BaseModelNameOrPath: base}}
	for l := range cfg.NumHiddenLayers {
		for _, m := range peft.Modules {
			out, in, _ := peft.ModuleShape(cfg, m)
			for _, half := range []struct {
				b     bool
				shape []int
			}{{false, []int{r, in}}, {true, []int{out, r}}} {
				data := make([]float32, half.shape[0]*half.shape[1])
				for i := range data {
					data[i] = float32(rng.NormFloat64() * 0.3)
				}
				a.Tensors = append(a.Tensors, gpu.Tensor{Name: peft.TensorName(l, m, half.b), Shape: half.shape, Data: data})
			}
		}
	}
	if err := peft.Write(dir, a); err != nil {
		t.Fatal(err)
	}
}

// The weight sync end to end: `swerl serve --model BASE` in another
// process is the engine; the syncer pushes real PEFT adapter folders to it
// through vLLM's API; rollout requests then name each version's adapter and
// the samples carry exactly that version, read from the response.
func TestEngineSyncToServeProcess(t *testing.T) {
	root := t.TempDir()
	base := tinyModelAt(t, filepath.Join(root, "base"))
	mp, err := modeldir.Load(base)
	if err != nil {
		t.Fatal(err)
	}
	addr := serveProcess(t, "--model", base, "--max-seq", "256", "--max-tokens", "8")
	url := "http://" + addr + "/v1"
	served := weightsync.NewTable()
	s, err := weightsync.New(weightsync.Config{Engines: []weightsync.Engine{{URL: url, Kind: engineapi.VLLM}}, Keep: 1, Backoff: time.Millisecond,
		OnHeld: func(e weightsync.Engine, v engineapi.ServedVersion) { served.Set(e.URL, v) }})
	if err != nil {
		t.Fatal(err)
	}
	pol, err := rollout.Open(url+"?model=base", rollout.WithTable(served))
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	req := rollout.Request{InstanceID: "e2e", Prompt: "fix the bug", N: 2, MaxTokens: 8, Seed: 11}
	before, err := pol.Complete(context.Background(), req)
	if err != nil || before.PolicyVersion != -1 {
		t.Fatalf("base model: version %d, %v", before.PolicyVersion, err)
	}
	var answers []string
	for _, v := range []int64{5, 6} {
		dir := filepath.Join(root, "out", "checkpoints", fmt.Sprintf("v%06d", v))
		writeAdapter(t, mp.Model.Config, base, dir, uint64(v))
		t0 := time.Now()
		if err := s.Push(context.Background(), v, dir); err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		resp, err := pol.Complete(context.Background(), req)
		t.Logf("v%d: push (load, check and merge into a copy of the %d-parameter base) %v, then a rollout of 2×8 tokens %v",
			v, mp.Model.NumParams(), t1.Sub(t0).Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
		if err != nil || resp.PolicyVersion != v || len(resp.Completions) != 2 {
			t.Fatalf("after pushing v%d: version %d, %d completions, %v", v, resp.PolicyVersion, len(resp.Completions), err)
		}
		answers = append(answers, resp.Completions[0].Text+"|"+resp.Completions[1].Text)
	}
	if answers[0] == answers[1] || answers[0] == before.Completions[0].Text+"|"+before.Completions[1].Text {
		t.Errorf("the adapters did not change the answers: %q, base %q", answers, before.Completions[0].Text)
	}
	// The window of 1 unloaded v5; /v1/models lists the base and v6.
	mr, err := http.Get(url + "/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct{ ID, Root string } `json:"data"`
	}
	json.NewDecoder(mr.Body).Decode(&models)
	mr.Body.Close()
	if len(models.Data) != 2 || models.Data[1].ID != "swerl-v000006" || !strings.HasSuffix(models.Data[1].Root, "v000006") {
		t.Fatalf("models %+v", models.Data)
	}
	// A version the engine refuses (an adapter for another architecture)
	// is an error, and the rollouts stay on v6.
	bad := filepath.Join(root, "out", "checkpoints", "v000007")
	other := mp.Model.Config
	other.IntermediateSize *= 2
	writeAdapter(t, other, base, bad, 7)
	s2, _ := weightsync.New(weightsync.Config{Engines: []weightsync.Engine{{URL: url, Kind: engineapi.VLLM}}, Attempts: 2, Backoff: time.Millisecond})
	if err := s2.Push(context.Background(), 7, bad); err == nil || !strings.Contains(err.Error(), "version 7") {
		t.Fatalf("mismatched adapter: %v", err)
	}
	if resp, err := pol.Complete(context.Background(), req); err != nil || resp.PolicyVersion != 6 {
		t.Fatalf("after a refused push: version %d, %v", resp.PolicyVersion, err)
	}
}

// swerl run against swerl serve (another process) closes the loop: each
// published version is pushed to the server before the round that samples
// it, so every sample carries the version the learner published before its
// step, never -1. Full fine-tuning goes through SGLang's
// update_weights_from_disk (engine=sglang); with --lora-rank, each version
// is a PEFT adapter loaded through vLLM's load_lora_adapter and named by
// the rollouts.
func TestRunClosesTheLoopThroughServe(t *testing.T) {
	if testing.Short() {
		t.Skip("whole swerl runs against a server process")
	}
	var help bytes.Buffer
	runMain(context.Background(), []string{"run", "-h"}, &help, &help)
	for _, tc := range []struct {
		name, query string
		extra       []string
	}{
		{"full weights, SGLang API", "?engine=sglang&model=base", nil},
		{"LoRA adapters, vLLM API", "", []string{"--lora-rank", "4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if len(tc.extra) > 0 && !strings.Contains(help.String(), "-lora-rank") {
				t.Skip("swerl run has no --lora-rank in this build")
			}
			root := t.TempDir()
			base := tinyModelAt(t, filepath.Join(root, "base"))
			addr := serveProcess(t, "--model", base, "--max-seq", "1024")
			out := filepath.Join(root, "out")
			spec := "http://" + addr + "/v1" + tc.query
			args := append([]string{"run", "--repo", runRepo(t), "--out", out, "--model", base, "--policy", spec, "--sft-steps", "0", "--steps", "3",
				"--batch", "2", "--group-size", "2", "--max-tokens", "40", "--eval", "0", "--metrics-addr", "", "--seed", "3"}, tc.extra...)
			var stderr bytes.Buffer
			if code := runMain(context.Background(), args, &bytes.Buffer{}, &stderr); code != 0 {
				t.Fatalf("exit %d:\n%s", code, stderr.String())
			}
			samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
			if err != nil {
				t.Fatal(err)
			}
			byRound := map[string][]int64{}
			for _, s := range samples {
				byRound[s.GroupID[:8]] = append(byRound[s.GroupID[:8]], s.PolicyVersion)
			}
			var rounds []string
			for r := range byRound {
				rounds = append(rounds, r)
			}
			slices.Sort(rounds)
			// v0 is the base (no warm start); step k samples version k-1.
			if len(rounds) != 3 {
				t.Fatalf("rounds %v:\n%s", rounds, stderr.String())
			}
			for k, r := range rounds {
				for _, v := range byRound[r] {
					if v != int64(k) {
						t.Fatalf("round %s: sample versions %v, want all %d:\n%s", r, byRound[r], k, stderr.String())
					}
				}
			}
		})
	}
}
