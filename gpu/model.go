package gpu

// Dimension legend, used in the shape comments of this file:
//
//	B   batch size (sequences)          T   sequence length (tokens)
//	N   rows, B*T                       C   hidden size (channels)
//	V   vocabulary size                 L   number of layers
//	NH  query heads                     NKV key/value heads (GQA)
//	HS  head size                       QC  NH*HS, KVC NKV*HS
//	I   MLP intermediate size           P   max positions (RoPE tables)

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"swerl/gpu/arch"
)

// Config is the model architecture, with the JSON keys of a Hugging Face
// config.json: the one description package hf reads and writes too.
type Config = arch.Config

// RopeScaling is the rope_scaling object of a config.json.
type RopeScaling = arch.RopeScaling

// TinyConfig is the built-in tiny model: a Qwen2-style decoder (q/k/v bias,
// grouped-query attention, tied embeddings) small enough to train in tests
// on a CPU. Its vocabulary (512) covers the built-in tokenizer's byte-level
// ids; random weights come from NewModel(TinyConfig(), seed).
func TinyConfig() Config {
	return Config{
		ModelType:             "qwen2",
		HiddenSize:            64,
		IntermediateSize:      176,
		NumHiddenLayers:       2,
		NumAttentionHeads:     4,
		NumKeyValueHeads:      2,
		VocabSize:             512,
		MaxPositionEmbeddings: 1024,
		RMSNormEps:            1e-6,
		RopeTheta:             10000,
		TieWordEmbeddings:     true,
		AttentionBias:         true,
	}
}

