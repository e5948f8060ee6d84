package gpu_test

import (
	"slices"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
)

// groupedAdamW adds gpu.GroupedAdamW to hidden by calling AdamW on each
// group's window (with no decay where Decay is unset), recording the calls.
type groupedAdamW struct {
	hidden
	calls *[][]gpu.AdamWGroup
}

func (b groupedAdamW) AdamWGroups(p, g, m, v gpu.Buf, groups []gpu.AdamWGroup, h gpu.AdamWParams) {
	*b.calls = append(*b.calls, slices.Clone(groups))
	for _, gr := range groups {
		hg := h
		if !gr.Decay {
			hg.WeightDecay = 0
		}
		w := func(x gpu.Buf) gpu.Buf { return b.Slice(x, gr.Off, gr.N) }
		b.AdamW(w(p), w(g), w(m), w(v), gr.N, hg)
	}
}

// TestGroupedAdamW: on a GroupedAdamW backend the trainer updates the
// whole model in one call a step, with a group per tensor in arena order,
// decay on the matrices only, and trains exactly as with one AdamW call
// a tensor; a LoRA trainer updates its adapters in one call as well.
func TestGroupedAdamW(t *testing.T) {
	cbe := cpu.New()
	defer cbe.Close()
	c := gpu.TinyConfig()
	batch := twoSequences()
	tc := gpu.TrainConfig{MaxBatch: 2, MaxSeq: 16, LR: 1e-2, WeightDecay: 0.1}
	var calls [][]gpu.AdamWGroup
	var weights [2][]float32
	var m *gpu.Model
	for i, be := range []gpu.Backend{hidden{cbe}, groupedAdamW{hidden{cbe}, &calls}} {
		var err error
		if m, err = gpu.NewModel(c, 3); err != nil {
			t.Fatal(err)
		}
		tr, err := gpu.NewTrainer(m, be, tc)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := tr.Step(batch); err != nil {
				t.Fatal(err)
			}
		}
		if err := tr.SyncHost(); err != nil {
			t.Fatal(err)
		}
		for _, x := range m.Tensors() {
			weights[i] = append(weights[i], x.Data...)
		}
	}
	if !slices.Equal(weights[0], weights[1]) {
		t.Error("weights differ between one AdamW call a tensor and grouped calls")
	}
	if len(calls) != 2 {
		t.Fatalf("%d grouped calls for two steps, want 2", len(calls))
	}
	ts := m.Tensors()
	if len(calls[0]) != len(ts) {
		t.Fatalf("a step's call has %d groups, want one per tensor (%d)", len(calls[0]), len(ts))
	}
	// The groups follow the arena, one after another (its order is not
	// Tensors': q, k and v's weights lie side by side), each a tensor's
	// size, with weight decay on the matrices only.
	off := 0
	var got, want []gpu.AdamWGroup
	for i, gr := range calls[0] {
		if gr.Off != off {
			t.Errorf("group %d: %+v, want Off %d (where the last one ended)", i, gr, off)
		}
		off += gr.N
		got = append(got, gpu.AdamWGroup{N: gr.N, Decay: gr.Decay})
	}
	if off != m.NumParams() {
		t.Errorf("the groups cover %d parameters, want %d", off, m.NumParams())
	}
	for _, x := range ts {
		want = append(want, gpu.AdamWGroup{N: len(x.Data), Decay: len(x.Shape) > 1})
	}
	byShape := func(a, b gpu.AdamWGroup) int {
		if a.N != b.N {
			return a.N - b.N
		}
		if a.Decay == b.Decay {
			return 0
		}
		if a.Decay {
			return 1
		}
		return -1
	}
	slices.SortFunc(got, byShape)
	slices.SortFunc(want, byShape)
	if !slices.Equal(got, want) {
		t.Errorf("groups (size, decay) %v, want the tensors' %v", got, want)
	}

	// LoRA: the adapters, all matrices, in one call.
	calls = nil
	a, err := gpu.NewLoRA(c, gpu.LoRAConfig{Rank: 2, Alpha: 4, Targets: []string{"q_proj", "v_proj"}, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := gpu.NewLoRATrainer(m, a, groupedAdamW{hidden{cbe}, &calls}, tc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Step(batch); err != nil {
		t.Fatal(err)
	}
	if len(calls) != 1 || len(calls[0]) != len(a.Tensors()) {
		t.Fatalf("LoRA step: calls %v, want one with a group per adapter tensor (%d)", calls, len(a.Tensors()))
	}
	for i, gr := range calls[0] {
		if !gr.Decay {
			t.Errorf("adapter group %d has no decay", i)
		}
	}
}
