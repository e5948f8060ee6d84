package gpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
)

// LoRAModules are the linear modules of a decoder layer that LoRA can
// adapt, in layer order, with their PEFT names.
var LoRAModules = []string{"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}

// Module indices into LoRAModules, used by the forward and backward pass.
const (
	modQ = iota
	modK
	modV
	modO
	modGate
	modUp
	modDown
	numMods
)

// LoRAConfig configures low-rank adapters (Hu et al., 2021) on a model's
// linear layers: for a module with weight W [out, in], A [r, in] and
// B [out, r], the layer computes x·Wᵀ + (Alpha/Rank)·(x·Aᵀ)·Bᵀ.
type LoRAConfig struct {
	// Rank r of every adapter; 0 means no LoRA (full fine-tuning).
	Rank int
	// Alpha sets the scale Alpha/Rank. Default 32, the fixed alpha of
	// "LoRA Without Regret" (Schulman et al., 2025): with the 1/r scale
	// the best learning rate hardly depends on the rank.
	Alpha float64
	// Targets are the adapted modules (names of LoRAModules). Default all
	// seven.
	Targets []string
	// Seed draws A. A is Kaiming-uniform as PEFT initialises it
	// (kaiming_uniform_ with a=√5: U(-1/√in, 1/√in)); B starts at zero, so
	// a new adapter leaves the model unchanged.
	Seed uint64
}

// DefaultLoRAAlpha is LoRAConfig.Alpha when it is 0, and --lora-alpha's
// default.
const DefaultLoRAAlpha = 32

func (c LoRAConfig) withDefaults() LoRAConfig {
	if c.Alpha == 0 {
		c.Alpha = DefaultLoRAAlpha
	}
	if len(c.Targets) == 0 {
		c.Targets = LoRAModules
	}
	// Targets in LoRAModules order, so adapter files and arenas have one
	// layout whatever order the flag listed them in.
	var ts []string
	for _, m := range LoRAModules {
		if slices.Contains(c.Targets, m) {
			ts = append(ts, m)
		}
	}
	c.Targets = ts
	return c
}

// Validate names the first invalid field.
func (c LoRAConfig) Validate() error {
	switch {
	case c.Rank < 0 || c.Rank > 65536:
		return fmt.Errorf("gpu: LoRAConfig.Rank %d outside [0, 65536]", c.Rank)
	case c.Alpha < 0 || math.IsNaN(c.Alpha) || math.IsInf(c.Alpha, 0):
		return fmt.Errorf("gpu: LoRAConfig.Alpha %v is not a positive number", c.Alpha)
	}
	seen := map[string]bool{}
	for _, t := range c.Targets {
		if !slices.Contains(LoRAModules, t) {
			return fmt.Errorf("gpu: LoRA target %q is not one of %s", t, strings.Join(LoRAModules, ", "))
		}
		if seen[t] {
			return fmt.Errorf("gpu: LoRA target %q listed twice", t)
		}
		seen[t] = true
	}
	return nil
}

// ParseLoRATargets parses a comma-separated list of modules, each either
// a PEFT name ("q_proj") or its short form ("q", "gate"), into names of
// LoRAModules.
func ParseLoRATargets(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		name := f
		if !strings.HasSuffix(name, "_proj") {
			name += "_proj"
		}
		if !slices.Contains(LoRAModules, name) {
			return nil, fmt.Errorf("gpu: LoRA target %q: want some of q, k, v, o, gate, up, down", f)
		}
		if slices.Contains(out, name) {
			return nil, fmt.Errorf("gpu: LoRA target %q listed twice", f)
		}
		out = append(out, name)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("gpu: no LoRA targets in %q", s)
	}
	return out, nil
}

// loraSpec is one adapter matrix: the A (b false) or B half on module mod
// of layer l, at off in the LoRA arena.
type loraSpec struct {
	l, mod int
	b      bool
	shape  [2]int
	off    int
}

// LoRA is a set of adapters for one architecture, in one host arena
// (float32). It is not safe for concurrent mutation.
type LoRA struct {
	cfg   LoRAConfig // defaults filled
	base  Config
	arena []float32
	specs []loraSpec
}

