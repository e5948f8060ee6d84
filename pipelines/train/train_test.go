package train_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"swerl/pipelines/train"
	"swerl/pipelines/train/traintest"
	"swerl/schemas"
	"swerl/sinks/parquetio"
	"swerl/transforms/advantage"
	"swerl/transforms/reward"
	"swerl/transforms/scoring"
)

// expected computes, independently of the pipeline, the reward and GRPO
// advantage of every (instance, completion) of set: the reward is
// transforms/reward.SearchReplace on the instance's files, the advantage
// (r − mean) / (population std + 1e-6) over the group.
func expected(t *testing.T, set *traintest.Set) map[string][2]float64 {
	t.Helper()
	out := map[string][2]float64{}
	for _, in := range set.Instances {
		cs := set.Completions[in.ID]
		r := make([]float64, len(cs))
		for j, c := range cs {
			r[j] = reward.SearchReplace(context.Background(), in.CodeContext, in.OracleNewContent, c).Reward
		}
		var mean, v float64
		for _, x := range r {
			mean += x
		}
		mean /= float64(len(r))
		for _, x := range r {
			v += (x - mean) * (x - mean)
		}
		std := math.Sqrt(v / float64(len(r)))
		for j := range cs {
			a := (r[j] - mean) / (std + 1e-6)
			if std == 0 {
				a = 0
			}
			out[fmt.Sprintf("%s/%d", in.ID, j)] = [2]float64{r[j], a}
		}
	}
	return out
}

