package gpu_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
)

func TestGRPOLoss(t *testing.T) {
	ln := math.Log
	for _, tc := range []struct {
		name        string
		p           gpu.GRPOParams
		adv         float64
		logp, old   []float64
		ref         []float64
		weight      float64
		wantLoss    float64
		wantDLogp   []float64
		wantClipped int
		wantKL      float64
	}{
		{name: "on-policy ratio 1", adv: 2, logp: []float64{-1, -2, -3}, weight: 1.0 / 3,
			wantLoss: -2, wantDLogp: []float64{-2.0 / 3, -2.0 / 3, -2.0 / 3}},
		{name: "ratio 1.5 positive advantage is clipped", adv: 1, logp: []float64{ln(1.5) - 1}, old: []float64{-1}, weight: 1,
			wantLoss: -1.2, wantDLogp: []float64{0}, wantClipped: 1},
		{name: "ratio 1.5 negative advantage is not clipped", adv: -1, logp: []float64{ln(1.5) - 1}, old: []float64{-1}, weight: 1,
			wantLoss: 1.5, wantDLogp: []float64{1.5}},
		{name: "ratio 0.5 positive advantage is not clipped", adv: 1, logp: []float64{ln(0.5)}, old: []float64{0}, weight: 1,
			wantLoss: -0.5, wantDLogp: []float64{-0.5}},
		{name: "ratio 0.5 negative advantage is clipped", adv: -1, logp: []float64{ln(0.5)}, old: []float64{0}, weight: 1,
			wantLoss: 0.8, wantDLogp: []float64{0}, wantClipped: 1},
		{name: "clip-higher lets ratio 1.25 through", p: gpu.GRPOParams{ClipHigh: 0.28}, adv: 1, logp: []float64{ln(1.25)}, old: []float64{0}, weight: 1,
			wantLoss: -1.25, wantDLogp: []float64{-1.25}},
		{name: "k3 KL with reference twice as likely", p: gpu.GRPOParams{KLCoef: 0.1}, adv: 0, logp: []float64{-2}, ref: []float64{-2 + ln(2)}, weight: 1,
			wantLoss: 0.1 * (1 - ln(2)), wantDLogp: []float64{-0.1}, wantKL: 1 - ln(2)},
		{name: "positive-only keeps a positive sample", p: gpu.GRPOParams{PositiveOnly: true}, adv: 2, logp: []float64{-1, -2}, weight: 0.5,
			wantLoss: -2, wantDLogp: []float64{-1, -1}},
		{name: "positive-only drops a negative sample", p: gpu.GRPOParams{PositiveOnly: true}, adv: -2, logp: []float64{-1, -2}, weight: 0.5,
			wantLoss: 0, wantDLogp: []float64{0, 0}},
		{name: "positive-only keeps a negative sample's KL", p: gpu.GRPOParams{PositiveOnly: true, KLCoef: 0.1}, adv: -1, logp: []float64{-2}, ref: []float64{-2 + ln(2)}, weight: 1,
			wantLoss: 0.1 * (1 - ln(2)), wantDLogp: []float64{-0.1}, wantKL: 1 - ln(2)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := gpu.GRPOLoss(tc.p, tc.adv, tc.logp, tc.old, tc.ref, tc.weight)
			if math.Abs(got.Loss-tc.wantLoss) > 1e-12 || got.Clipped != tc.wantClipped || math.Abs(got.KL-tc.wantKL) > 1e-12 {
				t.Errorf("loss %v clipped %d KL %v\nwant %v clipped %d KL %v", got.Loss, got.Clipped, got.KL, tc.wantLoss, tc.wantClipped, tc.wantKL)
			}
			for i := range tc.wantDLogp {
				if math.Abs(got.DLogp[i]-tc.wantDLogp[i]) > 1e-12 {
					t.Errorf("dlogp %v\nwant  %v", got.DLogp, tc.wantDLogp)
					break
				}
			}
		})
	}
}

