package main

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/internal/testenv"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/parquetio"
	"swerl/transforms/scoring"
)

// TestElasticWorkers: rollout workers come and go in one consumer group.
// `swerl train --follow --group elastic` runs in two child processes over
// a broker of the test (6 partitions of swerl.instances); instances
// arrive in batches, a third worker joins mid-run, and one of the three,
// chosen at random, is SIGKILLed at a random point of the second batch
// (its partitions go to the others once its session expires). After the
// rest have drained the topic: the distinct sample ids on swerl.samples
// are exactly every instance × G; a sample id produced twice (the dead
// worker's output not yet committed) carries the same content both
// times; nothing was dead-lettered; and the workers' Parquet outputs
// together hold every sample. The survivors then stop on SIGTERM, leaving
// the group.
func TestElasticWorkers(t *testing.T) {
	rng, _ := killRNG(t, 5)
	start := time.Now()
	const batches, perBatch, G, parts = 4, 12, 2, 6
	dir := t.TempDir()
	set := traintest.New(t, dir, batches*perBatch, G, nil)
	b, err := kafkaio.StartBroker(kafkaio.BrokerOptions{Partitions: parts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	kc := b.Config("")

	var workers []*cli
	outs := []string{}
	startWorker := func() *cli {
		out := filepath.Join(dir, fmt.Sprintf("worker%d", len(workers)+1))
		w := startCLI(t, "train", "--brokers", b.Addrs()[0], "--policy", "file:"+set.CompletionsPath, "--follow",
			"--group", "elastic", "--group-session-timeout", "6s", "--group-size", strconv.Itoa(G), "--concurrency", "2",
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
	w3.waitAlive(t, 2*time.Minute, "the third worker holds partitions", func() bool { return holds.MatchString(w3.out.String()) })
	feed(1)
	victim := rng.IntN(3)
	at := perBatch*G + 1 + rng.IntN(perBatch*G)
	testenv.Eventually(t, 2*time.Minute, fmt.Sprintf("%d samples before the kill", at), samplesUpTo(at))
	before := len(onKafka)
	if exited, err := workers[victim].kill(); exited {
		t.Fatalf("worker %d exited before its kill: %v", victim+1, err)
	}
	t.Logf("SIGKILLed worker %d with %d distinct samples on swerl.samples", victim+1, before)
	for k := 2; k < batches; k++ {
		feed(k)
	}
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
	var dead int
	if err := kafkaio.Scan(context.Background(), kafkaio.ReadConfig{Config: kc, Topic: kc.Topic(kafkaio.DeadLetter)}, func(kafkaio.Message) error {
		dead++
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
		dead += len(dl)
	}
	if dead != 0 {
		t.Errorf("%d dead-letters", dead)
	}
	for id := range want {
		if inParquet[id] == 0 {
			t.Errorf("sample %s is in no worker's Parquet output", id)
		}
	}
	// Work is shared, not repeated: only what the dead worker had read
	// and not committed (at most its 32 records in flight, the bound
	// swerl train sets at --concurrency 2) is written a second time.
	again := 0
	for _, n := range perWorker {
		again += n
	}
	again -= len(want)
	if again > 32*G {
		t.Errorf("%d samples written by more than one worker (rows per worker %v): more than the dead worker's %d in flight", again, perWorker, 32*G)
	}

	// The survivors stop cleanly and leave the group.
	for i, w := range workers {
		if i == victim {
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
	t.Logf("%d instances × G=%d over %d partitions, 3 workers (worker %d killed at %d samples): %d distinct samples, %d produced again, %d written again; Parquet rows per worker %v; %s",
		len(set.Instances), G, parts, victim+1, before, len(onKafka), dups, again, perWorker, time.Since(start).Round(time.Millisecond))
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
