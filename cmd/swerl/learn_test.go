package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"swerl/gpu/learner"
	"swerl/gpu/learner/learnertest"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/sinks/kafkaio"
	"swerl/sinks/kafkaio/kafkaiotest"
	"swerl/sinks/parquetio"
)

// pairGroups returns n complete groups "g0".."g<n-1>" of two samples of
// policy version 0: rewards 0 and 1, advantages -1 and +1.
func pairGroups(n int) []schemas.Sample {
	var samples []schemas.Sample
	for g := range n {
		for i := range 2 {
			samples = append(samples, schemas.Sample{
				Rollout: schemas.Rollout{SchemaVersion: 1, ID: fmt.Sprintf("g%d/%d", g, i), GroupID: fmt.Sprintf("g%d", g), GroupSize: 2, Index: i,
					PolicyVersion: 0, Prompt: "fix the bug", Completion: strings.Repeat("x", 3+i), FinishReason: "stop"},
				Reward: float64(i), Advantage: float64(2*i - 1), GroupComplete: true,
			})
		}
	}
	return samples
}

func TestLearnOffline(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t, dir)
	out := filepath.Join(dir, "out")
	var so, se bytes.Buffer
	samples := pairGroups(3)
	// One sample too long for --max-seq: skipped and counted, not fatal.
	samples[5].Completion = strings.Repeat("long ", 100)
	file := filepath.Join(dir, "samples.parquet")
	if err := parquetio.WriteFile(file, samples); err != nil {
		t.Fatal(err)
	}
	args := []string{"learn", "--model", model, "--samples", file, "--out", out, "--batch-groups", "1",
		"--max-staleness", "-1", "--max-seq", "128", "--metrics-addr", "", "--lr", "1e-3"}
	if code := runMain(context.Background(), args, &so, &se); code != 0 {
		t.Fatalf("learn exit %d: %s", code, se.String())
	}
	if !strings.Contains(se.String(), "trained 3 steps") || !strings.Contains(se.String(), "1 skipped") {
		t.Errorf("summary: %s", se.String())
	}
	st, err := checkpoint.Open(checkpoint.Config{Dir: out})
	if err != nil {
		t.Fatal(err)
	}
	v, err := st.LatestGood()
	if err != nil || v.Version != 3 || v.Step != 3 {
		t.Fatalf("latest %+v, %v", v, err)
	}
	// Again without --resume: refused. With it, the run goes on after the
	// samples it trained: a group added to the file is the one more step.
	se.Reset()
	if code := runMain(context.Background(), args, &so, &se); code != 1 || !strings.Contains(se.String(), "--resume") {
		t.Errorf("rerun without --resume: exit %d: %s", code, se.String())
	}
	for i := range 2 {
		s := samples[i]
		s.ID, s.GroupID = fmt.Sprintf("g3/%d", i), "g3"
		samples = append(samples, s)
	}
	if err := parquetio.WriteFile(file, samples); err != nil {
		t.Fatal(err)
	}
	se.Reset()
	args = append(args[:1], append([]string{"--resume", "--steps", "2"}, args[3:]...)...)
	if code := runMain(context.Background(), args, &so, &se); code != 0 {
		t.Fatalf("resume exit %d: %s", code, se.String())
	}
	if !strings.Contains(se.String(), "trained 1 steps (1 groups, 2 samples") {
		t.Errorf("resumed summary, want the new group only: %s", se.String())
	}
	if v, err := st.LatestGood(); err != nil || v.Version != 4 || v.Step != 4 {
		t.Fatalf("after resume latest %+v, %v", v, err)
	}
	// The output root serves as a model: swerl model info reads v4.
	so.Reset()
	if code := runMain(context.Background(), []string{"model", "info", out}, &so, &se); code != 0 || !strings.Contains(so.String(), `"version": 4`) {
		t.Errorf("model info of the output root: %s %s", so.String(), se.String())
	}
	if code := runMain(context.Background(), []string{"learn", "--model", model}, &so, &se); code != 2 {
		t.Errorf("learn without --samples: exit %d, want 2", code)
	}
}

