package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"swerl/gpu/learner"
	"swerl/internal/engineapi"
	"swerl/pipelines/train"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/kafkaio/kafkaiotest"
	"swerl/sinks/kafkaio/kafkatest"
	"swerl/sinks/parquetio"
)

// loopRig is the distributed loop in four kinds of process on loopback: a
// Kafka broker (here), two `swerl serve` engines, `swerl learn --lora-rank
// 4 --engine A,B` and `swerl train --follow` over both engines (children).
type loopRig struct {
	t                  *testing.T
	dir, base, brokers string
	broker             *kafkaiotest.Broker
	addr               [2]string
	engine             [2]*cli
	le, tr             *cli
	lout, tout         string
	metricsAddr        string
	hidden             bool // the engines list no adapters (swerl serve --hide-adapters)
}

const loopBatch, loopG = 3, 2

func newLoopRig(t *testing.T) *loopRig { t.Helper(); return newLoopRigHidden(t, false) }

// newLoopRigHidden is newLoopRig with engines that, when hidden, list no
// adapters on /v1/models: the worker can only learn them from swerl.weights.
func newLoopRigHidden(t *testing.T, hidden bool) *loopRig {
	t.Helper()
	if testing.Short() {
		t.Skip("child processes")
	}
	r := &loopRig{t: t, dir: t.TempDir(), hidden: hidden}
	var serveArgs []string
	if hidden {
		serveArgs = []string{"--hide-adapters"}
	}
	r.base = tinyModelAt(t, filepath.Join(r.dir, "base"))
	b := kafkaiotest.Start(t, kafkaio.BrokerOptions{Partitions: 2})
	r.broker, r.brokers = b, b.Addrs()[0]
	for i := range r.addr {
		r.engine[i], r.addr[i] = serveChild(t, r.base, "", serveArgs...)
	}
	r.lout, r.tout = filepath.Join(r.dir, "learn"), filepath.Join(r.dir, "train")
	r.metricsAddr = "127.0.0.1:" + freePort(t)
	r.le = startCLI(t, "learn", "--brokers", r.brokers, "--model", r.base, "--out", r.lout, "--batch-groups", strconv.Itoa(loopBatch),
		"--max-staleness", "1", "--max-seq", "2048", "--metrics-addr", "", "--progress-every", "1m", "--lora-rank", "4", "--lr", "1e-3",
		"--engine", r.url(0)+","+r.url(1), "--engine-retries", "1")
	r.tr = startCLI(t, "train", "--brokers", r.brokers, "--policy", r.url(0)+","+r.url(1)+"?route=round-robin&health=100ms", "--follow",
		"--group-size", strconv.Itoa(loopG), "--max-tokens", "16", "--seed", "3", "--concurrency", "1", "--out", r.tout,
		"--metrics-addr", r.metricsAddr, "--progress-every", "1m")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("learn:\n%s\ntrain:\n%s", r.le.out, r.tr.out)
		}
	})
	return r
}

func (r *loopRig) url(i int) string { return "http://" + r.addr[i] + "/v1" }

