package kafkaio

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/runners/prism"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"swerl/schemas"
	"swerl/sinks/kafkaio/kafkatest"
)

func init() {
	register.Function1x1[Message, Message](relabel)
	register.Function3x0[beam.EventTime, Message, func(string)](timeMismatch)
}

// timeMismatch emits a line for a message whose event time is not its
// Kafka record timestamp.
func timeMismatch(et beam.EventTime, m Message, emit func(string)) {
	if int64(et) != m.TimeMS || m.TimeMS == 0 {
		emit(fmt.Sprintf("%s: event time %d, record time %d", m.Source(), et, m.TimeMS))
	}
}

// relabel turns an input record into an output record for topic "out":
// the value gains the source position, so the test can check every input
// arrived exactly where it was.
func relabel(m Message) Message {
	return Message{Key: m.Key, Value: []byte(m.Source() + " " + string(m.Value))}
}

// startBroker returns the Config of a broker holding topics (short names;
// each is c.Topic(name), under a prefix of this test's own) with 3
// partitions each: a new embedded broker, or the real broker the tests
// share when kafkatest.Shared names one. No topics: swerl's four.
func startBroker(t testing.TB, topics ...string) Config {
	t.Helper()
	return startBrokerWith(t, kafkatest.Prefix(t), 3, topics...)
}

// startBrokerWith is startBroker with the topic prefix and the partition
// count given.
func startBrokerWith(t testing.TB, prefix string, partitions int, topics ...string) Config {
	t.Helper()
	c := Config{TopicPrefix: prefix}
	if topics == nil {
		topics = TopicNames
	}
	full := c.fullNames(topics)
	if addr := kafkatest.Shared(t); addr != "" {
		c.Brokers = []string{addr}
		kafkatest.CreateTopics(t, addr, partitions, full...)
		return c
	}
	return embeddedBroker(t, prefix, partitions, full)
}

// embeddedBroker starts an embedded broker with the topics full, which the
// test's cleanup closes.
func embeddedBroker(t testing.TB, prefix string, partitions int, full []string) Config {
	t.Helper()
	b, err := StartBroker(BrokerOptions{Partitions: partitions, Topics: full})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b.Config(prefix)
}

// fullNames returns the names of topics under c's prefix.
func (c Config) fullNames(topics []string) []string {
	full := make([]string, len(topics))
	for i, n := range topics {
		full[i] = c.Topic(n)
	}
	return full
}

// ownRealBroker starts a real broker for this test alone (a new cluster
// id), creates full on it with partitions each, and points c at it.
func ownRealBroker(t testing.TB, c *Config, partitions int, full []string) *kafkatest.Real {
	t.Helper()
	r := kafkatest.StartReal(t, t.TempDir(), partitions)
	c.Brokers = []string{r.Addr()}
	kafkatest.CreateTopics(t, r.Addr(), partitions, full...)
	return r
}

// newCluster is startBrokerWith on a cluster of the test's own: a new
// embedded broker, or under the real-broker leg a real broker started for
// this test (a new cluster id).
func newCluster(t testing.TB, prefix string, partitions int, topics ...string) Config {
	t.Helper()
	c := Config{TopicPrefix: prefix}
	full := c.fullNames(topics)
	if kafkatest.Shared(t) != "" {
		ownRealBroker(t, &c, partitions, full)
		return c
	}
	return embeddedBroker(t, prefix, partitions, full)
}

// produce writes n records key-i/value-i (i from first) to topic.
func produce(t testing.TB, c Config, topic string, first, n int) {
	t.Helper()
	w, err := NewWriter(WriteConfig{Config: c, Topic: topic, BatchTimeout: time.Millisecond, BatchSize: 500})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var msgs []kafka.Message
	for i := first; i < first+n; i++ {
		msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "key-%d", i), Value: fmt.Appendf(nil, "value-%d", i)})
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
}

// consumeAll reads topic until it holds want records or wait has passed,
// and returns what it read.
func consumeAll(t testing.TB, c Config, topic string, want int, wait time.Duration) []kafka.Message {
	t.Helper()
	return kafkatest.ReadAtLeast(t, c.Brokers[0], topic, want, wait)
}

func runPipeline(t testing.TB, ctx context.Context, p *beam.Pipeline) error {
	t.Helper()
	_, err := prism.Execute(ctx, p)
	return err
}

