package train

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"

	"swerl/sinks/kafkaio"
)

func init() {
	register.Function1x1(messageRecord)
	register.Function2x1(originPosition)
	register.Emitter1[kafkaio.Position]()
}

// messageRecord turns a Kafka message into an input Record.
func messageRecord(m kafkaio.Message) Record {
	return Record{Source: m.Source(), Key: string(m.Key), Value: m.Value}
}

// originPosition parses the origin of a dropped group for Ack.
func originPosition(origin string, emit func(kafkaio.Position)) error {
	p, err := kafkaio.ParsePosition(origin)
	if err != nil {
		return fmt.Errorf("train: origin of a dropped group: %w", err)
	}
	emit(p)
	return nil
}

// positionsDir holds the instances topic's acknowledged positions.
func positionsDir(cfg Config) string { return filepath.Join(cfg.Out, "positions") }

// kafkaSource reads the instances topic, resuming after the positions
// acknowledged under Out/positions; bounded reads stop at the end offsets
// seen when the read starts. With a consumer group it reads what the
// group assigns this run's member.
func kafkaSource(cfg Config) source {
	return func(s beam.Scope) beam.PCollection {
		rc := kafkaio.ReadConfig{Config: cfg.Kafka, Topic: cfg.Kafka.Topic(kafkaio.Instances),
			Bounded: cfg.Bounded, PositionsDir: positionsDir(cfg)}
		if cfg.consumer != "" {
			rc = kafkaio.ReadConfig{Config: cfg.Kafka, Topic: cfg.Kafka.Topic(kafkaio.Instances), GroupMember: cfg.consumer}
		}
		msgs := kafkaio.Read(s, rc)
		return beam.ParDo(s.Scope("ToRecord"), messageRecord, msgs)
	}
}

// ackOrigins acknowledges the origins of written (WriteAcked's output):
// to the consumer group member, or in the positions files.
func ackOrigins(s beam.Scope, cfg Config, written beam.PCollection) {
	if cfg.consumer != "" {
		kafkaio.AckOriginsGroup(s, cfg.consumer, written)
		return
	}
	kafkaio.AckOrigins(s, positionsDir(cfg), written)
}

// ackPositions acknowledges positions (a PCollection of kafkaio.Position) as
// ackOrigins does.
func ackPositions(s beam.Scope, cfg Config, positions beam.PCollection) {
	if cfg.consumer != "" {
		kafkaio.AckGroup(s, cfg.consumer, positions)
		return
	}
	kafkaio.Ack(s, positionsDir(cfg), positions)
}

// joinGroup makes this run a member of cfg.ConsumerGroup; its lines go to
// cfg.Progress.
func joinGroup(cfg Config) (*kafkaio.GroupMember, error) {
	m, err := kafkaio.JoinGroup(kafkaio.GroupConfig{Config: cfg.Kafka, Topic: cfg.Kafka.Topic(kafkaio.Instances), Group: cfg.ConsumerGroup,
		SessionTimeout: cfg.ConsumerSessionTimeout,
		// Enough records in flight to keep the rollout slots busy, few
		// enough that a worker losing its partitions drains them quickly.
		MaxInFlight: max(4*cfg.Concurrency, 32),
		Logf:        func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "train: "+format+"\n", args...) }})
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	return m, nil
}

// lag is the number of records of topic past the acknowledged positions
// under dir (a partition without a position counts from its first offset).
func lag(ctx context.Context, c kafkaio.Config, topic, dir string) (int64, error) {
	parts, err := kafkaio.Partitions(ctx, c, topic)
	if err != nil {
		return 0, err
	}
	pos, err := kafkaio.LoadPositions(dir, topic)
	if err != nil {
		return 0, err
	}
	d, err := c.Dialer()
	if err != nil {
		return 0, err
	}
	var total int64
	for _, p := range parts {
		conn, err := d.DialLeader(ctx, "tcp", c.Brokers[0], topic, p)
		if err != nil {
			return 0, err
		}
		first, last, err := conn.ReadOffsets()
		conn.Close()
		if err != nil {
			return 0, err
		}
		next, ok := pos[p]
		if !ok || next < first {
			next = first
		}
		total += max(last-next, 0)
	}
	return total, nil
}
