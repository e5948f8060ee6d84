package gpu_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/gputest"
)

// residualNorm adds gpu.ResidualNorm to hidden as two ops, counting the
// calls.
type residualNorm struct {
	hidden
	calls *int
}

func (residualNorm) FusedNorm() bool { return true }

func (b residualNorm) AddRMSNormForward(sum, out, rstd, a, x, w gpu.Buf, N, C int, eps float32) {
	*b.calls++
	b.Add(sum, a, x, N*C)
	b.RMSNormForward(out, rstd, sum, w, N, C, eps)
}

// TestResidualNorm: on a ResidualNorm backend the trainer adds and
// normalizes once a layer a forward pass (the attention residual and the
// MLP's input norm) and the batch sampler twice a layer but the last (the
// MLP's input norm, and the next layer's), and both compute exactly what
// they compute without it: the same log-probabilities before and after
// training, the same completions.
func TestResidualNorm(t *testing.T) {
	cbe := cpu.New()
	defer cbe.Close()
	c := gpu.TinyConfig()
	calls := 0
	var logps [2][][]float32
	var outs [2][]gpu.Completion
	for i, be := range []gpu.Backend{hidden{cbe}, residualNorm{hidden{cbe}, &calls}} {
		m, err := gpu.NewModel(c, 3)
		if err != nil {
			t.Fatal(err)
		}
		logps[i] = stepLogProbs(t, m, be)
		if want := 6 * c.NumHiddenLayers; i == 1 && calls != want {
			t.Errorf("three steps and log-probabilities made %d fused calls, want %d (one a layer a forward pass)", calls, want)
		}
		calls = 0
		outs[i] = sampleThree(t, m, be)
		if L := c.NumHiddenLayers; i == 1 && (calls == 0 || calls%(2*L-1) != 0) {
			t.Errorf("sampling made %d fused calls, want a multiple of %d (2L-1 a step)", calls, 2*L-1)
		}
	}
	for s := range logps[0] {
		if !slices.Equal(logps[0][s], logps[1][s]) {
			t.Errorf("after %d steps: log-probabilities %v without ResidualNorm, %v with", s, logps[0][s], logps[1][s])
		}
	}
	for i := range outs[0] {
		if !slices.Equal(outs[0][i].Tokens, outs[1][i].Tokens) || !slices.Equal(outs[0][i].LogProbs, outs[1][i].LogProbs) {
			t.Errorf("request %d: sampled %v without ResidualNorm, %v with", i, outs[0][i].Tokens, outs[1][i].Tokens)
		}
	}
}

// sampleThree samples three requests (greedy and seeded) from m on be.
func sampleThree(t *testing.T, m *gpu.Model, be gpu.Backend) []gpu.Completion {
	t.Helper()
	s, err := gpu.NewBatchSampler(m, be, 32, 3)
	if err != nil {
		t.Fatal(err)
	}
	prompts := [][]int32{{1, 2, 3}, {4, 5}, {6}}
	ps := []gpu.SamplingParams{{MaxTokens: 6}, {Temperature: 1, TopK: 20, Seed: 3, MaxTokens: 5}, {MaxTokens: 4}}
	outs, err := s.SampleAll(prompts, ps)
	if err != nil {
		t.Fatal(err)
	}
	return outs
}

// biasFold adds gpu.RaggedKVBias to the CPU backend's RaggedAttention: it
// adds the biases to the rows on the host, then rotates and scatters.
type biasFold struct {
	hidden
	ra    gpu.RaggedAttention
	hb    gpu.HostBacked
	calls *int
}

