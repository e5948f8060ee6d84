package gpu_test

import (
	"math"
	"slices"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
)

// refCorrection is the plain formula of each correction (OBJECTIVES.md):
// the per-token factor c_t, from the weights w_t = π_old/π_behav computed
// directly (products, no log space: the test sequences are short).
func refCorrection(p gpu.GRPOParams, old, behav []float64) []float64 {
	n := len(old)
	capW, low, veto := 2.0, 0.5, 1e-4
	if p.ISCap != 0 {
		capW, low = p.ISCap, 1/p.ISCap
	}
	if p.ISLow != 0 {
		low = p.ISLow
	}
	w := make([]float64, n)
	prod := 1.0
	for t := range old {
		w[t] = math.Exp(old[t]) / math.Exp(behav[t])
		prod *= w[t]
	}
	c := make([]float64, n)
	if p.Correction != gpu.CorrectionOff && slices.ContainsFunc(w, func(x float64) bool { return x < veto }) {
		return c
	}
	geo := math.Pow(prod, 1/float64(n))
	for t := range c {
		switch p.Correction {
		case gpu.CorrectionOff:
			c[t] = 1
		case gpu.TokenTIS:
			c[t] = math.Min(w[t], capW)
		case gpu.TokenMIS:
			if w[t] >= low && w[t] <= capW {
				c[t] = w[t]
			}
		case gpu.SeqTIS:
			c[t] = math.Min(prod, capW)
		case gpu.SeqMIS:
			if prod >= low && prod <= capW {
				c[t] = prod
			}
		case gpu.GeoMIS:
			if geo >= low && geo <= capW {
				c[t] = geo
			}
		}
	}
	return c
}

// refLoss is the plain formula of each objective's loss (no MinTokenProb,
// no KL). CISPO's stop-gradient weight is taken at sg, the log-probs the
// gradient is taken at, so that finite differences hold it constant.
func refLoss(p gpu.GRPOParams, adv float64, logp, sg, old, behav []float64, weight float64) float64 {
	lo, hi := 1-p.ClipLow, 1+p.ClipHigh
	c := make([]float64, len(logp))
	for t := range c {
		c[t] = 1
	}
	if behav != nil {
		c = refCorrection(p, old, behav)
	}
	clip := func(x float64) float64 { return math.Min(math.Max(x, lo), hi) }
	var loss float64
	switch p.Objective {
	case gpu.ObjectiveGRPO:
		for t := range logp {
			r := math.Exp(logp[t] - old[t])
			loss -= weight * c[t] * math.Min(r*adv, clip(r)*adv)
		}
	case gpu.ObjectiveGSPO:
		var lr, cs float64
		for t := range logp {
			lr += logp[t] - old[t]
			cs += c[t]
		}
		n := float64(len(logp))
		s := math.Exp(lr / n)
		loss = -weight * n * (cs / n) * math.Min(s*adv, clip(s)*adv)
	case gpu.ObjectiveCISPO:
		for t := range logp {
			r := math.Exp(sg[t] - old[t])
			loss -= weight * c[t] * math.Min(r, hi) * adv * logp[t]
		}
	}
	return loss
}

var (
	objectives  = []gpu.Objective{gpu.ObjectiveGRPO, gpu.ObjectiveGSPO, gpu.ObjectiveCISPO}
	corrections = []gpu.Correction{gpu.CorrectionOff, gpu.TokenTIS, gpu.TokenMIS, gpu.SeqTIS, gpu.SeqMIS, gpu.GeoMIS}
)

