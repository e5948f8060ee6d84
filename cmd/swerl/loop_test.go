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
	"swerl/pipelines/train"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/parquetio"
	"swerl/transforms/rollout"
)

// The distributed loop in four kinds of process on loopback: a Kafka
// broker, two `swerl serve` engines, `swerl learn --lora-rank 4 --engine
// A,B` and `swerl train --follow` over both engines. Instances arrive one
// step's batch at a time, each after the learner published the previous
// version; the worker follows the adapters the learner loads, so the
// samples that trained version k were sampled by version k−1, or within
// --max-staleness 1 when a batch raced the adapter's load. Both engines
// answer, and every sample the worker produced is trained exactly once.
func TestLoopFollowsAdaptersAcrossProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("child processes")
	}
	const steps, batch, G = 4, 3, 2
	dir := t.TempDir()
	base := tinyModelAt(t, filepath.Join(dir, "base"))
	b, err := kafkaio.StartBroker(kafkaio.BrokerOptions{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	brokers := b.Addrs()[0]
	_, addrA := serveChild(t, base, "")
	_, addrB := serveChild(t, base, "")
	urlA, urlB := "http://"+addrA+"/v1", "http://"+addrB+"/v1"

	lout, tout := filepath.Join(dir, "learn"), filepath.Join(dir, "train")
	metricsAddr := "127.0.0.1:" + freePort(t)
	le := startCLI(t, "learn", "--brokers", brokers, "--model", base, "--out", lout, "--batch-groups", strconv.Itoa(batch),
		"--max-staleness", "1", "--max-seq", "2048", "--metrics-addr", "", "--progress-every", "1m", "--lora-rank", "4", "--lr", "1e-3",
		"--engine", urlA+","+urlB)
	tr := startCLI(t, "train", "--brokers", brokers, "--policy", urlA+","+urlB+"?route=round-robin&health=100ms", "--follow",
		"--group-size", strconv.Itoa(G), "--max-tokens", "16", "--seed", "3", "--concurrency", "1", "--out", tout,
		"--metrics-addr", metricsAddr, "--progress-every", "1m")
	defer func() {
		if t.Failed() {
			t.Logf("learn:\n%s\ntrain:\n%s", le.out, tr.out)
		}
	}()

	feed := func(k int) {
		path := filepath.Join(dir, fmt.Sprintf("batch%d.jsonl", k))
		var lines []byte
		for i := range batch {
			in := traintest.Instance(k*batch + i)
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
		if _, err := train.Feed(ctx, b.Config(""), path, filepath.Join(dir, "deadletter")); err != nil {
			t.Fatal(err)
		}
	}
	for k := range steps {
		// Version k is out and both engines hold its adapter: the next
		// batch is sampled from it.
		if err := waitRows(lout, k+1, k+1); err != nil {
			t.Fatal(err)
		}
		waitUntil(t, fmt.Sprintf("both engines hold %s", rollout.AdapterName(int64(k))), func() bool {
			return slices.Contains(servedModels(t, urlA), rollout.AdapterName(int64(k))) && slices.Contains(servedModels(t, urlB), rollout.AdapterName(int64(k)))
		})
		feed(k)
	}
	if err := waitRows(lout, steps+1, steps+1); err != nil {
		t.Fatal(err)
	}
	// What each engine served, from the worker's Prometheus metrics.
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	prom, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	tr.kill()
	if exited, err := le.kill(); exited {
		t.Fatalf("swerl learn exited: %v", err)
	}

	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(tout, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]schemas.Sample{}
	for _, s := range samples {
		byID[s.ID] = s
	}
	if len(byID) != steps*batch*G {
		t.Fatalf("the worker produced %d samples, want %d", len(byID), steps*batch*G)
	}
	trained := map[string]int64{}
	exact := 0
	for v := int64(1); v <= steps; v++ {
		rec, err := learner.ReadRecord(lout, v)
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
	t.Logf("%d of %d samples trained by the version after the one that sampled them", exact, len(trained))
	for _, addr := range []string{addrA, addrB} {
		m := regexp.MustCompile(`swerl_engine_requests_total\{engine="http://` + regexp.QuoteMeta(addr) + `"\} (\d+)`).FindSubmatch(prom)
		if m == nil || string(m[1]) == "0" {
			t.Fatalf("engine %s answered no request (%q):\n%s", addr, m, prom)
		}
		t.Logf("engine %s: %s requests", addr, m[1])
	}
}
