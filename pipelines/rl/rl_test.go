package rl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/learner"
	"swerl/gpu/modeldir"
	"swerl/pipelines/eval"
	"swerl/schemas"
	"swerl/sinks/parquetio"
	"swerl/transforms/advantage"
	"swerl/transforms/prompt"
	"swerl/transforms/rollout"
	"swerl/transforms/scoring"
)

// tasks returns n small instances and a file: policy whose two completions
// per instance are the oracle answer and an answer with a format error.
func tasks(t *testing.T, n int) ([]schemas.Instance, rollout.Policy) {
	t.Helper()
	var ins []schemas.Instance
	path := filepath.Join(t.TempDir(), "c.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		in := schemas.Instance{SchemaVersion: 1, ID: fmt.Sprintf("o/r@%d/f.go:1", i), Repo: "o/r", ProblemStatement: "wrong value",
			CodeContext:      map[string]string{"f.go": fmt.Sprintf("func F() int {\n\treturn %d\n}\n", i)},
			OracleNewContent: map[string]string{"f.go": fmt.Sprintf("func F() int {\n\treturn %d\n}\n", i+100)}}
		p, err := prompt.Build(&in, prompt.Options{Compact: true})
		if err != nil {
			t.Fatal(err)
		}
		ans, err := prompt.OracleAnswer(&in, p.Files)
		if err != nil {
			t.Fatal(err)
		}
		line, _ := json.Marshal(map[string]any{"instance_id": in.ID, "completions": []string{ans, "<think>no</think>"}})
		f.Write(append(line, '\n'))
		ins = append(ins, in)
	}
	f.Close()
	pol, err := rollout.Open("file:" + path)
	if err != nil {
		t.Fatal(err)
	}
	return ins, pol
}

// testRun returns a Config of a small run over n tasks with the tiny
// built-in model (2 RL steps of 2 instances × 2 completions from a file
// policy, no warm start), writing under a fresh folder, and that folder.
func testRun(t *testing.T, n int) (Config, string) {
	t.Helper()
	ins, pol := tasks(t, n)
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	if _, err := modeldir.Init(model, "tiny", 1); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	spec := scoring.Spec{Prompt: prompt.Options{Compact: true}, GroupSize: 2, MaxTokens: 64, Temperature: 1, Seed: 7}
	return Config{Learner: learner.Config{Out: filepath.Join(dir, "out"), Model: model, Backend: cpu.New(),
		Train: gpu.TrainConfig{LR: 1e-4, MaxSeq: 512}, Log: log},
		Instances: ins, SFTBatch: 2, SFTLR: 1e-3, Steps: 2, BatchInstances: 2, GroupSize: 2, Prompt: spec.Prompt, Seed: 7,
		Rollouts: Local(pol, spec, advantage.GRPO, 0, log)}, dir
}

func TestRunStepsAndResume(t *testing.T) {
	cfg, _ := testRun(t, 3)
	cfg.SFTSteps = 2
	out := cfg.Learner.Out
	var seen []StepStats
	cfg.AfterStep = func(_ context.Context, st StepStats) error { seen = append(seen, st); return nil }
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// v0, 2 SFT versions, 2 RL versions; every round: one exact answer and
	// one format error per instance, so the mean reward is 0.
	if sum.SFTSteps != 2 || sum.RLSteps != 2 || sum.Version != 4 || sum.Samples != 8 {
		t.Fatalf("summary %+v", sum)
	}
	for _, st := range seen {
		if st.MeanReward != 0 || st.FormatErrorRate != 0.5 || st.ExactRate != 0.5 || st.ZeroVarianceRate != 0 {
			t.Fatalf("step stats %+v", st)
		}
	}
	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	if len(samples) != 8 {
		t.Fatalf("%d samples on disk, want 8", len(samples))
	}
	for _, s := range samples {
		want := 1.0 // GRPO of (1, −1): ±1/(1+1e-6)
		if s.Reward < 0 {
			want = -1
		}
		if math.Abs(s.Advantage-want/(1+1e-6)) > 1e-9 {
			t.Fatalf("sample %s: reward %v advantage %v", s.ID, s.Reward, s.Advantage)
		}
	}
	// Resume to 3 steps: only step 3 runs, no new warm start.
	cfg.Steps, cfg.Learner.Resume, seen = 3, true, nil
	sum, err = Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// SFTSteps counts the whole run's warm start; RLSteps this call's.
	if sum.SFTSteps != 2 || sum.RLSteps != 1 || sum.Done != 3 || len(sum.History) != 3 || sum.Version != 5 || len(seen) != 1 || seen[0].Step != 3 {
		t.Fatalf("resumed summary %+v, steps %+v", sum, seen)
	}
}