func (b biasFold) RoPERows(x, cos, sin gpu.Buf, pos []int32, H, HS int) {
	b.ra.RoPERows(x, cos, sin, pos, H, HS)
}
func (b biasFold) ScatterRows(dst, src gpu.Buf, idx []int32, W int) {
	b.ra.ScatterRows(dst, src, idx, W)
}
func (b biasFold) AttentionRows(out, q, k, v gpu.Buf, start, cnt []int32, NH, NKV, HS int) {
	b.ra.AttentionRows(out, q, k, v, start, cnt, NH, NKV, HS)
}
func (b biasFold) RaggedBias() bool { return true }
func (b biasFold) RoPEScatterRowsBias(q, k, v, kc, vc, cos, sin, qb, kb, vb gpu.Buf, pos, dst []int32, NH, NKV, HS int) {
	*b.calls++
	add := func(x, bias gpu.Buf, W int) {
		if bias == nil {
			return
		}
		xs, bs := b.hb.Host(x), b.hb.Host(bias)
		for n := range pos {
			for c := range W {
				xs[n*W+c] += bs[c]
			}
		}
	}
	add(q, qb, NH*HS)
	add(k, kb, NKV*HS)
	add(v, vb, NKV*HS)
	b.ra.RoPERows(q, cos, sin, pos, NH, HS)
	b.ra.RoPERows(k, cos, sin, pos, NKV, HS)
	b.ra.ScatterRows(kc, k, dst, NKV*HS)
	b.ra.ScatterRows(vc, v, dst, NKV*HS)
}

// TestRaggedBiasFold: a batch sampler over a RaggedKVBias backend leaves
// the q, k and v biases to the ragged op, one call a layer a step, and
// samples what it samples with the biases in the projections (to float32
// rounding: the sums are taken in another order).
func TestRaggedBiasFold(t *testing.T) {
	cbe := cpu.New()
	defer cbe.Close()
	c := gpu.TinyConfig()
	m, err := gpu.NewModel(c, 5)
	if err != nil {
		t.Fatal(err)
	}
	if nb := gputest.SetBiases(m); nb != 3*c.NumHiddenLayers {
		t.Fatalf("%d bias tensors, want q, k and v's of %d layers", nb, c.NumHiddenLayers)
	}
	ra, _ := gpu.Backend(cbe).(gpu.RaggedAttention)
	hb, _ := gpu.Backend(cbe).(gpu.HostBacked)
	if ra == nil || hb == nil {
		t.Fatal("the CPU backend has no RaggedAttention or HostBacked")
	}
	calls := 0
	prompts := [][]int32{{1, 2, 3}, {4, 5}, {6, 7, 8, 9}}
	ps := []gpu.SamplingParams{{MaxTokens: 7}, {Temperature: 1, TopK: 20, Seed: 3, MaxTokens: 6}, {MaxTokens: 5}}
	var outs [2][]gpu.Completion
	for i, be := range []gpu.Backend{cbe, biasFold{hidden{cbe}, ra, hb, &calls}} {
		s, err := gpu.NewBatchSampler(m, be, 32, 3)
		if err != nil {
			t.Fatal(err)
		}
		if outs[i], err = s.SampleAll(prompts, ps); err != nil {
			t.Fatal(err)
		}
	}
	if L := c.NumHiddenLayers; calls == 0 || calls%L != 0 {
		t.Errorf("%d folded calls, want a positive multiple of %d (one a layer a step)", calls, L)
	}
	for i := range outs[0] {
		gputest.SameCompletion(t, fmt.Sprintf("request %d", i), "unfolded", "folded", outs[0][i], outs[1][i], 1e-5)
	}
}

// pairedGLU adds gpu.PairedSwiGLU to hidden: it copies the gate and up
// halves of each row into buffers of their own and runs the backend's
// SwiGLU on them (the backward copies the sums back), counting the calls.
type pairedGLU struct {
	hidden
	calls *int
}

func (pairedGLU) PairedGLU() bool { return true }

// halves copies gu's halves into new gate and up buffers (toPair false)
// or those back into gu (toPair true).
func (b pairedGLU) halves(gu, gate, up gpu.Buf, N, I int, toPair bool) {
	for n := range N {
		for h, x := range []gpu.Buf{gate, up} {
			pair, half := b.Slice(gu, (2*n+h)*I, I), b.Slice(x, n*I, I)
			if toPair {
				b.Copy(pair, half)
			} else {
				b.Copy(half, pair)
			}
		}
	}
}

func (b pairedGLU) split(gu gpu.Buf, N, I int) (gate, up gpu.Buf) {
	gate, _ = b.Alloc(N * I)
	up, _ = b.Alloc(N * I)
	b.halves(gu, gate, up, N, I, false)
	return gate, up
}

func (b pairedGLU) SwiGLUPairForward(out, gu gpu.Buf, N, I int) {
	*b.calls++
	gate, up := b.split(gu, N, I)
	b.SwiGLUForward(out, gate, up, N*I)
	b.Free(gate)
	b.Free(up)
}

