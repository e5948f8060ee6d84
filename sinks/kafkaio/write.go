package kafkaio

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"
)

func init() {
	register.DoFn3x1[context.Context, Message, func(int), error](&writeFn{})
	register.Function1x0[beam.T](discard)
	register.Emitter1[int]()
	register.DoFn3x1[context.Context, Message, func(Message), error](&writeAckedFn{})
	register.Emitter1[Message]()
}

// WriteConfig configures Write.
type WriteConfig struct {
	Config Config
	// Topic (full name) for messages whose Topic is empty.
	Topic string
	// BatchTimeout is the longest a partial batch waits; default 5ms.
	BatchTimeout time.Duration
	// BatchSize is the most records in one produce batch; default 1000.
	BatchSize int
	// NoCompression turns zstd off.
	NoCompression bool
	// MaxMessageBytes is the largest key+value written as is; default
	// 1000000 (Kafka's default message.max.bytes is 1048588). A larger
	// message is not written: a schemas.DeadLetter naming it (stage
	// "kafka-write", the first 64 KiB of its value) goes to
	// Config.Topic(DeadLetter) instead, so one oversized record neither
	// fails the pipeline nor disappears.
	MaxMessageBytes int
}

// Write produces the Messages of col to Kafka (an empty Message.Topic
// means wc.Topic; the key picks the partition by murmur2 hash, as the Java
// client does). Records are buffered and flushed at the end of every
// bundle, so a bundle succeeds only once Kafka has acknowledged all its
// records; a failed flush fails the bundle and the runner retries it.
func Write(s beam.Scope, wc WriteConfig, col beam.PCollection) {
	s = s.Scope("kafkaio.Write")
	Drain(s, beam.ParDo(s, &writeFn{writer: writer{WC: wc}}, col))
}

// Drain consumes col behind a Reshuffle and drops it. Use it to end a sink:
// a fused stage with no output makes Prism (v2.77) spin a core on a closed
// channel for as long as each of its bundles runs (Write through Prism went
// from 0.12 to 0.9 of raw kafka-go's rate with this). Give the sink DoFn an
// output (one element per bundle, emitted in FinishBundle, is enough) and
// Drain it, so the stage's output crosses a stage boundary.
func Drain(s beam.Scope, col beam.PCollection) {
	s = s.Scope("kafkaio.Drain")
	beam.ParDo0(s, discard, beam.Reshuffle(s, col))
}

func discard(beam.T) {}

// WriteAcked is Write that also returns the messages it wrote, each
// emitted only after the flush that made it durable (the input Message,
// its Topic filled in, Origin as given: pass them to AckOrigins).
func WriteAcked(s beam.Scope, wc WriteConfig, col beam.PCollection) beam.PCollection {
	s = s.Scope("kafkaio.WriteAcked")
	return beam.ParDo(s, &writeAckedFn{writer: writer{WC: wc}}, col)
}

// Writer produces records to Kafka: the one producer of swerl, used by
// the Beam Write transforms, the train feed, swerl run's sample publisher
// and the learner's announcements. Keys pick partitions by murmur2, as
// Kafka's Java client does (kcat's murmur2_random and librdkafka agree);
// batches are zstd-compressed and acknowledged by all in-sync replicas.
// WriteMessages rides out a broker outage as Config.Retry says.
type Writer struct {
	kw    *kafka.Writer
	retry RetryConfig
}

// NewWriter returns a Writer for wc.Config. With wc.Topic set every
// message goes there (and must not name a topic); without it every
// message names its own.
func NewWriter(wc WriteConfig) (*Writer, error) {
	if err := wc.Config.Validate(); err != nil {
		return nil, err
	}
	tr, err := wc.Config.Transport()
	if err != nil {
		return nil, err
	}
	if wc.BatchTimeout <= 0 {
		wc.BatchTimeout = 5 * time.Millisecond
	}
	if wc.BatchSize <= 0 {
		wc.BatchSize = 1000
	}
	kw := &kafka.Writer{
		Addr:         kafka.TCP(wc.Config.Brokers...),
		Topic:        wc.Topic,
		Transport:    tr,
		Balancer:     &kafka.Murmur2Balancer{},
		BatchTimeout: wc.BatchTimeout,
		BatchSize:    wc.BatchSize,
		BatchBytes:   int64(max(1<<20, wc.maxMessageBytes()+(64<<10))),
		RequiredAcks: kafka.RequireAll,
		MaxAttempts:  5,
		WriteTimeout: 30 * time.Second,
		// Topics the pipeline writes to are created on first use by the
		// embedded broker; real clusters get them from EnsureTopics.
		AllowAutoTopicCreation: true,
	}
	if !wc.NoCompression {
		kw.Compression = compress.Zstd
	}
	return &Writer{kw: kw, retry: wc.Config.Retry}, nil
}

// Topic is the writer's topic ("" when every message names its own).
func (w *Writer) Topic() string { return w.kw.Topic }