// ropeTables fills cos and sin [P, HS/2] for positions 0..P-1, with the
// inverse frequencies theta^(-2i/HS), adjusted by llama3 rope scaling when
// configured (the same piecewise rule as transformers'
// _compute_llama3_parameters).
func ropeTables(c Config, P int) (cos, sin []float32) {
	hs := c.HeadSize()
	half := hs / 2
	inv := make([]float64, half)
	for i := range inv {
		inv[i] = 1 / math.Pow(c.RopeTheta, float64(2*i)/float64(hs))
	}
	if s := c.RopeScaling; s != nil && s.Kind() == "llama3" {
		old := float64(s.OriginalMaxPositionEmbeddings)
		lowWavelen := old / s.LowFreqFactor
		highWavelen := old / s.HighFreqFactor
		for i, f := range inv {
			wavelen := 2 * math.Pi / f
			switch {
			case wavelen < highWavelen:
				// high frequency: unchanged
			case wavelen > lowWavelen:
				inv[i] = f / s.Factor
			default:
				smooth := (old/wavelen - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
				inv[i] = (1-smooth)*f/s.Factor + smooth*f
			}
		}
	}
	cos = make([]float32, P*half)
	sin = make([]float32, P*half)
	for p := 0; p < P; p++ {
		for i, f := range inv {
			// float32 frequencies as transformers computes them, then the
			// angle in float64 so large positions keep their precision.
			a := float64(p) * float64(float32(f))
			cos[p*half+i] = float32(math.Cos(a))
			sin[p*half+i] = float32(math.Sin(a))
		}
	}
	return cos, sin
}

// ---------------------------------------------------------------------------
// parameters

// Params are the weights of the model, in Hugging Face order and layout,
// over T = []float32 (the host arena) or T = Buf (a backend's copy).
// Linear weights are [out, in] row-major.
type Params[T any] struct {
	Wte    T // [V, C] model.embed_tokens.weight
	Layers []LayerParams[T]
	Norm   T // [C] model.norm.weight
	LMHead T // [V, C] lm_head.weight; the same memory as Wte when tied
}

// LayerParams are the weights of one decoder layer. The bias fields are
// zero values without attention_bias.
type LayerParams[T any] struct {
	InputNorm T // [C] input_layernorm.weight
	Q         T // [QC, C] self_attn.q_proj.weight
	QBias     T // [QC] self_attn.q_proj.bias
	K         T // [KVC, C] self_attn.k_proj.weight
	KBias     T // [KVC] self_attn.k_proj.bias
	V         T // [KVC, C] self_attn.v_proj.weight
	VBias     T // [KVC] self_attn.v_proj.bias
	O         T // [C, QC] self_attn.o_proj.weight
	PostNorm  T // [C] post_attention_layernorm.weight
	Gate      T // [I, C] mlp.gate_proj.weight
	Up        T // [I, C] mlp.up_proj.weight
	Down      T // [C, I] mlp.down_proj.weight
	// QKV is Q, K and V as one [QC+2·KVC, C] tensor and QKVBias their
	// biases as one (zero without attention_bias); GateUp is Gate and Up
	// as one [2I, C] tensor: the same memory, each group adjacent in the
	// arena (layerRank; zero where they are not bound so).
	QKV, QKVBias T
	GateUp       T
}

// Tensor is a named tensor: from Model.Tensors, a view into the
// parameter arena.
type Tensor = arch.Tensor

// spec is one parameter tensor of Config.Tensors with its arena offset.
type spec struct {
	arch.TensorSpec
	off int
}

// layerRank orders a decoder layer's tensors in the arena: Hugging Face's
// order, but for the q, k and v weights side by side and then their
// biases, so that one view covers the three projections (LayerParams.QKV
// and QKVBias) and one product can make them.
var layerRank = map[string]int{
	"input_layernorm.weight": 0, "self_attn.q_proj.weight": 1, "self_attn.k_proj.weight": 2,
	"self_attn.v_proj.weight": 3, "self_attn.q_proj.bias": 4, "self_attn.k_proj.bias": 5,
	"self_attn.v_proj.bias": 6, "self_attn.o_proj.weight": 7, "post_attention_layernorm.weight": 8,
	"mlp.gate_proj.weight": 9, "mlp.up_proj.weight": 10, "mlp.down_proj.weight": 11,
}

// layout gives each tensor of c.Tensors its offset in the arena and
// returns the arena size; specs stay in c.Tensors' order, and the arena
// holds each layer's tensors in layerRank's. A tied lm_head has no entry
// of its own.
func layout(c Config) ([]spec, int) {
	ts := c.Tensors()
	specs := make([]spec, len(ts))
	order := make([]int, len(ts)) // arena order: indices into ts
	for i := range order {
		order[i] = i
	}
	rank := func(i int) (layer, r int) {
		rest, ok := strings.CutPrefix(ts[i].Name, "model.layers.")
		if !ok {
			if i == 0 {
				return -1, 0 // the embedding first
			}
			return c.NumHiddenLayers, i // the final norm and lm_head last
		}
		num, name, _ := strings.Cut(rest, ".")
		l, _ := strconv.Atoi(num)
		return l, layerRank[name]
	}
	slices.SortStableFunc(order, func(a, b int) int {
		la, ra := rank(a)
		lb, rb := rank(b)
		return cmp.Or(cmp.Compare(la, lb), cmp.Compare(ra, rb))
	})
	off := 0
	for _, i := range order {
		specs[i] = spec{ts[i], off}
		off += arch.Numel(ts[i].Shape)
	}
	return specs, off
}

// tensorOrder copies an arena-shaped x into the order of c.Tensors, one
// tensor after another (toArena false), or back (toArena true).
func tensorOrder(specs []spec, x []float32, toArena bool) []float32 {
	out := make([]float32, len(x))
	at := 0
	for _, s := range specs {
		n := arch.Numel(s.Shape)
		if toArena {
			copy(out[s.off:s.off+n], x[at:at+n])
		} else {
			copy(out[at:at+n], x[s.off:s.off+n])
		}
		at += n
	}
	return out
}

// bindParams builds Params over an arena through view(off, n).
func bindParams[T any](c Config, view func(off, n int) T) Params[T] {
	specs, _ := layout(c)
	byName := make(map[string]T, len(specs))
	offs := make(map[string]int, len(specs))
	for _, s := range specs {
		byName[s.Name] = view(s.off, arch.Numel(s.Shape))
		offs[s.Name] = s.off
	}
	p := Params[T]{Wte: byName["model.embed_tokens.weight"], Norm: byName["model.norm.weight"]}
	p.LMHead = p.Wte
	if !c.TieWordEmbeddings {
		p.LMHead = byName["lm_head.weight"]
	}
	// adjacent returns the window of layer l's tensors names (of sizes)
	// where they lie one after another in that order.
	adjacent := func(l int, names []string, sizes []int) (off, n int, ok bool) {
		at := -1
		for i, s := range names {
			o, found := offs[fmt.Sprintf("model.layers.%d.%s", l, s)]
			if !found || at >= 0 && o != at {
				return 0, 0, false
			}
			if at < 0 {
				off = o
			}
			at = o + sizes[i]
		}
		return off, at - off, true
	}
	d := dimsOf(c)
	groups := []struct {
		names []string
		sizes []int
		view  func(*LayerParams[T]) *T
	}{
		{[]string{"mlp.gate_proj.weight", "mlp.up_proj.weight"}, []int{d.I * d.C, d.I * d.C},
			func(w *LayerParams[T]) *T { return &w.GateUp }},
		{[]string{"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"},
			[]int{d.QC * d.C, d.KVC * d.C, d.KVC * d.C}, func(w *LayerParams[T]) *T { return &w.QKV }},
		{[]string{"self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"},
			[]int{d.QC, d.KVC, d.KVC}, func(w *LayerParams[T]) *T { return &w.QKVBias }},
	}
	p.Layers = make([]LayerParams[T], c.NumHiddenLayers)
	for l := range p.Layers {
		n := func(s string) T { return byName[fmt.Sprintf("model.layers.%d.%s", l, s)] }
		p.Layers[l] = LayerParams[T]{
			InputNorm: n("input_layernorm.weight"),
			Q:         n("self_attn.q_proj.weight"), QBias: n("self_attn.q_proj.bias"),
			K: n("self_attn.k_proj.weight"), KBias: n("self_attn.k_proj.bias"),
			V: n("self_attn.v_proj.weight"), VBias: n("self_attn.v_proj.bias"),
			O:        n("self_attn.o_proj.weight"),
			PostNorm: n("post_attention_layernorm.weight"),
			Gate:     n("mlp.gate_proj.weight"),
			Up:       n("mlp.up_proj.weight"),
			Down:     n("mlp.down_proj.weight"),
		}
		// Views over tensors that layout puts side by side.
		for _, g := range groups {
			if off, n, ok := adjacent(l, g.names, g.sizes); ok {
				*g.view(&p.Layers[l]) = view(off, n)
			}
		}
	}
	return p
}

// Model is a configuration and its parameters in one host arena.
// It is not safe for concurrent mutation; Trainer and Sampler read or
// write it as documented on them.
type Model struct {
	Config Config
	Params Params[[]float32] // views into the arena
	arena  []float32
	specs  []spec
}

// NumParams is the number of parameters (a tied lm_head counted once).
func (m *Model) NumParams() int { return len(m.arena) }

// Tensors returns the parameter tensors in Hugging Face order, as views
// into the arena: writing Data changes the model. A tied lm_head is not
// listed (it is model.embed_tokens.weight).
func (m *Model) Tensors() []Tensor {
	ts := make([]Tensor, len(m.specs))
	for i, s := range m.specs {
		n := arch.Numel(s.Shape)
		ts[i] = Tensor{Name: s.Name, Shape: append([]int(nil), s.Shape...), Data: m.arena[s.off : s.off+n : s.off+n]}
	}
	return ts
}

// NewZeroModel returns a model with all parameters zero, to be filled
// through Tensors (e.g. from safetensors).
func NewZeroModel(cfg Config) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	specs, size := layout(cfg)
	arena := make([]float32, size)
	m := &Model{Config: cfg, arena: arena, specs: specs}
	m.Params = bindParams(cfg, func(off, n int) []float32 { return arena[off : off+n : off+n] })
	return m, nil
}

