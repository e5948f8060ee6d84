package gpu

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// CheckFinite names the first tensor holding a NaN or an infinity, with
// how many and where.
func TestCheckFinite(t *testing.T) {
	m, err := NewModel(TinyConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := m.CheckFinite(); err != nil {
		t.Fatalf("fresh model: %v", err)
	}
	ts := m.Tensors()
	ts[3].Data[5] = float32(math.Inf(-1))
	ts[3].Data[7] = float32(math.NaN())
	ts[4].Data[0] = float32(math.NaN())
	var nf *NonFiniteError
	if err := m.CheckFinite(); !errors.As(err, &nf) || nf.Tensor != ts[3].Name || nf.Count != 2 || nf.Index != 5 ||
		!strings.Contains(err.Error(), ts[3].Name) {
		t.Fatalf("got %v", err)
	}
	m2, _ := NewModel(TinyConfig(), 1)
	ts = m2.Tensors()
	ts[2].Data[1] = -3e38
	if name, v := m2.Largest(); name != ts[2].Name || v != 3e38 {
		t.Fatalf("largest %q %v", name, v)
	}
}

// Adapters whose values are finite but whose product overflows float32
// (all 3e38) make the merge fail naming the merged weight, instead of
// leaving infinities in the model.
func TestMergeRefusesANonFiniteResult(t *testing.T) {
	m, err := NewModel(TinyConfig(), 1)
	if err != nil {
		t.Fatal(err)
	}
	lo, err := NewLoRA(m.Config, LoRAConfig{Rank: 4, Targets: []string{"q_proj", "v_proj"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range lo.Tensors() {
		for i := range x.Data {
			x.Data[i] = 3e38
		}
	}
	if err := CheckFinite(lo.Tensors()); err != nil {
		t.Fatalf("the adapters themselves are finite: %v", err)
	}
	var nf *NonFiniteError
	_, err = lo.Merged(m)
	if !errors.As(err, &nf) || nf.Tensor != "model.layers.0.self_attn.q_proj.weight" || !strings.Contains(err.Error(), nf.Tensor) {
		t.Fatalf("got %v", err)
	}
	if err := m.CheckFinite(); err != nil {
		t.Fatalf("Merged changed the base: %v", err)
	}
	// Small adapters merge.
	for _, x := range lo.Tensors() {
		for i := range x.Data {
			x.Data[i] = 0.01
		}
	}
	if _, err := lo.Merged(m); err != nil {
		t.Fatal(err)
	}
}