func readSamples(t *testing.T, out string) []schemas.Sample {
	t.Helper()
	rows, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestRunFileInput(t *testing.T) {
	dir := t.TempDir()
	const n, g = 7, 4
	set := traintest.New(t, dir, n, g, nil)
	out := filepath.Join(dir, "out")
	var progress bytes.Buffer
	sum, err := train.Run(context.Background(), train.Config{Instances: set.InstancesPath,
		Policy: "file:" + set.CompletionsPath, Out: out, Progress: &progress, ProgressEvery: 100 * time.Millisecond,
		Spec: scoring.Spec{GroupSize: g}})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	want := expected(t, set)
	rows := readSamples(t, out)
	if len(rows) != n*g {
		t.Fatalf("%d sample rows, want %d", len(rows), n*g)
	}
	rewards := map[float64]bool{}
	seen := map[string]bool{}
	for _, s := range rows {
		key := fmt.Sprintf("%s/%d", s.InstanceID, s.Index)
		if seen[key] {
			t.Fatalf("duplicate row for %s", key)
		}
		seen[key] = true
		w, ok := want[key]
		if !ok {
			t.Fatalf("unexpected row %s", key)
		}
		if math.Abs(s.Reward-w[0]) > 1e-9 || math.Abs(s.Advantage-w[1]) > 1e-9 {
			t.Errorf("%s: reward %v advantage %v, want %v %v", key, s.Reward, s.Advantage, w[0], w[1])
		}
		if s.Completion != set.Completions[s.InstanceID][s.Index] || s.GroupSize != g || !s.GroupComplete || s.PolicyVersion != -1 {
			t.Errorf("%s: row fields %+v", key, s.Rollout)
		}
		if !strings.HasPrefix(s.GroupID, s.InstanceID+"@") || s.ID != fmt.Sprintf("%s/%d", s.GroupID, s.Index) {
			t.Errorf("%s: ids %q %q", key, s.GroupID, s.ID)
		}
		rewards[s.Reward] = true
	}
	if len(rewards) < 3 {
		t.Fatalf("the fixture should give at least 3 distinct rewards, got %v", rewards)
	}
	if sum.Samples != n*g || sum.Instances != n || sum.Rollouts != n*g || sum.Groups != n || sum.DeadLetters != 0 {
		t.Fatalf("summary %+v", sum)
	}
	// Instances 0 and 5 have only malformed answers.
	if sum.ZeroVariance != 2 || sum.FormatErrors == 0 {
		t.Fatalf("summary %+v", sum)
	}
	if !strings.Contains(progress.String(), "samples written") {
		t.Fatalf("no end summary in progress output:\n%s", progress.String())
	}

	// A second run in the same process over the same input and Out adds
	// nothing (every sample id is there already).
	sum2, err := train.Run(context.Background(), train.Config{Instances: set.InstancesPath,
		Policy: "file:" + set.CompletionsPath, Out: out,
		Spec: scoring.Spec{GroupSize: g}})
	if err != nil {
		t.Fatal(err)
	}
	if sum2.Samples != 0 || sum2.Duplicates != n*g || len(readSamples(t, out)) != n*g {
		t.Fatalf("rerun: summary %+v, %d rows", sum2, len(readSamples(t, out)))
	}
}

func TestDeadLettersAndDrops(t *testing.T) {
	dir := t.TempDir()
	const n, g = 6, 3
	set := traintest.New(t, dir, n, g, map[int]string{2: `{"schema_version":1,"id":"broken`, 4: `{"schema_version":1,"id":"x/y#1"}`})
	// Instance 3's completions are missing from the policy file: a rollout
	// dead-letter.
	cf, _ := os.ReadFile(set.CompletionsPath)
	var keep []string
	for _, l := range strings.Split(strings.TrimSpace(string(cf)), "\n") {
		if !strings.Contains(l, set.Instances[3].ID) {
			keep = append(keep, l)
		}
	}
	os.WriteFile(set.CompletionsPath, []byte(strings.Join(keep, "\n")+"\n"), 0o644)

	out := filepath.Join(dir, "out")
	sum, err := train.Run(context.Background(), train.Config{Instances: set.InstancesPath,
		Policy: "file:" + set.CompletionsPath, Out: out, DropZeroVariance: true, Method: advantage.RLOO,
		Spec: scoring.Spec{GroupSize: g}})
	if err != nil {
		t.Fatal(err)
	}
	dls, err := parquetio.ReadDir[schemas.DeadLetter](filepath.Join(out, "deadletter"))
	if err != nil {
		t.Fatal(err)
	}
	byStage := map[string][]schemas.DeadLetter{}
	for _, d := range dls {
		byStage[d.Stage] = append(byStage[d.Stage], d)
	}
	if len(dls) != 3 || len(byStage["decode"]) != 2 || len(byStage["rollout"]) != 1 {
		t.Fatalf("dead-letters %+v", dls)
	}
	srcs := []string{byStage["decode"][0].Source, byStage["decode"][1].Source}
	sort.Strings(srcs)
	// Lines 3 and 5 of the file (1-based) are the bad ones.
	if srcs[0] != set.InstancesPath+":3" || srcs[1] != set.InstancesPath+":5" {
		t.Fatalf("decode dead-letter sources %q", srcs)
	}
	for _, d := range byStage["decode"] {
		if !strings.Contains(d.Reason, d.Source) || len(d.Value) == 0 {
			t.Errorf("dead-letter %+v: reason must name the line and keep the value", d)
		}
	}
	if r := byStage["rollout"][0]; r.Key != set.Instances[3].ID || !strings.Contains(r.Reason, "no completions") {
		t.Fatalf("rollout dead-letter %+v", r)
	}
	rows := readSamples(t, out)
	// 6 instances − 1 without completions − instances 0 and 5 (zero variance, dropped).
	if len(rows) != 3*g || sum.DroppedGroups != 2 || sum.ZeroVariance != 2 || sum.DeadLetters != 3 {
		t.Fatalf("%d rows, summary %+v", len(rows), sum)
	}
	for _, s := range rows {
		if s.InstanceID == set.Instances[0].ID || s.InstanceID == set.Instances[5].ID {
			t.Fatalf("zero-variance group %s was not dropped", s.InstanceID)
		}
	}
	// RLOO: advantages of a group sum to zero.
	sums := map[string]float64{}
	for _, s := range rows {
		sums[s.GroupID] += s.Advantage
	}
	for gid, a := range sums {
		if math.Abs(a) > 1e-9 {
			t.Errorf("RLOO advantages of %s sum to %v", gid, a)
		}
	}
}

// The end summary is what the pipeline wrote: its sample and dead-letter
// counts equal the rows of the Parquet files under Out, and they come from
// the runner's metrics (Prism in process here), not from counters of the
// process that called Run.
func TestSummaryEqualsWhatWasWritten(t *testing.T) {
	dir := t.TempDir()
	const n, g, bad = 9, 3, 2
	set := traintest.New(t, dir, n, g, nil)
	f, err := os.OpenFile(set.InstancesPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i := range bad {
		fmt.Fprintf(f, "{\"schema_version\":1,\"id\":%d}\n", i) // not an instance
	}
	f.Close()
	out := filepath.Join(dir, "out")
	var progress bytes.Buffer
	sum, err := train.Run(context.Background(), train.Config{Instances: set.InstancesPath,
		Policy: "file:" + set.CompletionsPath, Out: out, RowsPerFile: 4, Progress: &progress,
		Spec: scoring.Spec{GroupSize: g}})
	if err != nil {
		t.Fatalf("%v\n%s", err, progress.String())
	}
	if strings.Contains(progress.String(), "reported no counts") {
		t.Fatalf("the summary did not come from the runner:\n%s", progress.String())
	}
	samples := readSamples(t, out)
	dead, err := parquetio.ReadDir[schemas.DeadLetter](filepath.Join(out, "deadletter"))
	if err != nil {
		t.Fatal(err)
	}
	sampleFiles, _ := parquetio.Files(filepath.Join(out, "samples"))
	deadFiles, _ := parquetio.Files(filepath.Join(out, "deadletter"))
	if len(samples) != n*g || sum.Samples != int64(len(samples)) {
		t.Errorf("summary says %d samples written, the Parquet files hold %d (want %d)", sum.Samples, len(samples), n*g)
	}
	if len(dead) != bad || sum.DeadLetters != int64(len(dead)) {
		t.Errorf("summary says %d dead-letters, the Parquet files hold %d (want %d)", sum.DeadLetters, len(dead), bad)
	}
	if sum.Files != int64(len(sampleFiles)+len(deadFiles)) {
		t.Errorf("summary says %d files, %d were written", sum.Files, len(sampleFiles)+len(deadFiles))
	}
	if sum.Records != n+bad || sum.Instances != n || sum.Groups != n {
		t.Errorf("summary %+v, want %d records, %d instances and groups", sum, n+bad, n)
	}
	var rewards float64
	for _, s := range samples {
		rewards += s.Reward
	}
	if want := rewards / float64(len(samples)); math.Abs(sum.MeanReward-want) > 1e-5 {
		t.Errorf("summary's mean reward %v, the rows' %v", sum.MeanReward, want)
	}
}
