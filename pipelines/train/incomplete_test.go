package train_test

import (
	"context"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"swerl/pipelines/train"
	"swerl/pipelines/train/traintest"
	"swerl/sinks/metrics"
	"swerl/transforms/rollout"
	"swerl/transforms/scoring"
)

// shortPolicy is a file policy that answers every second instance with one
// completion fewer than asked: its groups reach the group stage with a
// tombstone.
type shortPolicy struct {
	rollout.Policy
	mu    sync.Mutex
	short map[string]bool
}

func (p *shortPolicy) Complete(ctx context.Context, req rollout.Request) (rollout.Response, error) {
	r, err := p.Policy.Complete(ctx, req)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil && p.short[req.InstanceID] {
		r.Completions = r.Completions[:len(r.Completions)-1]
	}
	return r, err
}

var shortIDs = map[string]bool{}

func init() {
	rollout.RegisterScheme("short", func(spec string) (rollout.Policy, error) {
		p, err := rollout.OpenFile("file:" + strings.TrimPrefix(spec, "short:"))
		if err != nil {
			return nil, err
		}
		return &shortPolicy{Policy: p, short: shortIDs}, nil
	})
}

func TestIncompleteGroups(t *testing.T) {
	dir := t.TempDir()
	const n, g = 6, 4
	set := traintest.New(t, dir, n, g, nil)
	for i, in := range set.Instances {
		if i%2 == 1 {
			shortIDs[in.ID] = true
		}
	}
	for _, mode := range []train.Incomplete{train.IncompleteEmit, train.IncompleteDrop} {
		out := filepath.Join(dir, string(mode))
		sum, err := train.Run(context.Background(), train.Config{Instances: set.InstancesPath,
			Policy: "short:" + set.CompletionsPath, Out: out, Incomplete: mode, MetricsAddr: "127.0.0.1:0",
			Spec: scoring.Spec{GroupSize: g}})
		if err != nil {
			t.Fatal(err)
		}
		rows := readSamples(t, out)
		if sum.Incomplete != 3 {
			t.Fatalf("%s: summary %+v", mode, sum)
		}
		switch mode {
		case train.IncompleteEmit:
			if len(rows) != 3*g+3*(g-1) || sum.DroppedGroups != 0 {
				t.Fatalf("emit: %d rows, summary %+v", len(rows), sum)
			}
			// Advantages of an incomplete group are over the members present.
			byGroup := map[string][]float64{}
			for _, s := range rows {
				if s.GroupComplete == shortIDs[s.InstanceID] {
					t.Errorf("%s: group_complete %v", s.ID, s.GroupComplete)
				}
				if shortIDs[s.InstanceID] {
					byGroup[s.GroupID] = append(byGroup[s.GroupID], s.Reward)
					if s.Index == g-1 {
						t.Errorf("%s: the lost member has a row", s.ID)
					}
				}
			}
			for _, s := range rows {
				r, ok := byGroup[s.GroupID]
				if !ok {
					continue
				}
				var mean, v float64
				for _, x := range r {
					mean += x / float64(len(r))
				}
				for _, x := range r {
					v += (x - mean) * (x - mean) / float64(len(r))
				}
				want := 0.0
				if v > 0 {
					want = (s.Reward - mean) / (math.Sqrt(v) + 1e-6)
				}
				if math.Abs(s.Advantage-want) > 1e-9 || math.Abs(s.GroupMean-mean) > 1e-9 {
					t.Errorf("%s: advantage %v mean %v, want %v %v", s.ID, s.Advantage, s.GroupMean, want, mean)
				}
			}
		case train.IncompleteDrop:
			if len(rows) != 3*g || sum.DroppedGroups != 3 {
				t.Fatalf("drop: %d rows, summary %+v", len(rows), sum)
			}
		}
	}
	// The run's metrics are on the process registry.
	srv, err := metrics.Serve("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	res, err := http.Get("http://" + srv.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, m := range []string{"swerl_train_rollouts_total", "swerl_train_reward_bucket", `swerl_train_groups_total{outcome="incomplete"}`,
		`swerl_train_groups_total{outcome="zero_variance"}`, "swerl_train_format_errors_total", "swerl_train_samples_total", "swerl_train_policy_version"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("/metrics lacks %s", m)
		}
	}
}

// slowPolicy is a file policy that takes 100ms per request and records how
// many requests were in flight at once.
type slowPolicy struct {
	rollout.Policy
	mu          sync.Mutex
	now, most   int
	concurrency *int
}

func (p *slowPolicy) Complete(ctx context.Context, req rollout.Request) (rollout.Response, error) {
	p.mu.Lock()
	p.now++
	p.most = max(p.most, p.now)
	*p.concurrency = p.most
	p.mu.Unlock()
	time.Sleep(100 * time.Millisecond) // a slow policy on purpose: requests overlap
	p.mu.Lock()
	p.now--
	p.mu.Unlock()
	return p.Policy.Complete(ctx, req)
}

var slowMost int

func init() {
	rollout.RegisterScheme("slow", func(spec string) (rollout.Policy, error) {
		p, err := rollout.OpenFile("file:" + strings.TrimPrefix(spec, "slow:"))
		if err != nil {
			return nil, err
		}
		return &slowPolicy{Policy: p, concurrency: &slowMost}, nil
	})
}

// TestRolloutConcurrency checks that policy requests overlap up to
// Concurrency and never exceed it.
func TestRolloutConcurrency(t *testing.T) {
	dir := t.TempDir()
	const n, g = 16, 2
	set := traintest.New(t, dir, n, g, nil)
	start := time.Now()
	sum, err := train.Run(context.Background(), train.Config{Instances: set.InstancesPath,
		Policy: "slow:" + set.CompletionsPath, Out: filepath.Join(dir, "out"), Concurrency: 4,
		Spec: scoring.Spec{GroupSize: g}})
	if err != nil {
		t.Fatal(err)
	}
	el := time.Since(start)
	if sum.Samples != n*g || slowMost != 4 {
		t.Fatalf("%d samples, at most %d requests at once (want 4), %v", sum.Samples, slowMost, el)
	}
	if el > time.Duration(n)*100*time.Millisecond {
		t.Fatalf("%d requests of 100ms took %v with concurrency 4", n, el)
	}
}