// moduleShape returns the [out, in] shape of module mod's weight in c.
func moduleShape(d dims, mod int) (out, in int) {
	switch mod {
	case modQ:
		return d.QC, d.C
	case modK, modV:
		return d.KVC, d.C
	case modO:
		return d.C, d.QC
	case modGate, modUp:
		return d.I, d.C
	default: // modDown
		return d.C, d.I
	}
}

// NewLoRA returns adapters for base with A drawn from c.Seed and B zero
// (see LoRAConfig). c.Rank must be positive.
func NewLoRA(base Config, c LoRAConfig) (*LoRA, error) {
	if err := base.Validate(); err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Rank == 0 {
		return nil, fmt.Errorf("gpu: LoRAConfig.Rank is 0 (LoRA off)")
	}
	c = c.withDefaults()
	a := &LoRA{cfg: c, base: base}
	d := dimsOf(base)
	off := 0
	for l := range d.L {
		for mod, name := range LoRAModules {
			if !slices.Contains(c.Targets, name) {
				continue
			}
			out, in := moduleShape(d, mod)
			a.specs = append(a.specs, loraSpec{l: l, mod: mod, shape: [2]int{c.Rank, in}, off: off})
			off += c.Rank * in
			a.specs = append(a.specs, loraSpec{l: l, mod: mod, b: true, shape: [2]int{out, c.Rank}, off: off})
			off += out * c.Rank
		}
	}
	a.arena = make([]float32, off)
	r := rand.New(rand.NewPCG(c.Seed, 0x4c6f5241))
	for _, s := range a.specs {
		if s.b {
			continue
		}
		bound := 1 / math.Sqrt(float64(s.shape[1]))
		for i := range s.shape[0] * s.shape[1] {
			a.arena[s.off+i] = float32(bound * (2*r.Float64() - 1))
		}
	}
	return a, nil
}

// Config returns the adapters' configuration with defaults filled in.
func (a *LoRA) Config() LoRAConfig { return a.cfg }

// Scale is Alpha/Rank, the factor of the low-rank product.
func (a *LoRA) Scale() float64 { return a.cfg.Alpha / float64(a.cfg.Rank) }

// NumParams is the number of adapter parameters.
func (a *LoRA) NumParams() int { return len(a.arena) }

// loraName returns the PEFT name of an adapter matrix, built from the
// base weight's Hugging Face name:
// base_model.model.model.layers.L.self_attn.q_proj.lora_A.weight.
func loraName(s loraSpec) string {
	group := "self_attn"
	if s.mod >= modGate {
		group = "mlp"
	}
	half := "A"
	if s.b {
		half = "B"
	}
	return fmt.Sprintf("base_model.model.model.layers.%d.%s.%s.lora_%s.weight", s.l, group, LoRAModules[s.mod], half)
}

// Tensors returns the adapter matrices with their PEFT names, per layer
// and module A then B, as views into the arena: writing Data changes the
// adapters. A is [r, in], B is [out, r].
func (a *LoRA) Tensors() []Tensor {
	ts := make([]Tensor, len(a.specs))
	for i, s := range a.specs {
		n := s.shape[0] * s.shape[1]
		ts[i] = Tensor{Name: loraName(s), Shape: []int{s.shape[0], s.shape[1]}, Data: a.arena[s.off : s.off+n : s.off+n]}
	}
	return ts
}

// SetTensors copies ts (PEFT names, the shapes of Tensors) into the
// adapters. Every adapter matrix must be given exactly once.
func (a *LoRA) SetTensors(ts []Tensor) error {
	byName := map[string]Tensor{}
	for _, t := range ts {
		if _, dup := byName[t.Name]; dup {
			return fmt.Errorf("gpu: LoRA tensor %s given twice", t.Name)
		}
		byName[t.Name] = t
	}
	mine := a.Tensors()
	if len(ts) != len(mine) {
		return fmt.Errorf("gpu: %d LoRA tensors given, the adapters have %d", len(ts), len(mine))
	}
	for _, m := range mine {
		t, ok := byName[m.Name]
		if !ok {
			return fmt.Errorf("gpu: LoRA tensor %s missing", m.Name)
		}
		if !slices.Equal(t.Shape, m.Shape) || len(t.Data) != len(m.Data) {
			return fmt.Errorf("gpu: LoRA tensor %s has shape %v, want %v", m.Name, t.Shape, m.Shape)
		}
	}
	for _, m := range mine {
		copy(m.Data, byName[m.Name].Data)
	}
	return nil
}

