package gpu_test

import (
	"slices"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
)

// TestTrainingWorkerCountInvariant: the CPU backend partitions work by a
// fixed rule and sums in a fixed order, so training on 1, 2 or 5 workers
// gives bitwise the same weights (and sampling the same completion).
func TestTrainingWorkerCountInvariant(t *testing.T) {
	batch := func(i int) []gpu.Sequence {
		seq := func(n, off int) []int32 {
			s := make([]int32, n)
			for j := range s {
				s[j] = int32((j*37 + off + i) % 512)
			}
			return s
		}
		return []gpu.Sequence{
			{Prompt: seq(9, 1), Completion: seq(30, 2), Advantage: 1},
			{Prompt: seq(4, 3), Completion: seq(20, 4), Advantage: -0.5},
		}
	}
	run := func(workers int) ([]float32, []int32) {
		m, _ := gpu.NewModel(gpu.TinyConfig(), 3)
		be := cpu.NewWorkers(workers)
		defer be.Close()
		tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: 2, MaxSeq: 40, LR: 1e-3, WeightDecay: 0.1})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 2 {
			if _, err := tr.Step(batch(i)); err != nil {
				t.Fatal(err)
			}
		}
		if err := tr.SyncHost(); err != nil {
			t.Fatal(err)
		}
		var all []float32
		for _, x := range m.Tensors() {
			all = append(all, x.Data...)
		}
		s, err := gpu.NewSampler(m, be, 64)
		if err != nil {
			t.Fatal(err)
		}
		c, err := s.Sample([]int32{5, 6, 7}, gpu.SamplingParams{Temperature: 1, Seed: 9, MaxTokens: 20})
		if err != nil {
			t.Fatal(err)
		}
		return all, c.Tokens
	}
	w1, t1 := run(1)
	for _, workers := range []int{2, 5} {
		w, tk := run(workers)
		if !slices.Equal(w1, w) {
			t.Errorf("%d workers: weights differ from 1 worker's", workers)
		}
		if !slices.Equal(t1, tk) {
			t.Errorf("%d workers: sampled %v, 1 worker %v", workers, tk, t1)
		}
	}
}
