package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/sinks/kafkaio/kafkaiotest"
	"swerl/sinks/parquetio"
	"swerl/transforms/prompt"
	"swerl/transforms/reward"
)

func replayFixture(t *testing.T) (kafkaio.Config, *schemas.Instance, time.Time) {
	t.Helper()
	b := kafkaiotest.Start(t, kafkaio.BrokerOptions{Partitions: 1})
	c := b.Config("")
	in := &schemas.Instance{SchemaVersion: 1, ID: "acme/calc#7", Repo: "acme/calc",
		CodeContext:      map[string]string{"calc.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"},
		OracleNewContent: map[string]string{"calc.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"}}
	right, err := prompt.OracleAnswer(in, in.CodeContext)
	if err != nil {
		t.Fatal(err)
	}
	wrong := "<think>\nmaybe mul\n</think>\n<solution>\n```python\n### calc.py\n<<<<<<< SEARCH\n    return a * b\n=======\n    return b * a\n>>>>>>> REPLACE\n```\n</solution>"
	completions := []string{right, "no tags at all", wrong, right}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var msgs []kafka.Message
	for i, comp := range completions {
		s := schemas.Sample{Rollout: schemas.Rollout{ID: fmt.Sprintf("g7/%d", i), InstanceID: in.ID, GroupID: "g7", GroupSize: len(completions), Index: i, Completion: comp},
			Reward: 0.123, Advantage: 9} // stale scores that re-scoring must replace
		v, err := kafkaio.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, kafka.Message{Key: []byte("g7"), Value: v, Time: t0.Add(time.Duration(i) * time.Minute)})
		if i == 1 {
			msgs = append(msgs, kafka.Message{Key: []byte("junk"), Value: []byte(`{"schema_version":1,"reward":"high"}`), Time: t0.Add(90 * time.Second)})
		}
	}
	w, err := kafkaio.NewWriter(kafkaio.WriteConfig{Config: c, Topic: c.Topic(kafkaio.Samples), BatchTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()
	return c, in, t0
}

func runSwerl(t *testing.T, args ...string) (string, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	if code := runMain(context.Background(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("swerl %q: exit %d\n%s", args, code, stderr.String())
	}
	return stdout.String(), stderr.String()
}

// swerl replay writes every sample of the topic to Parquet with its
// source position, and the record that is not a sample to the dead-letter
// output with the reason naming it.
func TestReplaySamples(t *testing.T) {
	c, _, _ := replayFixture(t)
	out := t.TempDir()
	stdout, stderr := runSwerl(t, "replay", "--brokers", c.Brokers[0], "--topic", "samples", "--out", out)
	if !strings.Contains(stderr, "replay done:") || !strings.Contains(stdout, "5 records → 4 rows, 1 dead-letter") {
		t.Fatalf("summary: %s\n%s", stdout, stderr)
	}
	rows, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil || len(rows) != 4 {
		t.Fatalf("%d sample rows, %v", len(rows), err)
	}
	for _, r := range rows {
		p, err := kafkaio.ParsePosition(r.Source)
		if err != nil || p.Topic != "swerl.samples" || r.Reward != 0.123 {
			t.Errorf("row %s: source %q reward %v", r.ID, r.Source, r.Reward)
		}
	}
	dead, err := parquetio.ReadDir[schemas.DeadLetter](filepath.Join(out, "deadletter"))
	if err != nil || len(dead) != 1 || dead[0].Source != "swerl.samples@0:2" || !strings.Contains(dead[0].Reason, "swerl.samples@0:2") || dead[0].Key != "junk" {
		t.Fatalf("dead letters %+v %v", dead, err)
	}
}

// --rescore gives every sample the reward `reward.SearchReplace` gives its
// completion today and recomputes the group's GRPO advantages.
func TestReplayRescore(t *testing.T) {
	c, in, _ := replayFixture(t)
	dir := t.TempDir()
	b, _ := kafkaio.Encode(in)
	instFile := filepath.Join(dir, "instances.jsonl")
	os.WriteFile(instFile, append(b, '\n'), 0o644)
	out := filepath.Join(dir, "out")
	stdout, _ := runSwerl(t, "replay", "--brokers", c.Brokers[0], "--topic", "samples", "--out", out, "--rescore", "--instances", instFile)
	if !strings.Contains(stdout, "4 samples re-scored, 0 incomplete groups") {
		t.Fatal(stdout)
	}
	rows, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil || len(rows) != 4 {
		t.Fatalf("%d rows %v", len(rows), err)
	}
	var rs []float64
	for _, r := range rows {
		want := reward.SearchReplace(context.Background(), in.CodeContext, in.OracleNewContent, r.Completion)
		if r.Reward != want.Reward || r.FormatError != want.Error {
			t.Errorf("%s: reward %v (%q), reward.SearchReplace gives %v (%q)", r.ID, r.Reward, r.FormatError, want.Reward, want.Error)
		}
		rs = append(rs, r.Reward)
	}
	if rs[0] != 1 || rs[1] != -1 || rs[2] <= -1 || rs[2] >= 1 {
		t.Fatalf("rewards %v: want 1 for the oracle answer, −1 for no format, in between for the wrong edit", rs)
	}
	mean := (rs[0] + rs[1] + rs[2] + rs[3]) / 4
	v := 0.0
	for _, r := range rs {
		v += (r - mean) * (r - mean)
	}
	std := math.Sqrt(v / 4)
	for i, r := range rows {
		if want := (rs[i] - mean) / (std + 1e-6); math.Abs(r.Advantage-want) > 1e-9 || !r.GroupComplete {
			t.Errorf("%s: advantage %v, want %v", r.ID, r.Advantage, want)
		}
	}
	// Without the instance, the group is dead-lettered with the reason.
	os.WriteFile(instFile, []byte(`{"schema_version":1,"id":"other#1"}`+"\n"), 0o644)
	out2 := filepath.Join(dir, "out2")
	runSwerl(t, "replay", "--brokers", c.Brokers[0], "--topic", "samples", "--out", out2, "--rescore", "--instances", instFile)
	dead, _ := parquetio.ReadDir[schemas.DeadLetter](filepath.Join(out2, "deadletter"))
	if len(dead) != 5 || !strings.Contains(dead[4].Reason+dead[0].Reason, "not in --instances") {
		t.Fatalf("%d dead letters: %+v", len(dead), dead)
	}
}

// Offset and time ranges select exactly the records inside them.
func TestReplayRanges(t *testing.T) {
	c, _, t0 := replayFixture(t)
	for _, tc := range []struct {
		args []string
		want []string // sample ids, in offset order
	}{
		{[]string{"--from-offset", "1", "--to-offset", "4"}, []string{"g7/1", "g7/2"}}, // offset 2 is the junk record
		{[]string{"--from-time", t0.Add(2 * time.Minute).Format(time.RFC3339)}, []string{"g7/2", "g7/3"}},
		{[]string{"--from-time", t0.Add(time.Minute).Format(time.RFC3339), "--to-time", t0.Add(3 * time.Minute).Format(time.RFC3339)}, []string{"g7/1", "g7/2"}},
	} {
		out := t.TempDir()
		runSwerl(t, append([]string{"replay", "--brokers", c.Brokers[0], "--topic", "swerl.samples", "--out", out}, tc.args...)...)
		rows, _ := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
		var got []string
		for _, r := range rows {
			got = append(got, r.ID)
		}
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%q: %v, want %v", tc.args, got, tc.want)
		}
	}
	for _, bad := range [][]string{
		{"replay", "--out", "x", "--brokers", "h:1"},
		{"replay", "--topic", "samples", "--brokers", "h:1"},
		{"replay", "--topic", "samples", "--out", "x", "--rescore", "--brokers", "h:1"},
		{"replay", "--topic", "samples", "--out", "x", "--from-time", "yesterday", "--brokers", "h:1"},
		{"replay", "--topic", "samples", "--out", "x", "--from-offset", "1", "--from-time", "2026-01-01T00:00:00Z", "--brokers", "h:1"},
		{"replay", "--topic", "samples", "--out", "x"},
	} {
		if code := runMain(context.Background(), bad, io.Discard, io.Discard); code != 2 {
			t.Errorf("%q: exit %d, want 2", bad, code)
		}
	}
}

// Instances, weight versions and topics of no swerl kind each land in
// their own directory as their own rows.
func TestReplayKinds(t *testing.T) {
	b := kafkaiotest.Start(t, kafkaio.BrokerOptions{Partitions: 2})
	c := b.Config("")
	ctx := context.Background()
	write := func(topic string, msgs ...kafka.Message) {
		w, err := kafkaio.NewWriter(kafkaio.WriteConfig{Config: c, Topic: topic, BatchTimeout: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			t.Fatal(err)
		}
	}
	inst, _ := kafkaio.Encode(schemas.Instance{ID: "a/b#1", Repo: "a/b", PRNumber: 1})
	wv, _ := kafkaio.Encode(schemas.WeightVersion{Version: 3, Step: 30, Offsets: []schemas.TopicOffset{{Topic: "swerl.samples", Partition: 1, Offset: 99}}})
	write(c.Topic(kafkaio.Instances), kafka.Message{Key: []byte("a/b#1"), Value: inst})
	write(c.Topic(kafkaio.Weights), kafka.Message{Key: []byte("v000003"), Value: wv}, kafka.Message{Key: []byte("bad"), Value: []byte(`{"schema_version":2}`)})
	write("audit.log", kafka.Message{Key: []byte("k"), Value: []byte("plain text")})

	out := t.TempDir()
	runSwerl(t, "replay", "--brokers", c.Brokers[0], "--topic", "instances", "--out", out)
	runSwerl(t, "replay", "--brokers", c.Brokers[0], "--topic", "weights", "--out", out)
	runSwerl(t, "replay", "--brokers", c.Brokers[0], "--topic", "audit.log", "--out", out)
	ins, err := parquetio.ReadDir[schemas.Instance](filepath.Join(out, "instances"))
	if err != nil || len(ins) != 1 || ins[0].ID != "a/b#1" || ins[0].PRNumber != 1 {
		t.Fatalf("instances %+v %v", ins, err)
	}
	ws, err := parquetio.ReadDir[schemas.WeightVersion](filepath.Join(out, "weights"))
	if err != nil || len(ws) != 1 || ws[0].Version != 3 || len(ws[0].Offsets) != 1 || ws[0].Offsets[0].Offset != 99 {
		t.Fatalf("weights %+v %v", ws, err)
	}
	raw, err := parquetio.ReadDir[kafkaio.RawRecord](filepath.Join(out, "raw"))
	if err != nil || len(raw) != 1 || string(raw[0].Value) != "plain text" || raw[0].Topic != "audit.log" {
		t.Fatalf("raw %+v %v", raw, err)
	}
	dead, _ := parquetio.ReadDir[schemas.DeadLetter](filepath.Join(out, "deadletter"))
	if len(dead) != 1 || !strings.Contains(dead[0].Reason, "schema_version 2 is newer") || dead[0].Key != "bad" {
		t.Fatalf("dead letters %+v", dead)
	}
}