// TestGRPOLossGradient checks DLogp against finite differences of Loss
// away from the clip boundaries.
func TestGRPOLossGradient(t *testing.T) {
	p := gpu.GRPOParams{ClipLow: 0.2, ClipHigh: 0.3, KLCoef: 0.05}
	logp := []float64{-1, -0.5, -2, -0.1}
	old := []float64{-1.1, -0.2, -2.05, -0.9}
	ref := []float64{-0.8, -0.7, -2.5, -0.3}
	for _, adv := range []float64{1.3, -0.7} {
		g := gpu.GRPOLoss(p, adv, logp, old, ref, 0.25)
		for i := range logp {
			const h = 1e-6
			x := slices.Clone(logp)
			x[i] += h
			lp := gpu.GRPOLoss(p, adv, x, old, ref, 0.25).Loss
			x[i] -= 2 * h
			lm := gpu.GRPOLoss(p, adv, x, old, ref, 0.25).Loss
			if fd := (lp - lm) / (2 * h); math.Abs(fd-g.DLogp[i]) > 1e-6 {
				t.Errorf("adv %v token %d: dlogp %v, finite difference %v", adv, i, g.DLogp[i], fd)
			}
		}
	}
}

func TestLRSchedule(t *testing.T) {
	c := gpu.TrainConfig{LR: 1, MinLR: 0.1, WarmupSteps: 10, DecaySteps: 110}
	for _, tc := range []struct {
		step int
		want float64
	}{{1, 0.1}, {5, 0.5}, {10, 1}, {60, 0.55}, {110, 0.1}, {500, 0.1}} {
		if got := c.LRAt(tc.step); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("LRAt(%d) = %v, want %v", tc.step, got, tc.want)
		}
	}
	if got := (gpu.TrainConfig{LR: 0.3}).LRAt(1000); got != 0.3 {
		t.Errorf("constant schedule LRAt(1000) = %v, want 0.3", got)
	}
}