// TestPolicyLossReference checks every objective with every correction
// against the plain formulas and PolicyLoss's gradient against finite
// differences of its loss, on tokens placed away from the clip edges.
func TestPolicyLossReference(t *testing.T) {
	ln := math.Log
	logp := []float64{-1, -0.5, -2, -0.1, -0.7}
	// Ratios 1.1, 0.5, 1.5, 0.95, 1.02: some inside the clip range, some
	// beyond it on either side.
	old := []float64{-1 - ln(1.1), -0.5 - ln(0.5), -2 - ln(1.5), -0.1 - ln(0.95), -0.7 - ln(1.02)}
	behavSets := map[string][]float64{
		// Weights 3, 0.8, 1.2, 0.3, 1: one above the cap, one below the
		// mask's lower bound.
		"mixed": {old[0] - ln(3), old[1] - ln(0.8), old[2] - ln(1.2), old[3] - ln(0.3), old[4]},
		// Weights near 1: nothing truncated.
		"near": {old[0] - 0.05, old[1] + 0.03, old[2] - 0.01, old[3] + 0.02, old[4] - 0.04},
		// Product 1.25^5 = 3.05 > cap, geometric mean 1.25 inside.
		"drift": {old[0] - ln(1.25), old[1] - ln(1.25), old[2] - ln(1.25), old[3] - ln(1.25), old[4] - ln(1.25)},
	}
	for _, obj := range objectives {
		for _, corr := range corrections {
			for name, behav := range behavSets {
				for _, adv := range []float64{1.3, -0.7} {
					p := gpu.GRPOParams{ClipLow: 0.2, ClipHigh: 0.28, Objective: obj, Correction: corr}
					if obj == gpu.ObjectiveGSPO {
						// The mean log-ratio is ln(1.1·0.5·1.5·0.95·1.02)/5 ≈ −0.045:
						// a tight clip puts it outside, a wide one inside.
						p.ClipLow, p.ClipHigh = 0.3, 0.3
					}
					got := gpu.PolicyLoss(p, gpu.PolicyInput{Adv: adv, Logp: logp, Old: old, Behav: behav, Weight: 0.2})
					want := refLoss(p, adv, logp, logp, old, behav, 0.2)
					if math.Abs(got.Loss-want) > 1e-12 {
						t.Errorf("%v %v %s adv %v: loss %.15g, reference %.15g", obj, corr, name, adv, got.Loss, want)
					}
					for i := range logp {
						const h = 1e-6
						x := slices.Clone(logp)
						x[i] += h
						lp := refLoss(p, adv, x, logp, old, behav, 0.2)
						x[i] -= 2 * h
						lm := refLoss(p, adv, x, logp, old, behav, 0.2)
						if fd := (lp - lm) / (2 * h); math.Abs(fd-got.DLogp[i]) > 1e-6 {
							t.Errorf("%v %v %s adv %v token %d: dlogp %v, finite difference %v", obj, corr, name, adv, i, got.DLogp[i], fd)
						}
					}
				}
			}
		}
	}
}

// TestPolicyLossCISPOKeepsEveryGradient: where GRPO's clip zeroes a
// token's gradient, CISPO's capped weight keeps it.
func TestPolicyLossCISPOKeepsEveryGradient(t *testing.T) {
	logp, old := []float64{-1, -1}, []float64{-1 - math.Log(1.6), -1 - math.Log(0.4)}
	for _, adv := range []float64{1, -1} {
		grpo := gpu.PolicyLoss(gpu.GRPOParams{}, gpu.PolicyInput{Adv: adv, Logp: logp, Old: old, Weight: 1})
		cispo := gpu.PolicyLoss(gpu.GRPOParams{Objective: gpu.ObjectiveCISPO}, gpu.PolicyInput{Adv: adv, Logp: logp, Old: old, Weight: 1})
		if grpo.Clipped != 1 || !slices.Contains(grpo.DLogp, 0) {
			t.Fatalf("adv %v: GRPO clipped %d, dlogp %v; want one token clipped to 0", adv, grpo.Clipped, grpo.DLogp)
		}
		if slices.Contains(cispo.DLogp, 0) {
			t.Errorf("adv %v: CISPO dlogp %v has a zero", adv, cispo.DLogp)
		}
		// The capped weight: min(1.6, 1.2) and 0.4.
		if want := []float64{-1.2 * adv, -0.4 * adv}; math.Abs(cispo.DLogp[0]-want[0]) > 1e-12 || math.Abs(cispo.DLogp[1]-want[1]) > 1e-12 {
			t.Errorf("adv %v: CISPO dlogp %v, want %v", adv, cispo.DLogp, want)
		}
	}
}