func (b pairedGLU) SwiGLUPairBackward(dgu, dout, gu gpu.Buf, N, I int) {
	*b.calls++
	gate, up := b.split(gu, N, I)
	dgate, dup := b.split(dgu, N, I)
	b.SwiGLUBackward(dgate, dup, dout, gate, up, N*I)
	b.halves(dgu, dgate, dup, N, I, true)
	for _, x := range []gpu.Buf{gate, up, dgate, dup} {
		b.Free(x)
	}
}

// stepLogProbs trains m on be for three steps and returns the
// log-probabilities of twoSequences before each.
func stepLogProbs(t *testing.T, m *gpu.Model, be gpu.Backend) [][]float32 {
	t.Helper()
	tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: 2, MaxSeq: 16, LR: 1e-2})
	if err != nil {
		t.Fatal(err)
	}
	var logps [][]float32
	for range 3 {
		lp, err := tr.LogProbs(twoSequences())
		if err != nil {
			t.Fatal(err)
		}
		logps = append(logps, slices.Concat(lp...))
		if _, err := tr.Step(twoSequences()); err != nil {
			t.Fatal(err)
		}
	}
	return logps
}

// sameTraining fails unless stepLogProbs's results agree: the same
// before training (the forward computes the same numbers), to 1e-5 after.
func sameTraining(t *testing.T, what string, want, got [][]float32) {
	t.Helper()
	if !slices.Equal(want[0], got[0]) {
		t.Errorf("%s: log-probabilities %v, want %v: the forward should not change", what, got[0], want[0])
	}
	for s := 1; s < len(want); s++ {
		for j, x := range want[s] {
			if y := got[s][j]; math.Abs(float64(x-y)) > 1e-5 {
				t.Errorf("%s: after %d steps: log-probability %d is %v, want %v", what, s, j, y, x)
			}
		}
	}
}

// adapterKeeps fails unless a LoRA trainer on be with an adapter on
// module makes no call of the fused op (counted by calls) in a step.
func adapterKeeps(t *testing.T, be gpu.Backend, module string, calls *int) {
	t.Helper()
	c := gpu.TinyConfig()
	m, err := gpu.NewModel(c, 3)
	if err != nil {
		t.Fatal(err)
	}
	a, err := gpu.NewLoRA(c, gpu.LoRAConfig{Rank: 2, Targets: []string{module}})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := gpu.NewLoRATrainer(m, a, be, gpu.TrainConfig{MaxBatch: 2, MaxSeq: 16, LR: 1e-2})
	if err != nil {
		t.Fatal(err)
	}
	*calls = 0
	if _, err := tr.Step(twoSequences()); err != nil {
		t.Fatal(err)
	}
	if *calls != 0 {
		t.Errorf("with an adapter on %s the trainer made %d fused calls, want 0", module, *calls)
	}
}

// TestPairedGLU: on a PairedSwiGLU backend the trainer runs each MLP's
// gate and up projections as one product of 2I columns (one paired call
// a layer forward and one backward), the batch sampler likewise (one a
// layer a step), and both compute what they compute with two products:
// the forward the same numbers (each output is the same dot product),
// the input's gradient summed over 2I at once instead of two sums added,
// so the log-probabilities after a step agree to float32 rounding. A
// LoRA adapter on gate or up keeps the two products.
func TestPairedGLU(t *testing.T) {
	cbe := cpu.New()
	defer cbe.Close()
	c := gpu.TinyConfig()
	calls := 0
	var logps [2][][]float32 // before each step
	var outs [2][]gpu.Completion
	for i, be := range []gpu.Backend{hidden{cbe}, pairedGLU{hidden{cbe}, &calls}} {
		m, err := gpu.NewModel(c, 3)
		if err != nil {
			t.Fatal(err)
		}
		logps[i] = stepLogProbs(t, m, be)
		if want := 3 * 3 * c.NumHiddenLayers; i == 1 && calls != want {
			t.Errorf("three steps and log-probabilities made %d paired calls, want %d (a layer's forward and backward, and forward)", calls, want)
		}
		calls = 0
		outs[i] = sampleThree(t, m, be)
		if L := c.NumHiddenLayers; i == 1 && (calls == 0 || calls%L != 0) {
			t.Errorf("sampling made %d paired calls, want a positive multiple of %d (one a layer a step)", calls, L)
		}
	}
	sameTraining(t, "one product against two", logps[0], logps[1])
	for i := range outs[0] {
		gputest.SameCompletion(t, fmt.Sprintf("request %d", i), "two products", "one", outs[0][i], outs[1][i], 1e-5)
	}
	adapterKeeps(t, pairedGLU{hidden{cbe}, &calls}, "up_proj", &calls)
}

