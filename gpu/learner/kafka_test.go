package learner

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/gpu"
	"swerl/gpu/learner/learnertest"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/sinks/kafkaio"
	"swerl/sinks/kafkaio/kafkaiotest"
)

// startBroker starts the embedded broker with the samples and weights
// topics of partitions partitions each; the test's cleanup stops it.
func startBroker(t *testing.T, partitions int) *kafkaiotest.Broker {
	t.Helper()
	br := kafkaiotest.Start(t, kafkaio.BrokerOptions{Partitions: partitions, Topics: []string{"swerl.samples", "swerl.weights"}})
	return br
}

// The learner against a real Kafka protocol broker (kfake, in process):
// it trains on swerl.samples in a consumer group, announces every version
// on swerl.weights, and the group's committed offsets equal those of the
// newest index row.
func TestKafkaLearner(t *testing.T) {
	cluster := startBroker(t, 2)
	brokers := cluster.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	kcfg := kafkaio.Config{Brokers: brokers}
	w, err := kafkaio.NewWriter(kafkaio.WriteConfig{Config: kcfg, Topic: kcfg.Topic(kafkaio.Samples), BatchTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []kafka.Message
	for _, s := range syntheticSamples(4, 2, -1, "") {
		s.Source = ""
		b, err := schemas.Encode(&s)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(s.GroupID), Value: b})
	}
	msgs = append(msgs[:2], append([]kafka.Message{{Key: []byte("junk"), Value: []byte("not json")}}, msgs[2:]...)...)
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()

	out := t.TempDir()
	kc := KafkaConfig{Kafka: kcfg, Log: quiet()}
	ann := announcer(t, kc)
	cfg := Config{Out: out, Model: initModel(t), BatchGroups: 1, MaxStaleness: -1, Announce: ann.Announce,
		Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64}}
	l := newLearner(t, cfg)
	src, err := NewKafkaSource(kc, l.Offsets())
	if err != nil {
		t.Fatal(err)
	}
	if st, err := l.Run(ctx, src, 3); err != nil || st.Steps != 3 {
		t.Fatalf("%+v %v", st, err)
	}
	src.Close()
	store, _ := checkpoint.Open(checkpoint.Config{Dir: out, Log: quiet()})
	v3, err := store.Get(3)
	if err != nil {
		t.Fatal(err)
	}
	committed := groupOffsets(t, ctx, brokers, "swerl-learner")
	total := int64(0)
	for _, o := range v3.Offsets {
		if committed[o.Partition] < o.Offset {
			t.Errorf("partition %d: committed %d, index %d", o.Partition, committed[o.Partition], o.Offset)
		}
		total += o.Offset
	}
	if total < 6 {
		t.Errorf("index offsets %v cover fewer than the 6 samples trained", v3.Offsets)
	}
	// Every version, v0 included, was announced.
	seen := learnertest.Announced(t, ctx, brokers, "swerl.weights", 2)
	if len(seen) != 4 {
		t.Errorf("announced versions %v, want 0..3", seen)
	}

	// Resume: the one group left is trained, nothing twice.
	cfg.Resume, cfg.Model = true, ""
	l2 := newLearner(t, cfg)
	src2, err := NewKafkaSource(kc, l2.Offsets())
	if err != nil {
		t.Fatal(err)
	}
	defer src2.Close()
	st, err := l2.Run(ctx, src2, 1)
	if err != nil || st.Samples != 2 || l2.Version() != 4 {
		t.Fatalf("resumed run %+v, v%d, %v", st, l2.Version(), err)
	}
	if src.Undecodable+src2.Undecodable != 1 {
		t.Errorf("undecodable records %d+%d, want 1", src.Undecodable, src2.Undecodable)
	}
}