// NewModel returns a model with weights drawn from seed: normal(0, 0.02)
// for matrices, ones for norm weights, zeros for biases, as transformers
// initialises Llama (initializer_range 0.02). The result depends only on
// cfg and seed.
func NewModel(cfg Config, seed uint64) (*Model, error) {
	m, err := NewZeroModel(cfg)
	if err != nil {
		return nil, err
	}
	r := rand.New(rand.NewPCG(seed, 0x5357_4552_4c00))
	for _, t := range m.Tensors() {
		switch {
		case len(t.Shape) == 1 && strings.HasSuffix(t.Name, "norm.weight"):
			for i := range t.Data {
				t.Data[i] = 1
			}
		case len(t.Shape) == 1: // biases
		default:
			for i := range t.Data {
				t.Data[i] = float32(0.02 * r.NormFloat64())
			}
		}
	}
	return m, nil
}

// ---------------------------------------------------------------------------
// activations

// acts are the forward activations kept for the backward pass, sized for
// at most B*T rows.
type acts struct {
	res    []Buf // L+1 x [N, C]: the residual stream entering each layer, then the last
	ln1    []Buf // L x [N, C]
	rstd1  []Buf // L x [N]
	q      []Buf // L x [N, QC] after RoPE
	k      []Buf // L x [N, KVC] after RoPE
	v      []Buf // L x [N, KVC]
	att    []Buf // L x [B, NH, T, T] attention probabilities ([B, NH, T] log-sum-exps with FlashAttention)
	atty   []Buf // L x [N, QC] attention output
	resMid []Buf // L x [N, C] residual after attention
	ln2    []Buf // L x [N, C]
	rstd2  []Buf // L x [N]
	gate   []Buf // L x [N, I]
	up     []Buf // L x [N, I]
	gu     []Buf // L x [N, 2I]: gate and up side by side, instead of gate and up (glu set); bf16 like ln2
	swi    []Buf // L x [N, I]
	lnf    Buf   // [N, C]
	rstdf  Buf   // [N]
	logits Buf   // [N, V]
	lse    Buf   // [N]
	logp   Buf   // [N]
	// rawlogp and rawlse are the log-probs at temperature 1 of a forward
	// at another temperature (the trainer allocates them; nil in other
	// forwards).
	rawlogp, rawlse Buf
	proj            Buf // [N, C] output of o_proj and down_proj before the residual add
	// glu, when set, runs each MLP's gate and up projections as one
	// product into gu (pairedGLU).
	glu PairedSwiGLU
	// pq, when set, runs each layer's q, k and v projections as one
	// product into qkv [N, QC+2·KVC] (packedQKV), split into q, k and v.
	pq  PackedQKV
	qkv Buf
}

