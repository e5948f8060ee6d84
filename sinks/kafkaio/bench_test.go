package kafkaio

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"

	"swerl/schemas"
)

// sampleValue returns the JSON of a sample about 2 KB long.
func sampleValue(b testing.TB, i int) []byte {
	s := schemas.Sample{Rollout: schemas.Rollout{ID: fmt.Sprintf("g%d/0", i), InstanceID: fmt.Sprintf("acme/w#%d", i), GroupID: fmt.Sprintf("g%d", i),
		GroupSize: 4, Prompt: strings.Repeat("prompt text ", 60), Completion: fmt.Sprintf("<think>%d</think>", i) + strings.Repeat("completion ", 100)},
		Reward: 0.5, Advantage: 0.1}
	v, err := Encode(s)
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// fill produces n ~2 KB sample records to topic (not timed).
func fill(b *testing.B, c Config, topic string, n int) {
	w := &kafka.Writer{Addr: kafka.TCP(c.Brokers...), Topic: topic, Balancer: &kafka.Murmur2Balancer{}, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll, BatchSize: 1000, Compression: compress.Zstd}
	defer w.Close()
	var msgs []kafka.Message
	for i := 0; i < n; i++ {
		msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "g%d", i), Value: sampleValue(b, i)})
		if len(msgs) == 5000 || i == n-1 {
			if err := w.WriteMessages(context.Background(), msgs...); err != nil {
				b.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
}

// BenchmarkRawConsumeProduce is the floor the train pipeline is compared
// with: plain kafka-go, no Beam, consumes ~2 KB JSON records from one topic
// of the embedded broker (a Reader per partition) and produces each to
// another (one Writer, zstd, the settings Write uses), all partitions in
// parallel. One op is one record consumed and produced.
func BenchmarkRawConsumeProduce(b *testing.B) {
	c := startBroker(b, "in", "out")
	tin, tout := c.Topic("in"), c.Topic("out")
	fill(b, c, tin, b.N)
	parts, err := Partitions(context.Background(), c, tin)
	if err != nil {
		b.Fatal(err)
	}
	w := &kafka.Writer{Addr: kafka.TCP(c.Brokers...), Topic: tout, Balancer: &kafka.Murmur2Balancer{}, BatchTimeout: 5 * time.Millisecond, BatchSize: 1000, Compression: compress.Zstd, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	ctx := context.Background()
	b.SetBytes(int64(len(sampleValue(b, 0))))
	b.ResetTimer()
	var wg sync.WaitGroup
	errs := make(chan error, len(parts))
	for _, p := range parts {
		wg.Add(1)
		go func(p int) {
			defer wg.Done()
			conn, err := kafka.DialLeader(ctx, "tcp", c.Brokers[0], tin, p)
			if err != nil {
				errs <- err
				return
			}
			_, last, err := conn.ReadOffsets()
			conn.Close()
			if err != nil || last == 0 {
				errs <- err
				return
			}
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: c.Brokers, Topic: tin, Partition: p, MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 50 * time.Millisecond})
			defer r.Close()
			var batch []kafka.Message
			for {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					errs <- err
					return
				}
				batch = append(batch, kafka.Message{Key: m.Key, Value: m.Value})
				if len(batch) == 1000 || m.Offset == last-1 {
					if err := w.WriteMessages(ctx, batch...); err != nil {
						errs <- err
						return
					}
					batch = batch[:0]
				}
				if m.Offset == last-1 {
					return
				}
			}
		}(p)
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkBeamReadWrite is the same work through kafkaio on Prism: a
// bounded Read, an identity step, and Write. Its msgs/s against
// BenchmarkRawConsumeProduce is the cost of Beam and the Kafka IO alone.
func BenchmarkBeamReadWrite(b *testing.B) {
	c := startBroker(b, "in", "out")
	tin, tout := c.Topic("in"), c.Topic("out")
	fill(b, c, tin, b.N)
	b.SetBytes(int64(len(sampleValue(b, 0))))
	b.ResetTimer()
	p, s := beam.NewPipelineWithRoot()
	Write(s, WriteConfig{Config: c, Topic: tout}, beam.ParDo(s, relabel, Read(s, ReadConfig{Config: c, Topic: tin, Bounded: true})))
	if err := runPipeline(b, context.Background(), p); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