// learn --brokers with the shared Kafka flags: a custom --topic-prefix is
// where it consumes samples and announces versions, on a real Kafka
// protocol broker (embedded kfake).
func TestLearnKafka(t *testing.T) {
	b := kafkaiotest.Start(t, kafkaio.BrokerOptions{Partitions: 2, Topics: []string{"t9.samples", "t9.weights"}})
	brokers := b.Addrs()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	dir := t.TempDir()
	model := tinyModel(t, dir)
	var so, se bytes.Buffer
	w, err := kafkaio.NewWriter(kafkaio.WriteConfig{Config: kafkaio.Config{Brokers: brokers}, Topic: "t9.samples", BatchTimeout: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var msgs []kafka.Message
	for g := range 2 {
		for i := range 2 {
			s := schemas.Sample{
				Rollout: schemas.Rollout{SchemaVersion: 1, ID: fmt.Sprintf("g%d/%d", g, i), GroupID: fmt.Sprintf("g%d", g), GroupSize: 2, Index: i,
					Prompt: "fix the bug", Completion: strings.Repeat("y", 2+i), FinishReason: "stop"},
				Reward: float64(i), Advantage: float64(2*i - 1), GroupComplete: true,
			}
			v, err := schemas.Encode(&s)
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, kafka.Message{Key: []byte(s.GroupID), Value: v})
		}
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	w.Close()

	out := filepath.Join(dir, "out")
	args := []string{"learn", "--model", model, "--brokers", strings.Join(brokers, ","), "--topic-prefix", "t9.", "--out", out,
		"--batch-groups", "1", "--steps", "2", "--max-staleness", "-1", "--max-seq", "128", "--metrics-addr", ""}
	se.Reset()
	if code := runMain(ctx, args, &so, &se); code != 0 {
		t.Fatalf("learn exit %d: %s", code, se.String())
	}
	if !strings.Contains(se.String(), "consuming t9.samples") {
		t.Errorf("stderr does not name the prefixed samples topic: %s", se.String())
	}
	st, err := checkpoint.Open(checkpoint.Config{Dir: out})
	if err != nil {
		t.Fatal(err)
	}
	if v, err := st.LatestGood(); err != nil || v.Version != 2 {
		t.Fatalf("latest %+v, %v; want version 2", v, err)
	}
	// Versions 0..2 were announced on t9.weights.
	seen := learnertest.Announced(t, ctx, brokers, "t9.weights", 2)
	if len(seen) != 3 {
		t.Errorf("announced versions %v on t9.weights, want 0..2", seen)
	}
}

func TestLearnKafkaFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "m"}, "--brokers"},
		{[]string{"--model", "m", "--samples", "s.parquet", "--brokers", "a:1"}, "--brokers"},
		{[]string{"--model", "m", "--brokers", "a:1", "--sasl-user", "u"}, "need --sasl-mechanism"},
		{[]string{"--model", "m", "--brokers", "a:1", "--sasl-mechanism", "plain", "--sasl-user", "u"}, "sasl-password-env"},
		{[]string{"--model", "m", "--brokers", "a:1", "--kafka-cert", "c.pem"}, "--kafka-key"},
	} {
		var so, se bytes.Buffer
		args := append([]string{"learn", "--metrics-addr", ""}, tc.args...)
		if code := runMain(context.Background(), args, &so, &se); code != 2 || !strings.Contains(se.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 mentioning %s", tc.args, code, se.String(), tc.want)
		}
	}
}

