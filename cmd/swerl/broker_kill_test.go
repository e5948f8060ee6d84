package main

import (
	"os"
	"testing"
	"time"

	"swerl/sinks/kafkaio"
)

// TestTrainRidesOutBrokerKill stops the broker (kept on disk, as `swerl
// broker --data-dir` keeps it; under the real-broker leg, Apache Kafka
// SIGKILLed) in the middle of a running `swerl train
// --brokers` and `swerl learn --brokers`, and starts it again on the same
// address after
// SWERL_KAFKA_OUTAGE (a Go duration; default 3s, the documented long run
// 75s):
//
//	SWERL_KAFKA_OUTAGE=75s go test ./cmd/swerl -run RidesOutBrokerKill -v -timeout 15m
//
// Neither may fail: train finishes with every sample kept once, and the
// learner trains every sample of the topic exactly once
// (trainLearnRig.finish).
func TestTrainRidesOutBrokerKill(t *testing.T) {
	if testing.Short() {
		t.Skip("outage test: seconds of child processes")
	}
	down := 3 * time.Second
	if s := os.Getenv("SWERL_KAFKA_OUTAGE"); s != "" {
		var err error
		if down, err = time.ParseDuration(s); err != nil {
			t.Fatalf("SWERL_KAFKA_OUTAGE: %v", err)
		}
	}
	opts := kafkaio.BrokerOptions{Partitions: 2, DataDir: t.TempDir()}
	r := newTrainLearnRig(t, 8, opts)
	tr, le := startCLI(t, r.trainArgs...), startCLI(t, r.learnArgs...)
	// Both sleeps place the outage on purpose: the broker stops inside
	// train's rollouts (24 of 1 s each) and stays down for the outage.
	time.Sleep(4 * time.Second)
	if err := r.broker.Stop(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	time.Sleep(down)
	if err := r.broker.Restart(); err != nil {
		t.Fatalf("restarting the broker on %s: %v", r.broker.Addrs()[0], err)
	}
	t.Logf("broker down %s", time.Since(stopped).Round(time.Millisecond))
	select {
	case <-tr.done:
		err := tr.err
		// Finished during the outage: it did not need the broker then.
		r.logf("train exited before the broker came back: %v", err)
		if err != nil {
			t.Fatalf("swerl train failed during the outage: %v\n%s", err, tr.out)
		}
		r.finish(tr, true, le)
		return
	default:
	}
	r.finish(tr, false, le)
	t.Logf("train and learn rode out a %s broker outage", down)
}