// Merge adds Scale·B·A to the weight of every adapted module of m, in
// place on its host arena; sums over the rank run in float64. m must have
// the architecture the adapters were made for. A merged weight that is
// NaN or infinite (finite adapters whose product overflows float32, or a
// base that held one) is an error naming that weight, a
// *NonFiniteError; m is then partly merged and must be discarded.
func (a *LoRA) Merge(m *Model) error {
	if err := a.fits(m.Config); err != nil {
		return fmt.Errorf("gpu: merge LoRA: %w", err)
	}
	s := a.Scale()
	r := a.cfg.Rank
	col := make([]float64, r)
	for i := 0; i < len(a.specs); i += 2 {
		sa, sb := a.specs[i], a.specs[i+1]
		w := moduleWeight(&m.Params.Layers[sa.l], sa.mod)
		out, in := sb.shape[0], sa.shape[1]
		A := a.arena[sa.off : sa.off+r*in]
		B := a.arena[sb.off : sb.off+out*r]
		for o := range out {
			for k := range r {
				col[k] = s * float64(B[o*r+k])
			}
			wrow := w[o*in : o*in+in]
			for j := range wrow {
				var sum float64
				for k, c := range col {
					sum += c * float64(A[k*in+j])
				}
				wrow[j] += float32(sum)
			}
		}
		if n, at := nonFinite(w); n > 0 {
			name := strings.TrimSuffix(strings.TrimPrefix(loraName(sa), "base_model.model."), ".lora_A.weight") + ".weight"
			return fmt.Errorf("gpu: merge LoRA: the merged weight: %w", &NonFiniteError{Tensor: name, Count: n, Index: at, Value: w[at]})
		}
	}
	return nil
}

// fits reports whether c has the layer count and module shapes the
// adapters were made for.
func (a *LoRA) fits(c Config) error {
	d, want := dimsOf(c), dimsOf(a.base)
	if d.L != want.L {
		return fmt.Errorf("the model has %d layers, the adapters %d", d.L, want.L)
	}
	for mod, name := range LoRAModules {
		o, i := moduleShape(d, mod)
		wo, wi := moduleShape(want, mod)
		if o != wo || i != wi {
			return fmt.Errorf("the model's %s is [%d, %d], the adapters were made for [%d, %d]", name, o, i, wo, wi)
		}
	}
	return nil
}

// Merged returns a copy of base with the adapters merged (see Merge);
// base is unchanged. Samplers serve the merged copy, so the batched
// sampler needs no LoRA path of its own.
func (a *LoRA) Merged(base *Model) (*Model, error) {
	m, err := NewZeroModel(base.Config)
	if err != nil {
		return nil, err
	}
	copy(m.arena, base.arena)
	return m, a.Merge(m)
}

// moduleWeight returns the weight of module mod in a layer.
func moduleWeight[T any](p *LayerParams[T], mod int) T {
	switch mod {
	case modQ:
		return p.Q
	case modK:
		return p.K
	case modV:
		return p.V
	case modO:
		return p.O
	case modGate:
		return p.Gate
	case modUp:
		return p.Up
	default:
		return p.Down
	}
}

// ---------------------------------------------------------------------------
// training

// loraPair is the A and B buffers of one adapted module (nil when the
// module is not adapted).
type loraPair struct{ A, B Buf }

// loraRun is what the forward and backward passes need of the adapters:
// their weights and gradients on the backend, the scaled low-rank
// activations kept for the backward pass, and scratch.
type loraRun struct {
	r     int
	scale float32
	w, g  [][numMods]loraPair // per layer
	hs    [][numMods]Buf      // per layer: Scale·(x·Aᵀ) [N, r], kept for backward
	tmp   Buf                 // [N, max out] the low-rank output before it is added
	h, dh Buf                 // [N, r] scratch
}