// gradActs are the backward scratch buffers, shared by all layers.
type gradActs struct {
	dlogits Buf // [N, V]
	dlogp   Buf // [N]
	dlnf    Buf // [N, C]
	dres    Buf // [N, C] gradient of the residual stream
	dln     Buf // [N, C]
	datty   Buf // [N, QC]
	dq      Buf // [N, QC]
	dk      Buf // [N, KVC]
	dv      Buf // [N, KVC]
	datt    Buf // [B, NH, T, T] ([B, NH, T] with FlashAttention)
	dswi    Buf // [N, I]
	dgate   Buf // [N, I]
	dup     Buf // [N, I]
	dgu     Buf // [N, 2I] instead of dgate and dup with acts.glu
	dqkv    Buf // [N, QC+2·KVC] with acts.pq
}

// arena hands out consecutive windows of one backend allocation.
type arena struct {
	be   Backend
	buf  Buf
	off  int
	size int
	// h16 lays out the activations only matrix products read, in a
	// buffer of their own from BF16Activations; nil: in this arena.
	h16 *arena
}

// half is the arena of the activations only products read.
func (a *arena) half() *arena {
	if a.h16 != nil {
		return a.h16
	}
	return a
}

// take returns the next n elements; with buf nil it only counts.
func (a *arena) take(n int) Buf {
	a.off += n
	if a.buf == nil {
		return nil
	}
	return a.be.Slice(a.buf, a.off-n, n)
}

func (a *arena) takeL(L, n int) []Buf {
	bs := make([]Buf, L)
	for i := range bs {
		bs[i] = a.take(n)
	}
	return bs
}

// takeShared returns L views of one n-element window: the per-layer
// buffers of activation checkpointing, which every layer overwrites.
func (a *arena) takeShared(L, n int) []Buf {
	b := a.take(n)
	bs := make([]Buf, L)
	for i := range bs {
		bs[i] = b
	}
	return bs
}

// allocArena sizes a layout with a counting pass of fill, allocates one
// buffer and runs fill again to slice it. What fill takes from a.half()
// (the activations only matrix products read) comes from one AllocBF16
// of a BF16Activations backend, returned as half; on other backends from
// the main buffer.
func allocArena(be Backend, fill func(a *arena)) (main, half Buf, err error) {
	b16, _ := be.(BF16Activations)
	newArena := func(buf Buf) *arena { return &arena{be: be, buf: buf} }
	count := newArena(nil)
	if b16 != nil {
		count.h16 = newArena(nil)
	}
	fill(count)
	if main, err = be.Alloc(count.off); err != nil {
		return nil, nil, fmt.Errorf("gpu: allocate %d floats: %w", count.off, err)
	}
	a := newArena(main)
	if b16 != nil && count.h16.off > 0 {
		if half, err = b16.AllocBF16(count.h16.off); err != nil {
			be.Free(main)
			return nil, nil, fmt.Errorf("gpu: allocate %d bf16 activations: %w", count.h16.off, err)
		}
		a.h16 = newArena(half)
	}
	fill(a)
	return main, half, nil
}