// packedQKV adds gpu.PackedQKV to hidden: it copies each row's q, k and v
// between the packed buffer and their own, rotating q and k with the
// backend's RoPE (on copies, so that dq and dk are left as they were),
// counting the calls.
type packedQKV struct {
	hidden
	calls *int
}

func (packedQKV) PackedQKVOK() bool { return true }

func (packedQKV) SplitQKV16(NH, NKV, HS int) bool { return false }

// rows copies each row's q, k and v between qkv [N, W] and x (toPacked
// false: from qkv).
func (b packedQKV) rows(qkv gpu.Buf, x [3]gpu.Buf, widths [3]int, N int, toPacked bool) {
	W := widths[0] + widths[1] + widths[2]
	for n := range N {
		at := n * W
		for i, w := range widths {
			packed, own := b.Slice(qkv, at, w), b.Slice(x[i], n*w, w)
			if toPacked {
				b.Copy(packed, own)
			} else {
				b.Copy(own, packed)
			}
			at += w
		}
	}
}

func (b packedQKV) SplitQKV(q, k, v, qkv, cos, sin gpu.Buf, B, T, NH, NKV, HS, pos0 int) {
	*b.calls++
	b.rows(qkv, [3]gpu.Buf{q, k, v}, [3]int{NH * HS, NKV * HS, NKV * HS}, B*T, false)
	b.RoPEForward(q, cos, sin, B, T, NH, HS, pos0)
	b.RoPEForward(k, cos, sin, B, T, NKV, HS, pos0)
}

func (b packedQKV) MergeQKV(dqkv, dq, dk, dv, cos, sin gpu.Buf, B, T, NH, NKV, HS int) {
	*b.calls++
	N := B * T
	rq, _ := b.Alloc(N * NH * HS)
	rk, _ := b.Alloc(N * NKV * HS)
	b.Copy(rq, b.Slice(dq, 0, N*NH*HS))
	b.Copy(rk, b.Slice(dk, 0, N*NKV*HS))
	b.RoPEBackward(rq, cos, sin, B, T, NH, HS, 0)
	b.RoPEBackward(rk, cos, sin, B, T, NKV, HS, 0)
	b.rows(dqkv, [3]gpu.Buf{rq, rk, dv}, [3]int{NH * HS, NKV * HS, NKV * HS}, N, true)
	b.Free(rq)
	b.Free(rk)
}

// TestPackedQKV: on a PackedQKV backend the trainer runs each layer's q,
// k and v projections as one product (one split a layer forward, one
// merge backward) and computes what it computes with three: the forward
// the same numbers, the gradients summed in another order (the input's
// over all three at once), so log-probabilities after training agree to
// float32 rounding. With and without attention biases; an adapter on
// v_proj keeps the three products.
func TestPackedQKV(t *testing.T) {
	cbe := cpu.New()
	defer cbe.Close()
	for _, bias := range []bool{true, false} {
		c := gpu.TinyConfig()
		c.AttentionBias = bias
		calls := 0
		var logps [2][][]float32 // before each step
		for i, be := range []gpu.Backend{hidden{cbe}, packedQKV{hidden{cbe}, &calls}} {
			m, err := gpu.NewModel(c, 3)
			if err != nil {
				t.Fatal(err)
			}
			if bias {
				gputest.SetBiases(m)
			}
			logps[i] = stepLogProbs(t, m, be)
		}
		if want := 3 * 3 * c.NumHiddenLayers; calls != want {
			t.Errorf("bias %v: three steps and log-probabilities made %d packed calls, want %d", bias, calls, want)
		}
		sameTraining(t, fmt.Sprintf("bias %v, one product against three", bias), logps[0], logps[1])
	}
	calls := 0
	adapterKeeps(t, packedQKV{hidden{cbe}, &calls}, "v_proj", &calls)
}
