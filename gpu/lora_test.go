package gpu_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
)

// randomLoRA returns adapters on c whose B is random too (a fresh B is
// zero, which would make every gradient of A zero).
func randomLoRA(t testing.TB, c gpu.Config, lc gpu.LoRAConfig, seed uint64) *gpu.LoRA {
	t.Helper()
	a, err := gpu.NewLoRA(c, lc)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 9))
	for _, ten := range a.Tensors() {
		if strings.Contains(ten.Name, "lora_B") {
			for i := range ten.Data {
				ten.Data[i] = float32(0.3 * r.NormFloat64())
			}
		}
	}
	return a
}

func loraBatch() []gpu.Sequence {
	return []gpu.Sequence{
		{Prompt: []int32{1, 5, 9}, Completion: []int32{3, 30, 7, 2, 11}},
		{Prompt: []int32{4, 31, 0, 8, 16, 2}, Completion: []int32{6, 6, 21}},
	}
}

// TestLoRAGradientFiniteDifferences checks the adapters' backward against
// central finite differences of the forward, in float64, for every
// adapter matrix, with all seven modules adapted and with a subset.
func TestLoRAGradientFiniteDifferences(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  gpu.Config
		lc   gpu.LoRAConfig
	}{
		{"all,untied,bias", testConfig(false, true, nil), gpu.LoRAConfig{Rank: 3, Alpha: 6, Seed: 1}},
		{"q,v,down,tied", testConfig(true, false, nil), gpu.LoRAConfig{Rank: 2, Alpha: 5, Targets: []string{"down_proj", "q_proj", "v_proj"}, Seed: 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := gpu.NewModel(tc.cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			randomize(m, 2)
			base := slices.Clone(allWeights(m))
			a := randomLoRA(t, tc.cfg, tc.lc, 3)
			be := cpu.NewFloat64()
			defer be.Close()
			tr, err := gpu.NewLoRATrainer(m, a, be, gpu.TrainConfig{MaxBatch: 2, MaxSeq: 12, AccumSteps: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			batch := loraBatch() // 8 completion tokens: the SFT weight 1/8 is exact
			if _, err := tr.SFTStep(batch); err != nil {
				t.Fatal(err)
			}
			grads := slices.Clone(be.Data(tr.Grads()))
			params := be.Data(tr.LoRAParams())
			if len(grads) != a.NumParams() || len(params) != a.NumParams() {
				t.Fatalf("gradient arena %d, adapter arena %d, want %d (the adapters only)", len(grads), len(params), a.NumParams())
			}
			checkFiniteDifferences(t, a.Tensors(), params, grads, sftLoss64(t, tr, batch, 8))
			if !slices.Equal(allWeights(m), base) {
				t.Error("the LoRA trainer changed the base weights")
			}
		})
	}
}

func allWeights(m *gpu.Model) []float32 {
	var all []float32
	for _, x := range m.Tensors() {
		all = append(all, x.Data...)
	}
	return all
}

// TestLoRAMergedMatchesUnmerged: the log-probabilities of a model with
// its adapters merged (a plain Trainer on LoRA.Merged) equal those of the
// base with the adapters applied on the side, in float64 and float32.
func TestLoRAMergedMatchesUnmerged(t *testing.T) {
	for _, tc := range []struct {
		name string
		be   func() gpu.Backend
		tol  float64
	}{
		{"float64", func() gpu.Backend { return cpu.NewFloat64() }, 2e-6}, // the merged weights are float32
		{"float32", func() gpu.Backend { return cpu.New() }, 2e-4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := testConfig(false, true, nil)
			m, _ := gpu.NewModel(c, 4)
			randomize(m, 5)
			a := randomLoRA(t, c, gpu.LoRAConfig{Rank: 4, Seed: 6}, 7)
			merged, err := a.Merged(m)
			if err != nil {
				t.Fatal(err)
			}
			be := tc.be()
			tc1 := gpu.TrainConfig{MaxBatch: 2, MaxSeq: 12}
			lt, err := gpu.NewLoRATrainer(m, a, be, tc1)
			if err != nil {
				t.Fatal(err)
			}
			ft, err := gpu.NewTrainer(merged, be, tc1)
			if err != nil {
				t.Fatal(err)
			}
			batch := loraBatch()
			lp1, err := lt.LogProbs64(batch)
			if err != nil {
				t.Fatal(err)
			}
			lp2, err := ft.LogProbs64(batch)
			if err != nil {
				t.Fatal(err)
			}
			plain, _ := gpu.NewTrainer(m, be, tc1)
			lp0, _ := plain.LogProbs64(batch)
			var moved float64
			for i := range lp1 {
				for j := range lp1[i] {
					if d := math.Abs(lp1[i][j] - lp2[i][j]); d > tc.tol*(1+math.Abs(lp2[i][j])) {
						t.Errorf("sequence %d token %d: unmerged %v, merged %v", i, j, lp1[i][j], lp2[i][j])
					}
					moved = math.Max(moved, math.Abs(lp1[i][j]-lp0[i][j]))
				}
			}
			if moved < 1e-3 {
				t.Errorf("the adapters change the log-probabilities by at most %v: the check compares nothing", moved)
			}
		})
	}
}

// TestLoRATrainingStep: a fresh adapter (B zero) leaves the model as it
// is; SFT steps then lower the loss, move only the adapters, and are
// deterministic.
func TestLoRATrainingStep(t *testing.T) {
	run := func() ([]float32, []float64) {
		m, _ := gpu.NewModel(gpu.TinyConfig(), 3)
		base := slices.Clone(allWeights(m))
		a, err := gpu.NewLoRA(m.Config, gpu.LoRAConfig{Rank: 4, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		be := cpu.New()
		defer be.Close()
		tr, err := gpu.NewLoRATrainer(m, a, be, gpu.TrainConfig{MaxBatch: 2, MaxSeq: 16, LR: 1e-2})
		if err != nil {
			t.Fatal(err)
		}
		plain, _ := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: 2, MaxSeq: 16})
		batch := loraBatch()
		l0, _ := tr.LogProbs(batch)
		p0, _ := plain.LogProbs(batch)
		for i := range l0 {
			if !slices.Equal(l0[i], p0[i]) {
				t.Fatalf("a fresh adapter changes the log-probabilities: %v vs %v", l0[i], p0[i])
			}
		}
		var losses []float64
		for range 5 {
			met, err := tr.SFTStep(batch)
			if err != nil {
				t.Fatal(err)
			}
			losses = append(losses, met.Loss)
		}
		if !slices.Equal(allWeights(m), base) {
			t.Fatal("LoRA training changed the base weights")
		}
		if err := tr.SyncHost(); err != nil {
			t.Fatal(err)
		}
		var lw []float32
		for _, x := range a.Tensors() {
			lw = append(lw, x.Data...)
		}
		return lw, losses
	}
	w1, losses := run()
	w2, _ := run()
	if !slices.Equal(w1, w2) {
		t.Error("two identical LoRA runs gave different adapters")
	}
	if !(losses[len(losses)-1] < losses[0]-0.1) {
		t.Errorf("SFT losses %v: LoRA did not learn", losses)
	}
}

// TestLoRAMemory reports bytes per base parameter held while training
// the ~20M benchmark model (base weights + everything the trainer
// allocates on the backend), full fine-tuning beside LoRA rank 8 on all
// modules, and checks that LoRA allocates no gradient or AdamW moment of
// base size: its trainer allocates exactly the full trainer's activations
// and RoPE tables plus three adapter-sized arenas and its own low-rank
// activations.
func TestLoRAMemory(t *testing.T) {
	const B, T, r = 4, 256, 8
	cfg := benchConfig()
	m, err := gpu.NewModel(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	P := m.NumParams()
	count := func(lora bool) ([]int, *gpu.LoRA) {
		be := &allocCounter{Backend: cpu.New()}
		defer be.Close()
		tc := gpu.TrainConfig{MaxBatch: B, MaxSeq: T}
		// The activations are laid out by the first step, for its B
		// sequences of T positions.
		batch := make([]gpu.Sequence, B)
		for i := range batch {
			seq := make([]int32, T+1)
			for k := range seq {
				seq[k] = int32((i*31 + k*7) % cfg.VocabSize)
			}
			batch[i] = gpu.Sequence{Prompt: seq[:T/2], Completion: seq[T/2:], Advantage: 1}
		}
		var tr *gpu.Trainer
		var a *gpu.LoRA
		var err error
		if lora {
			if a, err = gpu.NewLoRA(cfg, gpu.LoRAConfig{Rank: r}); err != nil {
				t.Fatal(err)
			}
			tr, err = gpu.NewLoRATrainer(m, a, be, tc)
		} else {
			tr, err = gpu.NewTrainer(m, be, tc)
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tr.Step(batch); err != nil {
			t.Fatal(err)
		}
		return be.sizes, a
	}
	full, _ := count(false)
	lsz, a := count(true)
	sum := func(s []int) int {
		n := 0
		for _, v := range s {
			n += v
		}
		return n
	}
	for _, n := range lsz {
		if n == P {
			t.Errorf("the LoRA trainer allocates %d elements, the size of the base: a base gradient or moment", n)
		}
	}
	if got := slices.Clone(lsz[:3]); !slices.Equal(got, []int{a.NumParams(), a.NumParams(), a.NumParams()}) {
		t.Errorf("LoRA trainer's first allocations %v, want gradient, m and v of the %d adapter parameters", got, a.NumParams())
	}
	if !slices.Equal(full[:3], []int{P, P, P}) {
		t.Errorf("full trainer's first allocations %v, want three of %d", full[:3], P)
	}
	// Low-rank activations: Scale·x·Aᵀ per module and layer, the [N, max
	// out] sum and two [N, r] scratch buffers.
	N := B * T
	loraActs := cfg.NumHiddenLayers*7*N*r + N*cfg.IntermediateSize + 2*N*r
	if d := sum(lsz) - 3*a.NumParams() - (sum(full) - 3*P); d != loraActs {
		t.Errorf("LoRA allocates %d elements beyond the full trainer's activations and its own adapter state, want %d", d, loraActs)
	}
	// Bytes per base parameter: the base weights (the host arena, which
	// the CPU backend trains or reads in place) plus the backend's
	// allocations, 4 bytes an element.
	fullB := float64(4*P+4*sum(full)) / float64(P)
	loraB := float64(4*P+4*a.NumParams()+4*sum(lsz)) / float64(P)
	statesFull := float64(4*3*P) / float64(P)
	statesLoRA := float64(4*3*a.NumParams()) / float64(P)
	t.Logf("%.1fM base parameters, B×T %d×%d: full fine-tuning %.2f bytes/param (grad+AdamW %.2f), LoRA r=%d all modules %.2f bytes/param (grad+AdamW %.3f, %d adapter parameters = %.2f%% of the base)",
		float64(P)/1e6, B, T, fullB, statesFull, r, loraB, statesLoRA, a.NumParams(), 100*float64(a.NumParams())/float64(P))
	if loraB >= fullB-11 {
		t.Errorf("LoRA %.2f bytes/param is not about 12 below full fine-tuning's %.2f", loraB, fullB)
	}
}

func TestLoRAConfigErrors(t *testing.T) {
	c := gpu.TinyConfig()
	for _, lc := range []gpu.LoRAConfig{
		{Rank: 0},
		{Rank: -1},
		{Rank: 2, Alpha: math.NaN()},
		{Rank: 2, Targets: []string{"lm_head"}},
		{Rank: 2, Targets: []string{"q_proj", "q_proj"}},
	} {
		if _, err := gpu.NewLoRA(c, lc); err == nil {
			t.Errorf("NewLoRA(%+v) accepted", lc)
		}
	}
	if ts, err := gpu.ParseLoRATargets("q, v,gate_proj"); err != nil || !slices.Equal(ts, []string{"q_proj", "v_proj", "gate_proj"}) {
		t.Errorf("ParseLoRATargets: %v %v", ts, err)
	}
	for _, bad := range []string{"", "q,q", "lm_head", "x"} {
		if _, err := gpu.ParseLoRATargets(bad); err == nil {
			t.Errorf("ParseLoRATargets(%q) accepted", bad)
		}
	}
	a, _ := gpu.NewLoRA(c, gpu.LoRAConfig{Rank: 2, Targets: []string{"up_proj", "q_proj"}})
	if got := a.Config().Targets; !slices.Equal(got, []string{"q_proj", "up_proj"}) {
		t.Errorf("targets %v, want layer order", got)
	}
	other := testConfig(false, true, nil)
	m, _ := gpu.NewModel(other, 1)
	if _, err := gpu.NewLoRATrainer(m, a, cpu.New(), gpu.TrainConfig{MaxBatch: 1, MaxSeq: 8}); err == nil {
		t.Error("NewLoRATrainer accepted adapters of another architecture")
	}
	if err := a.Merge(m); err == nil {
		t.Error("Merge accepted a model of another architecture")
	}
}
