// Package kafkaiotest starts the broker of a test in another package than
// kafkaio: the embedded broker (kafkaio.StartBroker), or, when
// $SWERL_KAFKA_BROKERS asks for the real-broker leg, an Apache Kafka
// broker of the test's own (kafkatest.StartReal: a new cluster, as a new
// embedded broker is, so the test's topic names need no prefix).
package kafkaiotest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"swerl/sinks/kafkaio"
	"swerl/sinks/kafkaio/kafkatest"
)

// Broker is a test's broker; the test's cleanup stops it.
type Broker struct {
	o    kafkaio.BrokerOptions
	addr string
	real *kafkatest.Real

	mu  sync.Mutex
	emb *kafkaio.Broker
}

// Start starts a broker as kafkaio.StartBroker(o) does: o.Topics (or
// swerl's four under o.TopicPrefix) with o.Partitions each (default 4),
// topics created on first use with as many. Under the real-broker leg
// o.Addr is ignored (the broker picks a free port) and o.DataDir, when
// set, holds the real broker's data.
func Start(t testing.TB, o kafkaio.BrokerOptions) *Broker {
	t.Helper()
	if o.Partitions <= 0 {
		o.Partitions = 4
	}
	if o.Topics == nil {
		c := kafkaio.Config{TopicPrefix: o.TopicPrefix}
		for _, n := range kafkaio.TopicNames {
			o.Topics = append(o.Topics, c.Topic(n))
		}
	}
	b := &Broker{o: o}
	if kafkatest.Shared(t) != "" {
		dir := o.DataDir
		if dir == "" {
			dir = t.TempDir()
		}
		b.real = kafkatest.StartReal(t, dir, o.Partitions)
		b.addr = b.real.Addr()
		if len(o.Topics) > 0 {
			kafkatest.CreateTopics(t, b.addr, o.Partitions, o.Topics...)
		}
		return b
	}
	emb, err := kafkaio.StartBroker(o)
	if err != nil {
		t.Fatal(err)
	}
	b.emb, b.addr = emb, emb.Addrs()[0]
	b.o.Addr = b.addr
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.emb.Close()
	})
	return b
}

// Real reports whether this is a real Apache Kafka broker.
func (b *Broker) Real() bool { return b.real != nil }

// Addrs returns the broker's bootstrap address; it stays the same across
// Stop and Restart.
func (b *Broker) Addrs() []string { return []string{b.addr} }

// Config returns a Config that connects to this broker with the given
// topic prefix.
func (b *Broker) Config(topicPrefix string) kafkaio.Config {
	return kafkaio.Config{Brokers: b.Addrs(), TopicPrefix: topicPrefix}
}

// Stop stops the broker as a crash would: the embedded broker is closed
// (its data stays in o.DataDir), the real one SIGKILLed.
func (b *Broker) Stop() error {
	if b.real != nil {
		return b.real.Kill()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.emb.Close()
	return nil
}

// Restart starts the broker again on the same address with its data
// (the embedded broker needs o.DataDir for that) and waits until it
// answers. It does not stop the test, so a goroutine may call it.
func (b *Broker) Restart() error {
	if b.real != nil {
		return b.real.Start()
	}
	if b.o.DataDir == "" {
		return fmt.Errorf("kafkaiotest: an embedded broker without a DataDir cannot restart with its data")
	}
	emb, err := kafkaio.StartBroker(b.o)
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.emb = emb
	b.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = kafkaio.ClusterID(ctx, b.Config(""))
	return err
}
