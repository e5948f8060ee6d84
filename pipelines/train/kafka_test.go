package train_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/internal/testenv"
	"swerl/pipelines/train"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/kafkaio/kafkatest"
	"swerl/sinks/parquetio"
	"swerl/transforms/scoring"
)

func startBroker(t *testing.T) kafkaio.Config {
	t.Helper()
	b, err := kafkaio.StartBroker(kafkaio.BrokerOptions{Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b.Config("")
}

// consumeAll reads every record of topic up to its current end offsets.
func consumeAll(t *testing.T, c kafkaio.Config, topic string) []kafka.Message {
	return kafkatest.ReadAll(t, c.Brokers[0], topic, 20*time.Second)
}

// TestRunThroughKafka feeds a JSONL file with a bad line into the embedded
// broker and runs the whole path through Kafka: instances topic → Prism →
// samples topic and Parquet.
func TestRunThroughKafka(t *testing.T) {
	dir := t.TempDir()
	const n, g = 8, 3
	set := traintest.New(t, dir, n, g, map[int]string{3: `{"schema_version":1,"id":`})
	c := startBroker(t)
	out := filepath.Join(dir, "out")
	// Four rows a file: the sink writes files in the background while the
	// bundle goes on, and every sample must still reach Kafka once durable.
	cfg := train.Config{Kafka: c, Instances: set.InstancesPath, FeedInstances: true, Bounded: true,
		Policy: "file:" + set.CompletionsPath, Out: out, RowsPerFile: 4,
		Spec: scoring.Spec{GroupSize: g}}
	sum, err := train.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Files < n*g/4 {
		t.Errorf("%d sample files for %d rows at 4 a file", sum.Files, n*g)
	}
	want := expected(t, set)
	places := recordPlaces(t, set.InstancesPath)
	rows := readSamples(t, out)
	if len(rows) != n*g || sum.Samples != n*g || sum.Fed != n {
		t.Fatalf("%d rows, summary %+v", len(rows), sum)
	}
	for _, s := range rows {
		w := want[fmt.Sprintf("%s/%d", s.InstanceID, s.Index)]
		if math.Abs(s.Reward-w[0]) > 1e-9 || math.Abs(s.Advantage-w[1]) > 1e-9 {
			t.Errorf("%s: reward %v advantage %v, want %v", s.ID, s.Reward, s.Advantage, w)
		}
		// Through Kafka a group keeps the id a direct read of the file gives
		// it: the record's place in the file, not where the broker put it.
		if want := scoring.GroupID("", s.InstanceID, places[s.InstanceID]); s.GroupID != want {
			t.Errorf("group id %q, want %q", s.GroupID, want)
		}
	}
	// The samples topic holds the same samples, keyed by group id.
	msgs := consumeAll(t, c, c.Topic(kafkaio.Samples))
	ids := map[string]bool{}
	for _, m := range msgs {
		s, err := kafkaio.Decode[schemas.Sample](m.Value, "samples")
		if err != nil {
			t.Fatal(err)
		}
		if string(m.Key) != s.GroupID {
			t.Fatalf("sample %s keyed %q, want its group id", s.ID, m.Key)
		}
		ids[s.ID] = true
	}
	if len(ids) != n*g {
		t.Fatalf("samples topic: %d distinct samples in %d records, want %d", len(ids), len(msgs), n*g)
	}
	// The bad line is a dead-letter naming its line, in Parquet and Kafka.
	dls, err := parquetio.ReadDir[schemas.DeadLetter](filepath.Join(out, "deadletter"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 || dls[0].Source != set.InstancesPath+":4" || !strings.Contains(dls[0].Reason, ":4:") {
		t.Fatalf("dead-letters %+v", dls)
	}
	if dm := consumeAll(t, c, c.Topic(kafkaio.DeadLetter)); len(dm) != 1 {
		t.Fatalf("%d records on the dead-letter topic, want 1", len(dm))
	}
	// Every instance was acknowledged: a second bounded run reads nothing.
	sum2, err := train.Run(context.Background(), train.Config{Kafka: c, Bounded: true,
		Policy: "file:" + set.CompletionsPath, Out: out,
		Spec: scoring.Spec{GroupSize: g}})
	if err != nil {
		t.Fatal(err)
	}
	if sum2.Records != 0 || sum2.Samples != 0 {
		t.Fatalf("rerun after full acknowledgement read %d records, wrote %d samples", sum2.Records, sum2.Samples)
	}
}

// TestRestartNoLossNoDuplicates stops an unbounded run mid-stream (the
// context is cancelled while instances are still being produced and
// processed, as a crash would stop it), then starts a bounded run on the
// same topic and output: every (instance, completion) ends up in the
// samples exactly once.
func TestRestartNoLossNoDuplicates(t *testing.T) {
	dir := t.TempDir()
	const n, g = 24, 3
	set := traintest.New(t, dir, n, g, nil)
	c := startBroker(t)
	w, err := kafkaio.NewWriter(kafkaio.WriteConfig{Config: c, Topic: c.Topic(kafkaio.Instances), BatchTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			v, _ := schemas.Encode(&set.Instances[i])
			if err := w.WriteMessages(context.Background(), kafka.Message{Key: []byte(set.Instances[i].ID), Value: v}); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(20 * time.Millisecond) // paces the input on purpose: the stop lands while it comes
		}
	}
	out := filepath.Join(dir, "out")
	cfg := train.Config{Kafka: c, Policy: "file:" + set.CompletionsPath, Out: out, GroupTimeout: time.Hour, Spec: scoring.Spec{GroupSize: g}}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var sum1 train.Summary
	go func() {
		var err error
		sum1, err = train.Run(ctx, cfg)
		done <- err
	}()
	produced := make(chan struct{})
	go func() { produce(0, n); close(produced) }()
	// Stop as soon as some input is acknowledged (its samples durable),
	// while input is still coming.
	testenv.Eventually(t, 60*time.Second, "an acknowledged input record", func() bool {
		pos, _ := kafkaio.LoadPositions(filepath.Join(out, "positions"), c.Topic(kafkaio.Instances))
		acked := int64(0)
		for _, next := range pos {
			acked += next
		}
		return acked > 0
	})
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) && !strings.Contains(err.Error(), "cancel") {
			t.Fatalf("first run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the pipeline did not stop on cancel")
	}
	before := len(readSamples(t, out))
	<-produced
	if before >= n*g {
		t.Logf("first run finished everything before it was stopped (%d rows)", before)
	}
	sum2, err := train.Run(context.Background(), train.Config{Kafka: c, Bounded: true,
		Policy: "file:" + set.CompletionsPath, Out: out,
		Spec: scoring.Spec{GroupSize: g}})
	if err != nil {
		t.Fatal(err)
	}
	if sum2.Records >= n {
		t.Errorf("the restart read all %d records again: it did not resume from the acknowledged positions", sum2.Records)
	}
	rows := readSamples(t, out)
	seen := map[string]int{}
	for _, s := range rows {
		seen[fmt.Sprintf("%s/%d", s.InstanceID, s.Index)]++
	}
	for k, v := range seen {
		if v != 1 {
			t.Errorf("%s: %d rows", k, v)
		}
	}
	if len(seen) != n*g || len(rows) != n*g {
		t.Fatalf("after restart: %d rows, %d distinct (instance, completion), want %d; first run %+v wrote %d, second %+v", len(rows), len(seen), n*g, sum1, before, sum2)
	}
	t.Logf("first run wrote %d rows before it was stopped; the restart read %d records and wrote %d (skipped %d duplicates)", before, sum2.Records, sum2.Samples, sum2.Duplicates)
}

// recordPlaces maps the id of each instance of a JSONL file to its place
// among the file's non-blank lines (lines that are not instances count).
func recordPlaces(t *testing.T, path string) map[string]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var in struct{ ID string }
		if json.Unmarshal([]byte(line), &in) == nil {
			out[in.ID] = n
		}
		n++
	}
	return out
}

// A consumer group read is unbounded and reads the topic: a bounded run,
// an instances file, or no brokers is refused before anything starts.
func TestGroupConfigRefused(t *testing.T) {
	dir := t.TempDir()
	set := traintest.New(t, dir, 1, 2, nil)
	kc := kafkaio.Config{Brokers: []string{"127.0.0.1:1"}}
	for _, c := range []train.Config{
		{ConsumerGroup: "g", Kafka: kc, Bounded: true},
		{ConsumerGroup: "g", Kafka: kc, Instances: set.InstancesPath},
		{ConsumerGroup: "g", Kafka: kc, Instances: set.InstancesPath, FeedInstances: true},
		{ConsumerGroup: "g"},
		{ConsumerGroup: "g", Kafka: kc, ConsumerSessionTimeout: -time.Second},
	} {
		c.Policy, c.Out = "file:"+set.CompletionsPath, filepath.Join(dir, "out")
		_, err := train.Run(context.Background(), c)
		if err == nil || !strings.Contains(err.Error(), "group") && !strings.Contains(err.Error(), "brokers") {
			t.Errorf("group %q, bounded %v, instances %q, brokers %v: %v", c.ConsumerGroup, c.Bounded, c.Instances, c.Kafka.Brokers, err)
		}
	}
}
