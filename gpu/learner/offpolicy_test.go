package learner

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/policy"
	"swerl/schemas"
	"swerl/transforms/rollout"
)

// openV0 publishes model as version 0 of a new output root and opens the
// in-process policy on it (the trainer's own kernels, the same weights).
func openV0(t *testing.T, model string) *policy.Policy {
	t.Helper()
	out := t.TempDir()
	newLearner(t, Config{Out: out, Model: model})
	pol, err := policy.Open(out, policy.Options{MaxSeq: 64, MaxTokens: 12, Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pol.Close() })
	return pol
}

// sampleV0 samples groups from version 0 of model with the in-process
// policy.
func sampleV0(t *testing.T, model string, groups, G int) []schemas.Sample {
	t.Helper()
	pol := openV0(t, model)
	samples, _ := rollouts(t, pol, 0, groups, G)
	for _, s := range samples {
		if len(s.LogProbs) != len(s.CompletionTokens) || len(s.LogProbs) == 0 {
			t.Fatalf("sample %s has %d log-probs for %d tokens", s.ID, len(s.LogProbs), len(s.CompletionTokens))
		}
	}
	return samples
}

// learnOne trains one step on samples from version 0 of model and returns
// its record.
func learnOne(t *testing.T, model string, samples []schemas.Sample, p gpu.GRPOParams) StepRecord {
	t.Helper()
	out := t.TempDir()
	l := newLearner(t, Config{Out: out, Model: model, BatchGroups: 64, MaxStaleness: -1,
		Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64, LR: 1e-3, GRPO: p}})
	if _, err := l.Run(context.Background(), &SliceSource{Samples: samples}, 1); err != nil {
		t.Fatal(err)
	}
	r, err := ReadRecord(out, 1)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestBehaviourWeightIsOneInProcess: samples of the in-process sampler at
// the version being trained have w = π_old/π_behav = 1 up to float error.
func TestBehaviourWeightIsOneInProcess(t *testing.T) {
	model := initModel(t)
	samples := sampleV0(t, model, 2, 4)
	r := learnOne(t, model, samples, gpu.GRPOParams{Correction: gpu.TokenTIS})
	tokens := 0
	for _, s := range samples {
		tokens += len(s.CompletionTokens)
	}
	t.Logf("w max %.9f mean %.9f, |Δ ln π| max %.3g, k3 %.3g over %d tokens", r.ISWeightMax, r.ISWeightMean, r.RolloutLogprobDiffMax, r.RolloutKL, r.RolloutTokens)
	if r.RolloutTokens != tokens || r.Correction != "token-tis" || r.Objective != "grpo" {
		t.Fatalf("record counts %d rollout tokens (want %d), objective %q, correction %q", r.RolloutTokens, tokens, r.Objective, r.Correction)
	}
	if r.RolloutLogprobDiffMax > 1e-4 || math.Abs(r.ISWeightMax-1) > 1e-4 || r.RolloutKL > 1e-8 || r.ISTruncatedFrac != 0 {
		t.Errorf("in-process samples: |Δ ln π| max %v, w max %v, k3 %v, truncated %v; want w = 1 up to float error", r.RolloutLogprobDiffMax, r.ISWeightMax, r.RolloutKL, r.ISTruncatedFrac)
	}
	if r.Entropy <= 0 || r.GradNorm <= 0 {
		t.Errorf("entropy %v, grad norm %v: want both positive", r.Entropy, r.GradNorm)
	}
	if r.TimeFwdBwd <= 0 || r.TimeOptimizer <= 0 || r.TimePublish <= 0 || r.TimeStep < r.TimeFwdBwd+r.TimeOptimizer+r.TimePublish {
		t.Errorf("time split: fwd-bwd %v optimizer %v publish %v, step %v: want positive parts within the step", r.TimeFwdBwd, r.TimeOptimizer, r.TimePublish, r.TimeStep)
	}
}

// TestRolloutStatsExact: behaviour log-probs shifted by known amounts give
// the step record's statistics computed from the samples themselves (π_old
// being the unshifted log-probs up to float error), within 1e-3.
func TestRolloutStatsExact(t *testing.T) {
	model := initModel(t)
	samples := sampleV0(t, model, 2, 4)
	// Weights e^1 (above the cap 2), e^0.4, 1, e^-0.3, e^-0.9.
	shifts := []float64{-1, -0.4, 0, 0.3, 0.9}
	var n, trunc int
	var k3, wsum, wmax, dmax float64
	shifted := make([]schemas.Sample, len(samples))
	for i, s := range samples {
		s.LogProbs = append([]float32(nil), s.LogProbs...)
		for k := range s.LogProbs {
			d := shifts[(i+k)%len(shifts)]
			orig := float64(s.LogProbs[k])
			s.LogProbs[k] = float32(orig + d)
			lw := orig - float64(s.LogProbs[k])
			w := math.Exp(lw)
			n++
			k3 += w - 1 - lw
			wsum += w
			wmax = math.Max(wmax, w)
			dmax = math.Max(dmax, math.Abs(lw))
			if w > 2 {
				trunc++
			}
		}
		shifted[i] = s
	}
	// Through a JSONL file, as another tool would hand them over.
	path := filepath.Join(t.TempDir(), "samples.jsonl")
	var b strings.Builder
	for i := range shifted {
		line, err := schemas.Encode(&shifted[i])
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := ParquetSource(path)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	l := newLearner(t, Config{Out: out, Model: model, BatchGroups: 64, MaxStaleness: -1,
		Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64, LR: 1e-3, GRPO: gpu.GRPOParams{Correction: gpu.TokenTIS}}})
	if _, err := l.Run(context.Background(), src, 1); err != nil {
		t.Fatal(err)
	}
	r, err := ReadRecord(out, 1)
	if err != nil {
		t.Fatal(err)
	}
	rel := func(got, want float64) bool { return math.Abs(got-want) <= 1e-3*math.Abs(want) }
	wantKL, wantTrunc := k3/float64(n), float64(trunc)/float64(n)
	if r.RolloutTokens != n || !rel(r.RolloutKL, wantKL) || !rel(r.ISWeightMax, wmax) || !rel(r.ISWeightMean, wsum/float64(n)) ||
		!rel(r.ISTruncatedFrac, wantTrunc) || !rel(r.RolloutLogprobDiffMax, dmax) {
		t.Errorf("record: tokens %d kl %v w max %v mean %v truncated %v diff max %v\nwant:   tokens %d kl %v w max %v mean %v truncated %v diff max %v",
			r.RolloutTokens, r.RolloutKL, r.ISWeightMax, r.ISWeightMean, r.ISTruncatedFrac, r.RolloutLogprobDiffMax,
			n, wantKL, wmax, wsum/float64(n), wantTrunc, dmax)
	}
	if len(r.Samples) != len(samples) {
		t.Errorf("record holds %d samples, want %d", len(r.Samples), len(samples))
	}
}

func TestJSONLSamplesErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.jsonl")
	os.WriteFile(bad, []byte(`{"schema_version":1,"id":"a/0","group_id":"a","group_size":1}`+"\n{not json\n"), 0o644)
	if _, err := ParquetSource(bad); err == nil || !strings.Contains(err.Error(), "bad.jsonl:2") {
		t.Errorf("a bad second line: err = %v, want one naming bad.jsonl:2", err)
	}
	empty := filepath.Join(dir, "empty.jsonl")
	os.WriteFile(empty, []byte("\n\n"), 0o644)
	if _, err := ParquetSource(empty); err == nil {
		t.Error("an empty JSONL file: no error")
	}
}

// TestTemperatureRawLogProbs: samples drawn at temperature 0.7 by the
// in-process sampler, which reports raw log-probs, have w = 1 up to float
// error once the learner trains at 0.7 and converts them; a sample drawn
// at another temperature is skipped.
func TestTemperatureRawLogProbs(t *testing.T) {
	model := initModel(t)
	pol := openV0(t, model)
	var samples []schemas.Sample
	for g := range 2 {
		resp, err := pol.Complete(context.Background(), rollout.Request{InstanceID: "o/r#1", Prompt: "write something", N: 4, Seed: int64(g), Temperature: 0.7})
		if err != nil {
			t.Fatal(err)
		}
		gid := "t" + strconv.Itoa(g)
		for i, c := range resp.Completions {
			samples = append(samples, schemas.Sample{Rollout: schemas.Rollout{ID: gid + "/" + strconv.Itoa(i), GroupID: gid, GroupSize: 4, Index: i,
				Prompt: "write something", PromptTokens: c.PromptTokens, CompletionTokens: c.Tokens, LogProbs: c.LogProbs, FinishReason: c.FinishReason,
				Temperature: 0.7}, Advantage: float64(i) - 1.5, GroupComplete: true})
		}
	}
	// One more group drawn at temperature 1: skipped.
	for i := range 4 {
		s := samples[i]
		s.ID, s.GroupID, s.Temperature = "u/"+strconv.Itoa(i), "u", 1
		samples = append(samples, s)
	}
	// The learner at 0.7, and following its samples (Temperature 0).
	for _, temp := range []float64{0.7, 0} {
		lout := t.TempDir()
		l := newLearner(t, Config{Out: lout, Model: model, BatchGroups: 64, MaxStaleness: -1, Temperature: temp,
			Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64, LR: 1e-3, GRPO: gpu.GRPOParams{Correction: gpu.TokenTIS}}})
		st, err := l.Run(context.Background(), &SliceSource{Samples: samples}, 1)
		if err != nil {
			t.Fatal(err)
		}
		if st.Skipped != 4 || st.Samples != 8 {
			t.Errorf("learner temperature %v: trained %d samples and skipped %d; want 8 and the 4 drawn at temperature 1", temp, st.Samples, st.Skipped)
		}
		r, err := ReadRecord(lout, 1)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("learner temperature %v: w max %.9f, |Δ ln π| max %.3g over %d tokens", temp, r.ISWeightMax, r.RolloutLogprobDiffMax, r.RolloutTokens)
		if r.RolloutTokens == 0 || r.RolloutLogprobDiffMax > 1e-4 || r.ISTruncatedFrac != 0 {
			t.Errorf("converted raw log-probs: |Δ ln π| max %v over %d tokens, truncated %v; want float error", r.RolloutLogprobDiffMax, r.RolloutTokens, r.ISTruncatedFrac)
		}
	}
	// The same samples marked processed are compared as they are: raw
	// log-probs taken for processed ones are a real mismatch.
	for i := range samples {
		samples[i].LogProbsProcessed = true
	}
	lout2 := t.TempDir()
	l2 := newLearner(t, Config{Out: lout2, Model: model, BatchGroups: 64, MaxStaleness: -1, Temperature: 0.7,
		Train: gpu.TrainConfig{MaxBatch: 8, MaxSeq: 64, LR: 1e-3, GRPO: gpu.GRPOParams{Correction: gpu.TokenTIS}}})
	if _, err := l2.Run(context.Background(), &SliceSource{Samples: samples[:8]}, 1); err != nil {
		t.Fatal(err)
	}
	r3, err := ReadRecord(lout2, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r3.RolloutLogprobDiffMax < 1e-3 {
		t.Errorf("raw log-probs read as processed at τ=0.7: |Δ ln π| max %v, want a visible mismatch", r3.RolloutLogprobDiffMax)
	}
}