// dims are the derived sizes of a config.
type dims struct {
	C, I, V, L, NH, NKV, HS, QC, KVC int
	eps                              float32
}

func dimsOf(c Config) dims {
	hs := c.HeadSize()
	return dims{
		C: c.HiddenSize, I: c.IntermediateSize, V: c.VocabSize, L: c.NumHiddenLayers,
		NH: c.NumAttentionHeads, NKV: c.KVHeads(), HS: hs,
		QC: c.NumAttentionHeads * hs, KVC: c.KVHeads() * hs, eps: float32(c.RMSNormEps),
	}
}

// trainActs lays out the activations for B*T rows; with glu, the MLP's
// gate and up projections as one [N, 2I] buffer a layer; with pq, one
// [N, QC+2·KVC] buffer for the q, k and v products and one for their
// gradients, and q, k and v in bf16 where pq says SplitQKV may write them
// so for the flash attention that reads them; with glu and dswi16 (no
// adapter on the down projection), its input gradient from the bf16
// arena as well. forwardOnly (a scorer) lays out the forward pass only,
// its layers sharing buffers as with ckpt, and no gradients.
func trainActs(d dims, B, T int, a *arena, ckpt, forwardOnly bool, glu PairedSwiGLU, dswi16 bool, pq PackedQKV, flash bool) (acts, gradActs) {
	N := B * T
	// With activation checkpointing every layer but the residual stream
	// shares one set of buffers: the backward pass recomputes a layer's
	// activations from its input res[l] before using them.
	// ln1, ln2, swi and lnf are read only by matrix products: they come
	// from a.half() (bf16 on a BF16Activations backend).
	h := a.half()
	layer, layer16 := a.takeL, h.takeL
	if ckpt || forwardOnly {
		layer, layer16 = a.takeShared, h.takeShared
	}
	qkvLayer := layer
	if pq != nil && flash && pq.SplitQKV16(d.NH, d.NKV, d.HS) {
		qkvLayer = layer16
	}
	ac := acts{
		res: a.takeL(d.L+1, N*d.C), ln1: layer16(d.L, N*d.C), rstd1: layer(d.L, N),
		q: qkvLayer(d.L, N*d.QC), k: qkvLayer(d.L, N*d.KVC), v: qkvLayer(d.L, N*d.KVC),
		att: layer(d.L, attLen(a.be, d, B, T)), atty: layer(d.L, N*d.QC), resMid: layer(d.L, N*d.C),
		ln2: layer16(d.L, N*d.C), rstd2: layer(d.L, N),
		swi: layer16(d.L, N*d.I),
		lnf: h.take(N * d.C), rstdf: a.take(N), logits: a.take(N * d.V), lse: a.take(N), logp: a.take(N),
		proj: a.take(N * d.C), glu: glu,
	}
	if glu != nil {
		// Read only by SwiGLU: the product writes it in bf16 too.
		ac.gu = layer16(d.L, 2*N*d.I)
	} else {
		ac.gate, ac.up = layer(d.L, N*d.I), layer(d.L, N*d.I)
	}
	if forwardOnly {
		if pq != nil {
			ac.pq, ac.qkv = pq, a.take(N*(d.QC+2*d.KVC))
		}
		return ac, gradActs{}
	}
	// dlogits, dgate and dup are read only by the products of the LM
	// head and of the gate and up projections (none has a bias): they
	// come from a.half() too.
	g := gradActs{
		dlogits: h.take(N * d.V), dlogp: a.take(N), dlnf: a.take(N * d.C), dres: a.take(N * d.C),
		dln: a.take(N * d.C), datty: a.take(N * d.QC), dq: a.take(N * d.QC), dk: a.take(N * d.KVC),
		dv: a.take(N * d.KVC), datt: a.take(attLen(a.be, d, B, T)),
	}
	if glu != nil {
		// The down projection's input gradient is read only by the
		// paired SwiGLU's backward: bf16 too, unless an adapter adds to it.
		g.dgu = h.take(2 * N * d.I)
		if dswi16 {
			g.dswi = h.take(N * d.I)
		} else {
			g.dswi = a.take(N * d.I)
		}
	} else {
		g.dswi = a.take(N * d.I)
		g.dgate, g.dup = h.take(N*d.I), h.take(N*d.I)
	}
	if pq != nil {
		ac.pq, ac.qkv, g.dqkv = pq, a.take(N*(d.QC+2*d.KVC)), a.take(N*(d.QC+2*d.KVC))
	}
	return ac, g
}

