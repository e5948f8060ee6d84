package gpu_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
)

// testConfig is a tiny architecture that exercises every feature: GQA,
// q/k/v bias, an explicit head_dim, untied or tied embeddings and llama3
// rope scaling.
func testConfig(tied, bias bool, scaling *gpu.RopeScaling) gpu.Config {
	return gpu.Config{
		HiddenSize: 16, IntermediateSize: 24, NumHiddenLayers: 2,
		NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 6, VocabSize: 32,
		MaxPositionEmbeddings: 64, RMSNormEps: 1e-5, RopeTheta: 10000, RopeScaling: scaling,
		TieWordEmbeddings: tied, AttentionBias: bias,
	}
}

// randomize gives every parameter (norms and biases included) a random
// value so that no gradient is trivially zero.
func randomize(m *gpu.Model, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	for _, t := range m.Tensors() {
		for i := range t.Data {
			t.Data[i] = float32(0.3 * r.NormFloat64())
			if len(t.Shape) == 1 {
				t.Data[i] += 1
			}
		}
	}
}

// TestModelGradientFiniteDifferences checks the whole model's backward
// against central finite differences of its forward, in float64 (the
// float64 CPU backend), for every parameter tensor.
func TestModelGradientFiniteDifferences(t *testing.T) {
	llama3 := &gpu.RopeScaling{RopeType: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8}
	for _, tc := range []struct {
		name string
		cfg  gpu.Config
	}{
		{"untied,bias", testConfig(false, true, nil)},
		{"tied,nobias,llama3", testConfig(true, false, llama3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := gpu.NewModel(tc.cfg, 1)
			if err != nil {
				t.Fatal(err)
			}
			randomize(m, 2)
			be := cpu.NewFloat64()
			defer be.Close()
			tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: 2, MaxSeq: 12, AccumSteps: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			// Two sequences of different lengths: padding must not leak.
			// 8 completion tokens in all, so the SFT weight 1/8 is exact.
			batch := []gpu.Sequence{
				{Prompt: []int32{1, 5, 9}, Completion: []int32{3, 30, 7, 2, 11}},
				{Prompt: []int32{4, 31, 0, 8, 16, 2}, Completion: []int32{6, 6, 21}},
			}
			if _, err := tr.SFTStep(batch); err != nil {
				t.Fatal(err)
			}
			grads := slices.Clone(be.Data(tr.Grads()))
			params := be.Data(tr.Params())
			checkFiniteDifferences(t, m.Tensors(), params, grads, sftLoss64(t, tr, batch, 8))
		})
	}
}

func TestTensorsLayout(t *testing.T) {
	cfg := testConfig(false, true, nil)
	m, err := gpu.NewModel(cfg, 1)
	if err != nil {
		t.Fatal(err)
	}
	ts := m.Tensors()
	want := []struct {
		name  string
		shape []int
	}{
		{"model.embed_tokens.weight", []int{32, 16}},
		{"model.layers.0.input_layernorm.weight", []int{16}},
		{"model.layers.0.self_attn.q_proj.weight", []int{24, 16}},
		{"model.layers.0.self_attn.q_proj.bias", []int{24}},
		{"model.layers.0.self_attn.k_proj.weight", []int{12, 16}},
		{"model.layers.0.self_attn.k_proj.bias", []int{12}},
		{"model.layers.0.self_attn.v_proj.weight", []int{12, 16}},
		{"model.layers.0.self_attn.v_proj.bias", []int{12}},
		{"model.layers.0.self_attn.o_proj.weight", []int{16, 24}},
		{"model.layers.0.post_attention_layernorm.weight", []int{16}},
		{"model.layers.0.mlp.gate_proj.weight", []int{24, 16}},
		{"model.layers.0.mlp.up_proj.weight", []int{24, 16}},
		{"model.layers.0.mlp.down_proj.weight", []int{16, 24}},
	}
	for i, w := range want {
		if ts[i].Name != w.name || !slices.Equal(ts[i].Shape, w.shape) || len(ts[i].Data) != 1*prod(w.shape) {
			t.Errorf("tensor %d = %s %v (%d values)\nwant %s %v", i, ts[i].Name, ts[i].Shape, len(ts[i].Data), w.name, w.shape)
		}
	}
	last := ts[len(ts)-2:]
	if last[0].Name != "model.norm.weight" || last[1].Name != "lm_head.weight" {
		t.Errorf("last tensors %s, %s; want model.norm.weight, lm_head.weight", last[0].Name, last[1].Name)
	}
	total := 0
	for _, x := range ts {
		total += len(x.Data)
	}
	if total != m.NumParams() || len(ts) != 1+2*12+2 {
		t.Errorf("%d tensors with %d values, NumParams %d", len(ts), total, m.NumParams())
	}
	// Views alias the model: a write is visible in Params.
	ts[0].Data[5] = 42
	if m.Params.Wte[5] != 42 {
		t.Error("Tensors()[0].Data does not alias Params.Wte")
	}
	tied, _ := gpu.NewModel(testConfig(true, false, nil), 1)
	for _, x := range tied.Tensors() {
		if x.Name == "lm_head.weight" || x.Name == "model.layers.0.self_attn.q_proj.bias" {
			t.Errorf("tied model without bias lists %s", x.Name)
		}
	}
}

