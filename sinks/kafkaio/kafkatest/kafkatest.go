// Package kafkatest holds what tests of several packages need from a
// Kafka topic: every record up to its end.
package kafkatest

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/sinks/kafkaio"
)

// ReadAll reads every record of topic on c's brokers up to the end offsets
// it finds when called, partition by partition, failing the test after
// timeout.
func ReadAll(t testing.TB, c kafkaio.Config, topic string, timeout time.Duration) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	parts, err := kafkaio.Partitions(ctx, c, topic)
	if err != nil {
		t.Fatal(err)
	}
	var out []kafka.Message
	for _, p := range parts {
		conn, err := kafka.DialLeader(ctx, "tcp", c.Brokers[0], topic, p)
		if err != nil {
			t.Fatal(err)
		}
		last, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		if last == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: c.Brokers, Topic: topic, Partition: p, MaxWait: 100 * time.Millisecond})
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				t.Fatalf("%s/%d: %v", topic, p, err)
			}
			out = append(out, m)
			if m.Offset+1 >= last {
				break
			}
		}
		r.Close()
	}
	return out
}
