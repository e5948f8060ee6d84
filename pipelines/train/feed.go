package train

import (
	"bufio"
	"bytes"
	"context"
	"fmt"

	"github.com/segmentio/kafka-go"

	"swerl/schemas"
	"swerl/sinks/files"
	"swerl/sinks/kafkaio"
)

// FeedSummary counts what Feed did.
type FeedSummary struct {
	Produced    int64 // instances produced to the topic
	DeadLetters int64 // lines that are not valid instances, or too large for a Kafka message
}

// Feed produces the instances of a JSONL or Parquet file to the instances
// topic of c (key: RequestKey of the instance id and the record's place in
// the file, so that the train pipeline gives it the group id a direct read
// of the file does; value: the instance's JSON). A line that is
// not a valid instance (stage "decode"), or whose instance is larger than
// a Kafka message may be (stage "feed", WriteConfig.MessageLimit), is not
// produced: it becomes a dead-letter (source "FILE:LINE") written to
// deadDir as Parquet and to the dead-letter topic. Records are produced in file order by one writer, so
// feeding the same file into a fresh topic gives every record the same
// offset each time.
func Feed(ctx context.Context, c kafkaio.Config, path, deadDir string) (FeedSummary, error) {
	var sum FeedSummary
	w, err := kafkaio.NewWriter(kafkaio.WriteConfig{Config: c})
	if err != nil {
		return sum, err
	}
	defer w.Close()
	var msgs []kafka.Message
	var dead []schemas.DeadLetter
	limit := kafkaio.WriteConfig{Config: c}.MessageLimit()
	flush := func() error {
		if len(msgs) == 0 {
			return nil
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			return fmt.Errorf("train: feeding %s: %w", path, err)
		}
		sum.Produced += int64(len(msgs))
		msgs = msgs[:0]
		return nil
	}
	topic := c.Topic(kafkaio.Instances)
	add := func(src string, n int, value []byte) error {
		in, err := DecodeRecord(Record{Source: src, Value: value})
		if err != nil {
			dead = append(dead, schemas.DeadLetter{SchemaVersion: schemas.Version, Stage: "decode", Source: src,
				Reason: err.Error(), Value: value, CreatedAt: now()})
			return nil
		}
		key := []byte(RequestKey(in.ID, n))
		if size := len(key) + len(value); size > limit {
			// One instance over the broker's message limit (a commit that
			// adds megabytes of logs) would fail the whole feed; it is set
			// aside, its first 64 KiB kept, and the rest goes on.
			dead = append(dead, schemas.DeadLetter{SchemaVersion: schemas.Version, Stage: "feed", Source: src,
				Reason: fmt.Sprintf("instance %s is %d bytes, over the %d-byte limit of a Kafka message", in.ID, size, limit),
				Value:  value[:min(len(value), 64<<10)], CreatedAt: now()})
			return nil
		}
		msgs = append(msgs, kafka.Message{Topic: topic, Key: key, Value: value})
		if len(msgs) >= 1000 {
			return flush()
		}
		return nil
	}
	err = scanInstances(ctx, path, func(src string, n int, _ string, value []byte) error { return add(src, n, value) })
	if err == nil {
		err = flush()
	}
	if err != nil {
		return sum, err
	}
	if len(dead) > 0 {
		if err := writeParquet(ctx, partName(deadDir, "deadletter"), dead); err != nil {
			return sum, err
		}
		var dm []kafka.Message
		for _, d := range dead {
			v, err := schemas.Encode(&d)
			if err != nil {
				return sum, err
			}
			dm = append(dm, kafka.Message{Topic: c.Topic(kafkaio.DeadLetter), Key: []byte(d.Source), Value: v})
		}
		if err := w.WriteMessages(ctx, dm...); err != nil {
			return sum, fmt.Errorf("train: dead-letters of %s: %w", path, err)
		}
		sum.DeadLetters = int64(len(dead))
		// Outside the pipeline: Prometheus and the progress line see these,
		// Beam's counts do not (Run adds them to its summary).
		for _, d := range dead {
			cDeadLetters.With(d.Stage).Add(ctx, 1)
		}
	}
	return sum, nil
}

// scanLines calls fn with "PATH:LINE", the line's place among the
// non-blank lines (0-based) and the bytes of every non-blank line of the
// file at path, local or in object storage.
func scanLines(ctx context.Context, path string, fn func(src string, n int, line []byte) error) error {
	f, err := files.Open(ctx, path)
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	records := 0
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := fn(fmt.Sprintf("%s:%d", path, n), records, append([]byte(nil), line...)); err != nil {
			return err
		}
		records++
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("train: %s: %w", path, err)
	}
	return nil
}