// ---------------------------------------------------------------------------
// forward

// step is one forward call's geometry: B sequences of T tokens at
// positions pos0..pos0+T-1 (pos0 is 0 in training). The BatchSampler
// (batch.go) runs its own forward over per-sequence KV caches.
type step struct {
	B, T, pos0 int
	// temp, when neither 0 nor 1, divides the logits before the
	// log-softmax (the sampling temperature); the log-probs at
	// temperature 1 go to acts.rawlogp first when it is allocated.
	temp float64
}

func (s step) scaled() bool { return s.temp != 0 && s.temp != 1 }

// forward runs the decoder over tokens[B*T] and, when targets is not nil,
// the log-probabilities of targets[B*T] into ac.logp. Every layer keeps
// its own activations for the backward pass. lo, when not nil, adds the
// LoRA adapters' low-rank path to the adapted linear layers.
func forward(be Backend, d dims, p *Params[Buf], lo *loraRun, ac *acts, cos, sin Buf, s step, tokens, targets []int32) {
	N := s.B * s.T
	fa := flashOf(be, d)
	if s.pos0 != 0 {
		fa = nil
	}
	be.EmbeddingForward(ac.res[0], p.Wte, tokens, d.C)
	for i := range d.L {
		forwardLayer(be, d, p, lo, ac, cos, sin, s, fa, i)
	}
	be.RMSNormForward(ac.lnf, ac.rstdf, ac.res[d.L], p.Norm, N, d.C, d.eps)
	be.MatmulForward(ac.logits, ac.lnf, p.LMHead, nil, N, d.C, d.V)
	if targets != nil {
		if s.scaled() {
			if ac.rawlogp != nil {
				be.LogProbForward(ac.rawlogp, ac.rawlse, ac.logits, targets, d.V)
			}
			// logits += (1/τ − 1)·logits: logits/τ in place, with the ops
			// every backend has.
			be.Axpy(ac.logits, ac.logits, float32(1/s.temp-1), N*d.V)
		}
		be.LogProbForward(ac.logp, ac.lse, ac.logits, targets, d.V)
	}
}