// TestPolicyLossRolloutStats: the statistics of known weights, the veto
// and the truncation counts.
func TestPolicyLossRolloutStats(t *testing.T) {
	ln := math.Log
	old := []float64{-1, -2, -0.5, -3}
	w := []float64{2.5, 1, 0.25, 1.5}
	behav := make([]float64, len(old))
	for i := range old {
		behav[i] = old[i] - ln(w[i])
	}
	var k3, diff, sum float64
	for _, x := range w {
		k3 += x - 1 - ln(x)
		diff += math.Abs(ln(x))
		sum += x
	}
	for _, tc := range []struct {
		corr      gpu.Correction
		truncated int
	}{
		{gpu.CorrectionOff, 0},
		{gpu.TokenTIS, 1}, // 2.5 capped
		{gpu.TokenMIS, 2}, // 2.5 above, 0.25 below 1/2
		{gpu.SeqTIS, 0},   // product 0.9375
		{gpu.SeqMIS, 0},
		{gpu.GeoMIS, 0},
	} {
		got := gpu.PolicyLoss(gpu.GRPOParams{Correction: tc.corr}, gpu.PolicyInput{Adv: 1, Logp: old, Behav: behav, Weight: 1})
		r := got.Rollout
		if r.Tokens != 4 || math.Abs(r.K3-k3) > 1e-12 || math.Abs(r.Diff-diff) > 1e-12 || math.Abs(r.DiffMax-ln(4)) > 1e-12 ||
			math.Abs(r.Weight-sum) > 1e-12 || math.Abs(r.WeightMax-2.5) > 1e-12 || r.Truncated != tc.truncated {
			t.Errorf("%v: stats %+v; want k3 %v diff %v max %v Σw %v max 2.5 truncated %d", tc.corr, r, k3, diff, ln(4), sum, tc.truncated)
		}
		if math.Abs(got.Entropy-6.5) > 1e-12 {
			t.Errorf("%v: entropy sum %v, want 6.5", tc.corr, got.Entropy)
		}
	}
	// A token at weight 1e-5 vetoes its sequence under any correction.
	behav[1] = old[1] - ln(1e-5)
	for _, corr := range corrections[1:] {
		got := gpu.PolicyLoss(gpu.GRPOParams{Correction: corr}, gpu.PolicyInput{Adv: 1, Logp: old, Behav: behav, Weight: 1})
		if got.Rollout.Truncated != 4 || got.Loss != 0 || slices.ContainsFunc(got.DLogp, func(x float64) bool { return x != 0 }) {
			t.Errorf("%v with a vetoed token: truncated %d, loss %v, dlogp %v; want the sequence masked", corr, got.Rollout.Truncated, got.Loss, got.DLogp)
		}
	}
	if got := gpu.PolicyLoss(gpu.GRPOParams{}, gpu.PolicyInput{Adv: 1, Logp: old, Behav: behav, Weight: 1}); got.Rollout.Truncated != 0 || got.DLogp[1] == 0 {
		t.Errorf("off: a vetoed token still trains (truncated %d, dlogp %v)", got.Rollout.Truncated, got.DLogp)
	}
	// Long sequences: a product of 2,000 weights of e^0.5 overflows
	// float64 unless taken in log space; seq-tis caps it, seq-mis masks it.
	n := 2000
	lo, lb := make([]float64, n), make([]float64, n)
	for i := range lo {
		lo[i], lb[i] = -1, -1.5
	}
	if got := gpu.PolicyLoss(gpu.GRPOParams{Correction: gpu.SeqTIS}, gpu.PolicyInput{Adv: 1, Logp: lo, Behav: lb, Weight: 1}); math.Abs(got.DLogp[0]+2) > 1e-12 || got.Rollout.Truncated != n {
		t.Errorf("seq-tis on 2,000 tokens: dlogp[0] %v (want −2), truncated %d", got.DLogp[0], got.Rollout.Truncated)
	}
	if got := gpu.PolicyLoss(gpu.GRPOParams{Correction: gpu.GeoMIS, ISCap: 2}, gpu.PolicyInput{Adv: 1, Logp: lo, Behav: lb, Weight: 1}); got.Rollout.Truncated != 0 || math.Abs(got.DLogp[0]+math.Exp(0.5)) > 1e-9 {
		t.Errorf("geo-mis on 2,000 tokens at e^0.5 each: truncated %d, dlogp[0] %v (want −e^0.5)", got.Rollout.Truncated, got.DLogp[0])
	}
}

