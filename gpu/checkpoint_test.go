package gpu_test

import (
	"errors"
	"slices"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
)

// TestActivationCheckpointing: with TrainConfig.Checkpoint the trainer
// holds one layer's activations instead of all of them and, recomputing
// each layer in the backward pass, takes bitwise the steps it takes
// without (full fine-tuning and LoRA; GRPO and SFT steps).
func TestActivationCheckpointing(t *testing.T) {
	cfg := gpu.TinyConfig()
	cfg.NumHiddenLayers = 3
	batch := []gpu.Sequence{
		{Prompt: []int32{1, 2, 3}, Completion: []int32{4, 5, 6, 7}, Advantage: 1},
		{Prompt: []int32{8, 9}, Completion: []int32{10, 11, 12, 13, 14}, Advantage: -0.5},
	}
	run := func(lora, ckpt bool) (weights []float32, losses []float64, actLen int) {
		m, err := gpu.NewModel(cfg, 4)
		if err != nil {
			t.Fatal(err)
		}
		be := &allocCounter{Backend: cpu.New()}
		defer be.Close()
		tc := gpu.TrainConfig{MaxBatch: 2, MaxSeq: 16, LR: 1e-2, Checkpoint: ckpt}
		var tr *gpu.Trainer
		var a *gpu.LoRA
		if lora {
			if a, err = gpu.NewLoRA(cfg, gpu.LoRAConfig{Rank: 2, Seed: 3}); err != nil {
				t.Fatal(err)
			}
			tr, err = gpu.NewLoRATrainer(m, a, be, tc)
		} else {
			tr, err = gpu.NewTrainer(m, be, tc)
		}
		if err != nil {
			t.Fatal(err)
		}
		for i := range 4 {
			f := tr.Step
			if i%2 == 1 {
				f = tr.SFTStep
			}
			met, err := f(batch)
			if err != nil {
				t.Fatal(err)
			}
			losses = append(losses, met.Loss)
		}
		if err := tr.SyncHost(); err != nil {
			t.Fatal(err)
		}
		ts := m.Tensors()
		if lora {
			ts = a.Tensors()
		}
		for _, x := range ts {
			weights = append(weights, x.Data...)
		}
		for _, n := range be.sizes {
			actLen += n
		}
		return weights, losses, actLen
	}
	for _, lora := range []bool{false, true} {
		w0, l0, n0 := run(lora, false)
		w1, l1, n1 := run(lora, true)
		if !slices.Equal(l0, l1) || !slices.Equal(w0, w1) {
			t.Errorf("lora=%v: checkpointing changed the steps: losses %v vs %v", lora, l1, l0)
		}
		// 3 layers' activations become 1 layer's.
		if n1 >= n0 {
			t.Errorf("lora=%v: checkpointing allocates %d elements, without %d", lora, n1, n0)
		}
		t.Logf("lora=%v: backend elements %d without checkpointing, %d with", lora, n0, n1)
	}
}

// TestScorer: a NewScorer gives bitwise the trainer's log-probs, at
// temperature 1 and after SetTemperature, for a fraction of the backend
// memory (no gradients, moments or backward activations, one layer's
// forward buffers), and refuses to train.
func TestScorer(t *testing.T) {
	cfg := gpu.TinyConfig()
	cfg.NumHiddenLayers = 3
	batch := []gpu.Sequence{
		{Prompt: []int32{1, 2, 3}, Completion: []int32{4, 5, 6, 7}},
		{Prompt: []int32{8, 9}, Completion: []int32{10, 11, 12, 13, 14}},
	}
	m, err := gpu.NewModel(cfg, 4)
	if err != nil {
		t.Fatal(err)
	}
	tc := gpu.TrainConfig{MaxBatch: 2, MaxSeq: 16}
	bt, bs := &allocCounter{Backend: cpu.New()}, &allocCounter{Backend: cpu.New()}
	defer bt.Close()
	defer bs.Close()
	tr, err := gpu.NewTrainer(m, bt, tc)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := gpu.NewScorer(m, bs, tc)
	if err != nil {
		t.Fatal(err)
	}
	for _, temp := range []float64{1, 0.7} {
		for _, x := range []*gpu.Trainer{tr, sc} {
			if err := x.SetTemperature(temp); err != nil {
				t.Fatal(err)
			}
		}
		want, err := tr.LogProbs(batch)
		if err != nil {
			t.Fatal(err)
		}
		got, err := sc.LogProbs(batch)
		if err != nil {
			t.Fatal(err)
		}
		for i := range want {
			if !slices.Equal(got[i], want[i]) {
				t.Errorf("temperature %v, sequence %d: scorer %v, trainer %v", temp, i, got[i], want[i])
			}
		}
	}
	sum := func(b *allocCounter) (n int) {
		for _, k := range b.sizes {
			n += k
		}
		return n
	}
	nt, ns := sum(bt), sum(bs)
	t.Logf("backend elements: trainer %d, scorer %d", nt, ns)
	if ns*2 > nt {
		t.Errorf("the scorer allocates %d elements, the trainer %d: want under half", ns, nt)
	}
	if _, err := sc.Step(batch); !errors.Is(err, gpu.ErrScoreOnly) {
		t.Errorf("scorer Step: %v, want ErrScoreOnly", err)
	}
	if _, err := sc.SFTStep(batch); !errors.Is(err, gpu.ErrScoreOnly) {
		t.Errorf("scorer SFTStep: %v, want ErrScoreOnly", err)
	}
	if _, _, _, err := sc.OptimizerState(); !errors.Is(err, gpu.ErrScoreOnly) {
		t.Errorf("scorer OptimizerState: %v, want ErrScoreOnly", err)
	}
}