// forwardLayer runs decoder layer i from ac.res[i] to ac.res[i+1],
// keeping its activations in the layer's buffers of ac.
func forwardLayer(be Backend, d dims, p *Params[Buf], lo *loraRun, ac *acts, cos, sin Buf, s step, fa FlashAttention, i int) {
	B, T := s.B, s.T
	N := B * T
	Tk := s.pos0 + T
	w := &p.Layers[i]
	in, out := ac.res[i], ac.res[i+1]
	be.RMSNormForward(ac.ln1[i], ac.rstd1[i], in, w.InputNorm, N, d.C, d.eps)
	if ac.pq != nil {
		be.MatmulForward(ac.qkv, ac.ln1[i], w.QKV, w.QKVBias, N, d.C, d.QC+2*d.KVC)
		ac.pq.SplitQKV(ac.q[i], ac.k[i], ac.v[i], ac.qkv, cos, sin, B, T, d.NH, d.NKV, d.HS, s.pos0)
	} else {
		be.MatmulForward(ac.q[i], ac.ln1[i], w.Q, w.QBias, N, d.C, d.QC)
		be.MatmulForward(ac.k[i], ac.ln1[i], w.K, w.KBias, N, d.C, d.KVC)
		be.MatmulForward(ac.v[i], ac.ln1[i], w.V, w.VBias, N, d.C, d.KVC)
		lo.forward(be, i, modQ, ac.q[i], ac.ln1[i], N, d.C, d.QC)
		lo.forward(be, i, modK, ac.k[i], ac.ln1[i], N, d.C, d.KVC)
		lo.forward(be, i, modV, ac.v[i], ac.ln1[i], N, d.C, d.KVC)
		be.RoPEForward(ac.q[i], cos, sin, B, T, d.NH, d.HS, s.pos0)
		be.RoPEForward(ac.k[i], cos, sin, B, T, d.NKV, d.HS, s.pos0)
	}
	if fa != nil {
		fa.AttentionForwardLSE(ac.atty[i], ac.att[i], ac.q[i], ac.k[i], ac.v[i], B, T, d.NH, d.NKV, d.HS)
	} else {
		be.AttentionForward(ac.atty[i], ac.att[i], ac.q[i], ac.k[i], ac.v[i], B, T, Tk, d.NH, d.NKV, d.HS)
	}
	be.MatmulForward(ac.proj, ac.atty[i], w.O, nil, N, d.QC, d.C)
	lo.forward(be, i, modO, ac.proj, ac.atty[i], N, d.QC, d.C)
	addNorm(be, ac.resMid[i], ac.ln2[i], ac.rstd2[i], in, ac.proj, w.PostNorm, N, d.C, d.eps)
	if ac.glu != nil {
		be.MatmulForward(ac.gu[i], ac.ln2[i], w.GateUp, nil, N, d.C, 2*d.I)
		ac.glu.SwiGLUPairForward(ac.swi[i], ac.gu[i], N, d.I)
	} else {
		be.MatmulForward(ac.gate[i], ac.ln2[i], w.Gate, nil, N, d.C, d.I)
		be.MatmulForward(ac.up[i], ac.ln2[i], w.Up, nil, N, d.C, d.I)
		lo.forward(be, i, modGate, ac.gate[i], ac.ln2[i], N, d.C, d.I)
		lo.forward(be, i, modUp, ac.up[i], ac.ln2[i], N, d.C, d.I)
		be.SwiGLUForward(ac.swi[i], ac.gate[i], ac.up[i], N*d.I)
	}
	be.MatmulForward(ac.proj, ac.swi[i], w.Down, nil, N, d.I, d.C)
	lo.forward(be, i, modDown, ac.proj, ac.swi[i], N, d.I, d.C)
	be.Add(out, ac.resMid[i], ac.proj, N*d.C)
}

// ---------------------------------------------------------------------------
// backward