func newTrainer(t *testing.T, m *gpu.Model, cfg gpu.TrainConfig) *gpu.Trainer {
	t.Helper()
	be := cpu.New()
	t.Cleanup(func() { be.Close() })
	tr, err := gpu.NewTrainer(m, be, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestSFTLearns(t *testing.T) {
	m, _ := gpu.NewModel(gpu.TinyConfig(), 1)
	tr := newTrainer(t, m, gpu.TrainConfig{MaxBatch: 1, MaxSeq: 32, LR: 3e-3})
	seq := []gpu.Sequence{{Prompt: []int32{10, 20, 30}, Completion: []int32{40, 50, 60, 70, 80, 90, 100, 110}}}
	var first, last gpu.Metrics
	for i := range 40 {
		met, err := tr.SFTStep(seq)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = met
		}
		last = met
	}
	// log(512) = 6.24 at random init; memorising 8 tokens must get far below.
	if first.Loss < 5.5 || last.Loss > 0.5 || last.Step != 40 || !last.Applied {
		t.Errorf("SFT loss %v -> %v after %d steps; want from ~6.2 to < 0.5", first.Loss, last.Loss, last.Step)
	}
}

// TestGRPODirection: a positive advantage makes its completion more
// likely, a negative one less likely.
func TestGRPODirection(t *testing.T) {
	for _, adv := range []float64{1, -1} {
		m, _ := gpu.NewModel(gpu.TinyConfig(), 2)
		tr := newTrainer(t, m, gpu.TrainConfig{MaxBatch: 1, MaxSeq: 16, LR: 1e-3})
		seq := []gpu.Sequence{{Prompt: []int32{1, 2}, Completion: []int32{3, 4, 5}, Advantage: adv}}
		before, _ := tr.LogProbs(seq)
		seq[0].OldLogProbs = before[0]
		for range 3 {
			if _, err := tr.Step(seq); err != nil {
				t.Fatal(err)
			}
		}
		after, _ := tr.LogProbs(seq)
		var db float64
		for i := range before[0] {
			db += float64(after[0][i] - before[0][i])
		}
		if adv*db <= 0 {
			t.Errorf("advantage %v: completion log-prob changed by %v", adv, db)
		}
	}
}

// TestAccumulation: two micro-batches accumulated equal one batch holding
// both (token-mean SFT with equal token counts).
func TestAccumulation(t *testing.T) {
	s1 := gpu.Sequence{Prompt: []int32{1, 2, 3}, Completion: []int32{4, 5, 6, 7}}
	s2 := gpu.Sequence{Prompt: []int32{9, 8}, Completion: []int32{7, 6, 5, 4}}
	m1, _ := gpu.NewModel(gpu.TinyConfig(), 4)
	m2, _ := gpu.NewModel(gpu.TinyConfig(), 4)
	a := newTrainer(t, m1, gpu.TrainConfig{MaxBatch: 2, MaxSeq: 16, LR: 1e-3, AccumSteps: 2, GradClip: -1})
	b := newTrainer(t, m2, gpu.TrainConfig{MaxBatch: 2, MaxSeq: 16, LR: 1e-3, GradClip: -1})
	met1, _ := a.SFTStep([]gpu.Sequence{s1})
	met2, _ := a.SFTStep([]gpu.Sequence{s2})
	metB, err := b.SFTStep([]gpu.Sequence{s1, s2})
	if err != nil {
		t.Fatal(err)
	}
	if met1.Applied || !met2.Applied || !metB.Applied {
		t.Fatalf("applied flags %v %v %v, want false true true", met1.Applied, met2.Applied, metB.Applied)
	}
	if math.Abs(met2.GradNorm-metB.GradNorm) > 1e-5*metB.GradNorm {
		t.Errorf("grad norm accumulated %v, batched %v", met2.GradNorm, metB.GradNorm)
	}
	var maxDiff float64
	for i, x := range m1.Tensors() {
		y := m2.Tensors()[i]
		for j := range x.Data {
			maxDiff = math.Max(maxDiff, math.Abs(float64(x.Data[j]-y.Data[j])))
		}
	}
	// One Adam step moves weights by about LR; the two paths agree far closer.
	if maxDiff > 2e-5 {
		t.Errorf("accumulated and batched weights differ by %v", maxDiff)
	}
}

func TestTrainerRejectsBadBatches(t *testing.T) {
	m, _ := gpu.NewModel(gpu.TinyConfig(), 1)
	tr := newTrainer(t, m, gpu.TrainConfig{MaxBatch: 2, MaxSeq: 8})
	ok := gpu.Sequence{Prompt: []int32{1}, Completion: []int32{2}}
	for _, tc := range []struct {
		name  string
		batch []gpu.Sequence
	}{
		{"empty batch", nil},
		{"too many sequences", []gpu.Sequence{ok, ok, ok}},
		{"empty completion", []gpu.Sequence{{Prompt: []int32{1}}}},
		{"empty prompt", []gpu.Sequence{{Completion: []int32{1}}}},
		{"too long", []gpu.Sequence{{Prompt: make([]int32, 5), Completion: make([]int32, 5)}}},
		{"token outside the vocabulary", []gpu.Sequence{{Prompt: []int32{1}, Completion: []int32{512}}}},
		{"old log-probs of the wrong length", []gpu.Sequence{{Prompt: []int32{1}, Completion: []int32{2, 3}, OldLogProbs: []float32{-1}}}},
	} {
		if _, err := tr.Step(tc.batch); !errors.Is(err, gpu.ErrBatch) {
			t.Errorf("%s: err = %v, want ErrBatch", tc.name, err)
		}
	}
	// The trainer stays usable after rejected batches.
	if _, err := tr.Step([]gpu.Sequence{ok}); err != nil {
		t.Errorf("valid batch after rejections: %v", err)
	}
	if _, err := gpu.NewTrainer(m, cpu.New(), gpu.TrainConfig{MaxSeq: 5000}); err == nil {
		t.Error("MaxSeq beyond max_position_embeddings: no error")
	}
	if _, err := gpu.NewTrainer(m, cpu.New(), gpu.TrainConfig{GRPO: gpu.GRPOParams{ClipLow: 1.5}}); err == nil {
		t.Error("ClipLow 1.5: no error")
	}
}

// With advantage 1 and on-policy log-probs (ratio 1, inside the clip
// range), the GRPO step's gradient is the SFT step's: -1/tokens on every
// completion token. Equal models must stay equal through a few steps, so
// RL on a policy's exact answers is the warm start continued.
func TestGRPOUnitAdvantageIsSFT(t *testing.T) {
	seqs := []gpu.Sequence{
		{Prompt: []int32{1, 2, 3}, Completion: []int32{4, 5, 6, 7, 8}},
		{Prompt: []int32{9, 8}, Completion: []int32{7, 6, 5}},
	}
	m1, _ := gpu.NewModel(gpu.TinyConfig(), 5)
	m2, _ := gpu.NewModel(gpu.TinyConfig(), 5)
	cfg := gpu.TrainConfig{MaxBatch: 2, MaxSeq: 16, LR: 3e-3, GradClip: 1, GRPO: gpu.GRPOParams{ClipLow: 0.2, ClipHigh: 0.28}}
	sft, rl := newTrainer(t, m1, cfg), newTrainer(t, m2, cfg)
	for step := range 5 {
		if _, err := sft.SFTStep(seqs); err != nil {
			t.Fatal(err)
		}
		lp, err := rl.LogProbs(seqs)
		if err != nil {
			t.Fatal(err)
		}
		batch := make([]gpu.Sequence, len(seqs))
		for i, s := range seqs {
			batch[i] = gpu.Sequence{Prompt: s.Prompt, Completion: s.Completion, Advantage: 1, OldLogProbs: lp[i]}
		}
		if _, err := rl.Step(batch); err != nil {
			t.Fatal(err)
		}
		w1, w2 := m1.Tensors(), m2.Tensors()
		for k := range w1 {
			for j := range w1[k].Data {
				if d := math.Abs(float64(w1[k].Data[j] - w2[k].Data[j])); d > 1e-6 {
					t.Fatalf("step %d: tensor %s[%d] differs by %g (SFT %g, GRPO %g)", step+1, w1[k].Name, j, d, w1[k].Data[j], w2[k].Data[j])
				}
			}
		}
	}
}

// MinTokenProb leaves out the tokens drawn below it, and in a negative
// sample everything after the first of them; without old log-probs it
// filters nothing.
func TestGRPOLossMinTokenProb(t *testing.T) {
	p := gpu.GRPOParams{MinTokenProb: 0.5}
	logp := []float64{-0.1, -5, -0.2, -0.05}
	old := []float64{-0.1, -5, -0.2, -0.05}
	pos := gpu.GRPOLoss(p, 1, logp, old, nil, 1)
	if pos.Masked != 1 || pos.DLogp[1] != 0 || pos.DLogp[0] == 0 || pos.DLogp[2] == 0 || pos.DLogp[3] == 0 {
		t.Fatalf("positive sample: masked %d, dlogp %v", pos.Masked, pos.DLogp)
	}
	neg := gpu.GRPOLoss(p, -1, logp, old, nil, 1)
	if neg.Masked != 3 || neg.DLogp[0] == 0 || neg.DLogp[1] != 0 || neg.DLogp[2] != 0 || neg.DLogp[3] != 0 {
		t.Fatalf("negative sample: masked %d, dlogp %v", neg.Masked, neg.DLogp)
	}
	// The unmasked tokens keep exactly the unfiltered loss's values.
	all := gpu.GRPOLoss(gpu.GRPOParams{}, -1, logp, old, nil, 1)
	if neg.DLogp[0] != all.DLogp[0] || all.Masked != 0 {
		t.Fatalf("unfiltered %v, filtered %v", all.DLogp, neg.DLogp)
	}
	if on := gpu.GRPOLoss(p, -1, logp, nil, nil, 1); on.Masked != 0 {
		t.Fatalf("on-policy (no old log-probs) masked %d tokens", on.Masked)
	}
	for _, bad := range []float64{-0.1, 1, 2} {
		if err := (gpu.GRPOParams{MinTokenProb: bad}).Validate(); err == nil {
			t.Errorf("MinTokenProb %v validated", bad)
		}
	}
}
