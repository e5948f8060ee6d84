package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"swerl/gpu/learner"
	"swerl/gpu/learner/learnertest"
	"swerl/internal/gitio/gittest"
	"swerl/pipelines/rl"
	"swerl/schemas"
	"swerl/sinks/parquetio"
)

// runRepo makes a real git repository with a few small commits to mine.
func runRepo(t *testing.T) string {
	r := gittest.New(t)
	base := map[string]string{}
	for i := range 4 {
		base[fmt.Sprintf("pkg/f%d.go", i)] = fmt.Sprintf("package pkg\n\nfunc F%d() int {\n\treturn %d\n}\n", i, i)
	}
	r.Commit("initial", base)
	for i := range 4 {
		p := fmt.Sprintf("pkg/f%d.go", i)
		r.Commit(fmt.Sprintf("F%d returns the wrong value\n\nIt must return %d.", i, 10+i),
			map[string]string{p: strings.Replace(base[p], fmt.Sprintf("return %d\n", i), fmt.Sprintf("return %d\n", 10+i), 1)})
	}
	return r.Dir
}

// The whole loop on embedded defaults, small: mine a real repository, warm
// start, RL steps through Kafka and the Beam train pipeline on Prism,
// evaluation; then --resume continues where the first run stopped.
func TestRunWholeLoopAndResume(t *testing.T) {
	repo := runRepo(t)
	out := filepath.Join(t.TempDir(), "out")
	args := []string{"run", "--repo", repo, "--out", out, "--sft-steps", "2", "--batch", "2", "--group-size", "2",
		"--max-tokens", "200", "--eval", "1", "--metrics-addr", "", "--seed", "3", "--keep-checkpoints", "2", "--kl-coef", "0.1"}
	var stderr bytes.Buffer
	// --resume on a fresh --out starts fresh and says so (the habit of
	// Trainer-style tools), in the user's words.
	if code := runMain(context.Background(), append(args, "--steps", "2", "--resume"), &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("exit %d:\n%s", code, stderr.String())
	}
	log := stderr.String()
	if !strings.Contains(log, "nothing to resume in "+out+" (no version published yet); starting fresh") || strings.Contains(log, "Config.") {
		t.Errorf("--resume on a fresh --out: want it to say it starts fresh, and no internal name:\n%s", log)
	}
	for _, want := range []string{"embedded Kafka broker", "mined 4 instances", "step 2/2", "eval start", "eval end", filepath.Join(out, "index.parquet"),
		"time of the 2 RL steps", "forward-backward", "learner device idle"} {
		if !strings.Contains(log, want) {
			t.Errorf("output lacks %q:\n%s", want, log)
		}
	}
	samples, err := parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if err != nil {
		t.Fatal(err)
	}
	// 2 RL steps × 2 instances × 2 completions, every one scored and
	// carrying the version it was sampled from (after the 2 SFT versions).
	if len(samples) != 8 {
		t.Fatalf("%d samples, want 8", len(samples))
	}
	for _, s := range samples {
		if s.PolicyVersion < 2 || s.Reward < -1 || s.Reward > 1 || s.GroupSize != 2 {
			t.Fatalf("bad sample %+v", s)
		}
	}
	versions, err := parquetio.ReadFile[schemas.WeightVersion](filepath.Join(out, "index.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	if len(versions) != 5 { // v0 + 2 SFT + 2 RL
		t.Fatalf("%d versions in the index, want 5", len(versions))
	}
	// The KL reference is the policy RL started from (v2), so the first RL
	// step, on-policy, measures no KL at all; against the untrained v0 it
	// would be far from 0.
	if kl := versions[3].KL; kl > 1e-6 || kl < 0 {
		t.Fatalf("KL of the first RL step %v, want 0 (reference = the warm start's last version)", kl)
	}
	// The in-process sampler is the trainer: its samples' behaviour
	// weights are 1 up to float error, and the record says how long the
	// step's parts took.
	rec, err := learner.ReadRecord(out, 3)
	if err != nil {
		t.Fatal(err)
	}
	if rec.RolloutTokens == 0 || rec.RolloutLogprobDiffMax > 1e-3 || rec.Correction != "off" || rec.TimeFwdBwd <= 0 || rec.TimePublish <= 0 {
		t.Errorf("record of the first RL step: %+v", rec.StepStats)
	}
	preds, err := os.ReadFile(filepath.Join(out, "eval", "predictions-end.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var p struct {
		InstanceID string `json:"instance_id"`
		Model      string `json:"model_name_or_path"`
	}
	if err := json.Unmarshal(bytes.SplitN(preds, []byte("\n"), 2)[0], &p); err != nil || p.InstanceID == "" || p.Model == "" {
		t.Fatalf("eval prediction %q: %v", preds, err)
	}

	// Without --resume the run is refused before it mines, naming --out.
	stderr.Reset()
	if code := runMain(context.Background(), append(args, "--steps", "3"), &bytes.Buffer{}, &stderr); code != 1 ||
		!strings.Contains(stderr.String(), "--out "+out+" already holds a run (5 published versions, newest v4): continue it with --resume") ||
		strings.Contains(stderr.String(), "mine:") {
		t.Fatalf("a second run without --resume: exit %d, want 1 before mining with a message naming --out:\n%s", code, stderr.String())
	}
	stderr.Reset()
	if code := runMain(context.Background(), append(args, "--steps", "3", "--resume"), &bytes.Buffer{}, &stderr); code != 0 {
		t.Fatalf("resume: exit %d:\n%s", code, stderr.String())
	}
	if strings.Contains(stderr.String(), "step 1/3") || !strings.Contains(stderr.String(), "step 3/3") {
		t.Fatalf("resume did not continue at step 3:\n%s", stderr.String())
	}
	versions, _ = parquetio.ReadFile[schemas.WeightVersion](filepath.Join(out, "index.parquet"))
	samples, _ = parquetio.ReadDir[schemas.Sample](filepath.Join(out, "samples"))
	if len(versions) != 6 || len(samples) != 12 {
		t.Fatalf("after resume: %d versions, %d samples; want 6, 12", len(versions), len(samples))
	}
	// --keep-checkpoints 2: the index keeps every version, the disk only
	// version 0, the KL reference v2 and the newest two (the resume above
	// started from one and reloaded the reference).
	dirs := learnertest.CheckpointDirs(t, out)
	if want := []string{"v000000", "v000002", "v000004", "v000005"}; !slices.Equal(dirs, want) {
		t.Fatalf("checkpoint directories %v, want %v", dirs, want)
	}

	// swerl eval on the held-out tasks run wrote, with the newest
	// checkpoint and run's prompt settings, reproduces run's final eval.
	ckpt := filepath.Join(out, "checkpoints", fmt.Sprintf("v%06d", versions[len(versions)-1].Version))
	evalOut := filepath.Join(t.TempDir(), "p.jsonl")
	var ee bytes.Buffer
	evalArgs := []string{"eval", "--instances", filepath.Join(out, "eval", "heldout.jsonl"), "--model", ckpt,
		"--compact-prompt", "--max-prompt-bytes", "2500", "--max-tokens", "200", "--out", evalOut}
	if code := runMain(context.Background(), evalArgs, &bytes.Buffer{}, &ee); code != 0 {
		t.Fatalf("swerl eval: exit %d:\n%s", code, ee.String())
	}
	rates := func(s, prefix string) string {
		_, after, ok := strings.Cut(s, prefix)
		_, after, ok2 := strings.Cut(after, "): ")
		line, _, _ := strings.Cut(after, " → ")
		if !ok || !ok2 {
			t.Fatalf("no %q line in:\n%s", prefix, s)
		}
		return line
	}
	if got, want := rates(ee.String(), "swerl eval: 1 instances (v"), rates(stderr.String(), "eval end: 1 instances (v"); got != want {
		t.Fatalf("swerl eval: %q; swerl run's end eval: %q", got, want)
	}
	patch := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Patch string `json:"model_patch"`
		}
		if err := json.Unmarshal(b, &p); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return p.Patch
	}
	if got, want := patch(evalOut), patch(filepath.Join(out, "eval", "predictions-end.jsonl")); got != want {
		t.Fatalf("swerl eval's patch %q differs from swerl run's %q", got, want)
	}
}