// TestLearnCheckpointActivations: --checkpoint-activations recomputes
// activations instead of keeping them and publishes bitwise the same
// model files.
func TestLearnCheckpointActivations(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t, dir)
	var so, se bytes.Buffer
	var samples []schemas.Sample
	for g := range 2 {
		for i := range 2 {
			samples = append(samples, schemas.Sample{
				Rollout: schemas.Rollout{SchemaVersion: 1, ID: fmt.Sprintf("g%d/%d", g, i), GroupID: fmt.Sprintf("g%d", g), GroupSize: 2, Index: i,
					Prompt: "fix the bug", Completion: strings.Repeat("y", 4+3*i+g), FinishReason: "stop"},
				Reward: float64(i), Advantage: float64(2*i - 1), GroupComplete: true,
			})
		}
	}
	file := filepath.Join(dir, "samples.parquet")
	if err := parquetio.WriteFile(file, samples); err != nil {
		t.Fatal(err)
	}
	hashes := func(out string, extra ...string) map[string]string {
		args := append([]string{"learn", "--model", model, "--samples", file, "--out", out, "--batch-groups", "1",
			"--max-staleness", "-1", "--metrics-addr", "", "--lr", "1e-3"}, extra...)
		se.Reset()
		if code := runMain(context.Background(), args, &so, &se); code != 0 {
			t.Fatalf("learn %v: exit %d: %s", extra, code, se.String())
		}
		st, err := checkpoint.Open(checkpoint.Config{Dir: out})
		if err != nil {
			t.Fatal(err)
		}
		v, err := st.LatestGood()
		if err != nil || v.Version != 2 {
			t.Fatalf("latest %+v, %v", v, err)
		}
		h := map[string]string{}
		for _, f := range v.Files {
			h[f.Path] = f.SHA256
		}
		return h
	}
	plain := hashes(filepath.Join(dir, "plain"))
	ckpt := hashes(filepath.Join(dir, "ckpt"), "--checkpoint-activations")
	if len(plain) == 0 || fmt.Sprint(plain) != fmt.Sprint(ckpt) {
		t.Errorf("files differ with --checkpoint-activations:\n%v\n%v", ckpt, plain)
	}
}

// learn --samples FILE.jsonl with another objective and correction: the
// step record names them and measures every token the sampler scored.
func TestLearnJSONLObjective(t *testing.T) {
	dir := t.TempDir()
	model := tinyModel(t, dir)
	out := filepath.Join(dir, "out")
	var jsonl bytes.Buffer
	tokens := 0
	for i, s := range pairGroups(2) {
		// Token ids and log-probs as an engine would report them.
		s.PromptTokens = []int32{1, 2, 3, int32(4 + i)}
		s.CompletionTokens = []int32{int32(10 + i), 11, 12}
		s.LogProbs = []float32{-6, -5.5, -7}
		tokens += len(s.CompletionTokens)
		b, err := schemas.Encode(&s)
		if err != nil {
			t.Fatal(err)
		}
		jsonl.Write(append(b, '\n'))
	}
	file := filepath.Join(dir, "samples.jsonl")
	if err := os.WriteFile(file, jsonl.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var so, se bytes.Buffer
	args := []string{"learn", "--model", model, "--samples", file, "--out", out, "--batch-groups", "2", "--max-staleness", "-1",
		"--max-seq", "64", "--metrics-addr", "", "--loss", "cispo", "--rollout-correction", "token-mis", "--rollout-cap", "3"}
	if code := runMain(context.Background(), args, &so, &se); code != 0 {
		t.Fatalf("learn exit %d: %s", code, se.String())
	}
	r, err := learner.ReadRecord(out, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Objective != "cispo" || r.Correction != "token-mis" || r.RolloutTokens != tokens || r.ISWeightMax <= 0 || r.RolloutKL <= 0 || len(r.Samples) != 4 {
		t.Errorf("record %+v: want cispo, token-mis, %d rollout tokens, positive weight and KL, 4 samples", r.StepStats, tokens)
	}
	if !strings.Contains(se.String(), "rollout-kl") {
		t.Errorf("no rollout statistics on the step line: %s", se.String())
	}
	for _, bad := range [][]string{{"--rollout-correction", "tis"}, {"--loss", "ppo"}, {"--rollout-cap", "1"}} {
		se.Reset()
		a := append([]string{"learn", "--model", model, "--samples", file, "--out", filepath.Join(dir, "bad"), "--metrics-addr", ""}, bad...)
		if code := runMain(context.Background(), a, &so, &se); code != 2 {
			t.Errorf("%v: exit %d, want 2: %s", bad, code, se.String())
		}
	}
}