func TestEvaluateWritesApplicablePredictions(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	ins, pol := tasks(t, 2) // the file policy answers with the oracle first
	var buf strings.Builder
	res, preds, err := eval.Evaluate(context.Background(), pol, ins, eval.Options{Prompt: prompt.Options{Compact: true}, Model: "m"}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if res.Instances != 2 || res.FormatCorrect != 1 || res.MeanReward != 1 || res.ExactMatch != 1 {
		t.Fatalf("result %+v", res)
	}
	if n := strings.Count(buf.String(), "\n"); n != 2 || !strings.Contains(buf.String(), `"model_name_or_path":"m"`) {
		t.Fatalf("predictions:\n%s", buf.String())
	}
	// git itself applies the SWE-bench model_patch to the base and gets the
	// merged file.
	for i, p := range preds {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "f.go"), []byte(ins[i].CodeContext["f.go"]), 0o644)
		os.WriteFile(filepath.Join(dir, "p.diff"), []byte(p.ModelPatch), 0o644)
		cmd := exec.Command("git", "apply", "p.diff")
		cmd.Dir = dir
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git apply: %v: %s\n%s", err, b, p.ModelPatch)
		}
		got, _ := os.ReadFile(filepath.Join(dir, "f.go"))
		if string(got) != ins[i].OracleNewContent["f.go"] {
			t.Fatalf("applied patch gives %q", got)
		}
	}
}

// TestResumeKeepsBudgetsAndBeforeRL stops a run inside its warm start and
// again after BeforeRL, and resumes each time: the warm start's budget
// counts the steps published before the stop, and BeforeRL runs once.
func TestResumeKeepsBudgetsAndBeforeRL(t *testing.T) {
	ins, pol := tasks(t, 3)
	dir := t.TempDir()
	model := filepath.Join(dir, "model")
	if _, err := modeldir.Init(model, "tiny", 1); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	beforeRL := 0
	ctx, stop := context.WithCancel(context.Background())
	cfg := Config{Learner: learner.Config{Out: out, Model: model, Backend: cpu.New(), Train: gpu.TrainConfig{LR: 1e-4, MaxSeq: 512}, Log: log},
		Instances: ins, SFTSteps: 6, SFTBatch: 2, SFTLR: 1e-3,
		SFTUntil: 0.999, SFTCheck: 2, Steps: 1, BatchInstances: 2, GroupSize: 2, Prompt: prompt.Options{Compact: true},
		Rollouts: Local(pol, scoring.Spec{Prompt: prompt.Options{Compact: true}, GroupSize: 2, MaxTokens: 64, Temperature: 1, Seed: 7}, advantage.GRPO, 0, log),
		Seed:     7,
		AfterSFTCheck: func(step int, _ float64) {
			if step == 4 {
				stop() // a stop after 4 of the 6 warm-start steps
			}
		},
		BeforeRL: func(context.Context) error { beforeRL++; return nil },
	}
	if _, err := Run(ctx, cfg); err == nil {
		t.Fatal("the stopped run returned no error")
	}
	var checks []int
	cfg.Learner.Resume = true
	cfg.AfterSFTCheck = func(step int, _ float64) { checks = append(checks, step) }
	// Stop right after BeforeRL: its step has not run.
	ctx, stop = context.WithCancel(context.Background())
	cfg.BeforeRL = func(context.Context) error { beforeRL++; stop(); return nil }
	sum, err := Run(ctx, cfg)
	if err == nil {
		t.Fatal("the second stopped run returned no error")
	}
	// The check at step 4 is read again: a kill between step 4's publish
	// and its check would otherwise skip it, and a run that would have
	// ended its warm start there would train two steps more.
	if !slices.Equal(checks, []int{4, 6}) || sum.SFTSteps != 6 || sum.Version != 6 {
		t.Fatalf("resumed warm start: checks at %v, summary %+v; want checks at steps 4 and 6 and v6 (4 steps before the stop + 2)", checks, sum)
	}
	if beforeRL != 1 {
		t.Fatalf("BeforeRL ran %d times before RL started", beforeRL)
	}
	sum, err = Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if beforeRL != 1 || sum.RLSteps != 1 || sum.Version != 7 {
		t.Fatalf("after the last resume: BeforeRL ran %d times, summary %+v", beforeRL, sum)
	}
}