// TestRunConcurrencyFlag: --concurrency below 1 is a usage error naming
// the flag, before any work (no output folder is made).
func TestRunConcurrencyFlag(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	var usage bytes.Buffer
	if code := runMain(context.Background(), []string{"run", "--concurrency", "0", "--out", out}, &usage, &usage); code != 2 || !strings.Contains(usage.String(), "--concurrency ≥ 1") {
		t.Fatalf("exit %d, want 2 naming --concurrency:\n%s", code, usage.String())
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("--out was made on a usage error: %v", err)
	}
}

// TestStepLine: a step's line reports its round; a round whose every
// rollout was dead-lettered says it had no samples and no update, not a
// reward of 0 at a staleness counted from version 0.
func TestStepLine(t *testing.T) {
	var b bytes.Buffer
	stepLine(&b, rl.StepStats{Step: 5, Steps: 8, Version: 5, PolicyVersion: 4, Samples: 16, MeanReward: -0.598, FormatErrorRate: 0.75})
	stepLine(&b, rl.StepStats{Step: 6, Steps: 8, Version: 5})
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "step 5/8 v5  reward -0.598  format-err  75%") || !strings.Contains(lines[0], "staleness 0") {
		t.Fatalf("step with samples: %q", b.String())
	}
	if !strings.HasPrefix(lines[1], "step 6/8 v5  no samples:") || strings.Contains(lines[1], "reward") || strings.Contains(lines[1], "staleness") {
		t.Errorf("step without samples: %q", lines[1])
	}
}
