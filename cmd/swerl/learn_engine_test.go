package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"swerl/internal/engineapi"
	"swerl/sinks/parquetio"
	"swerl/transforms/rollout"
)

// swerl learn --engine pushes each version it publishes to the engines:
// `swerl serve` in another process is the engine. A LoRA run's adapters
// reach it through vLLM's load_lora_adapter (its /v1/models then lists the
// newest); a full run's checkpoints through SGLang's
// update_weights_from_disk (its completions then report the newest
// version). A second engine URL that refuses every push is logged, and
// the learner trains on.
func TestLearnPushesToEngines(t *testing.T) {
	if testing.Short() {
		t.Skip("swerl learn against a server process")
	}
	for _, tc := range []struct {
		name  string
		extra []string
	}{
		{"LoRA adapters, vLLM API", []string{"--lora-rank", "2", "--engine-kind", "vllm"}},
		{"full weights, SGLang API", []string{"--engine-kind", "sglang"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			base := tinyModelAt(t, filepath.Join(root, "base"))
			file := filepath.Join(root, "samples.parquet")
			if err := parquetio.WriteFile(file, pairGroups(3)); err != nil {
				t.Fatal(err)
			}
			addr := serveProcess(t, "--model", base, "--max-seq", "256", "--max-tokens", "4")
			url := "http://" + addr + "/v1"
			// A closed port: every push to it fails after the retries.
			dead := "http://127.0.0.1:1/v1"
			args := append([]string{"learn", "--model", base, "--samples", file, "--out", filepath.Join(root, "out"), "--batch-groups", "1",
				"--max-staleness", "-1", "--max-seq", "128", "--metrics-addr", "", "--lr", "1e-3", "--engine", url + "," + dead, "--engine-retries", "1"}, tc.extra...)
			var stderr bytes.Buffer
			if code := runMain(context.Background(), args, &bytes.Buffer{}, &stderr); code != 0 {
				t.Fatalf("learn exit %d:\n%s", code, stderr.String())
			}
			if !strings.Contains(stderr.String(), "trained 3 steps") || !strings.Contains(stderr.String(), "127.0.0.1:1") {
				t.Errorf("want 3 steps and the dead engine's failures logged:\n%s", stderr.String())
			}
			if len(tc.extra) > 2 && tc.extra[0] == "--lora-rank" {
				models := servedModels(t, url)
				if len(models) < 2 || models[len(models)-1] != engineapi.AdapterName(3) {
					t.Fatalf("served models %v, want the base and %s last", models, engineapi.AdapterName(3))
				}
				// A resumed learner (nothing new to train) pushes the
				// version it starts from; the engine, which holds it from
				// the first process, keeps serving it.
				stderr.Reset()
				resumed := append([]string{"learn", "--resume"}, args[3:]...) // without --model
				resumed[slices.Index(resumed, "--engine")+1] = url            // the live engine only
				if code := runMain(context.Background(), resumed, &bytes.Buffer{}, &stderr); code != 0 {
					t.Fatalf("resumed learn exit %d:\n%s", code, stderr.String())
				}
				if strings.Contains(stderr.String(), "did not load") {
					t.Errorf("the resumed learner's push failed:\n%s", stderr.String())
				}
				if models := servedModels(t, url); models[len(models)-1] != engineapi.AdapterName(3) {
					t.Fatalf("after the resumed learner: served models %v", models)
				}
				return
			}
			pol, err := rollout.Open(url + "?engine=sglang&model=base")
			if err != nil {
				t.Fatal(err)
			}
			defer pol.Close()
			resp, err := pol.Complete(context.Background(), rollout.Request{InstanceID: "learn", Prompt: "fix the bug", N: 1, MaxTokens: 4, Seed: 1})
			if err != nil || resp.PolicyVersion != 3 {
				t.Fatalf("after learn: served version %d, %v", resp.PolicyVersion, err)
			}
		})
	}
}

// servedModels returns the ids GET /models lists, in order.
func servedModels(t *testing.T, url string) []string {
	t.Helper()
	r, err := http.Get(url + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var m struct {
		Data []struct{ ID string } `json:"data"`
	}
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, d := range m.Data {
		ids = append(ids, d.ID)
	}
	return ids
}

func TestLearnEngineFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--engine", "h:8000"}, `"h:8000" is not`},
		{[]string{"--engine", "http://h:8000", "--engine-kind", "tgi"}, `kind "tgi"`},
		{[]string{"--engine", "http://h:8000", "--engine-path-map", "nope"}, "LEARNER_PREFIX=ENGINE_PREFIX"},
		{[]string{"--engine-path-map", "/a=/b"}, "without --engine"},
		{[]string{"--engine", "http://h:8000", "--engine-retries", "-1"}, "--engine-retries -1"},
		{[]string{"--engine", "http://h:8000", "--engine-timeout", "0s"}, "--engine-timeout 0s"},
	} {
		var se bytes.Buffer
		args := append([]string{"learn", "--model", t.TempDir(), "--samples", "x.parquet", "--metrics-addr", ""}, tc.args...)
		if code := runMain(context.Background(), args, &bytes.Buffer{}, &se); code != 2 || !strings.Contains(se.String(), tc.want) {
			t.Errorf("%v: exit %d: %s, want %q", tc.args, code, se.String(), tc.want)
		}
	}
}
