package kafkaio

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/sinks/kafkaio/kafkatest"
)

// outage is how long TestReadAndWriteRideOutBrokerRestart keeps the
// broker down: 3s by default, SWERL_KAFKA_OUTAGE (a Go duration) for the
// long version:
//
//	SWERL_KAFKA_OUTAGE=75s go test ./sinks/kafkaio -run RideOut -v -timeout 10m
func outage(t *testing.T) time.Duration {
	d := 3 * time.Second
	if s := os.Getenv("SWERL_KAFKA_OUTAGE"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatalf("SWERL_KAFKA_OUTAGE: %v", err)
		}
	}
	return d
}

// A broker that stops in the middle of a read and comes back on the same
// port with its data (a restart) costs a read and a write nothing: the
// read, stopped after its first record, goes on where it was and gets
// every record; a write started while the broker is down is delivered once
// it is back. Both wait with capped backoff (the ceiling is short here so
// the test is; the budget is the default 5 minutes).
func TestReadAndWriteRideOutBrokerRestart(t *testing.T) {
	down := outage(t)
	br := startRestartable(t, 3, "in", "out")
	c := br.c
	c.Retry.Ceiling = 500 * time.Millisecond
	const n, m = 200, 50
	tin, tout := c.Topic("in"), c.Topic("out")
	produce(t, c, tin, 0, n)

	ctx, cancel := context.WithTimeout(context.Background(), down+2*time.Minute)
	defer cancel()
	var stopped, restarted time.Time
	restartErr := make(chan error, 1)
	writeDone := make(chan error, 1)
	stop := func() {
		br.stop()
		stopped = time.Now()
		go func() {
			time.Sleep(down) // the outage, on purpose
			err := br.start()
			if err == nil {
				restarted = time.Now()
			}
			restartErr <- err
		}()
		// A write that starts while the broker is down.
		go func() {
			w, err := NewWriter(WriteConfig{Config: c, Topic: tout, BatchTimeout: time.Millisecond})
			if err != nil {
				writeDone <- err
				return
			}
			defer w.Close()
			var msgs []kafka.Message
			for i := range m {
				msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "w%d", i)})
			}
			writeDone <- w.WriteMessages(ctx, msgs...)
		}()
	}

	seen := map[string]bool{}
	err := Scan(ctx, ReadConfig{Config: c, Topic: tin, MaxWait: 50 * time.Millisecond}, func(msg Message) error {
		if len(seen) == 0 {
			stop()
		}
		seen[msg.Source()] = true
		return nil
	})
	if err != nil {
		t.Fatalf("the read did not survive the restart: %v", err)
	}
	if err := <-restartErr; err != nil {
		t.Fatalf("restarting the broker on %s: %v", c.Brokers[0], err)
	}
	if len(seen) != n {
		t.Fatalf("read %d distinct records across the restart, want %d", len(seen), n)
	}
	if err := <-writeDone; err != nil {
		t.Fatalf("the write did not survive the restart: %v", err)
	}
	if got := len(consumeAll(t, c, tout, m, time.Minute)); got < m {
		t.Fatalf("%d of %d records written during the outage arrived", got, m)
	}
	t.Logf("broker down %s (restarted %s after the stop); %d records read and %d written across it",
		down, restarted.Sub(stopped).Round(time.Millisecond), n, m)
}

// restartable is a broker a test stops and starts again on the same port
// with its data: the embedded broker with a DataDir (Close, then a new one
// on the same address), or under the real-broker leg a real broker of the
// test's own (SIGKILLed, then started again on its data dir).
type restartable struct {
	c     Config
	stop  func()
	start func() error
}

// startRestartable starts a restartable broker holding topics (short
// names, under a prefix of the test's own) with partitions each; the
// test's cleanup stops it.
func startRestartable(t *testing.T, partitions int, topics ...string) *restartable {
	t.Helper()
	c := Config{TopicPrefix: kafkatest.Prefix(t)}
	full := c.fullNames(topics)
	if kafkatest.Shared(t) != "" {
		r := ownRealBroker(t, &c, partitions, full)
		return &restartable{c: c, stop: func() {
			if err := r.Kill(); err != nil {
				t.Fatal(err)
			}
		}, start: r.Start}
	}
	opts := BrokerOptions{Partitions: partitions, Topics: full, DataDir: t.TempDir()}
	b, err := StartBroker(opts)
	if err != nil {
		t.Fatal(err)
	}
	opts.Addr = b.Addrs()[0]
	c.Brokers = b.Addrs()
	var mu sync.Mutex
	current := b
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		current.Close()
	})
	return &restartable{c: c,
		stop: func() {
			mu.Lock()
			defer mu.Unlock()
			current.Close()
		},
		start: func() error {
			nb, err := StartBroker(opts)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			current = nb
			return nil
		}}
}
