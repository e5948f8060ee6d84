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

	"swerl/internal/engineapi"
	"swerl/schemas"
	"swerl/sinks/weightsync"
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
	s, err := weightsync.New(weightsync.Config{Engines: []weightsync.Engine{{URL: ts.URL, Kind: engineapi.SGLang}}, Retries: -1,
		OnHeld: func(_ weightsync.Engine, v engineapi.ServedVersion) { held = append(held, v.Version) }})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sync = s.Round(cfg.Out)
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

// A spec naming several engines syncs every one of them, and each engine's
// version is what the rollout policy names on it; a spec with sync=false
// syncs none.
func TestSpecSyncPushesToEveryEngine(t *testing.T) {
	var mu sync.Mutex
	loads := map[string][]string{}
	srv := func(name string) *httptest.Server {
		return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var body struct {
				ModelPath string `json:"model_path"`
			}
			if r.URL.Path != "/update_weights_from_disk" || json.NewDecoder(r.Body).Decode(&body) != nil {
				http.Error(w, "bad request", 400)
				return
			}
			mu.Lock()
			loads[name] = append(loads[name], filepath.Base(body.ModelPath))
			mu.Unlock()
			json.NewEncoder(w).Encode(map[string]any{"success": true})
		}))
	}
	a, b := srv("a"), srv("b")
	defer a.Close()
	defer b.Close()
	served := weightsync.NewTable()
	cfg, _ := testRun(t, 1)
	cfg.SFTSteps = 1
	push, err := weightsync.SpecSyncer(a.URL+"/v1,"+b.URL+"/v1?engine=sglang&model=m", served, 0, cfg.Log)
	if err != nil || push == nil {
		t.Fatalf("SpecSyncer: %v", err)
	}
	cfg.Sync = push.Round(cfg.Out)
	cfg.Steps = 1
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(loads["a"], loads["b"]) || len(loads["a"]) == 0 {
		t.Fatalf("engine a loaded %v, engine b %v: want the same versions on both", loads["a"], loads["b"])
	}
	for _, u := range []string{a.URL, b.URL} {
		if sv, ok := served.Get(u); !ok || engineapi.AdapterName(sv.Version) != "swerl-"+loads["a"][len(loads["a"])-1] {
			t.Fatalf("%s: served %+v, %v; loads %v", u, sv, ok, loads["a"])
		}
	}
	if s, err := weightsync.SpecSyncer(a.URL+"/v1,"+b.URL+"/v1?sync=false", served, 0, cfg.Log); err != nil || s != nil {
		t.Fatalf("sync=false: %v %v", s != nil, err)
	}
	if _, err := weightsync.SpecSyncer(a.URL+"/v1?model=m,"+b.URL+"/v1", served, 0, cfg.Log); err == nil {
		t.Fatal("options before the last URL must fail")
	}
}
