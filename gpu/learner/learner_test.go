package learner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/learner/learnertest"
	"swerl/gpu/modeldir"
	"swerl/gpu/policy"
	"swerl/schemas"
	"swerl/sinks/checkpoint"
	"swerl/transforms/advantage"
	"swerl/transforms/rollout"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func initModel(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "model")
	if _, err := modeldir.Init(dir, "tiny", 1); err != nil {
		t.Fatal(err)
	}
	return dir
}

// publishedVersions opens the checkpoints under out read-only and lists
// their versions.
func publishedVersions(t *testing.T, out string) (*checkpoint.Store, []schemas.WeightVersion) {
	t.Helper()
	st, err := checkpoint.Open(checkpoint.Config{Dir: out, ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := st.Versions()
	if err != nil {
		t.Fatal(err)
	}
	return st, rows
}

func newLearner(t *testing.T, cfg Config) *Learner {
	t.Helper()
	if cfg.Backend == nil {
		cfg.Backend = cpu.New()
	}
	if cfg.Log == nil {
		cfg.Log = quiet()
	}
	if cfg.Train.MaxSeq == 0 {
		cfg.Train.MaxSeq = 64
		cfg.Train.MaxBatch = 8
	}
	l, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// reward is the synthetic task: the fraction of completion tokens whose id
// is below 128 (ASCII bytes); a stop token counts as a miss.
func reward(toks []int32) float64 {
	hit := 0
	for _, t := range toks {
		if t < 128 {
			hit++
		}
	}
	return float64(hit) / float64(len(toks))
}

// rollouts samples groups from pol and scores them with GRPO advantages.
func rollouts(t *testing.T, pol rollout.Policy, it, groups, G int) ([]schemas.Sample, float64) {
	t.Helper()
	var out []schemas.Sample
	var total float64
	for g := range groups {
		resp, err := pol.Complete(context.Background(), rollout.Request{
			InstanceID: fmt.Sprintf("o/r#%d", g), Prompt: "write something", N: G, Seed: int64(it*1000 + g*G),
		})
		if err != nil {
			t.Fatal(err)
		}
		var rs []float64
		for _, c := range resp.Completions {
			rs = append(rs, reward(c.Tokens))
		}
		adv, err := advantage.Compute(advantage.GRPO, rs)
		if err != nil {
			t.Fatal(err)
		}
		gid := fmt.Sprintf("it%d-g%d", it, g)
		for i, c := range resp.Completions {
			total += rs[i]
			out = append(out, schemas.Sample{
				Rollout: schemas.Rollout{
					ID: fmt.Sprintf("%s/%d", gid, i), GroupID: gid, GroupSize: G, Index: i,
					PolicyVersion: resp.PolicyVersion, Prompt: "write something", Completion: c.Text,
					PromptTokens: c.PromptTokens, CompletionTokens: c.Tokens, LogProbs: c.LogProbs,
					FinishReason: c.FinishReason,
				},
				Reward: rs[i], Advantage: adv[i], GroupComplete: true,
			})
		}
	}
	return out, total / float64(groups*G)
}

// The closed loop: the in-process policy samples from the newest
// published version, the learner trains on the scored groups, and the
// mean reward of the synthetic task rises.
func TestGRPOImprovesReward(t *testing.T) {
	out := t.TempDir()
	l := newLearner(t, Config{Out: out, Model: initModel(t), BatchGroups: 2, MaxStaleness: 0,
		Train: gpu.TrainConfig{MaxBatch: 16, MaxSeq: 48, LR: 1e-2}})
	pol, err := policy.Open(out, policy.Options{MaxSeq: 48, MaxTokens: 4, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	const iters = 16
	var rewards []float64
	for it := range iters {
		if _, err := pol.Reload(); err != nil {
			t.Fatal(err)
		}
		if pol.Version() != l.Version() {
			t.Fatalf("policy serves v%d, learner published v%d", pol.Version(), l.Version())
		}
		samples, r := rollouts(t, pol, it, 2, 8)
		rewards = append(rewards, r)
		st, err := l.Run(context.Background(), &SliceSource{Samples: samples}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if st.Stale != 0 {
			t.Fatalf("on-policy samples counted stale: %+v", st)
		}
	}
	first := (rewards[0] + rewards[1] + rewards[2]) / 3
	last := (rewards[iters-1] + rewards[iters-2] + rewards[iters-3]) / 3
	t.Logf("mean reward per iteration: %.3f", rewards)
	if last < first+0.15 {
		t.Fatalf("reward did not improve: first three %.3f, last three %.3f", first, last)
	}
	if l.Version() != iters {
		t.Errorf("published up to v%d, want v%d", l.Version(), iters)
	}
}

func syntheticSamples(n, G int, version int64, topic string) []schemas.Sample {
	var out []schemas.Sample
	for g := range n {
		for i := range G {
			gid := fmt.Sprintf("g%d", g)
			out = append(out, schemas.Sample{
				Rollout: schemas.Rollout{ID: fmt.Sprintf("%s/%d", gid, i), GroupID: gid, GroupSize: G, Index: i,
					PolicyVersion: version, Prompt: "fix it", Completion: strings.Repeat("ab", i+1), FinishReason: "stop"},
				Reward: float64(i), Advantage: float64(i) - float64(G-1)/2, GroupComplete: true,
				Source: fmt.Sprintf("%s@%d:%d", topic, g%2, 100+g*G+i),
			})
		}
	}
	return out
}

func weights(m *gpu.Model) []float32 {
	var w []float32
	for _, t := range m.Tensors() {
		w = append(w, t.Data...)
	}
	return w
}

type commitRecorder struct {
	*SliceSource
	store   *checkpoint.Store
	commits [][]schemas.TopicOffset
	err     error
}

func (c *commitRecorder) Commit(ctx context.Context, offs []schemas.TopicOffset) error {
	// Offsets are committed only once the version is in the index.
	rows, err := c.store.Versions()
	if err != nil || len(rows) == 0 || !slices.Equal(rows[len(rows)-1].Offsets, offs) {
		c.err = fmt.Errorf("commit of %v before the index row (%v)", offs, err)
	}
	c.commits = append(c.commits, offs)
	return nil
}

// straightAndResumed trains the learner cfg(out, false) gives on 8 groups
// of 4 samples straight through (a), and another that stops after 2
// steps and whose resume, cfg(outB, true), trains the rest (b2).
func straightAndResumed(t *testing.T, cfg func(out string, resume bool) Config) (a, b2 *Learner, outB string) {
	t.Helper()
	samples := syntheticSamples(8, 4, -1, "swerl.samples")
	a = newLearner(t, cfg(t.TempDir(), false))
	if _, err := a.Run(context.Background(), &SliceSource{Samples: samples}, 0); err != nil {
		t.Fatal(err)
	}
	outB = t.TempDir()
	b := newLearner(t, cfg(outB, false))
	src := &SliceSource{Samples: samples}
	if st, err := b.Run(context.Background(), src, 2); err != nil || st.Steps != 2 {
		t.Fatalf("%+v %v", st, err)
	}
	b2 = newLearner(t, cfg(outB, true))
	if b2.Version() != 2 {
		t.Fatalf("resumed at v%d, want v2", b2.Version())
	}
	if _, err := b2.Run(context.Background(), src, 0); err != nil {
		t.Fatal(err)
	}
	return a, b2, outB
}

// sameParams fails the test unless the straight run's parameters equal
// the resumed run's within 1e-6.
func sameParams(t *testing.T, what string, straight, resumed []float32) {
	t.Helper()
	for i := range straight {
		if d := math.Abs(float64(straight[i] - resumed[i])); d > 1e-6 {
			t.Fatalf("%s %d: straight run %v, resumed run %v", what, i, straight[i], resumed[i])
		}
	}
}

// Resuming from a checkpoint continues exactly: 2+2 steps equal 4 steps.
func TestResumeContinuesExactly(t *testing.T) {
	model := initModel(t)
	train := gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64, LR: 1e-3}
	a, b2, outB := straightAndResumed(t, func(out string, resume bool) Config {
		c := Config{Out: out, Model: model, Resume: resume, BatchGroups: 2, MaxStaleness: -1, Train: train}
		if resume {
			c.Model = ""
		}
		return c
	})
	sameParams(t, "parameter", weights(a.Model()), weights(b2.Model()))
	if !slices.Equal(a.Offsets(), b2.Offsets()) || len(a.Offsets()) != 2 {
		t.Errorf("offsets %v vs %v", a.Offsets(), b2.Offsets())
	}
	// Without Resume an existing output root is refused.
	if _, err := New(context.Background(), Config{Out: outB, Model: model, Backend: cpu.New(), Log: quiet()}); !errors.Is(err, ErrPublished) {
		t.Errorf("err = %v, want ErrPublished", err)
	}
}

// A corrupt newest checkpoint is skipped with a message naming it, and
// training resumes from the previous good one.
func TestResumeSkipsCorruptCheckpoint(t *testing.T) {
	out := t.TempDir()
	l := newLearner(t, Config{Out: out, Model: initModel(t), BatchGroups: 1, MaxStaleness: -1})
	if _, err := l.Run(context.Background(), &SliceSource{Samples: syntheticSamples(2, 2, -1, "t")}, 0); err != nil {
		t.Fatal(err)
	}
	st, _ := checkpoint.Open(checkpoint.Config{Dir: out, Log: quiet()})
	f := filepath.Join(st.Path(2), "model.safetensors")
	data, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 0xff
	if err := os.WriteFile(f, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	r := newLearner(t, Config{Out: out, Resume: true, BatchGroups: 1, Log: slog.New(slog.NewTextHandler(&logs, nil))})
	if r.Version() != 1 {
		t.Fatalf("resumed at v%d, want v1", r.Version())
	}
	if !strings.Contains(logs.String(), "v000002") || !strings.Contains(logs.String(), "model.safetensors") {
		t.Errorf("no message naming the corrupt checkpoint and file:\n%s", logs.String())
	}
	// The next publish is after the newest indexed version. (A new group:
	// g0 was trained in v1, and a resumed learner skips it as read again.)
	more := syntheticSamples(1, 2, -1, "t")
	for i := range more {
		more[i].GroupID, more[i].ID = "new", fmt.Sprintf("new/%d", i)
	}
	if _, err := r.Run(context.Background(), &SliceSource{Samples: more}, 0); err != nil {
		t.Fatal(err)
	}
	if r.Version() != 3 {
		t.Errorf("published v%d after resuming, want v3", r.Version())
	}
	if v, err := st.LatestGood(); err != nil || v.Version != 3 || v.Parent != 2 {
		t.Errorf("latest good %+v, %v", v, err)
	}
}

func TestStalenessAndOffsets(t *testing.T) {
	out := t.TempDir()
	l := newLearner(t, Config{Out: out, Model: initModel(t), BatchGroups: 1, MaxStaleness: 1})
	st, _ := checkpoint.Open(checkpoint.Config{Dir: out, Log: quiet()})
	// Groups from v0: the first is fresh; after two publishes, v0 samples
	// are two versions behind and dropped.
	src := &commitRecorder{SliceSource: &SliceSource{Samples: syntheticSamples(4, 2, 0, "swerl.samples")}, store: st}
	stats, err := l.Run(context.Background(), src, 0)
	if err != nil {
		t.Fatal(err)
	}
	if src.err != nil {
		t.Fatal(src.err)
	}
	if stats.Steps != 2 || stats.Stale != 4 {
		t.Fatalf("stats %+v, want 2 steps and 4 stale samples", stats)
	}
	// Commits follow publishes: the stale groups read after the last one
	// are not committed yet (they will be with the next version).
	want := []schemas.TopicOffset{{Topic: "swerl.samples", Partition: 0, Offset: 102}, {Topic: "swerl.samples", Partition: 1, Offset: 104}}
	if len(src.commits) != 2 || !slices.Equal(src.commits[1], want) {
		t.Errorf("commits %v, want two, the last %v", src.commits, want)
	}
	want = []schemas.TopicOffset{{Topic: "swerl.samples", Partition: 0, Offset: 106}, {Topic: "swerl.samples", Partition: 1, Offset: 108}}
	if got := l.Offsets(); !slices.Equal(got, want) {
		t.Errorf("consumed %v, want %v", got, want)
	}
	v, err := st.Get(1)
	if err != nil || v.Samples != 2 || v.MeanReward != 0.5 || v.Step != 1 {
		t.Errorf("index row v1 = %+v, %v", v, err)
	}
}

func TestIncompleteGroups(t *testing.T) {
	l := newLearner(t, Config{Out: t.TempDir(), Model: initModel(t), BatchGroups: 8, MaxStaleness: -1})
	s := syntheticSamples(3, 4, -1, "t")
	// Group g0 was emitted incomplete (3 of 4); g1 lost a member; g2 is whole.
	var in []schemas.Sample
	for _, x := range s {
		switch {
		case x.GroupID == "g0" && x.Index == 3, x.GroupID == "g1" && x.Index == 0:
			continue
		case x.GroupID == "g0":
			x.GroupComplete = false
		}
		in = append(in, x)
	}
	st, err := l.Run(context.Background(), &SliceSource{Samples: in}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Groups != 2 || st.Samples != 7 || st.Incomplete != 3 {
		t.Fatalf("stats %+v, want 2 groups of 7 samples and 3 incomplete", st)
	}
}

func TestSFTLearnsAnswer(t *testing.T) {
	out := t.TempDir()
	l := newLearner(t, Config{Out: out, Model: initModel(t), Train: gpu.TrainConfig{MaxBatch: 2, MaxSeq: 96, LR: 1e-2}})
	ex := []Example{{ID: "a", Prompt: "say hi", Answer: "hello world"}, {ID: "b", Prompt: "say bye", Answer: "bye now"}}
	st, err := l.SFT(context.Background(), ex, 2, 1)
	if err != nil {
		t.Fatal(err)
	}
	first := st.LastLoss
	st, err = l.SFT(context.Background(), ex, 2, 80)
	if err != nil {
		t.Fatal(err)
	}
	if st.LastLoss > first/2 {
		t.Fatalf("SFT loss %v after 80 steps, first %v", st.LastLoss, first)
	}
	// The published checkpoint greedily completes the prompt with the answer.
	pol, err := policy.Open(out, policy.Options{MaxSeq: 96, MaxTokens: 16, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	resp, err := pol.Complete(context.Background(), rollout.Request{Prompt: "say hi", N: 1, Temperature: 1e-9})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Completions[0].Text; got != "hello world" {
		t.Errorf("after SFT the policy answers %q, want %q", got, "hello world")
	}
}

func TestOffsetOf(t *testing.T) {
	for src, want := range map[string]bool{"a.b@3:17": true, "x@y@0:1": true, "file.parquet:3": false, "t@-1:2": false, "t@1:x": false, "@1:2": false} {
		if _, ok := offsetOf(src); ok != want {
			t.Errorf("offsetOf(%q) ok = %v", src, ok)
		}
	}
	if o, _ := offsetOf("x@y@0:1"); o.Topic != "x@y" || o.Offset != 1 {
		t.Errorf("%+v", o)
	}
}

// With a KL coefficient the reference is version 0: the first step sees
// KL 0 (weights equal the reference), later steps a positive estimate.
func TestKLToVersionZero(t *testing.T) {
	out := t.TempDir()
	l := newLearner(t, Config{Out: out, Model: initModel(t), BatchGroups: 1, MaxStaleness: -1,
		Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64, LR: 1e-2, GRPO: gpu.GRPOParams{KLCoef: 0.1}}})
	if _, err := l.Run(context.Background(), &SliceSource{Samples: syntheticSamples(3, 4, -1, "t")}, 0); err != nil {
		t.Fatal(err)
	}
	st, _ := checkpoint.Open(checkpoint.Config{Dir: out, Log: quiet()})
	rows, err := st.Versions()
	if err != nil || len(rows) != 4 {
		t.Fatalf("%d rows, %v", len(rows), err)
	}
	if math.Abs(rows[1].KL) > 1e-6 || rows[2].KL <= 1e-6 || rows[3].KL <= 1e-6 {
		t.Errorf("KL per version: %v %v %v; want 0, then > 0", rows[1].KL, rows[2].KL, rows[3].KL)
	}
}

// TestKeepCheckpointsPublishesOn: with KeepCheckpoints 2 the version a
// learner started from is deleted two publishes later, and publishing goes
// on (each checkpoint copies its config and tokenizer from the newest);
// the disk holds version 0 and the newest two, each loadable.
func TestKeepCheckpointsPublishesOn(t *testing.T) {
	out := t.TempDir()
	model := initModel(t)
	ex := []Example{{ID: "a", Prompt: "say hi", Answer: "hello world"}}
	l := newLearner(t, Config{Out: out, Model: model, KeepCheckpoints: 2, Train: gpu.TrainConfig{MaxBatch: 1, MaxSeq: 64, LR: 1e-3}})
	if _, err := l.SFT(context.Background(), ex, 1, 2); err != nil {
		t.Fatal(err)
	}
	// A second learner resumes from v2, then publishes past its start.
	l2 := newLearner(t, Config{Out: out, Resume: true, KeepCheckpoints: 2, Train: gpu.TrainConfig{MaxBatch: 1, MaxSeq: 64, LR: 1e-3}})
	st, err := l2.SFT(context.Background(), ex, 1, 4)
	if err != nil {
		t.Fatalf("publishing after the start version was pruned: %v", err)
	}
	if st.Version != 6 {
		t.Fatalf("newest version v%d, want v6", st.Version)
	}
	dirs := learnertest.CheckpointDirs(t, out)
	for _, d := range dirs {
		if _, err := modeldir.Load(filepath.Join(out, "checkpoints", d)); err != nil {
			t.Errorf("%s does not load: %v", d, err)
		}
	}
	if want := []string{"v000000", "v000005", "v000006"}; !slices.Equal(dirs, want) {
		t.Fatalf("checkpoint directories %v, want %v", dirs, want)
	}
}

// With MaskTruncated, samples cut at the token limit are left out of the
// loss; either way their group is trained.
func TestTruncatedSamples(t *testing.T) {
	for _, mask := range []bool{true, false} {
		l := newLearner(t, Config{Out: t.TempDir(), Model: initModel(t), BatchGroups: 2, MaxStaleness: -1, MaskTruncated: mask,
			Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64, LR: 1e-3}})
		in := syntheticSamples(2, 4, -1, "t")
		in[1].FinishReason, in[6].FinishReason = "length", "length"
		st, err := l.Run(context.Background(), &SliceSource{Samples: in}, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := Stats{Groups: 2, Samples: 6, Truncated: 2}
		if !mask {
			want = Stats{Groups: 2, Samples: 8}
		}
		if st.Groups != want.Groups || st.Samples != want.Samples || st.Truncated != want.Truncated || st.Skipped != 0 {
			t.Fatalf("MaskTruncated %v: stats %+v, want %d groups, %d samples trained, %d truncated", mask, st, want.Groups, want.Samples, want.Truncated)
		}
	}
}

func TestAnswerProbs(t *testing.T) {
	l := newLearner(t, Config{Out: t.TempDir(), Model: initModel(t), Train: gpu.TrainConfig{MaxBatch: 2, MaxSeq: 96, LR: 1e-2}})
	a := Example{ID: "a", Prompt: "say hi", Answer: "hello world"}
	long := Example{ID: "long", Prompt: "say hi", Answer: strings.Repeat("hello world ", 20)}
	ex := []Example{a, {ID: "b", Prompt: "say bye", Answer: "bye now"}}
	probe := func() float64 {
		t.Helper()
		ps, err := l.AnswerProbs([]Example{long, a})
		if err != nil {
			t.Fatal(err)
		}
		if len(ps) != 2 || !math.IsNaN(ps[0]) {
			t.Fatalf("probabilities %v: want NaN for the example longer than MaxSeq", ps)
		}
		return ps[1]
	}
	before := probe()
	if _, err := l.SFT(context.Background(), ex, 2, 60); err != nil {
		t.Fatal(err)
	}
	p := probe()
	if !(p > 0.5 && p > 1e6*before) {
		t.Fatalf("answer probability %g after 60 SFT steps, %g before", p, before)
	}
	// The SFT loss of a step on a alone is its mean NLL per answer token
	// under the same weights, read before the update: exp(−loss·tokens)
	// is the probability.
	st0 := l.Stats()
	st, err := l.SFT(context.Background(), []Example{a}, 1, st0.Steps+1)
	if err != nil {
		t.Fatal(err)
	}
	want := math.Exp(-st.LastLoss * float64(st.Tokens-st0.Tokens))
	if math.Abs(p-want) > 1e-4*want {
		t.Fatalf("AnswerProbs %v, from the SFT loss %v", p, want)
	}
}

// A sample that carries only text is encoded by the learner as the policy
// encoded its request: the same prompt ids, and where the completion's
// text encodes back to the sampled ids, the trainer's log-probabilities
// are the ones the sampler recorded. SFT examples encode their prompt the
// same way.
func TestTextSamplesEncodeAsThePolicy(t *testing.T) {
	model := initModel(t)
	l := newLearner(t, Config{Out: t.TempDir(), Model: model, Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 96}})
	pol, err := policy.Open(model, policy.Options{MaxSeq: 96, MaxTokens: 2, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	const system, prompt = "You fix bugs.", "Fix the <|im_end|> parser, please."
	resp, err := pol.Complete(context.Background(), rollout.Request{InstanceID: "o/r#1", System: system, Prompt: prompt, N: 32, Seed: 5, Temperature: 1})
	if err != nil {
		t.Fatal(err)
	}
	compared := 0
	for _, c := range resp.Completions {
		s := schemas.Sample{Rollout: schemas.Rollout{System: system, Prompt: prompt, Completion: c.Text, FinishReason: c.FinishReason}, Advantage: 1}
		seq, why := l.sequence(&s)
		if why != "" {
			t.Fatal(why)
		}
		if !slices.Equal(seq.Prompt, c.PromptTokens) {
			t.Fatalf("learner prompt %v, policy prompt %v", seq.Prompt, c.PromptTokens)
		}
		if !slices.Equal(seq.Completion, c.Tokens) {
			continue // the decoded text encodes to other ids (a merge, a special token)
		}
		lps, err := l.trainer.LogProbs([]gpu.Sequence{seq})
		if err != nil {
			t.Fatal(err)
		}
		if len(lps[0]) != len(c.LogProbs) {
			t.Fatalf("trainer gives %d log-probs, the sampler %d", len(lps[0]), len(c.LogProbs))
		}
		for i, lp := range lps[0] {
			if math.Abs(float64(lp-c.LogProbs[i])) > 1e-4 {
				t.Fatalf("completion %v token %d: trainer log-prob %v, sampler %v", c.Tokens, i, lp, c.LogProbs[i])
			}
		}
		compared++
	}
	if compared == 0 {
		t.Fatal("no completion's text encoded back to its sampled ids")
	}
	t.Logf("%d of %d completions compared", compared, len(resp.Completions))
	seq, why := l.sftSequence(Example{System: system, Prompt: prompt, Answer: "ok"})
	if why != "" || !slices.Equal(seq.Prompt, resp.Completions[0].PromptTokens) {
		t.Fatalf("SFT prompt %v (%s), policy prompt %v", seq.Prompt, why, resp.Completions[0].PromptTokens)
	}
}
