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

// writer buffers one bundle of messages for a kafka-go Writer.
type writer struct {
	WC WriteConfig

	w    *kafka.Writer
	buf  []kafka.Message
	size int
}

const maxBufferBytes = 8 << 20

func (w *writer) setup() error {
	wc := w.WC
	if err := wc.Config.Validate(); err != nil {
		return err
	}
	tr, err := wc.Config.Transport()
	if err != nil {
		return err
	}
	if wc.BatchTimeout <= 0 {
		wc.BatchTimeout = 5 * time.Millisecond
	}
	if wc.BatchSize <= 0 {
		wc.BatchSize = 1000
	}
	kw := &kafka.Writer{
		Addr:         kafka.TCP(wc.Config.Brokers...),
		Transport:    tr,
		Balancer:     &kafka.Murmur2Balancer{},
		BatchTimeout: wc.BatchTimeout,
		BatchSize:    wc.BatchSize,
		BatchBytes:   int64(max(1<<20, wc.MaxMessageBytes+(64<<10))),
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
	w.w = kw
	return nil
}

func (w *writer) add(ctx context.Context, m Message) error {
	topic := m.Topic
	if topic == "" {
		topic = w.WC.Topic
	}
	if topic == "" {
		return fmt.Errorf("kafkaio: write: message with key %q has no topic and WriteConfig.Topic is empty", m.Key)
	}
	limit := w.WC.MaxMessageBytes
	if limit <= 0 {
		limit = 1000000
	}
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
		var we kafka.WriteErrors
		if errors.As(err, &we) {
			for i, e := range we {
				if e != nil {
					m := w.buf[i]
					return fmt.Errorf("kafkaio: write to %s (key %q) and %d other failures: %w", m.Topic, m.Key, we.Count()-1, e)
				}
			}
		}
		return fmt.Errorf("kafkaio: write %d messages: %w", len(w.buf), err)
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