// bindLoRA builds the per-layer views of the adapters' weights w and
// gradients g (laid out as a's arena) on be.
func bindLoRA(be Backend, a *LoRA, w, g Buf) *loraRun {
	d := dimsOf(a.base)
	lr := &loraRun{r: a.cfg.Rank, scale: float32(a.Scale()), w: make([][numMods]loraPair, d.L), g: make([][numMods]loraPair, d.L)}
	for _, s := range a.specs {
		n := s.shape[0] * s.shape[1]
		pw, pg := &lr.w[s.l][s.mod], &lr.g[s.l][s.mod]
		if s.b {
			pw.B, pg.B = be.Slice(w, s.off, n), be.Slice(g, s.off, n)
		} else {
			pw.A, pg.A = be.Slice(w, s.off, n), be.Slice(g, s.off, n)
		}
	}
	return lr
}

// loraActs lays out the low-rank activations for N rows.
// With ckpt (activation checkpointing) the layers share one set, which
// the backward pass refills by recomputing each layer.
func (lr *loraRun) acts(d dims, N int, a *arena, ckpt bool) {
	lr.hs = make([][numMods]Buf, d.L)
	var shared [numMods]Buf
	for l := range d.L {
		for mod := range numMods {
			if lr.w[l][mod].A == nil {
				continue
			}
			if !ckpt {
				lr.hs[l][mod] = a.take(N * lr.r)
				continue
			}
			if shared[mod] == nil {
				shared[mod] = a.take(N * lr.r)
			}
			lr.hs[l][mod] = shared[mod]
		}
	}
	lr.tmp = a.take(N * max(d.QC, d.C, d.I))
	lr.h = a.take(N * lr.r)
	lr.dh = a.take(N * lr.r)
}

// adapts reports whether module mod of layer l has an adapter.
func (lr *loraRun) adapts(l, mod int) bool { return lr != nil && lr.w[l][mod].A != nil }

// adaptsAny reports whether module mod has an adapter in any layer.
func (lr *loraRun) adaptsAny(mod int) bool {
	if lr == nil {
		return false
	}
	for l := range lr.w {
		if lr.adapts(l, mod) {
			return true
		}
	}
	return false
}

// forward adds the adapter of module mod in layer l to y [N, out], the
// base layer's output for x [N, in]: y += Scale·(x·Aᵀ)·Bᵀ.
func (lr *loraRun) forward(be Backend, l, mod int, y, x Buf, N, in, out int) {
	if !lr.adapts(l, mod) {
		return
	}
	p, hs := lr.w[l][mod], lr.hs[l][mod]
	be.MatmulForward(lr.h, x, p.A, nil, N, in, lr.r)
	be.Zero(hs)
	be.Axpy(hs, lr.h, lr.scale, N*lr.r)
	be.MatmulForward(lr.tmp, hs, p.B, nil, N, lr.r, out)
	be.Add(y, y, lr.tmp, N*out)
}

// backward accumulates the adapter's gradients and its share of dx
// [N, in] from dy [N, out]: with hs = Scale·x·Aᵀ and y += hs·Bᵀ,
// dB += dyᵀ·hs, dh = Scale·dy·B, dA += dhᵀ·x and dx += dh·A.
func (lr *loraRun) backward(be Backend, l, mod int, dx, dy, x Buf, N, in, out int) {
	if !lr.adapts(l, mod) {
		return
	}
	p, g := lr.w[l][mod], lr.g[l][mod]
	be.Zero(lr.h)
	be.MatmulBackward(lr.h, g.B, nil, dy, lr.hs[l][mod], p.B, N, lr.r, out)
	be.Zero(lr.dh)
	be.Axpy(lr.dh, lr.h, lr.scale, N*lr.r)
	be.MatmulBackward(dx, g.A, nil, lr.dh, x, p.A, N, in, lr.r)
}
