package gpu_test

import (
	"math"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
)

// dense is the CPU backend with its FlashAttention turned off (every other
// capability kept), so a Trainer over it holds the [B,NH,T,T]
// probabilities and runs the dense attention backward.
type dense struct{ *cpu.Backend[float32] }

func (dense) FlashSupported(NH, NKV, HS int) bool { return false }

// TestFlashTrainer: a Trainer over the CPU backend's FlashAttention
// (log-sum-exps in place of the probabilities, recomputed in the backward)
// takes bitwise the steps it takes over the dense attention.
func TestFlashTrainer(t *testing.T) {
	run := func(be gpu.Backend) ([]float32, []float64) {
		m, _ := gpu.NewModel(gpu.TinyConfig(), 3)
		tr, err := gpu.NewTrainer(m, be, gpu.TrainConfig{MaxBatch: 2, MaxSeq: 16, LR: 1e-3})
		if err != nil {
			t.Fatal(err)
		}
		var losses []float64
		for i := range 3 {
			b := []gpu.Sequence{
				{Prompt: []int32{1, 2, 3}, Completion: []int32{4, 5, int32(6 + i)}, Advantage: 1},
				{Prompt: []int32{7, 8}, Completion: []int32{9, 10, 11, 12, 13, 14}, Advantage: -0.5},
			}
			met, err := tr.Step(b)
			if err != nil {
				t.Fatal(err)
			}
			losses = append(losses, met.Loss)
		}
		var all []float32
		for _, x := range m.Tensors() {
			all = append(all, x.Data...)
		}
		return all, losses
	}
	plain := dense{cpu.New()}
	defer plain.Close()
	fl := cpu.New()
	defer fl.Close()
	if _, ok := gpu.Backend(fl).(gpu.FlashAttention); !ok {
		t.Fatal("the CPU backend has no FlashAttention")
	}
	want, wl := run(plain)
	got, gl := run(fl)
	for i := range wl {
		if gl[i] != wl[i] {
			t.Fatalf("step %d loss %v with flash attention, %v without", i, gl[i], wl[i])
		}
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("weight %d is %v after 3 steps with flash attention, %v without", i, got[i], want[i])
		}
	}
}
