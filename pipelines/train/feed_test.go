package train_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"swerl/pipelines/train"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/parquetio"
)

// An instance larger than a Kafka message (here a 1.5 MB problem
// statement, as a commit adding megabytes of logs gives) used to fail the
// whole feed with the broker's "Message Size Too Large". It is now a dead
// letter naming its line, and every other instance is produced.
func TestFeedSetsAsideAnInstanceTooLargeForKafka(t *testing.T) {
	c := startBroker(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "instances.jsonl")
	var lines []string
	for i := range 4 {
		in := traintest.Instance(i)
		if i == 2 {
			in.ProblemStatement = strings.Repeat("log line\n", 170_000)
		}
		b, err := json.Marshal(&in)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, string(b))
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := train.Feed(context.Background(), c, path, filepath.Join(dir, "deadletter"))
	if err != nil {
		t.Fatalf("feed: %v", err)
	}
	if sum.Produced != 3 || sum.DeadLetters != 1 {
		t.Fatalf("produced %d, dead letters %d; want 3 and 1", sum.Produced, sum.DeadLetters)
	}
	if got := len(consumeAll(t, c, c.Topic(kafkaio.Instances))); got != 3 {
		t.Errorf("%d instances on the topic, want 3", got)
	}
	dead, err := parquetio.ReadDir[schemas.DeadLetter](filepath.Join(dir, "deadletter"))
	if err != nil || len(dead) != 1 {
		t.Fatalf("dead letters %d, err %v", len(dead), err)
	}
	d := dead[0]
	want := fmt.Sprintf("%s:3", path)
	if d.Stage != "feed" || d.Source != want || !strings.Contains(d.Reason, "over the 1000000-byte limit") || len(d.Value) != 64<<10 {
		t.Errorf("dead letter stage %q source %q reason %q, %d bytes of value; want stage feed, source %s, the limit named, 64 KiB",
			d.Stage, d.Source, d.Reason, len(d.Value), want)
	}
	if onTopic := consumeAll(t, c, c.Topic(kafkaio.DeadLetter)); len(onTopic) != 1 {
		t.Errorf("%d records on the dead-letter topic, want 1", len(onTopic))
	}
}
