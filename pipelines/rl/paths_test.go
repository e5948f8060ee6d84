package rl

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"swerl/pipelines/eval"
	"swerl/pipelines/train"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/kafkaio"
	"swerl/transforms/advantage"
	"swerl/transforms/prompt"
	"swerl/transforms/rollout"
	"swerl/transforms/scoring"
)

// TestScoringPathsAgree runs one round of the same instances and recorded
// answers through the Beam train pipeline (BeamRollouts, through Kafka),
// through Local, and through eval, and checks they make the same samples:
// the same group and sample ids, seeds, versions,
// rewards and advantages.
func TestScoringPathsAgree(t *testing.T) {
	dir := t.TempDir()
	set := traintest.New(t, dir, 6, 3, nil)
	pol, err := rollout.Open("file:" + set.CompletionsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	spec := scoring.Spec{Prompt: prompt.Options{Compact: true}, GroupSize: 3, MaxTokens: 64, Temperature: 1, Seed: 5}
	const round = 3
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	local, err := Local(pol, spec, advantage.GRPO, 0, log)(context.Background(), round, set.Instances)
	if err != nil {
		t.Fatal(err)
	}

	b, err := kafkaio.StartBroker(kafkaio.BrokerOptions{Partitions: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	out := filepath.Join(dir, "out")
	beam, err := BeamRollouts(b.Config(""), out, train.Config{Policy: "file:" + set.CompletionsPath,
		Method:      advantage.GRPO,
		Concurrency: 1,
		Spec:        scoring.Spec{GroupSize: spec.GroupSize, Prompt: spec.Prompt, Temperature: spec.Temperature, MaxTokens: spec.MaxTokens, Seed: spec.Seed}})(context.Background(), round, set.Instances)
	if err != nil {
		t.Fatal(err)
	}
	if len(local) != 6*3 || len(beam) != len(local) {
		t.Fatalf("local %d samples, beam %d, want %d each", len(local), len(beam), 6*3)
	}
	key := func(s schemas.Sample) string { return s.InstanceID + "/" + string(rune('0'+s.Index)) }
	byKey := map[string]schemas.Sample{}
	for _, s := range beam {
		byKey[key(s)] = s
	}
	for _, l := range local {
		m, ok := byKey[key(l)]
		if !ok {
			t.Fatalf("beam has no sample %s", key(l))
		}
		// The group id is prefix + instance + "@" + the instance's place in
		// the round: the same on both paths, whatever offset Kafka gave it.
		if l.GroupID != m.GroupID || !strings.HasPrefix(l.GroupID, RoundPrefix(round)+l.InstanceID+"@") {
			t.Errorf("group ids %q (local) and %q (beam), want the same, starting %q", l.GroupID, m.GroupID, RoundPrefix(round)+l.InstanceID+"@")
		}
		if l.ID != l.GroupID+"/"+string(rune('0'+l.Index)) || m.ID != m.GroupID+"/"+string(rune('0'+m.Index)) {
			t.Errorf("sample ids %q %q", l.ID, m.ID)
		}
		if l.SchemaVersion != schemas.Version || m.SchemaVersion != schemas.Version {
			t.Errorf("%s: schema versions %d %d", key(l), l.SchemaVersion, m.SchemaVersion)
		}
		if l.Completion != m.Completion || l.Prompt != m.Prompt || l.System != m.System || l.Reward != m.Reward ||
			l.FormatError != m.FormatError || l.Advantage != m.Advantage || l.GroupComplete != m.GroupComplete ||
			l.PolicyVersion != m.PolicyVersion || l.GroupSize != m.GroupSize || l.Repo != m.Repo {
			t.Errorf("%s: local and beam samples differ:\n local %+v\n beam  %+v", key(l), l, m)
		}
	}
	// eval answers once with the first recorded completion: its reward is
	// sample 0's.
	_, preds, err := eval.Evaluate(context.Background(), pol, set.Instances, eval.Options{Prompt: spec.Prompt}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(preds, func(i, j int) bool { return preds[i].InstanceID < preds[j].InstanceID })
	if len(preds) != 6 {
		t.Fatalf("%d predictions", len(preds))
	}
	byEvalID := map[string]schemas.Sample{}
	for _, s := range beam {
		if s.Index == 0 {
			byEvalID[schemas.SWEBenchID(s.InstanceID)] = s
		}
	}
	for _, p := range preds {
		s, ok := byEvalID[p.InstanceID]
		if !ok {
			t.Fatalf("eval predicted %s, which no sample names", p.InstanceID)
		}
		if p.Reward != s.Reward || p.FormatError != s.FormatError {
			t.Errorf("%s: eval reward %v %q, train %v %q", p.InstanceID, p.Reward, p.FormatError, s.Reward, s.FormatError)
		}
	}
}