// TestResumeKeepsEachStepsSamplesOnce plays the two windows a kill can hit
// in an RL step: after the rollouts but before the version is published
// (the staged samples were never trained on and must go), and after the
// version is published but before run.json says so (the step is done and
// its samples must be kept, not trained again).
func TestResumeKeepsEachStepsSamplesOnce(t *testing.T) {
	cfg, _ := testRun(t, 3)
	out := cfg.Learner.Out
	if _, err := Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	rows := func() []schemas.Sample {
		t.Helper()
		s, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if n := len(rows()); n != 8 {
		t.Fatalf("%d samples after 2 steps, want 8", n)
	}
	// Window 2: step 2 published, run.json not yet written, samples still
	// staged.
	files, err := filepath.Glob(filepath.Join(out, "samples", "round-000002-*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no sample files of round 2: %v", err)
	}
	staged := StagedSamples(out, 2)
	os.MkdirAll(staged, 0o755)
	for _, f := range files {
		if err := os.Rename(f, filepath.Join(staged, filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	if err := writeState(out, state{SFTDone: true, RLSteps: 1, BeforeRLDone: true}); err != nil {
		t.Fatal(err)
	}
	cfg.Learner.Resume = true
	sum, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if sum.RLSteps != 0 || sum.Version != 2 || len(rows()) != 8 {
		t.Fatalf("after resuming a published step: %d steps taken, v%d, %d samples; want 0, v2, 8", sum.RLSteps, sum.Version, len(rows()))
	}
	if _, err := os.Stat(roundDir(out, 2)); !os.IsNotExist(err) {
		t.Fatalf("round 2's staging folder is still there: %v", err)
	}
	// Window 1: round 3's rollouts staged, its step never published.
	junk := parquetio.NewDirWriter[schemas.Sample](StagedSamples(out, 3), "rl", 0)
	junk.Write(rows()[:3]...)
	if err := junk.Flush(); err != nil {
		t.Fatal(err)
	}
	cfg.Steps = 3
	if sum, err = Run(context.Background(), cfg); err != nil {
		t.Fatal(err)
	}
	all := rows()
	ids := map[string]bool{}
	for _, s := range all {
		if ids[s.ID] {
			t.Fatalf("sample %s kept twice", s.ID)
		}
		ids[s.ID] = true
	}
	if sum.RLSteps != 1 || sum.Version != 3 || len(all) != 12 {
		t.Fatalf("after resuming an unpublished step: %d steps, v%d, %d samples; want 1, v3, 12", sum.RLSteps, sum.Version, len(all))
	}
}

// Run chooses the learner's KL reference, batch and staleness bound
// itself, so a Config that sets them is refused before any work, naming
// the fields, instead of being overridden without a word.
func TestRunRefusesWhatItSets(t *testing.T) {
	for _, set := range []func(*learner.Config){
		func(l *learner.Config) { l.Reference = 3 },
		func(l *learner.Config) { l.BatchGroups = 2 },
		func(l *learner.Config) { l.MaxStaleness = 1 },
	} {
		cfg, _ := testRun(t, 1)
		set(&cfg.Learner)
		_, err := Run(context.Background(), cfg)
		if err == nil || !strings.Contains(err.Error(), "Run sets these") {
			t.Errorf("Run with %+v: %v", cfg.Learner, err)
		}
		if _, err := os.Stat(cfg.Learner.Out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("refused Run wrote %s: %v", cfg.Learner.Out, err)
		}
	}
}