// A bounded read on Prism reads exactly the records present when it starts
// and finishes; Write puts every one on the output topic, key preserved,
// on the partition the key hashes to.
func TestBoundedReadWriteOnPrism(t *testing.T) {
	c := startBroker(t, "in", "out")
	in, outTopic := c.Topic("in"), c.Topic("out")
	const n = 300
	produce(t, c, in, 0, n)

	p, s := beam.NewPipelineWithRoot()
	msgs := Read(s, ReadConfig{Config: c, Topic: in, Bounded: true})
	passert.Empty(s, beam.ParDo(s, timeMismatch, msgs))
	Write(s, WriteConfig{Config: c, Topic: outTopic}, beam.ParDo(s, relabel, msgs))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := runPipeline(t, ctx, p); err != nil {
		t.Fatal(err)
	}
	out := consumeAll(t, c, outTopic, n, time.Minute)
	checkRelabelled(t, out, in, 0, n)
	// The batches on the broker are zstd-compressed: franz-go's client
	// reports each record's batch codec.
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Brokers...), kgo.ConsumeTopics(outTopic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	codecs := map[uint8]int{}
	for got := 0; got < n; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err(); err != nil {
			t.Fatal(err)
		}
		fs.EachRecord(func(r *kgo.Record) { codecs[r.Attrs.CompressionType()]++; got++ })
	}
	if codecs[4] != n {
		t.Fatalf("record batch codecs %v, want all %d zstd (4)", codecs, n)
	}
}

// checkRelabelled checks that out holds relabel's output of the records
// key-first..key-(first+n-1) of topic in, each once.
func checkRelabelled(t testing.TB, out []kafka.Message, in string, first, n int) {
	t.Helper()
	seen := map[string]int{}
	byKeyPart := map[string]int{}
	for _, m := range out {
		src, val, ok := strings.Cut(string(m.Value), " ")
		if !ok || !strings.HasPrefix(src, in+"@") {
			t.Fatalf("output value %q lacks its source", m.Value)
		}
		pos, err := ParsePosition(src)
		if err != nil {
			t.Fatal(err)
		}
		if want := "value-" + strings.TrimPrefix(string(m.Key), "key-"); val != want {
			t.Errorf("key %s carries %q", m.Key, val)
		}
		seen[string(m.Key)]++
		if q, ok := byKeyPart[string(m.Key)]; ok && q != m.Partition {
			t.Errorf("key %s on partitions %d and %d", m.Key, q, m.Partition)
		}
		byKeyPart[string(m.Key)] = m.Partition
		_ = pos
	}
	var missing, dup []string
	for i := first; i < first+n; i++ {
		k := fmt.Sprintf("key-%d", i)
		switch seen[k] {
		case 0:
			missing = append(missing, k)
		case 1:
		default:
			dup = append(dup, k)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 || len(dup) > 0 || len(out) != n {
		t.Fatalf("%d records out for %d in; missing %v; duplicated %v", len(out), n, missing, dup)
	}
}

func TestMain(m *testing.M) {
	flag.Parse()
	beam.Init()
	os.Exit(m.Run())
}

func init() {
	register.Function1x1[Message, Message](inflate)
}

// inflate makes the record with key key-3 2 MB long.
func inflate(m Message) Message {
	out := relabel(m)
	if string(m.Key) == "key-3" {
		out.Value = []byte(strings.Repeat("x", 2<<20))
	}
	return out
}

// A message over the size limit does not fail the pipeline and is not
// lost: its dead letter goes to the deadletter topic, the rest is written.
func TestWriteOversizedGoesToDeadLetter(t *testing.T) {
	c := startBroker(t, "in", "out", DeadLetter)
	produce(t, c, c.Topic("in"), 0, 10)
	p, s := beam.NewPipelineWithRoot()
	Write(s, WriteConfig{Config: c, Topic: c.Topic("out")}, beam.ParDo(s, inflate, Read(s, ReadConfig{Config: c, Topic: c.Topic("in"), Bounded: true})))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := runPipeline(t, ctx, p); err != nil {
		t.Fatal(err)
	}
	if out := consumeAll(t, c, c.Topic("out"), 9, time.Minute); len(out) != 9 {
		t.Fatalf("%d records written, want the 9 small ones", len(out))
	}
	dead := consumeAll(t, c, c.Topic(DeadLetter), 1, time.Minute)
	if len(dead) != 1 {
		t.Fatalf("%d dead letters", len(dead))
	}
	dl, err := Decode[schemas.DeadLetter](dead[0].Value, "dead")
	if err != nil {
		t.Fatal(err)
	}
	if dl.Stage != "kafka-write" || dl.Key != "key-3" || !strings.Contains(dl.Reason, "over the 1000000-byte limit") || len(dl.Value) != 64<<10 {
		t.Fatalf("dead letter %+v", dl.Reason)
	}
}
