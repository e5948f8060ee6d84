package learner

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/schemas"
	"swerl/sinks/kafkaio"
)

// KafkaConfig is what the learner needs besides the cluster: it reads
// Kafka.Topic(kafkaio.Samples) and announces on Kafka.Topic(kafkaio.Weights).
type KafkaConfig struct {
	// Kafka locates the cluster (brokers, TLS, SASL, topic prefix).
	Kafka kafkaio.Config
	// Group is the consumer group. Default "swerl-learner".
	Group string
	// Log receives dead records (samples that do not decode). Default
	// slog.Default().
	Log *slog.Logger
}

func (c KafkaConfig) samplesTopic() string { return c.Kafka.Topic(kafkaio.Samples) }

func (c KafkaConfig) withDefaults() KafkaConfig {
	if c.Group == "" {
		c.Group = "swerl-learner"
	}
	if c.Log == nil {
		c.Log = slog.Default()
	}
	return c
}

// KafkaSource consumes swerl.samples in a consumer group without
// auto-commit: positions are committed through Commit, which the learner
// calls after publishing a version, with its commit points (the first
// sample not yet trained in each partition). Records below the commit
// points of the checkpoint a learner resumes from are skipped (the group's
// commit lags them after a crash between publish and commit); records at
// or above them that belong to groups already trained are skipped by the
// learner (StepRecord.Finished).
type KafkaSource struct {
	cfg    KafkaConfig
	r      *kafka.Reader
	mu     sync.Mutex
	resume map[string]int64          // topic/partition → first offset not yet trained
	bad    map[string]map[int64]bool // undecodable offsets not yet committed past
	// Undecodable counts records that are not Sample JSON (logged, skipped).
	Undecodable int
}

// NewKafkaSource joins the consumer group. resume are the offsets of the
// checkpoint training continues from (Learner.Offsets), or nil.
func NewKafkaSource(cfg KafkaConfig, resume []schemas.TopicOffset) (*KafkaSource, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Kafka.Validate(); err != nil {
		return nil, fmt.Errorf("learner: %w", err)
	}
	dialer, err := cfg.Kafka.Dialer()
	if err != nil {
		return nil, fmt.Errorf("learner: %w", err)
	}
	s := &KafkaSource{cfg: cfg, resume: map[string]int64{}, bad: map[string]map[int64]bool{}}
	for _, o := range resume {
		s.resume[offKey(o)] = o.Offset
	}
	s.r = kafka.NewReader(kafka.ReaderConfig{
		Brokers: cfg.Kafka.Brokers, GroupID: cfg.Group, Topic: cfg.samplesTopic(), Dialer: dialer,
		StartOffset: kafka.FirstOffset, MinBytes: 1, MaxBytes: 16 << 20, MaxWait: 500 * time.Millisecond,
		CommitInterval: 0, // synchronous commits, only through Commit
		// One learner consumes the group. A restarted one (after a crash:
		// the dead member never leaves) gets the partitions once the dead
		// member's session expires: 6 s, the least a broker accepts by
		// default (group.min.session.timeout.ms), instead of kafka-go's 30.
		SessionTimeout: 6 * time.Second, RebalanceTimeout: 6 * time.Second, HeartbeatInterval: time.Second,
		// kafka-go heals consumer-group errors (lost coordinator, failed
		// join or heartbeat) by itself and reports them nowhere else.
		ErrorLogger: kafka.LoggerFunc(func(format string, args ...any) {
			cfg.Log.Warn("learner: kafka consumer: " + fmt.Sprintf(format, args...))
		}),
	})
	return s, nil
}

// Next implements Source: the next sample, its Source set to
// "topic@partition:offset".
func (s *KafkaSource) Next(ctx context.Context) (schemas.Sample, error) {
	for {
		// A broker that is down (a restart) fails the consumer group's
		// joins; kafka-go hands the error over after three and then keeps
		// healing, so the fetch is tried again for Kafka.Retry's budget.
		var m kafka.Message
		err := s.cfg.Kafka.Retry.Do(ctx, "learner: fetch from "+s.cfg.samplesTopic(), func() (err error) {
			m, err = s.r.FetchMessage(ctx)
			return err
		})
		if err != nil {
			return schemas.Sample{}, err
		}
		src := m.Topic + "@" + strconv.Itoa(m.Partition) + ":" + strconv.FormatInt(m.Offset, 10)
		if m.Offset < s.resume[m.Topic+"/"+strconv.Itoa(m.Partition)] {
			continue
		}
		var smp schemas.Sample
		if err := schemas.Decode(m.Value, &smp); err != nil {
			s.Undecodable++
			mSamples.WithLabelValues("undecodable").Inc()
			s.cfg.Log.Warn("learner: skipping a record that is not a sample", "source", src, "key", string(m.Key), "err", err.Error())
			// The next commit that reaches this offset moves past it.
			k := m.Topic + "/" + strconv.Itoa(m.Partition)
			s.mu.Lock()
			if s.bad[k] == nil {
				s.bad[k] = map[int64]bool{}
			}
			s.bad[k][m.Offset] = true
			s.mu.Unlock()
			continue
		}
		smp.Source = src
		return smp, nil
	}
}

// Commit implements Committer.
func (s *KafkaSource) Commit(ctx context.Context, offsets []schemas.TopicOffset) error {
	var msgs []kafka.Message
	for _, o := range offsets {
		if o.Topic != s.cfg.samplesTopic() || o.Offset <= 0 {
			continue
		}
		next := o.Offset
		s.mu.Lock()
		bad := s.bad[offKey(o)]
		for bad[next] {
			delete(bad, next)
			next++
		}
		s.mu.Unlock()
		msgs = append(msgs, kafka.Message{Topic: o.Topic, Partition: o.Partition, Offset: next - 1})
	}
	if len(msgs) == 0 {
		return nil
	}
	return s.r.CommitMessages(ctx, msgs...)
}

// Close leaves the group.
func (s *KafkaSource) Close() error { return s.r.Close() }

// Announcer writes published versions to swerl.weights (key: the version
// directory name, value: the WeightVersion JSON).
type Announcer struct {
	w *kafkaio.Writer
}

// NewAnnouncer returns an announcer for the weights topic of cfg.Kafka.
func NewAnnouncer(cfg KafkaConfig) (*Announcer, error) {
	w, err := kafkaio.NewWriter(kafkaio.WriteConfig{Config: cfg.Kafka, Topic: cfg.Kafka.Topic(kafkaio.Weights), BatchTimeout: 10 * time.Millisecond})
	if err != nil {
		return nil, fmt.Errorf("learner: %w", err)
	}
	return &Announcer{w: w}, nil
}

// Announce implements Config.Announce.
func (a *Announcer) Announce(ctx context.Context, v schemas.WeightVersion) error {
	b, err := schemas.Encode(&v)
	if err != nil {
		return err
	}
	if err := a.w.WriteMessages(ctx, kafka.Message{Key: []byte(fmt.Sprintf("v%06d", v.Version)), Value: b}); err != nil {
		return fmt.Errorf("learner: announce v%d on %s: %w", v.Version, a.w.Topic(), err)
	}
	return nil
}

// Close flushes and closes the writer.
func (a *Announcer) Close() error { return a.w.Close() }
