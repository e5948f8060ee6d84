package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/internal/testenv"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/kafkaio/kafkaiotest"
	"swerl/sinks/kafkaio/kafkatest"
	"swerl/sinks/parquetio"
	"swerl/transforms/scoring"
)

// TestElasticWorkers: rollout workers come and go in one consumer group.
// `swerl train --follow --group elastic` runs in two child processes over
// a broker of the test (6 partitions of swerl.instances); instances
// arrive in batches, a third worker joins mid-run, and then, once per
// kill cycle (SWERL_KILL_CYCLES, default 3), a batch arrives and, at a
// random point of it, a live worker chosen at random (among those whose
// partitions hold records not yet committed, if any) is SIGKILLed (its
// partitions go to the others once its session expires) and a new worker
// joins in its place, except after the last kill; a last batch arrives
// after the last kill, on the dead worker's partitions too. Rollouts come
// from the slow policy server of the train kill tests (100 ms a request,
// deterministic answers). After the rest have
// drained the topic: the distinct sample ids on swerl.samples are exactly
// every instance × G; a sample id produced twice (a dead worker's output
// not yet committed) carries the same content both times; nothing was
// dead-lettered; the workers' Parquet outputs together hold every sample,
// and no more were written twice than the dead workers had in flight.
// The survivors then stop on SIGTERM, leaving the group.
func TestElasticWorkers(t *testing.T) {
	rng, cycles := killRNG(t, 5)
	start := time.Now()
	const perBatch, G, parts = 12, 2, 6
	batches := 3 + cycles
	dir := t.TempDir()
	set := traintest.New(t, dir, batches*perBatch, G, nil) // the instances (its completions file is not used)
	// The rollouts take 100 ms a request (one at a time per worker), so a
	// batch keeps the workers busy for a while and a kill lands among
	// rollouts in flight.
	t.Setenv("SWERL_API_KEY", "elastic-test-key")
	srv := httptest.NewServer(slowPolicy(t, "elastic-test-key", 100*time.Millisecond))
	t.Cleanup(srv.Close)
	b := kafkaiotest.Start(t, kafkaio.BrokerOptions{Partitions: parts})
	kc := b.Config("")

	var workers []*cli
	outs := []string{}
	startWorker := func() *cli {
		out := filepath.Join(dir, fmt.Sprintf("worker%d", len(workers)+1))
		w := startCLI(t, "train", "--brokers", b.Addrs()[0], "--policy", srv.URL+"/v1?retries=50&follow=false", "--follow",
			"--group", "elastic", "--group-session-timeout", "6s", "--group-size", strconv.Itoa(G), "--concurrency", "1",
			"--out", out, "--metrics-addr", "", "--progress-every", "1m")
		workers, outs = append(workers, w), append(outs, out)
		return w
	}
	defer func() {
		if t.Failed() || testing.Verbose() {
			for i, w := range workers {
				t.Logf("worker %d:\n%s", i+1, w.out)
			}
		}
	}()
	feed := func(k int) {
		t.Helper()
		w, err := kafkaio.NewWriter(kafkaio.WriteConfig{Config: kc, Topic: kc.Topic(kafkaio.Instances), BatchTimeout: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		var msgs []kafka.Message
		for _, in := range set.Instances[k*perBatch : (k+1)*perBatch] {
			v, err := schemas.Encode(&in)
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, kafka.Message{Key: []byte(in.ID), Value: v})
		}
		if err := w.WriteMessages(context.Background(), msgs...); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]bool{}
	for _, in := range set.Instances {
		for j := range G {
			want[scoring.SampleID(scoring.GroupID("", in.ID, 0), j)] = true
		}
	}
	var onKafka map[string][]schemas.Sample
	samplesUpTo := func(n int) func() bool {
		return func() bool {
			onKafka = scanSamples(t, kc)
			return len(onKafka) >= n
		}
	}
	holds := regexp.MustCompile(`generation \d+: partitions \[\d`)

	w1, w2 := startWorker(), startWorker()
	feed(0)
	testenv.Eventually(t, 2*time.Minute, "the first samples on swerl.samples", samplesUpTo(1))
	if !holds.MatchString(w1.out.String()) && !holds.MatchString(w2.out.String()) {
		t.Fatal("samples came, but no worker says it holds partitions")
	}
	w3 := startWorker()
	w3.ready(t, readiness{what: "the third worker holds partitions", line: holds, limit: 2 * time.Minute})
	feed(1)
	dead := map[int]bool{}
	var kills []string
	for c := range cycles {
		feed(2 + c)
		// Samples arrive a worker's bundle at a time: a point in the first
		// half of the batch leaves some workers with rollouts in flight.
		at := (2+c)*perBatch*G + 1 + rng.IntN(perBatch*G/2)
		testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%d samples before kill %d", at, c+1), samplesUpTo(at))
		// The victim is a live worker picked at random, among those whose
		// partitions hold records not yet committed when there are any:
		// a kill then lands among its rollouts in flight.
		lag := groupLag(t, kc, "elastic", parts)
		var live, busy []int
		for i, w := range workers {
			if dead[i] {
				continue
			}
			live = append(live, i)
			for _, p := range heldPartitions(w.out.String()) {
				if lag[p] > 0 {
					busy = append(busy, i)
					break
				}
			}
		}
		if len(busy) > 0 {
			live = busy
		}
		victim := live[rng.IntN(len(live))]
		if exited, err := workers[victim].kill(); exited {
			t.Fatalf("worker %d exited before its kill: %v", victim+1, err)
		}
		dead[victim] = true
		var its int64
		for _, p := range heldPartitions(workers[victim].out.String()) {
			its += lag[p]
		}
		kills = append(kills, fmt.Sprintf("worker %d at %d samples (its partitions: %d records uncommitted)", victim+1, len(onKafka), its))
		if c < cycles-1 {
			startWorker()
		}
	}
	t.Logf("SIGKILLed %s", strings.Join(kills, ", "))
	feed(batches - 1)
	testenv.Eventually(t, 3*time.Minute, "every sample on swerl.samples", samplesUpTo(len(want)))

	dups := 0
	for id, copies := range onKafka {
		if !want[id] {
			t.Errorf("unexpected sample id %s", id)
		}
		dups += len(copies) - 1
		for _, c := range copies[1:] {
			if !sameSample(copies[0], c) {
				t.Errorf("sample %s produced twice with different content:\n%+v\n%+v", id, copies[0], c)
			}
		}
	}
	if len(onKafka) != len(want) {
		t.Fatalf("%d distinct samples on swerl.samples, want %d", len(onKafka), len(want))
	}
	var deadLetters int
	if err := kafkaio.Scan(context.Background(), kafkaio.ReadConfig{Config: kc, Topic: kc.Topic(kafkaio.DeadLetter)}, func(kafkaio.Message) error {
		deadLetters++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	inParquet := map[string]int{}
	perWorker := make([]int, len(outs))
	for i, out := range outs {
		rows, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
		if err != nil {
			t.Fatal(err)
		}
		perWorker[i] = len(rows)
		for _, s := range rows {
			inParquet[s.ID]++
		}
		dl, _ := parquetio.ReadDir[schemas.DeadLetter](filepath.Join(out, "deadletter"))
		deadLetters += len(dl)
	}
	if deadLetters != 0 {
		t.Errorf("%d dead-letters", deadLetters)
	}
	for id := range want {
		if inParquet[id] == 0 {
			t.Errorf("sample %s is in no worker's Parquet output", id)
		}
	}
	// Work is shared, not repeated: only what the dead workers had read
	// and not committed (at most 32 records in flight each, the bound
	// swerl train sets at --concurrency 1) is written a second time.
	again := 0
	for _, n := range perWorker {
		again += n
	}
	again -= len(want)
	if again > cycles*32*G {
		t.Errorf("%d samples written by more than one worker (rows per worker %v): more than the dead workers' %d in flight", again, perWorker, cycles*32*G)
	}

	// The survivors stop cleanly and leave the group.
	for i, w := range workers {
		if dead[i] {
			continue
		}
		w.sigterm(t, fmt.Sprintf("worker %d", i+1), "the group drained")
		if w.err != nil {
			t.Errorf("worker %d: %v", i+1, w.err)
		}
		if !regexp.MustCompile(`left group elastic`).MatchString(w.out.String()) {
			t.Errorf("worker %d did not say it left the group", i+1)
		}
	}
	t.Logf("%d instances × G=%d over %d partitions, %d workers, %d killed: %d distinct samples, %d produced again, %d written again; Parquet rows per worker %v; %s",
		len(set.Instances), G, parts, len(workers), len(dead), len(onKafka), dups, again, perWorker, time.Since(start).Round(time.Millisecond))
}

// scanSamples reads swerl.samples as it is now, by sample id, each copy
// in the order produced.
func scanSamples(t *testing.T, kc kafkaio.Config) map[string][]schemas.Sample {
	t.Helper()
	out := map[string][]schemas.Sample{}
	err := kafkaio.Scan(context.Background(), kafkaio.ReadConfig{Config: kc, Topic: kc.Topic(kafkaio.Samples)}, func(m kafkaio.Message) error {
		var s schemas.Sample
		if err := schemas.Decode(m.Value, &s); err != nil {
			return fmt.Errorf("%s: %w", m.Source(), err)
		}
		out[s.ID] = append(out[s.ID], s)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// sameSample compares two copies of a sample but for what a second
// rollout of the same record measures anew (latency, creation time).
func sameSample(a, b schemas.Sample) bool {
	a.LatencyMS, b.LatencyMS = 0, 0
	a.CreatedAt, b.CreatedAt = "", ""
	a.Source, b.Source = "", ""
	return reflect.DeepEqual(a, b)
}

// groupLag is, for every partition of the instances topic, the number of
// records past group's committed offset.
func groupLag(t *testing.T, kc kafkaio.Config, group string, parts int) map[int]int64 {
	t.Helper()
	topic := kc.Topic(kafkaio.Instances)
	ids := make([]int, parts)
	for p := range ids {
		ids[p] = p
	}
	committed := kafkatest.Committed(t, kc.Brokers[0], group, topic, ids...)
	lag := map[int]int64{}
	for p, end := range kafkatest.EndOffsets(t, kc.Brokers[0], topic, ids...) {
		lag[p] = end - max(committed[p], 0)
	}
	return lag
}

// heldPartitions are the partitions a worker's log says it holds now (its
// last generation line).
func heldPartitions(log string) []int {
	ms := regexp.MustCompile(`generation \d+: partitions \[([\d ]*)\]`).FindAllStringSubmatch(log, -1)
	if len(ms) == 0 {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(ms[len(ms)-1][1]) {
		p, _ := strconv.Atoi(f)
		out = append(out, p)
	}
	return out
}