// backward accumulates into g the gradient of sum_n dlogp[n]*logp[n],
// given a training forward over the same tokens and targets. Rows with
// dlogp 0 (prompt and padding) cost nothing in the log-prob backward.
// A nil buffer of g is a frozen parameter: its gradient is skipped (LoRA
// leaves every base parameter nil). lo, when not nil, accumulates the
// adapters' gradients into its own buffers.
//
// With ckpt (activation checkpointing: trainActs shares one set of layer
// buffers) each layer's activations are recomputed from its input before
// its backward; the last layer's are still there from the forward pass.
func backward(be Backend, d dims, p, g *Params[Buf], lo *loraRun, ac *acts, ga *gradActs, cos, sin Buf, B, T int, tokens, targets []int32, ckpt bool) {
	N := B * T
	be.Zero(ga.dlogits)
	be.LogProbBackward(ga.dlogits, ga.dlogp, ac.logits, ac.lse, targets, d.V)
	be.Zero(ga.dlnf)
	be.MatmulBackward(ga.dlnf, g.LMHead, nil, ga.dlogits, ac.lnf, p.LMHead, N, d.C, d.V)
	be.Zero(ga.dres)
	be.RMSNormBackward(ga.dres, g.Norm, ga.dlnf, ac.res[d.L], p.Norm, ac.rstdf, N, d.C)
	fa := flashOf(be, d)
	for l := d.L - 1; l >= 0; l-- {
		if ckpt && l < d.L-1 {
			forwardLayer(be, d, p, lo, ac, cos, sin, step{B: B, T: T}, fa, l)
		}
		w, gw := &p.Layers[l], &g.Layers[l]
		// out = resMid + down(swiglu(gate(ln2), up(ln2))): dres flows
		// through unchanged and the MLP branch adds to it.
		be.Zero(ga.dswi)
		be.MatmulBackward(ga.dswi, gw.Down, nil, ga.dres, ac.swi[l], w.Down, N, d.I, d.C)
		lo.backward(be, l, modDown, ga.dswi, ga.dres, ac.swi[l], N, d.I, d.C)
		if ac.glu != nil {
			be.Zero(ga.dgu)
			ac.glu.SwiGLUPairBackward(ga.dgu, ga.dswi, ac.gu[l], N, d.I)
			be.Zero(ga.dln)
			be.MatmulBackward(ga.dln, gw.GateUp, nil, ga.dgu, ac.ln2[l], w.GateUp, N, d.C, 2*d.I)
		} else {
			be.Zero(ga.dgate)
			be.Zero(ga.dup)
			be.SwiGLUBackward(ga.dgate, ga.dup, ga.dswi, ac.gate[l], ac.up[l], N*d.I)
			be.Zero(ga.dln)
			be.MatmulBackward(ga.dln, gw.Gate, nil, ga.dgate, ac.ln2[l], w.Gate, N, d.C, d.I)
			be.MatmulBackward(ga.dln, gw.Up, nil, ga.dup, ac.ln2[l], w.Up, N, d.C, d.I)
			lo.backward(be, l, modGate, ga.dln, ga.dgate, ac.ln2[l], N, d.C, d.I)
			lo.backward(be, l, modUp, ga.dln, ga.dup, ac.ln2[l], N, d.C, d.I)
		}
		be.RMSNormBackward(ga.dres, gw.PostNorm, ga.dln, ac.resMid[l], w.PostNorm, ac.rstd2[l], N, d.C)
		// resMid = in + o(attention(rope(q), rope(k), v)).
		be.Zero(ga.datty)
		be.MatmulBackward(ga.datty, gw.O, nil, ga.dres, ac.atty[l], w.O, N, d.QC, d.C)
		lo.backward(be, l, modO, ga.datty, ga.dres, ac.atty[l], N, d.QC, d.C)
		be.Zero(ga.dq)
		be.Zero(ga.dk)
		be.Zero(ga.dv)
		if fa != nil {
			fa.AttentionBackwardLSE(ga.dq, ga.dk, ga.dv, ga.datt, ga.datty, ac.atty[l], ac.q[l], ac.k[l], ac.v[l], ac.att[l], B, T, d.NH, d.NKV, d.HS)
		} else {
			be.AttentionBackward(ga.dq, ga.dk, ga.dv, ga.datt, ga.datty, ac.q[l], ac.k[l], ac.v[l], ac.att[l], B, T, T, d.NH, d.NKV, d.HS)
		}
		be.Zero(ga.dln)
		if ac.pq != nil {
			ac.pq.MergeQKV(ga.dqkv, ga.dq, ga.dk, ga.dv, cos, sin, B, T, d.NH, d.NKV, d.HS)
			be.MatmulBackward(ga.dln, gw.QKV, gw.QKVBias, ga.dqkv, ac.ln1[l], w.QKV, N, d.C, d.QC+2*d.KVC)
		} else {
			be.RoPEBackward(ga.dq, cos, sin, B, T, d.NH, d.HS, 0)
			be.RoPEBackward(ga.dk, cos, sin, B, T, d.NKV, d.HS, 0)
			be.MatmulBackward(ga.dln, gw.Q, gw.QBias, ga.dq, ac.ln1[l], w.Q, N, d.C, d.QC)
			be.MatmulBackward(ga.dln, gw.K, gw.KBias, ga.dk, ac.ln1[l], w.K, N, d.C, d.KVC)
			be.MatmulBackward(ga.dln, gw.V, gw.VBias, ga.dv, ac.ln1[l], w.V, N, d.C, d.KVC)
			lo.backward(be, l, modQ, ga.dln, ga.dq, ac.ln1[l], N, d.C, d.QC)
			lo.backward(be, l, modK, ga.dln, ga.dk, ac.ln1[l], N, d.C, d.KVC)
			lo.backward(be, l, modV, ga.dln, ga.dv, ac.ln1[l], N, d.C, d.KVC)
		}
		be.RMSNormBackward(ga.dres, gw.InputNorm, ga.dln, ac.res[l], w.InputNorm, ac.rstd1[l], N, d.C)
	}
	if g.Wte != nil {
		be.EmbeddingBackward(g.Wte, ga.dres, tokens, d.C)
	}
}