func prod(s []int) int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

func TestNewModelDeterministic(t *testing.T) {
	a, _ := gpu.NewModel(gpu.TinyConfig(), 7)
	b, _ := gpu.NewModel(gpu.TinyConfig(), 7)
	c, _ := gpu.NewModel(gpu.TinyConfig(), 8)
	if !slices.Equal(a.Params.Wte, b.Params.Wte) || !slices.Equal(a.Params.Layers[1].Down, b.Params.Layers[1].Down) {
		t.Error("NewModel with the same seed differs")
	}
	if slices.Equal(a.Params.Wte, c.Params.Wte) {
		t.Error("NewModel with different seeds is equal")
	}
	var ss float64
	for _, v := range a.Params.Wte {
		ss += float64(v) * float64(v)
	}
	if std := math.Sqrt(ss / float64(len(a.Params.Wte))); math.Abs(std-0.02) > 0.002 {
		t.Errorf("embedding std %v, want about 0.02", std)
	}
	if a.Params.Norm[0] != 1 || a.Params.Layers[0].QBias[0] != 0 {
		t.Error("norms must start at 1 and biases at 0")
	}
}

// TestTrainingDeterministic: the same seed and batches give bitwise the
// same weights after several optimizer steps.
func TestTrainingDeterministic(t *testing.T) {
	run := func() []float32 {
		m, _ := gpu.NewModel(gpu.TinyConfig(), 3)
		be := cpu.New()
		defer be.Close()
		tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: 2, MaxSeq: 16, LR: 1e-3, WeightDecay: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 3 {
			b := []gpu.Sequence{
				{Prompt: []int32{1, 2, 3}, Completion: []int32{4, 5, int32(6 + i)}, Advantage: 1},
				{Prompt: []int32{7, 8}, Completion: []int32{9, 10, 11, 12}, Advantage: -0.5},
			}
			if _, err := tr.Step(b); err != nil {
				t.Fatal(err)
			}
		}
		var all []float32
		for _, x := range m.Tensors() {
			all = append(all, x.Data...)
		}
		return all
	}
	a, b := run(), run()
	if !slices.Equal(a, b) {
		t.Fatal("two identical training runs gave different weights")
	}
	init, _ := gpu.NewModel(gpu.TinyConfig(), 3)
	if slices.Equal(init.Params.Wte, a[:len(init.Params.Wte)]) {
		t.Fatal("training did not change the weights")
	}
}

func ExampleNewModel() {
	m, err := gpu.NewModel(gpu.TinyConfig(), 1)
	if err != nil {
		panic(err)
	}
	ts := m.Tensors()
	// 512*64 embedding + 2 layers of (2*64 norms + 64*64+64 q + 2*(32*64+32) k,v
	// + 64*64 o + 3*176*64 MLP) + 64 final norm; tied: no lm_head.
	fmt.Println(m.NumParams(), len(ts), ts[0].Name, ts[0].Shape)
	// Output: 125504 26 model.embed_tokens.weight [512 64]
}
