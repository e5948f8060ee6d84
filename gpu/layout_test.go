package gpu

import (
	"slices"
	"testing"

	"swerl/gpu/arch"
)

// TestArenaLayout: every tensor of Config.Tensors has its own window of
// the arena, together covering it; each layer's q, k and v weights lie
// side by side, then their biases, and gate_proj then up_proj, so that
// bindParams views QKV, QKVBias and GateUp over them; and tensorOrder
// puts arena-shaped data in Tensors' order (the optimizer state's file
// layout) and back.
func TestArenaLayout(t *testing.T) {
	for _, bias := range []bool{true, false} {
		c := TinyConfig()
		c.AttentionBias = bias
		specs, size := layout(c)
		ts := c.Tensors()
		if len(specs) != len(ts) {
			t.Fatalf("%d specs for %d tensors", len(specs), len(ts))
		}
		owner := make([]int, size)
		for i := range owner {
			owner[i] = -1
		}
		for i, s := range specs {
			if s.Name != ts[i].Name {
				t.Fatalf("spec %d is %s, want %s (Tensors' order)", i, s.Name, ts[i].Name)
			}
			for j := s.off; j < s.off+arch.Numel(s.Shape); j++ {
				if owner[j] != -1 {
					t.Fatalf("%s and %s share arena element %d", ts[owner[j]].Name, s.Name, j)
				}
				owner[j] = i
			}
		}
		if i := slices.Index(owner, -1); i >= 0 {
			t.Fatalf("arena element %d of %d belongs to no tensor", i, size)
		}
		arena := make([]float32, size)
		for j := range arena {
			arena[j] = float32(owner[j])
		}
		p := bindParams(c, func(off, n int) []float32 { return arena[off : off+n] })
		d := dimsOf(c)
		for l, w := range p.Layers {
			want := slices.Concat(w.Q, w.K, w.V)
			if !slices.Equal(w.QKV, want) {
				t.Errorf("bias %v layer %d: QKV does not view q, k and v's weights in that order", bias, l)
			}
			if bias && !slices.Equal(w.QKVBias, slices.Concat(w.QBias, w.KBias, w.VBias)) || !bias && w.QKVBias != nil {
				t.Errorf("bias %v layer %d: QKVBias %d elements, want q, k and v's biases", bias, l, len(w.QKVBias))
			}
			if !slices.Equal(w.GateUp, slices.Concat(w.Gate, w.Up)) || len(w.GateUp) != 2*d.I*d.C {
				t.Errorf("bias %v layer %d: GateUp does not view gate and up", bias, l)
			}
		}
		byTensor := tensorOrder(specs, arena, false)
		var want []float32
		for i, s := range specs {
			for range arch.Numel(s.Shape) {
				want = append(want, float32(i))
			}
		}
		if !slices.Equal(byTensor, want) {
			t.Errorf("bias %v: tensorOrder does not list the tensors in Tensors' order", bias)
		}
		if back := tensorOrder(specs, byTensor, true); !slices.Equal(back, arena) {
			t.Errorf("bias %v: tensorOrder there and back changes the data", bias)
		}
	}
}