func TestObjectiveNames(t *testing.T) {
	for _, o := range objectives {
		if got, err := gpu.ParseObjective(o.String()); err != nil || got != o {
			t.Errorf("ParseObjective(%q) = %v, %v", o, got, err)
		}
	}
	for _, c := range corrections {
		if got, err := gpu.ParseCorrection(c.String()); err != nil || got != c {
			t.Errorf("ParseCorrection(%q) = %v, %v", c, got, err)
		}
	}
	if _, err := gpu.ParseCorrection("tis"); err == nil {
		t.Error("ParseCorrection(tis): no error")
	}
	for _, bad := range []gpu.GRPOParams{{ISCap: 1}, {ISCap: -2}, {ISLow: 3}, {ISVeto: 1}, {Objective: 7}, {Correction: -1}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}

// fdBatch is the batch of the whole-model gradient checks: two sequences
// of different lengths, 8 completion tokens in all.
func fdBatch() []gpu.Sequence {
	return []gpu.Sequence{
		{Prompt: []int32{1, 5, 9}, Completion: []int32{3, 30, 7, 2, 11}, Advantage: 0.8},
		{Prompt: []int32{4, 31, 0, 8, 16, 2}, Completion: []int32{6, 6, 21}, Advantage: -1.1},
	}
}

// fdTrainer returns a float64 trainer with p at temperature temp (0: 1)
// on a randomized model, and the batch's log-probs under it.
func fdTrainer(t *testing.T, p gpu.GRPOParams, temp float64, batch []gpu.Sequence) (*gpu.Model, *cpu.Backend[float64], *gpu.Trainer, [][]float64) {
	t.Helper()
	m, err := gpu.NewModel(testConfig(false, true, nil), 1)
	if err != nil {
		t.Fatal(err)
	}
	randomize(m, 2)
	be := cpu.NewFloat64()
	t.Cleanup(func() { be.Close() })
	tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: 2, MaxSeq: 12, AccumSteps: 1 << 20, GRPO: p, Temperature: temp})
	if err != nil {
		t.Fatal(err)
	}
	lp0, err := tr.LogProbs64(batch)
	if err != nil {
		t.Fatal(err)
	}
	return m, be, tr, lp0
}

// checkPolicyGradient takes tr's step on batch and compares the gradient
// with finite differences of the plain formula over the batch, π_old
// olds (nil: lp0 detached) and behaviour log-probs behavs.
func checkPolicyGradient(t *testing.T, m *gpu.Model, be *cpu.Backend[float64], tr *gpu.Trainer, p gpu.GRPOParams, batch []gpu.Sequence, lp0, olds, behavs [][]float64) {
	t.Helper()
	if olds == nil {
		olds = lp0
	}
	if _, err := tr.Step(batch); err != nil {
		t.Fatal(err)
	}
	grads := slices.Clone(be.Data(tr.Grads()))
	loss := func() float64 {
		lp, err := tr.LogProbs64(batch)
		if err != nil {
			t.Fatal(err)
		}
		var l float64
		for i := range batch {
			l += refLoss(p, batch[i].Advantage, lp[i], lp0[i], olds[i], behavs[i], 1.0/8)
		}
		return l
	}
	checkFiniteDifferences(t, m.Tensors(), be.Data(tr.Params()), grads, loss)
}

