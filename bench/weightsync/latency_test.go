// Package weightsync_test measures weight-sync latency through a real
// vLLM: from a version published (weightsync.Syncer.Push called) to the
// first completion drawn from it. It is a measurement, not a test: it
// runs only with SWERL_BENCH_WEIGHTSYNC=1 and the peers of
// scripts/install-python-peers.sh and scripts/install-vllm.sh. See
// README.md.
package weightsync_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"swerl/gpu"
	"swerl/gpu/gguf"
	"swerl/gpu/hf"
	"swerl/gpu/modeldir"
	"swerl/gpu/peft"
	"swerl/internal/engineapi"
	"swerl/internal/testenv"
	"swerl/internal/vllmtest"
	"swerl/sinks/weightsync"
)

func TestLatencyThroughVLLM(t *testing.T) {
	if os.Getenv("SWERL_BENCH_WEIGHTSYNC") == "" {
		t.Skip("a measurement: set SWERL_BENCH_WEIGHTSYNC=1 (peers: scripts/install-python-peers.sh, scripts/install-vllm.sh)")
	}
	n := 20
	if s := os.Getenv("SWERL_BENCH_VERSIONS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			t.Fatalf("SWERL_BENCH_VERSIONS=%q: want a positive count", s)
		}
	}
	root := t.TempDir()
	model := filepath.Join(root, "smollm2")
	if _, err := gguf.Import(testenv.SmolLM2GGUF(t), model, hf.F32); err != nil {
		t.Fatal(err)
	}
	p, err := modeldir.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"adapter", "full"} {
		t.Run(kind, func(t *testing.T) {
			var dirs []string
			o := vllmtest.Options{Model: model}
			if kind == "adapter" {
				o.MaxLoRARank = 8
				for v := 1; v <= n; v++ {
					lo, err := gpu.NewLoRA(p.Model.Config, gpu.LoRAConfig{Rank: 8, Seed: uint64(v)})
					if err != nil {
						t.Fatal(err)
					}
					dir := filepath.Join(root, fmt.Sprintf("adapter-%03d", v))
					if err := peft.Write(dir, peft.FromLoRA(lo, model)); err != nil {
						t.Fatal(err)
					}
					dirs = append(dirs, dir)
				}
			} else {
				// Full weights: the model's folder and a copy of it, in
				// turn; vLLM reads every tensor from disk either way.
				o.DevMode = true
				cp := filepath.Join(root, "copy")
				if err := os.CopyFS(cp, os.DirFS(model)); err != nil {
					t.Fatal(err)
				}
				for v := 1; v <= n; v++ {
					dirs = append(dirs, []string{model, cp}[v%2])
				}
			}
			srv := vllmtest.Start(t, o)
			sy, err := weightsync.New(weightsync.Config{Engines: []weightsync.Engine{{URL: srv.URL, Kind: engineapi.VLLM}}})
			if err != nil {
				t.Fatal(err)
			}
			var push, first []time.Duration
			for i, dir := range dirs {
				v := int64(i + 1)
				name := "base"
				if kind == "adapter" {
					name = engineapi.AdapterName(v)
				}
				t0 := time.Now()
				if err := sy.Push(context.Background(), v, dir); err != nil {
					t.Fatalf("version %d: %v\n%s", v, err, vllmtest.Tail(srv.Log.String(), 30))
				}
				t1 := time.Now()
				complete(t, srv.URL, name)
				push, first = append(push, t1.Sub(t0)), append(first, time.Since(t0))
			}
			med, mx := stats(first)
			pmed, pmx := stats(push)
			t.Logf("%s, %d versions: published → first sample median %v, max %v (the push alone: median %v, max %v)",
				kind, n, med, mx, pmed, pmx)
		})
	}
}

// complete draws one token from model at srv and checks that the answer
// names it.
func complete(t *testing.T, url, model string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": "def add(a, b):", "max_tokens": 1, "temperature": 1})
	resp, err := http.Post(url+"/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Model string `json:"model"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.Model != model {
		t.Fatalf("completion from %s: HTTP %d, model %q, %v", model, resp.StatusCode, out.Model, err)
	}
}

func stats(d []time.Duration) (median, maximum time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond)
}
