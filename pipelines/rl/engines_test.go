package rl

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"

	"swerl/internal/engineapi"
	"swerl/internal/fakeengine"
	"swerl/schemas"
	"swerl/sinks/weightsync"
)

// Before each round (and before BeforeRL) the engines hold the newest
// published version: an SGLang-style engine is asked to load each full
// checkpoint folder, and every round's rollouts run after the load of the
// version they train from. An engine that refuses does not stop the run.
func TestEngineSyncBeforeEachRound(t *testing.T) {
	g := &fakeengine.SGLang{}
	refuse := false
	g.Fail = func(int, fakeengine.Call) (int, map[string]any) {
		if refuse {
			return 400, map[string]any{"success": false, "message": "out of memory"}
		}
		return 0, nil
	}
	ts := httptest.NewServer(g)
	defer ts.Close()
	cfg, _ := testRun(t, 3)
	cfg.SFTSteps = 2
	var held []int64
	s, err := weightsync.New(weightsync.Config{Engines: []weightsync.Engine{{URL: ts.URL, Kind: engineapi.SGLang}}, Attempts: 1,
		OnHeld: func(_ weightsync.Engine, v engineapi.ServedVersion) { held = append(held, v.Version) }})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Sync = s.Round(cfg.Learner.Out)
	cfg.BeforeRL = func(context.Context) error {
		if loads := loadedModels(g); !slices.Equal(loads, []string{"v000002"}) {
			t.Errorf("before RL the engine holds %v, want the warm start's v000002", loads)
		}
		return nil
	}
	inner := cfg.Rollouts
	var atRound []string
	cfg.Rollouts = func(ctx context.Context, round int, ins []schemas.Instance) ([]schemas.Sample, error) {
		g.Mu.Lock()
		atRound = append(atRound, filepath.Base(g.Model))
		if round == 2 {
			refuse = true // the push of v000004 will fail
		}
		g.Mu.Unlock()
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
	ga, gb := &fakeengine.SGLang{}, &fakeengine.SGLang{}
	a, b := httptest.NewServer(ga), httptest.NewServer(gb)
	defer a.Close()
	defer b.Close()
	served := weightsync.NewTable()
	cfg, _ := testRun(t, 1)
	cfg.SFTSteps = 1
	push, err := weightsync.SpecSyncer(a.URL+"/v1,"+b.URL+"/v1?engine=sglang&model=m", served, 0, cfg.Learner.Log)
	if err != nil || push == nil {
		t.Fatalf("SpecSyncer: %v", err)
	}
	cfg.Sync = push.Round(cfg.Learner.Out)
	cfg.Steps = 1
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	loadsA, loadsB := loadedModels(ga), loadedModels(gb)
	if !slices.Equal(loadsA, loadsB) || len(loadsA) == 0 {
		t.Fatalf("engine a loaded %v, engine b %v: want the same versions on both", loadsA, loadsB)
	}
	for _, u := range []string{a.URL, b.URL} {
		if sv, ok := served.Get(u); !ok || engineapi.AdapterName(sv.Version) != "swerl-"+loadsA[len(loadsA)-1] {
			t.Fatalf("%s: served %+v, %v; loads %v", u, sv, ok, loadsA)
		}
	}
	if s, err := weightsync.SpecSyncer(a.URL+"/v1,"+b.URL+"/v1?sync=false", served, 0, cfg.Learner.Log); err != nil || s != nil {
		t.Fatalf("sync=false: %v %v", s != nil, err)
	}
	if _, err := weightsync.SpecSyncer(a.URL+"/v1?model=m,"+b.URL+"/v1", served, 0, cfg.Learner.Log); err == nil {
		t.Fatal("options before the last URL must fail")
	}
}

// loadedModels is the folder name of every full-weight load g was asked
// for, in order.
func loadedModels(g *fakeengine.SGLang) []string {
	g.Mu.Lock()
	defer g.Mu.Unlock()
	var out []string
	for _, c := range g.Calls {
		if p, ok := c.Body["model_path"].(string); ok && c.Path == engineapi.UpdateWeightsPath {
			out = append(out, filepath.Base(p))
		}
	}
	return out
}