// TestPolicyGradientFiniteDifferences checks the trainer's whole-model
// gradient of every objective, with and without a correction, against
// central finite differences of the plain formula on the float64 backend.
func TestPolicyGradientFiniteDifferences(t *testing.T) {
	for _, obj := range objectives {
		for _, corr := range corrections {
			t.Run(obj.String()+"/"+corr.String(), func(t *testing.T) {
				p := gpu.GRPOParams{ClipLow: 0.2, ClipHigh: 0.28, Objective: obj, Correction: corr}
				batch := fdBatch()
				m, be, tr, lp0 := fdTrainer(t, p, 0, batch)
				// π_old a little off the current policy (ratios inside the
				// clip range), π_behav further off (weights 0.9 to 1.6).
				olds, behavs := make([][]float64, len(batch)), make([][]float64, len(batch))
				for i := range batch {
					n := len(batch[i].Completion)
					olds[i], behavs[i] = make([]float64, n), make([]float64, n)
					batch[i].OldLogProbs, batch[i].BehavLogProbs = make([]float32, n), make([]float32, n)
					for k := range n {
						olds[i][k] = float64(float32(lp0[i][k] + 0.03*float64((k+i)%3-1)))
						behavs[i][k] = float64(float32(olds[i][k] - 0.1*float64((k+2*i)%5) + 0.1))
						batch[i].OldLogProbs[k], batch[i].BehavLogProbs[k] = float32(olds[i][k]), float32(behavs[i][k])
					}
				}
				checkPolicyGradient(t, m, be, tr, p, batch, lp0, olds, behavs)
			})
		}
	}
}

// TestTemperatureLogProbs: at temperature τ the trainer's log-probs are
// those of softmax(logits/τ): over the whole vocabulary they sum to 1 in
// probability, and their differences are the raw ones divided by τ.
func TestTemperatureLogProbs(t *testing.T) {
	m, err := gpu.NewModel(gpu.TinyConfig(), 7)
	if err != nil {
		t.Fatal(err)
	}
	V := m.Config.VocabSize
	batch := make([]gpu.Sequence, V)
	for y := range V {
		batch[y] = gpu.Sequence{Prompt: []int32{5, 9, 2}, Completion: []int32{int32(y)}}
	}
	at := func(temp float64) []float64 {
		be := cpu.NewFloat64()
		defer be.Close()
		tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: V, MaxSeq: 4, Temperature: temp})
		if err != nil {
			t.Fatal(err)
		}
		lp, err := tr.LogProbs64(batch)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]float64, V)
		for y := range V {
			out[y] = lp[y][0]
		}
		return out
	}
	raw, cold := at(1), at(0.5)
	var sum float64
	for y := range V {
		sum += math.Exp(cold[y])
		if d := (cold[y] - cold[0]) - (raw[y]-raw[0])/0.5; math.Abs(d) > 1e-9 {
			t.Fatalf("token %d: log-prob difference at τ=0.5 is %v off the raw one over τ", y, d)
		}
	}
	if math.Abs(sum-1) > 1e-9 {
		t.Errorf("probabilities at τ=0.5 sum to %v", sum)
	}
}

// TestTemperatureGradientFiniteDifferences: the whole-model gradient at
// τ = 0.7 matches finite differences of the loss on log-probs at τ, with
// processed behaviour log-probs and with raw ones converted.
func TestTemperatureGradientFiniteDifferences(t *testing.T) {
	const temp = 0.7
	for _, processed := range []bool{true, false} {
		t.Run(map[bool]string{true: "processed", false: "raw"}[processed], func(t *testing.T) {
			p := gpu.GRPOParams{ClipLow: 0.2, ClipHigh: 0.28, Correction: gpu.TokenTIS}
			batch := fdBatch()
			m, be, tr, lp0 := fdTrainer(t, p, temp, batch)
			raw0 := lp0
			if !processed {
				_, _, rt, lp := fdTrainer(t, gpu.GRPOParams{}, 1, batch)
				if rt.Config().Temperature != 1 {
					t.Fatal("the raw trainer is not at temperature 1")
				}
				raw0 = lp
			}
			// The behaviour log-probs the loss sees, at τ.
			behavs := make([][]float64, len(batch))
			for i := range batch {
				n := len(batch[i].Completion)
				batch[i].BehavLogProbs, batch[i].BehavProcessed = make([]float32, n), processed
				behavs[i] = make([]float64, n)
				for k := range n {
					b := float32(raw0[i][k] - 0.1*float64((k+2*i)%5) + 0.1)
					batch[i].BehavLogProbs[k] = b
					if processed {
						behavs[i][k] = float64(b)
					} else {
						behavs[i][k] = lp0[i][k] - (raw0[i][k]-float64(b))/temp
					}
				}
			}
			checkPolicyGradient(t, m, be, tr, p, batch, lp0, nil, behavs)
		})
	}
}