// feed produces batch k's instances to the instances topic.
func (r *loopRig) feed(k int) {
	t := r.t
	t.Helper()
	path := filepath.Join(r.dir, fmt.Sprintf("batch%d.jsonl", k))
	var lines []byte
	for i := range loopBatch {
		in := traintest.Instance(k*loopBatch + i)
		v, err := schemas.Encode(&in)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(append(lines, v...), '\n')
	}
	if err := os.WriteFile(path, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := train.Feed(ctx, r.broker.Config(""), path, filepath.Join(r.dir, "deadletter")); err != nil {
		t.Fatal(err)
	}
}

// published waits until the learner has published version v.
func (r *loopRig) published(v int) {
	r.t.Helper()
	if err := waitRows(r.lout, v+1, v+1); err != nil {
		r.t.Fatal(err)
	}
}

// holds waits until each engine of which lists version v's adapter and
// the worker names it on that engine (its swerl_engine_policy_version).
// With hidden engines, which list nothing, only the worker is asked: it
// learns the adapter from the learner's announcement.
func (r *loopRig) holds(v int, which ...int) {
	r.t.Helper()
	name := engineapi.AdapterName(int64(v))
	waitUntil(r.t, fmt.Sprintf("engines %v hold %s and the worker names it", which, name), func() bool {
		for _, i := range which {
			if !r.hidden && !slices.Contains(listedModels(r.url(i)), name) || r.series("swerl_engine_policy_version", i) != v {
				return false
			}
		}
		return true
	})
	if r.hidden {
		for _, i := range which {
			if ids := listedModels(r.url(i)); slices.Contains(ids, name) {
				r.t.Fatalf("engine %d lists %v with --hide-adapters", i, ids)
			}
		}
	}
}

// listedModels is what GET /models lists; nothing when the engine does not
// answer.
func listedModels(url string) []string {
	resp, err := http.Get(url + "/models")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var ids []string
	for _, m := range regexp.MustCompile(`"id":"([^"]+)"`).FindAllSubmatch(b, -1) {
		ids = append(ids, string(m[1]))
	}
	return ids
}

// series is a swerl_engine_* series of engine i in the worker's /metrics
// (-2 when it is not there, or the worker does not serve /metrics yet:
// callers wait for a value).
func (r *loopRig) series(name string, i int) int {
	r.t.Helper()
	resp, err := http.Get("http://" + r.metricsAddr + "/metrics")
	if err != nil {
		return -2
	}
	prom, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := regexp.MustCompile(name + `\{engine="http://` + regexp.QuoteMeta(r.addr[i]) + `"\} (-?\d+)`).FindSubmatch(prom)
	if m == nil {
		return -2
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// requests is the worker's swerl_engine_requests_total of engine i.
func (r *loopRig) requests(i int) int { return max(r.series("swerl_engine_requests_total", i), 0) }

// followSteps runs steps rounds (the learner publishes version k, both
// engines hold it, the worker samples a round) and checks that both
// engines answered and that every sample that trained version k was
// sampled by version k−1.
func (r *loopRig) followSteps(t *testing.T, steps int) {
	t.Helper()
	for k := range steps {
		r.published(k)
		r.holds(k, 0, 1)
		r.feed(k)
	}
	r.published(steps)
	reqA, reqB := r.requests(0), r.requests(1)
	if reqA == 0 || reqB == 0 {
		t.Fatalf("requests: engine a %d, engine b %d; want both", reqA, reqB)
	}
	exact, total := r.check(steps)
	if exact != total {
		t.Fatalf("%d of %d samples trained by the version after the one that sampled them, want all", exact, total)
	}
	t.Logf("%d of %d samples trained by the version after the one that sampled them; engine a %d requests, b %d", exact, total, reqA, reqB)
}

// check stops the worker and the learner and checks steps versions: every
// sample the worker produced was trained exactly once, by the version after
// the one that sampled it or within --max-staleness 1; it returns how many
// were trained by the very next version.
func (r *loopRig) check(steps int) (exact, total int) {
	t := r.t
	t.Helper()
	r.tr.kill()
	if exited, err := r.le.kill(); exited {
		t.Fatalf("swerl learn exited: %v", err)
	}
	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(r.tout, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]schemas.Sample{}
	for _, s := range samples {
		byID[s.ID] = s
	}
	if len(byID) != steps*loopBatch*loopG {
		t.Fatalf("the worker produced %d samples, want %d", len(byID), steps*loopBatch*loopG)
	}
	trained := map[string]int64{}
	for v := int64(1); v <= int64(steps); v++ {
		rec, err := learner.ReadRecord(r.lout, v)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range rec.Samples {
			if _, dup := trained[id]; dup {
				t.Fatalf("sample %s trained twice", id)
			}
			trained[id] = v
			s, ok := byID[id]
			if !ok {
				t.Fatalf("version %d trained %s, which the worker did not produce", v, id)
			}
			if s.PolicyVersion > v-1 || s.PolicyVersion < v-2 {
				t.Fatalf("version %d trained %s sampled by version %d: want %d (or %d within --max-staleness 1)", v, id, s.PolicyVersion, v-1, v-2)
			}
			if s.PolicyVersion == v-1 {
				exact++
			}
		}
	}
	if len(trained) != len(byID) {
		t.Fatalf("%d samples trained of %d produced", len(trained), len(byID))
	}
	return exact, len(trained)
}

// Instances arrive one step's batch at a time, each after the learner
// published the previous version and both engines hold its adapter: the
// worker follows the adapters the learner loads, so the samples that
// trained version k were sampled by version k−1. Both engines answer, and
// every sample the worker produced is trained exactly once.
func TestLoopFollowsAdaptersAcrossProcesses(t *testing.T) {
	newLoopRig(t).followSteps(t, 4)
}

// The same loop on engines that list no adapters (swerl serve
// --hide-adapters, as older SGLang): the worker learns which adapter each
// engine holds from swerl.weights alone, where the learner announces each
// version again once its push to the engines completed. Samples that
// trained version k were sampled by version k−1, from both engines.
func TestLoopFollowsAnnouncedAdaptersOnEnginesThatListNone(t *testing.T) {
	const steps = 3
	r := newLoopRigHidden(t, true)
	r.followSteps(t, steps)
	// Each version was announced with its adapter, once with no engines
	// (published) and again with both (pushed).
	withBoth := map[int64]bool{}
	for _, v := range announcements(t, r.broker.Config("")) {
		if v.Adapter != engineapi.AdapterName(v.Version) {
			t.Fatalf("v%d announced with adapter %q", v.Version, v.Adapter)
		}
		if slices.Equal(v.Engines, []string{"http://" + r.addr[0], "http://" + r.addr[1]}) {
			withBoth[v.Version] = true
		}
	}
	for v := range int64(steps) {
		if !withBoth[v] {
			t.Errorf("v%d was never announced as held by both engines", v)
		}
	}
}

// announcements reads every record of the weights topic.
func announcements(t *testing.T, c kafkaio.Config) []schemas.WeightVersion {
	t.Helper()
	var out []schemas.WeightVersion
	for _, m := range kafkatest.ReadAll(t, c.Brokers[0], c.Topic(kafkaio.Weights), time.Minute) {
		var v schemas.WeightVersion
		if err := schemas.Decode(m.Value, &v); err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

// An engine SIGKILLed in the middle of the loop: the learner's pushes to it
// fail and it goes on; the worker samples from the other engine. Started
// again on its port (without its adapters), it gets the next version's
// adapter from the learner and the worker routes to it again. Every sample
// is still trained exactly once, within --max-staleness.
func TestLoopSurvivesEngineKill(t *testing.T) {
	const steps = 4
	r := newLoopRig(t)
	r.published(0)
	r.holds(0, 0, 1)
	r.feed(0)
	r.published(1)
	r.holds(1, 0, 1)
	if exited, _ := r.engine[1].kill(); exited {
		t.Fatal("engine b had exited")
	}
	r.feed(1) // sampled by engine a alone
	r.published(2)
	r.holds(2, 0)
	_, port, _ := cutLast(r.addr[1], ":")
	r.engine[1], _ = serveChild(t, r.base, port)
	r.feed(2) // engine b is back without adapters: engine a, which holds v2, answers
	r.published(3)
	r.holds(3, 0, 1) // the learner's push of v3 reached the restarted engine
	before := r.requests(1)
	r.feed(3)
	r.published(steps)
	after := r.requests(1)
	if after <= before {
		t.Fatalf("the restarted engine answered no request of the last batch (%d before, %d after)", before, after)
	}
	exact, total := r.check(steps)
	t.Logf("%d of %d samples trained by the version after the one that sampled them; the restarted engine answered %d requests", exact, total, after-before)
}

// cutLast splits s around the last sep.
func cutLast(s, sep string) (before, after string, found bool) {
	for i := len(s) - len(sep); i >= 0; i-- {
		if s[i:i+len(sep)] == sep {
			return s[:i], s[i+len(sep):], true
		}
	}
	return s, "", false
}
