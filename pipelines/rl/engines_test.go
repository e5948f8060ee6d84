package rl

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"swerl/schemas"
	"swerl/sinks/engine"
	"swerl/transforms/rollout"
)

// Before each round (and before BeforeRL) the engines hold the newest
// published version: an SGLang-style engine is asked to load each full
// checkpoint folder, and every round's rollouts run after the load of the
// version they train from. An engine that refuses does not stop the run.
func TestEngineSyncBeforeEachRound(t *testing.T) {
	var mu sync.Mutex
	var loads []string
	refuse := false
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			ModelPath string `json:"model_path"`
		}
		if r.URL.Path != "/update_weights_from_disk" || json.NewDecoder(r.Body).Decode(&body) != nil {
			http.Error(w, "bad request", 400)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if refuse {
			w.WriteHeader(400)
			json.NewEncoder(w).Encode(map[string]any{"success": false, "message": "out of memory"})
			return
		}
		loads = append(loads, filepath.Base(body.ModelPath))
		json.NewEncoder(w).Encode(map[string]any{"success": true, "message": "Succeeded to update model weights.", "num_paused_requests": 0})
	}))
	defer ts.Close()
	cfg, _ := testRun(t, 3)
	cfg.SFTSteps = 2
	var held []int64
	s, err := engine.New(engine.Config{Engines: []engine.Engine{{URL: ts.URL, Kind: engine.SGLang}}, Retries: -1,
		OnHeld: func(_ engine.Engine, v rollout.ServedVersion) { held = append(held, v.Version) }})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sync = EngineSync(s, cfg.Out, cfg.Log)
	cfg.BeforeRL = func(context.Context) error {
		if !slices.Equal(loads, []string{"v000002"}) {
			t.Errorf("before RL the engine holds %v, want the warm start's v000002", loads)
		}
		return nil
	}
	inner := cfg.Rollouts
	var atRound []string
	cfg.Rollouts = func(ctx context.Context, round int, ins []schemas.Instance) ([]schemas.Sample, error) {
		mu.Lock()
		atRound = append(atRound, loads[len(loads)-1])
		if round == 2 {
			refuse = true // the push of v000004 will fail
		}
		mu.Unlock()
		return inner(ctx, round, ins)
	}
	cfg.Steps = 3
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.RLSteps != 3 || !slices.Equal(atRound, []string{"v000002", "v000003", "v000003"}) || !slices.Equal(held, []int64{2, 3}) {
		t.Fatalf("steps %d, engine at each round %v, held %v", sum.RLSteps, atRound, held)
	}
}