// WriteMessages writes msgs and returns once Kafka has acknowledged all of
// them. When some fail for a reason that waiting can fix (the broker is
// down, a leader moves), it tries those again with backoff, within
// Config.Retry's budget; the error names a failed record.
func (w *Writer) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	pending := msgs
	var failed kafka.Message
	err := w.retry.Do(ctx, "write", func() error {
		err := w.kw.WriteMessages(ctx, pending...)
		var we kafka.WriteErrors
		if errors.As(err, &we) && len(we) == len(pending) {
			var again []kafka.Message
			for i, e := range we {
				if e != nil {
					again = append(again, pending[i])
				}
			}
			if len(again) == 0 {
				return nil
			}
			pending, failed = again, again[0]
			return err
		}
		if err != nil && len(pending) > 0 {
			failed = pending[0]
		}
		return err
	})
	if err == nil {
		return nil
	}
	topic := failed.Topic
	if topic == "" {
		topic = w.kw.Topic
	}
	var we kafka.WriteErrors
	if errors.As(err, &we) {
		for _, e := range we {
			if e != nil {
				return fmt.Errorf("kafkaio: write to %s (key %q) and %d other failures: %w", topic, failed.Key, we.Count()-1, e)
			}
		}
	}
	return fmt.Errorf("kafkaio: write %d messages to %s (first key %q): %w", len(pending), topic, failed.Key, err)
}

// Close flushes what is buffered and closes the connections.
func (w *Writer) Close() error { return w.kw.Close() }

func (wc WriteConfig) maxMessageBytes() int {
	if wc.MaxMessageBytes <= 0 {
		return 1000000
	}
	return wc.MaxMessageBytes
}

// writer buffers one bundle of messages for a Writer.
type writer struct {
	WC WriteConfig

	w    *Writer
	buf  []kafka.Message
	size int
}

const maxBufferBytes = 8 << 20

func (w *writer) setup() error {
	// Messages name their topic (add fills in WC.Topic): dead-letters of
	// oversized records go to another topic through the same writer.
	wc := w.WC
	wc.Topic = ""
	kw, err := NewWriter(wc)
	w.w = kw
	return err
}

func (w *writer) add(ctx context.Context, m Message) error {
	topic := m.Topic
	if topic == "" {
		topic = w.WC.Topic
	}
	if topic == "" {
		return fmt.Errorf("kafkaio: write: message with key %q has no topic and WriteConfig.Topic is empty", m.Key)
	}
	limit := w.WC.maxMessageBytes()
	if size := len(m.Key) + len(m.Value); size > limit {
		v := m.Value[:min(len(m.Value), 64<<10)]
		dl := DeadLetterFor(Message{Topic: topic, Partition: m.Partition, Offset: m.Offset, Key: m.Key, Value: v},
			"kafka-write", fmt.Errorf("message for %s with key %q is %d bytes, over the %d-byte limit (origin %q)", topic, m.Key, size, limit, m.Origin))
		dl.Source = m.Origin
		b, err := Encode(dl)
		if err != nil {
			return err
		}
		topic, m = w.WC.Config.Topic(DeadLetter), Message{Key: m.Key, Value: b}
	}
	km := kafka.Message{Topic: topic, Key: m.Key, Value: m.Value}
	if m.TimeMS != 0 {
		km.Time = time.UnixMilli(m.TimeMS)
	}
	w.buf = append(w.buf, km)
	w.size += len(m.Key) + len(m.Value)
	if w.size >= maxBufferBytes || len(w.buf) >= 10*max(w.WC.BatchSize, 1000) {
		return w.flush(ctx)
	}
	return nil
}

func (w *writer) flush(ctx context.Context) error {
	if len(w.buf) == 0 {
		return nil
	}
	if err := w.w.WriteMessages(ctx, w.buf...); err != nil {
		return err
	}
	clear(w.buf)
	w.buf = w.buf[:0]
	w.size = 0
	return nil
}

func (w *writer) teardown() {
	// Nothing is flushed here: a bundle whose FinishBundle did not run is
	// retried by the runner, so its buffer is dropped.
	if w.w != nil {
		w.w.Close()
	}
}

type writeFn struct {
	writer
	n int
}

func (fn *writeFn) Setup() error { return fn.setup() }

func (fn *writeFn) ProcessElement(ctx context.Context, m Message, _ func(int)) error {
	fn.n++
	return fn.add(ctx, m)
}

func (fn *writeFn) FinishBundle(ctx context.Context, emit func(int)) error {
	if err := fn.flush(ctx); err != nil {
		return err
	}
	if fn.n > 0 {
		emit(fn.n)
		fn.n = 0
	}
	return nil
}

func (fn *writeFn) Teardown() { fn.teardown() }

type writeAckedFn struct {
	writer
	pending []Message
}

func (fn *writeAckedFn) Setup() error { return fn.setup() }

func (fn *writeAckedFn) ProcessElement(ctx context.Context, m Message, _ func(Message)) error {
	if m.Topic == "" {
		m.Topic = fn.WC.Topic
	}
	fn.pending = append(fn.pending, m)
	return fn.add(ctx, m)
}

func (fn *writeAckedFn) FinishBundle(ctx context.Context, emit func(Message)) error {
	if err := fn.flush(ctx); err != nil {
		return err
	}
	for _, m := range fn.pending {
		emit(m)
	}
	fn.pending = fn.pending[:0]
	return nil
}

func (fn *writeAckedFn) Teardown() { fn.teardown() }

// MessageLimit is the largest key+value Write produces as is:
// MaxMessageBytes or its default.
func (wc WriteConfig) MessageLimit() int { return wc.maxMessageBytes() }
