package kafkaio

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apache/beam/sdks/v2/go/pkg/beam"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/register"
	"github.com/apache/beam/sdks/v2/go/pkg/beam/testing/passert"
	"github.com/segmentio/kafka-go"

	"swerl/schemas"
	"swerl/sinks/kafkaio/kafkatest"
)

func init() {
	register.Function1x1[Message, string](keyAndInstance)
	register.Function2x1[Message, func(Message), error](instanceToSample)
}

func needKcat(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("kcat is not installed (apt-get install kcat); CI=true requires the interop test to run")
		}
		t.Skip("kcat is not installed (apt-get install kcat): skipping the interop test")
	}
	return path
}

func keyAndInstance(m Message) string {
	in, err := Decode[schemas.Instance](m.Value, m.Source())
	if err != nil {
		return "error: " + err.Error()
	}
	return string(m.Key) + "=" + in.ID
}

// instanceToSample stands in for the train pipeline: one sample per
// instance, keyed by its group id.
func instanceToSample(m Message, emit func(Message)) error {
	in, err := Decode[schemas.Instance](m.Value, m.Source())
	if err != nil {
		return err
	}
	s := schemas.Sample{Rollout: schemas.Rollout{ID: in.ID + "/0", InstanceID: in.ID, GroupID: in.ID + "@v0", Completion: strings.Repeat("x", 500)}, Reward: 1}
	b, err := Encode(s)
	if err != nil {
		return err
	}
	emit(Message{Key: []byte(s.GroupID), Value: b})
	return nil
}

// Wire compatibility with a client nobody here wrote: kcat (librdkafka)
// produces zstd-compressed keyed instances to swerl.instances on the
// embedded broker, our Beam Read consumes and decodes them; our Write
// produces zstd batches to swerl.samples and kcat consumes them.
func TestKcatInterop(t *testing.T) {
	kcat := needKcat(t)
	c := startBrokerWith(t, kafkatest.Prefix(t), 2)
	broker := c.Brokers[0]

	const n = 50
	var in bytes.Buffer
	var want []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("acme/widgets#%d", i)
		v, err := Encode(schemas.Instance{ID: id, Repo: "acme/widgets", PRNumber: i, ProblemStatement: "fix it\tplease"})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&in, "%s|%s\n", id, v)
		want = append(want, id+"="+id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	prod := exec.CommandContext(ctx, kcat, "-P", "-b", broker, "-t", c.Topic(Instances), "-K", "|", "-z", "zstd")
	prod.Stdin = &in
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}

	p, s := beam.NewPipelineWithRoot()
	msgs := Read(s, ReadConfig{Config: c, Topic: c.Topic(Instances), Bounded: true})
	passert.Equals(s, beam.ParDo(s, keyAndInstance, msgs), beamStrings(want)...)
	Write(s, WriteConfig{Config: c, Topic: c.Topic(Samples)}, beam.ParDo(s, instanceToSample, msgs))
	if err := runPipeline(t, ctx, p); err != nil {
		t.Fatal(err)
	}

	cons := exec.CommandContext(ctx, kcat, "-C", "-b", broker, "-t", c.Topic(Samples), "-o", "beginning", "-e", "-q", "-f", "%k|%p|%s\n")
	out, err := cons.Output()
	if err != nil {
		t.Fatalf("kcat -C: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != n {
		t.Fatalf("kcat consumed %d samples, want %d:\n%s", len(lines), n, out)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		parts := strings.SplitN(l, "|", 3)
		if len(parts) != 3 {
			t.Fatalf("kcat line %q", l)
		}
		smp, err := Decode[schemas.Sample]([]byte(parts[2]), "kcat partition "+parts[1])
		if err != nil {
			t.Fatal(err)
		}
		if parts[0] != smp.GroupID || smp.InstanceID+"@v0" != smp.GroupID {
			t.Errorf("sample %s under key %q", smp.ID, parts[0])
		}
		seen[smp.InstanceID] = true
	}
	if len(seen) != n {
		t.Fatalf("kcat saw samples of %d instances, want %d", len(seen), n)
	}
}

func beamStrings(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// Writer partitions keys as Kafka's Java client does (murmur2 of the key,
// made positive, modulo the partition count). The reference is kcat's
// murmur2_random partitioner (librdkafka's murmur2, the Java client's
// algorithm): the same keys produced by kcat to one topic and by Writer to
// another of the same partition count land on the same partitions. Seven
// partitions, so a modulo of a power of two would not pass by chance.
func TestWriterPartitionsLikeJavaClient(t *testing.T) {
	kcat := needKcat(t)
	const parts, n = 7, 300
	c := startBrokerWith(t, kafkatest.Prefix(t), parts, "by-kcat", "by-swerl")
	byKcat, bySwerl := c.Topic("by-kcat"), c.Topic("by-swerl")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	var in bytes.Buffer
	var msgs []kafka.Message
	for i := range n {
		// Keys of several lengths, so every tail case of murmur2 (0-3
		// bytes after the last 4-byte block) is covered.
		key := fmt.Sprintf("acme/widgets#%d@%s", i, strings.Repeat("x", i%5))
		fmt.Fprintf(&in, "%s|v%d\n", key, i)
		msgs = append(msgs, kafka.Message{Key: []byte(key), Value: fmt.Appendf(nil, "v%d", i)})
	}
	prod := exec.CommandContext(ctx, kcat, "-P", "-b", c.Brokers[0], "-t", byKcat, "-K", "|", "-X", "partitioner=murmur2_random")
	prod.Stdin = &in
	if out, err := prod.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}
	w, err := NewWriter(WriteConfig{Config: c, Topic: bySwerl})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()

	partitionOf := func(topic string) map[string]int {
		got := map[string]int{}
		if err := Scan(ctx, ReadConfig{Config: c, Topic: topic}, func(m Message) error {
			got[string(m.Key)] = m.Partition
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("%s holds %d keys, want %d", topic, len(got), n)
		}
		return got
	}
	ref, ours := partitionOf(byKcat), partitionOf(bySwerl)
	used := map[int]bool{}
	fnvAgrees := 0
	all := make([]int, parts)
	for i := range all {
		all[i] = i
	}
	for _, m := range msgs {
		k := string(m.Key)
		used[ref[k]] = true
		if ours[k] != ref[k] {
			t.Errorf("key %q: Writer chose partition %d, kcat (murmur2) %d", k, ours[k], ref[k])
		}
		if (&kafka.Hash{}).Balance(m, all...) == ref[k] {
			fnvAgrees++
		}
	}
	if len(used) != parts {
		t.Errorf("kcat used %d of %d partitions: the keys do not exercise the partitioner", len(used), parts)
	}
	// The test can tell partitioners apart: kafka-go's FNV-1a Hash, which
	// a producer of swerl used before, disagrees with kcat on most keys.
	if fnvAgrees > n/2 {
		t.Errorf("kafka.Hash agrees with murmur2 on %d of %d keys: the keys cannot tell partitioners apart", fnvAgrees, n)
	}
}
