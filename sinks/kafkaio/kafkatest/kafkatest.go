// Package kafkatest holds what tests of several packages need from a
// Kafka topic: every record up to its end, or at least a number of them,
// and a consumer group's committed offsets.
//
// It speaks to the broker with kafka-go alone, so kafkaio's own tests use
// it too (importing kafkaio here would make that an import cycle).
package kafkatest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// ReadAll reads every record of topic on broker up to the end offsets it
// finds when called, partition by partition, failing the test after
// timeout.
func ReadAll(t testing.TB, broker, topic string, timeout time.Duration) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := read(ctx, broker, topic)
	// A real broker answers Not Leader For Partition (and other retriable
	// errors) while a new topic's leaders are being elected: read again
	// until the deadline.
	for backoff := 10 * time.Millisecond; err != nil && retriable(err) && ctx.Err() == nil; backoff = min(2*backoff, 500*time.Millisecond) {
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		out, err = read(ctx, broker, topic)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ReadAtLeast reads topic as ReadAll does, again and again, until it holds
// want records or timeout has passed; it returns the last read, which the
// caller checks (fewer than want when the time ran out). Every record
// present before timeout is returned: a read cut short by the deadline is
// not returned in place of a complete earlier one.
func ReadAtLeast(t testing.TB, broker, topic string, want int, timeout time.Duration) []kafka.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last []kafka.Message
	poll := time.NewTicker(100 * time.Millisecond)
	defer poll.Stop()
	for {
		out, err := read(ctx, broker, topic)
		switch {
		case err == nil:
			last = out
			if len(out) >= want {
				return out
			}
		case ctx.Err() == nil:
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			return last
		case <-poll.C:
		}
	}
}

// Committed returns group's committed offset of each of the partitions
// parts of topic on broker (-1: none committed).
func Committed(t testing.TB, broker, group, topic string, parts ...int) map[int]int64 {
	t.Helper()
	cl := &kafka.Client{Addr: kafka.TCP(broker)}
	resp, err := cl.OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: parts}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int64{}
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			t.Fatalf("offset fetch %s/%d: %v", topic, p.Partition, p.Error)
		}
		out[p.Partition] = p.CommittedOffset
	}
	return out
}

// EndOffsets returns the end offset (the next offset to be written) of
// each of the partitions parts of topic on broker.
func EndOffsets(t testing.TB, broker, topic string, parts ...int) map[int]int64 {
	t.Helper()
	out := map[int]int64{}
	for _, p := range parts {
		conn, err := kafka.DialLeader(context.Background(), "tcp", broker, topic, p)
		if err != nil {
			t.Fatal(err)
		}
		_, last, err := conn.ReadOffsets()
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		out[p] = last
	}
	return out
}

// read reads each partition of topic from its first offset to the end
// offset it finds first.
func read(ctx context.Context, broker, topic string) ([]kafka.Message, error) {
	parts, err := partitions(ctx, broker, topic)
	if err != nil {
		return nil, err
	}
	var out []kafka.Message
	for _, p := range parts {
		conn, err := kafka.DialLeader(ctx, "tcp", broker, topic, p)
		if err != nil {
			return nil, fmt.Errorf("%s/%d: %w", topic, p, err)
		}
		last, err := conn.ReadLastOffset()
		conn.Close()
		if err != nil {
			return nil, fmt.Errorf("%s/%d: end offset: %w", topic, p, err)
		}
		if last == 0 {
			continue
		}
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{broker}, Topic: topic, Partition: p,
			MinBytes: 1, MaxBytes: 10 << 20, MaxWait: 50 * time.Millisecond})
		for {
			m, err := r.ReadMessage(ctx)
			if err != nil {
				r.Close()
				return nil, fmt.Errorf("%s/%d: %w", topic, p, err)
			}
			out = append(out, m)
			if m.Offset+1 >= last {
				break
			}
		}
		r.Close()
	}
	return out, nil
}

// partitions lists topic's partitions in order.
func partitions(ctx context.Context, broker, topic string) ([]int, error) {
	conn, err := (&kafka.Dialer{}).DialContext(ctx, "tcp", broker)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	ps, err := conn.ReadPartitions(topic)
	if err != nil {
		return nil, fmt.Errorf("partitions of %s: %w", topic, err)
	}
	if len(ps) == 0 {
		return nil, errors.New("no partitions of " + topic)
	}
	ids := make([]int, len(ps))
	for i, p := range ps {
		ids[i] = p.ID
	}
	sort.Ints(ids)
	return ids, nil
}

// retriable reports whether err is a Kafka error the broker marks as
// temporary (a leader election, a coordinator moving).
func retriable(err error) bool {
	var ke kafka.Error
	return errors.As(err, &ke) && ke.Temporary()
}
