//go:build cuda

package cuda_test

import (
	"slices"
	"strings"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/gputest"
)

// TestLoRATrainerMatchesCPU trains LoRA adapters (rank 4, every module)
// on the tiny model for a few GRPO and SFT steps on the CPU and on the
// GPU from the same start and compares losses, gradient norms, the
// trained adapters and the log-probabilities after; the base weights must
// come back unchanged on both.
func TestLoRATrainerMatchesCPU(t *testing.T) {
	gbe := open(t)
	cbe := cpu.New()
	defer cbe.Close()
	cfg := gpu.TinyConfig()
	mc, err := gpu.NewModel(cfg, 3)
	if err != nil {
		t.Fatal(err)
	}
	mg, _ := gpu.NewModel(cfg, 3)
	base := weights(mc)
	lc := gpu.LoRAConfig{Rank: 4, Alpha: 8, Seed: 5}
	ac, err := gpu.NewLoRA(cfg, lc)
	if err != nil {
		t.Fatal(err)
	}
	ag, _ := gpu.NewLoRA(cfg, lc)
	tc := gpu.TrainConfig{MaxBatch: 4, MaxSeq: 16, LR: 1e-2}
	trc, err := gpu.NewLoRATrainer(mc, ac, cbe, tc)
	if err != nil {
		t.Fatal(err)
	}
	trg, err := gpu.NewLoRATrainer(mg, ag, gbe, tc)
	if err != nil {
		t.Fatal(err)
	}
	batch := tinyBatch()
	stepBoth(t, trc, trg, batch)
	var ref []float64
	var got []float32
	moved := false
	for i, x := range ac.Tensors() {
		for _, v := range x.Data {
			ref = append(ref, float64(v))
			moved = moved || (strings.Contains(x.Name, "lora_B") && v != 0)
		}
		got = append(got, ag.Tensors()[i].Data...)
	}
	if !moved {
		t.Fatal("no lora_B value moved from zero: the adapters did not train")
	}
	if ok, msg := gputest.Close(got, ref, 1e-4); !ok {
		t.Errorf("adapters after 4 steps: %s", msg)
	}
	if !slices.Equal(weights(mc), base) || !slices.Equal(weights(mg), base) {
		t.Error("LoRA training changed the base weights")
	}
	sameLogProbs(t, trc, trg, batch, 1e-3)
}

func weights(m *gpu.Model) []float32 {
	var all []float32
	for _, x := range m.Tensors() {
		all = append(all, x.Data...)
	}
	return all
}