func groupOffsets(t *testing.T, ctx context.Context, brokers []string, group string) map[int]int64 {
	t.Helper()
	c := &kafka.Client{Addr: kafka.TCP(brokers...)}
	resp, err := c.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{"swerl.samples": {0, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int64{}
	for _, p := range resp.Topics["swerl.samples"] {
		if p.Error != nil {
			t.Fatalf("partition %d: %v", p.Partition, p.Error)
		}
		out[p.Partition] = p.CommittedOffset
	}
	t.Logf("committed offsets: %v", out)
	return out
}

// Two rollout workers of one consumer group can produce the same group to
// swerl.samples: a worker that died after producing a group but before
// committing its record leaves it to another, which produces the same
// sample ids again (train's ids follow the record, not the worker). The
// copies come before the original, interleaved with it sample by sample,
// and after the group was trained; every sample is trained once, and the
// copies are counted as duplicates. A last group produced after all the
// copies is trained in the step right after the others: no copy made a
// step of its own.
func TestKafkaLearnerTrainsCopiesFromTwoWorkersOnce(t *testing.T) {
	cluster := startBroker(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const groups, G = 6, 2
	all := syntheticSamples(groups+1, G, -1, "")
	s := func(g, i int) schemas.Sample { x := all[g*G+i]; x.Source = ""; return x }
	// What worker A (which lived) and worker B (which died) produced, in
	// the order the partition holds it.
	stream := []schemas.Sample{
		s(0, 0), s(0, 1), s(1, 0), // B, before it died; g1 only in part
		s(0, 0), s(2, 0), s(0, 1), s(1, 0), s(1, 1), // A, and B's g2 interleaved
		s(2, 0), s(2, 1), s(2, 1), s(3, 0), s(3, 1), s(4, 0), s(4, 1),
		s(3, 0), s(3, 1), // B again, after g3 was trained
		s(5, 0), s(5, 1), s(0, 0), s(0, 1),
		s(6, 0), s(6, 1), // the last group, after every copy
	}
	kcfg := kafkaio.Config{Brokers: cluster.Addrs()}
	w, err := kafkaio.NewWriter(kafkaio.WriteConfig{Config: kcfg, Topic: kcfg.Topic(kafkaio.Samples), BatchTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	distinct := map[string]bool{}
	var msgs []kafka.Message
	for _, x := range stream {
		b, err := schemas.Encode(&x)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte(x.GroupID), Value: b})
		distinct[x.ID] = true
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if len(distinct) != (groups+1)*G {
		t.Fatalf("the stream holds %d distinct samples, want %d", len(distinct), (groups+1)*G)
	}

	out := t.TempDir()
	kc := KafkaConfig{Kafka: kcfg, Log: quiet()}
	ann := announcer(t, kc)
	l := newLearner(t, Config{Out: out, Model: initModel(t), BatchGroups: 1, MaxStaleness: -1, Announce: ann.Announce,
		Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64}})
	src, err := NewKafkaSource(kc, l.Offsets())
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	st, err := l.Run(ctx, src, groups+1)
	if err != nil || st.Steps != groups+1 {
		t.Fatalf("%+v %v", st, err)
	}
	trained := map[string]int64{}
	for v := int64(1); v <= groups+1; v++ {
		rec, err := ReadRecord(out, v)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range rec.Samples {
			if u, dup := trained[id]; dup {
				t.Fatalf("sample %s trained in v%d and again in v%d", id, u, v)
			}
			trained[id] = v
		}
	}
	for id := range distinct {
		if _, ok := trained[id]; !ok {
			t.Errorf("sample %s never trained (trained: %v)", id, trained)
		}
	}
	if v := trained[s(6, 0).ID]; v != groups+1 {
		t.Errorf("the last group was trained in v%d, want v%d", v, groups+1)
	}
	if want := len(stream) - len(distinct); st.Duplicates != want {
		t.Errorf("%d duplicates counted, want %d (the copies)", st.Duplicates, want)
	}
}

// announcer is an Announcer on kc that the test's end closes.
func announcer(t *testing.T, kc KafkaConfig) *Announcer {
	t.Helper()
	ann, err := NewAnnouncer(kc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ann.Close() })
	return ann
}
