package gpu

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
)

// PackedMatmul is an optional Backend capability for products against
// weights that stay fixed over many calls, as in decoding: the weight is
// stored once in the backend's preferred layout and every step multiplies
// a few rows (one per sequence) by it.
//
// A backend whose MatmulPacked is batch-invariant (row n of out depends
// only on row n of inp, bitwise, whatever N and the other rows), as the
// CPU backend's is, lets the BatchSampler promise that a sequence samples
// the same tokens alone or in any batch. A backend with FrozenWeights
// (CUDA: bf16-only weights in its bf16 mode) needs no packed copy and is
// not asked for one; cuBLAS picks kernels by shape, so its rows agree
// across batches only to rounding. A backend with neither runs
// MatmulForward on float32 weights.
type PackedMatmul interface {
	// PackedLen is the number of elements of the packed form of w[OC,C];
	// 0 when the backend does not pack in its present mode (then the
	// BatchSampler multiplies by the plain weights).
	PackedLen(OC, C int) int
	// PackWeight writes w[OC,C] (Hugging Face layout) in packed form to
	// dst, which has PackedLen(OC, C) elements.
	PackWeight(dst, w Buf, OC, C int)
	// MatmulPacked is MatmulForward with the weight packed by PackWeight:
	// out[N,OC] = inp[N,C] @ w^T + bias; bias may be nil.
	MatmulPacked(out, inp, wp, bias Buf, N, C, OC int)
}

// Seq is one sequence of a BatchSampler: a prompt, its sampling
// parameters and, once Done, its completion.
type Seq struct {
	prompt []int32
	p      SamplingParams
	rng    *rand.Rand
	limit  int     // most tokens to generate
	toks   []int32 // prompt then the generated tokens
	pos    int     // tokens of toks in the slot's KV cache
	slot   int     // -1 while waiting
	row    int     // this step: first activation row (-1: prefilled by a leader)
	lead   *Seq    // this step: the sequence with the same prompt that prefills for it
	out    Completion
	done   bool
}

// Done reports whether the sequence has finished (a stop token or its
// length limit).
func (q *Seq) Done() bool { return q.done }

// Completion returns the generated tokens so far; final once Done.
func (q *Seq) Completion() Completion { return q.out }

// BatchSampler generates many completions at once: every Step runs one
// forward pass over all sequences in flight, one row for each decoding
// sequence and the whole prompt of each newly admitted one, so the
// matrix products are matrix-matrix. Each sequence has its own KV cache
// slot; when a sequence finishes its slot goes to the next waiting one
// (continuous batching). Sequences admitted in the same step with equal
// prompts share one prefill: the leader's cache rows and first logits are
// copied to the others.
//
// Each sequence samples from its own random stream (SamplingParams.Seed)
// and, on a backend with a batch-invariant PackedMatmul (the CPU's), every
// op of the forward computes a row independently of the other rows: a
// sequence gets the same tokens, bit for bit, alone or in any batch. Log-probabilities are those of
// Completion (temperature 1, untruncated), as the Trainer computes them.
//
// A BatchSampler keeps its own copy of the weights (see SetWeights). It
// is not safe for concurrent use.
type BatchSampler struct {
	be     Backend
	pm     PackedMatmul // nil: MatmulForward
	cfg    Config
	d      dims
	maxSeq int
	slots  int
	rows   int // most activation rows a step

	params   Params[Buf]
	paramBuf Buf
	// With a FrozenWeights backend the weights are a frozen upload
	// (bf16 only in a bf16 mode: half the memory, and no conversion of
	// every weight at every step), vecBuf their norms and biases, and
	// SetWeights uploads anew instead of writing into them.
	fw       FrozenWeights
	vecBuf   Buf
	packed   Params[Buf] // the linear weights in packed form (pm != nil)
	packBuf  Buf
	cos, sin Buf

	// Activations of one step, for up to rows rows; the layers reuse them.
	x, ln, rstd, q, k, v, atty, resMid, proj, gate, up, swi Buf
	// glu, when set, runs each MLP's gate and up projections as one
	// product into gu [rows, 2I] instead of gate and up (pairedGLU).
	glu                            PairedSwiGLU
	gu                             Buf
	att                            Buf // [NH, maxSeq, maxSeq] attention probabilities of one sequence
	last, lastLn, lastRstd, logits Buf // [slots, C], [slots, C], [slots], [slots, V]
	actBuf                         Buf
	act16                          Buf // ln, swi, lastLn from BF16Activations (nil without)

	cache []Buf // per slot: k then v of every layer, [2, L, maxSeq, KVC]; nil until first used
	// With a RaggedAttention backend, one cache for all slots instead,
	// [2, L, slots, maxSeq, KVC] (k of every layer, then v), so a layer's
	// rows of every slot are one buffer; and this step's row indices.
	ra                      RaggedAttention
	big                     Buf
	rowPos, rowDst, rowBase []int32 // per row: position, cache row (slot*maxSeq+pos), slot's first cache row
	rowCnt                  []int32 // per row: keys it sees (pos+1)

	free    []int  // free slots, lowest first
	active  []*Seq // in admission order
	waiting []*Seq

	tokens     []int32   // this step's input tokens
	hostLogits []float32 // [slots, V]
	pickers    []picker  // one per sampling goroutine
	// onDevice: this step's rows were picked by the backend (every active
	// sequence greedy, backend a GreedyPicker) into devTok and devLogp.
	onDevice bool
	devTok   []int32
	devLogp  []float32

	// noCache recomputes each sequence's whole prefix at every step
	// (Sampler.NoCache, for tests and benchmarks).
	noCache bool
	err     error
	sampled int64 // tokens sampled so far (Sampled)
}

// NewBatchSampler returns a sampler of up to slots sequences at once, each
// of up to maxSeq tokens (prompt + completion), with m's weights.
func NewBatchSampler(m *Model, be Backend, maxSeq, slots int) (*BatchSampler, error) {
	if maxSeq <= 0 || maxSeq > m.Config.MaxPositionEmbeddings {
		return nil, fmt.Errorf("gpu: sampler max sequence %d outside 1..%d (max_position_embeddings)", maxSeq, m.Config.MaxPositionEmbeddings)
	}
	if slots <= 0 {
		return nil, fmt.Errorf("gpu: sampler batch of %d sequences, want at least 1", slots)
	}
	s := &BatchSampler{be: be, cfg: m.Config, d: dimsOf(m.Config), maxSeq: maxSeq, slots: slots}
	// A step holds one row per decoding sequence plus the prompts
	// admitted: with this budget a prompt (< maxSeq) always fits beside
	// the other slots' decoding rows.
	s.rows = maxSeq + slots
	// A backend that holds frozen weights compactly needs no packed copy
	// beside them; one that packs keeps float32 weights to pack from.
	if fw, ok := be.(FrozenWeights); ok {
		s.fw = fw
	} else if pm, ok := be.(PackedMatmul); ok && pm.PackedLen(1, 1) > 0 {
		s.pm = pm
	}
	var err error
	if s.fw == nil {
		if s.paramBuf, err = be.Alloc(len(m.arena)); err != nil {
			return nil, fmt.Errorf("gpu: allocate sampler weights: %w", err)
		}
		s.params = bindParams(m.Config, func(off, n int) Buf { return be.Slice(s.paramBuf, off, n) })
	}
	if s.pm != nil {
		if s.packBuf, _, err = allocArena(be, func(a *arena) { s.packed = s.packedLayout(a) }); err != nil {
			return nil, err
		}
	} else {
		s.packed.Layers = make([]LayerParams[Buf], s.d.L) // unused
	}
	if err := s.SetWeights(m); err != nil {
		return nil, err
	}
	if s.cos, s.sin, err = uploadRope(be, m.Config, maxSeq); err != nil {
		return nil, err
	}
	d, R, S := s.d, s.rows, slots
	if s.pm == nil { // packed weights have no GateUp
		s.glu = pairedGLU(be, &s.params, nil)
	}
	// ln, swi and lastLn are read only by matrix products: bf16 on a
	// BF16Activations backend, like the trainer's.
	s.actBuf, s.act16, err = allocArena(be, func(a *arena) {
		h := a.half()
		s.x, s.ln, s.rstd = a.take(R*d.C), h.take(R*d.C), a.take(R)
		s.q, s.k, s.v, s.atty = a.take(R*d.QC), a.take(R*d.KVC), a.take(R*d.KVC), a.take(R*d.QC)
		s.resMid, s.proj = a.take(R*d.C), a.take(R*d.C)
		if s.glu != nil {
			s.gu = h.take(2 * R * d.I)
		} else {
			s.gate, s.up = a.take(R*d.I), a.take(R*d.I)
		}
		s.swi = h.take(R * d.I)
		s.att = a.take(d.NH * maxSeq * maxSeq)
		s.last, s.lastLn, s.lastRstd, s.logits = a.take(S*d.C), h.take(S*d.C), a.take(S), a.take(S*d.V)
	})
	if err != nil {
		return nil, err
	}
	s.cache = make([]Buf, slots)
	if ra, ok := be.(RaggedAttention); ok {
		// One cache for every slot, allocated now; a backend that cannot
		// hold it decodes one sequence at a time with per-slot caches.
		if s.big, err = be.Alloc(2 * d.L * S * maxSeq * d.KVC); err == nil {
			s.ra = ra
		}
	}
	s.free = make([]int, slots)
	for i := range s.free {
		s.free[i] = i
	}
	s.hostLogits = make([]float32, S*d.V)
	s.pickers = make([]picker, min(S, runtime.GOMAXPROCS(0)))
	return s, be.Err()
}

// packedLayout lays out the packed linear weights in a (sizes only when
// a counts).
func (s *BatchSampler) packedLayout(a *arena) Params[Buf] {
	d := s.d
	w := func(OC, C int) Buf { return a.take(s.pm.PackedLen(OC, C)) }
	p := Params[Buf]{Layers: make([]LayerParams[Buf], d.L)}
	for l := range p.Layers {
		p.Layers[l] = LayerParams[Buf]{
			Q: w(d.QC, d.C), K: w(d.KVC, d.C), V: w(d.KVC, d.C), O: w(d.C, d.QC),
			Gate: w(d.I, d.C), Up: w(d.I, d.C), Down: w(d.C, d.I),
		}
	}
	p.LMHead = w(d.V, d.C)
	return p
}

// SetWeights replaces the weights with m's (a new policy version); m must
// have the sampler's configuration. Sequences in flight continue on the
// new weights.
func (s *BatchSampler) SetWeights(m *Model) error {
	if m.Config.HiddenSize != s.cfg.HiddenSize || m.Config.NumHiddenLayers != s.cfg.NumHiddenLayers ||
		m.Config.VocabSize != s.cfg.VocabSize || s.paramBuf != nil && len(m.arena) != s.paramBuf.Len() {
		return fmt.Errorf("gpu: SetWeights: model shape differs from the sampler's")
	}
	if s.fw != nil {
		// The old upload goes first, so that two versions never share
		// the device.
		if s.paramBuf != nil {
			s.be.Free(s.paramBuf)
			s.be.Free(s.vecBuf)
		}
		var err error
		if s.paramBuf, s.vecBuf, s.params, err = bindFrozen(s.be, s.fw, m); err != nil {
			s.paramBuf = nil
			return err
		}
		return s.be.Err()
	}
	s.be.Upload(s.paramBuf, m.arena)
	if s.pm != nil {
		d, p, w := s.d, &s.params, &s.packed
		for l := range d.L {
			pl, wl := &p.Layers[l], &w.Layers[l]
			s.pm.PackWeight(wl.Q, pl.Q, d.QC, d.C)
			s.pm.PackWeight(wl.K, pl.K, d.KVC, d.C)
			s.pm.PackWeight(wl.V, pl.V, d.KVC, d.C)
			s.pm.PackWeight(wl.O, pl.O, d.C, d.QC)
			s.pm.PackWeight(wl.Gate, pl.Gate, d.I, d.C)
			s.pm.PackWeight(wl.Up, pl.Up, d.I, d.C)
			s.pm.PackWeight(wl.Down, pl.Down, d.C, d.I)
		}
		s.pm.PackWeight(w.LMHead, p.LMHead, d.V, d.C)
	}
	return s.be.Err()
}

// MaxSeq is the longest prompt + completion in tokens.
func (s *BatchSampler) MaxSeq() int { return s.maxSeq }

// Sampled is the number of tokens sampled so far, over every sequence.
func (s *BatchSampler) Sampled() int64 { return s.sampled }

// Pending is the number of sequences in flight or waiting for a slot.
func (s *BatchSampler) Pending() int { return len(s.active) + len(s.waiting) }

// Submit queues a completion of prompt; it starts at the next Step that
// finds a free slot. The prompt is copied.
func (s *BatchSampler) Submit(prompt []int32, p SamplingParams) (*Seq, error) {
	if len(prompt) == 0 || len(prompt) >= s.maxSeq {
		return nil, fmt.Errorf("gpu: prompt of %d tokens, want 1..%d", len(prompt), s.maxSeq-1)
	}
	for i, t := range prompt {
		if t < 0 || int(t) >= s.d.V {
			return nil, fmt.Errorf("gpu: prompt token %d at %d outside the vocabulary of %d", t, i, s.d.V)
		}
	}
	if p.Temperature < 0 || p.TopP < 0 || p.TopP > 1 || p.TopK < 0 || p.MaxTokens < 0 || p.TopLogProbs < 0 {
		return nil, fmt.Errorf("gpu: bad sampling parameters %+v", p)
	}
	if len(prompt)+len(p.Forced) > s.maxSeq {
		return nil, fmt.Errorf("gpu: prompt of %d tokens and %d forced ones, want at most %d in all", len(prompt), len(p.Forced), s.maxSeq)
	}
	for i, t := range p.Forced {
		if t < 0 || int(t) >= s.d.V {
			return nil, fmt.Errorf("gpu: forced token %d at %d outside the vocabulary of %d", t, i, s.d.V)
		}
	}
	limit := s.maxSeq - len(prompt)
	if p.MaxTokens > 0 {
		limit = min(limit, max(p.MaxTokens, len(p.Forced)))
	}
	q := &Seq{
		prompt: slices.Clone(prompt), p: p, limit: limit, slot: -1,
		rng: rand.New(rand.NewPCG(p.Seed, 0x73616d706c65)),
	}
	q.p.StopTokens = slices.Clone(p.StopTokens)
	q.p.Forced = slices.Clone(p.Forced)
	q.toks = append(make([]int32, 0, len(prompt)+limit), prompt...)
	s.waiting = append(s.waiting, q)
	return q, nil
}

// Cancel drops q, waiting or in flight, and frees its slot.
func (s *BatchSampler) Cancel(q *Seq) {
	if i := slices.Index(s.waiting, q); i >= 0 {
		s.waiting = slices.Delete(s.waiting, i, i+1)
	}
	if i := slices.Index(s.active, q); i >= 0 {
		s.active = slices.Delete(s.active, i, i+1)
		s.release(q)
	}
}

func (s *BatchSampler) release(q *Seq) {
	s.free = append(s.free, q.slot)
	slices.Sort(s.free)
	q.slot = -1
}

// errPoisoned is returned by every Step after a backend failure.
var errPoisoned = errors.New("gpu: batch sampler stopped by an earlier error")

// Step admits waiting sequences into free slots, runs one forward pass
// over every sequence in flight, samples one token for each and returns
// the sequences that finished. It does nothing when none is pending.
func (s *BatchSampler) Step() ([]*Seq, error) {
	if s.err != nil {
		return nil, fmt.Errorf("%w: %w", errPoisoned, s.err)
	}
	if err := s.admit(); err != nil {
		return nil, err
	}
	if len(s.active) == 0 {
		return nil, nil
	}
	if err := s.forward(); err != nil {
		s.err = err
		return nil, err
	}
	s.pick()
	s.sampled += int64(len(s.active)) // one token for each sequence stepped
	var done []*Seq
	s.active = slices.DeleteFunc(s.active, func(q *Seq) bool {
		if q.done {
			done = append(done, q)
			s.release(q)
		}
		return q.done
	})
	return done, nil
}

// SampleAll completes every prompt (at most the sampler's slots at once)
// and returns the completions in order.
func (s *BatchSampler) SampleAll(prompts [][]int32, ps []SamplingParams) ([]Completion, error) {
	if len(prompts) != len(ps) {
		return nil, fmt.Errorf("gpu: %d prompts and %d sampling parameters", len(prompts), len(ps))
	}
	seqs := make([]*Seq, len(prompts))
	cancel := func() {
		for _, q := range seqs {
			if q != nil {
				s.Cancel(q)
			}
		}
	}
	for i := range prompts {
		q, err := s.Submit(prompts[i], ps[i])
		if err != nil {
			cancel()
			return nil, fmt.Errorf("gpu: prompt %d: %w", i, err)
		}
		seqs[i] = q
	}
	for slices.ContainsFunc(seqs, func(q *Seq) bool { return !q.done }) {
		if _, err := s.Step(); err != nil {
			cancel()
			return nil, err
		}
	}
	out := make([]Completion, len(seqs))
	for i, q := range seqs {
		out[i] = q.out
	}
	return out, nil
}

// admit moves waiting sequences into free slots, first come first
// served, while their prompts fit this step's rows. A slot's KV cache is
// allocated when the slot is first used; when that fails the sampler goes
// on with the slots it has, and fails only if it has none.
func (s *BatchSampler) admit() error {
	rows := 0
	for _, q := range s.active {
		rows += s.fresh(q)
	}
	var admitted []*Seq
	for len(s.waiting) > 0 && len(s.free) > 0 {
		q := s.waiting[0]
		q.lead = nil
		if !s.noCache {
			for _, a := range admitted {
				if a.lead == nil && slices.Equal(a.prompt, q.prompt) {
					q.lead = a
					break
				}
			}
		}
		if q.lead == nil {
			if rows+len(q.prompt) > s.rows {
				break
			}
			rows += len(q.prompt)
		}
		if s.ra == nil && s.cache[s.free[0]] == nil {
			c, err := s.be.Alloc(2 * s.d.L * s.maxSeq * s.d.KVC)
			if err != nil {
				s.free = slices.DeleteFunc(s.free, func(i int) bool { return s.cache[i] == nil })
				if len(s.active) == 0 && len(s.free) == 0 {
					return fmt.Errorf("gpu: allocate a KV cache of %d tokens: %w", s.maxSeq, err)
				}
				break
			}
			s.cache[s.free[0]] = c
		}
		q.slot, s.free = s.free[0], s.free[1:]
		q.pos = 0
		s.waiting = s.waiting[1:]
		s.active = append(s.active, q)
		admitted = append(admitted, q)
	}
	return nil
}

// fresh is the number of q's tokens this step feeds: those not yet in
// its cache (all of them with noCache; none when a leader prefills).
func (s *BatchSampler) fresh(q *Seq) int {
	if q.lead != nil {
		return 0
	}
	if s.noCache {
		return len(q.toks)
	}
	return len(q.toks) - q.pos
}

// kv returns the cache windows of slot for layer l: rows [0, n).
func (s *BatchSampler) kv(slot, l, n int) (k, v Buf) {
	L, P, KVC := s.d.L, s.maxSeq, s.d.KVC
	if s.ra != nil {
		S := s.slots
		k = s.be.Slice(s.big, ((l*S)+slot)*P*KVC, n*KVC)
		v = s.be.Slice(s.big, (((L+l)*S)+slot)*P*KVC, n*KVC)
		return k, v
	}
	k = s.be.Slice(s.cache[slot], l*P*KVC, n*KVC)
	v = s.be.Slice(s.cache[slot], (L+l)*P*KVC, n*KVC)
	return k, v
}

// matmul multiplies by a linear weight: its packed form when the backend
// packs, else the plain one.
func (s *BatchSampler) matmul(out, inp, w, wp, bias Buf, N, C, OC int) {
	if s.pm != nil {
		s.pm.MatmulPacked(out, inp, wp, bias, N, C, OC)
		return
	}
	s.be.MatmulForward(out, inp, w, bias, N, C, OC)
}

// forward runs the decoder over this step's fresh tokens of every active
// sequence and leaves the next-token logits of sequence i in row i of
// hostLogits.
func (s *BatchSampler) forward() error {
	be, d := s.be, s.d
	if s.noCache {
		for _, q := range s.active {
			q.pos = 0
		}
	}
	s.tokens = s.tokens[:0]
	for _, q := range s.active {
		q.row = len(s.tokens)
		s.tokens = append(s.tokens, q.toks[q.pos:q.pos+s.fresh(q)]...)
	}
	N := len(s.tokens)
	if s.ra != nil {
		s.raggedRows()
	}
	be.EmbeddingForward(s.x, s.params.Wte, s.tokens, d.C)
	rows := func(b Buf, i, n, width int) Buf { return be.Slice(b, i*width, n*width) }
	// With a RaggedKVBias backend the ragged op adds q, k and v's biases.
	kvb, fold := s.ra.(RaggedKVBias)
	fold = fold && kvb.RaggedBias()
	be.RMSNormForward(s.ln, s.rstd, s.x, s.params.Layers[0].InputNorm, N, d.C, d.eps)
	for l := range d.L {
		w, wp := &s.params.Layers[l], &s.packed.Layers[l]
		qb, kb, vb := w.QBias, w.KBias, w.VBias
		if fold {
			qb, kb, vb = nil, nil, nil
		}
		s.matmul(s.q, s.ln, w.Q, wp.Q, qb, N, d.C, d.QC)
		s.matmul(s.k, s.ln, w.K, wp.K, kb, N, d.C, d.KVC)
		s.matmul(s.v, s.ln, w.V, wp.V, vb, N, d.C, d.KVC)
		if s.ra != nil {
			s.raggedAttention(l, fold)
		}
		// Attention is per sequence: its rows, at its positions, over
		// its own cache.
		for _, q := range s.active {
			if s.ra != nil {
				break
			}
			T := s.fresh(q)
			if T == 0 {
				continue
			}
			qr, kr, vr := rows(s.q, q.row, T, d.QC), rows(s.k, q.row, T, d.KVC), rows(s.v, q.row, T, d.KVC)
			be.RoPEForward(qr, s.cos, s.sin, 1, T, d.NH, d.HS, q.pos)
			be.RoPEForward(kr, s.cos, s.sin, 1, T, d.NKV, d.HS, q.pos)
			kAll, vAll := s.kv(q.slot, l, q.pos+T)
			be.Copy(be.Slice(kAll, q.pos*d.KVC, T*d.KVC), kr)
			be.Copy(be.Slice(vAll, q.pos*d.KVC, T*d.KVC), vr)
			be.AttentionForward(rows(s.atty, q.row, T, d.QC), s.att, qr, kAll, vAll, 1, T, q.pos+T, d.NH, d.NKV, d.HS)
		}
		s.matmul(s.proj, s.atty, w.O, wp.O, nil, N, d.QC, d.C)
		addNorm(be, s.resMid, s.ln, s.rstd, s.x, s.proj, w.PostNorm, N, d.C, d.eps)
		if s.glu != nil {
			be.MatmulForward(s.gu, s.ln, w.GateUp, nil, N, d.C, 2*d.I)
			s.glu.SwiGLUPairForward(s.swi, s.gu, N, d.I)
		} else {
			s.matmul(s.gate, s.ln, w.Gate, wp.Gate, nil, N, d.C, d.I)
			s.matmul(s.up, s.ln, w.Up, wp.Up, nil, N, d.C, d.I)
			be.SwiGLUForward(s.swi, s.gate, s.up, N*d.I)
		}
		s.matmul(s.proj, s.swi, w.Down, wp.Down, nil, N, d.I, d.C)
		if l+1 < d.L { // the residual, and the next layer's input norm
			addNorm(be, s.x, s.ln, s.rstd, s.resMid, s.proj, s.params.Layers[l+1].InputNorm, N, d.C, d.eps)
		} else {
			be.Add(s.x, s.resMid, s.proj, N*d.C)
		}
	}
	// The last row of each prefilling sequence, then the final norm and
	// the LM head over those rows only.
	B := 0
	for _, q := range s.active {
		if s.fresh(q) > 0 {
			B++
		}
	}
	last, inPlace := s.last, B == N
	if inPlace {
		// A decoding step (one fresh row a sequence): the rows are
		// already in place, in order.
		last = rows(s.x, 0, N, d.C)
	}
	B = 0
	for _, q := range s.active {
		if T := s.fresh(q); T > 0 {
			if !inPlace {
				be.Copy(rows(s.last, B, 1, d.C), rows(s.x, q.row+T-1, 1, d.C))
			}
			q.row = B
			B++
		}
	}
	be.RMSNormForward(s.lastLn, s.lastRstd, last, s.params.Norm, B, d.C, d.eps)
	s.matmul(s.logits, s.lastLn, s.params.LMHead, s.packed.LMHead, nil, B, d.C, d.V)
	if err := s.fetchLogits(B); err != nil {
		return err
	}
	for _, q := range s.active {
		if q.lead != nil {
			// Share the leader's prefill: its cache rows and its logits.
			n := len(q.prompt)
			for l := range d.L {
				kl, vl := s.kv(q.lead.slot, l, n)
				kq, vq := s.kv(q.slot, l, n)
				be.Copy(kq, kl)
				be.Copy(vq, vl)
			}
			q.row = q.lead.row
		}
	}
	for _, q := range s.active {
		q.pos = len(q.toks)
		q.lead = nil
	}
	return be.Err()
}

// fetchLogits brings this step's B rows of next-token logits to the
// pickers: the greedy picks alone when every active sequence is greedy and
// the backend picks on the device (two numbers a row instead of V), else
// the whole rows into hostLogits.
func (s *BatchSampler) fetchLogits(B int) error {
	gp, ok := s.be.(GreedyPicker)
	// Forced tokens and top log-probabilities need the whole rows.
	s.onDevice = ok && !slices.ContainsFunc(s.active, func(q *Seq) bool {
		return q.p.Temperature != 0 || q.p.TopLogProbs > 0 || len(q.out.Tokens) < len(q.p.Forced)
	})
	if !s.onDevice {
		return s.be.Download(s.hostLogits[:B*s.d.V], s.logits)
	}
	if len(s.devTok) < B {
		s.devTok, s.devLogp = make([]int32, B), make([]float32, B)
	}
	return gp.PickGreedy(s.logits, B, s.d.V, s.devTok, s.devLogp)
}

// raggedRows fills this step's per-row indices for the RaggedAttention
// ops: row t of sequence q sits at position q.pos+t, is written to cache
// row slot*maxSeq+pos and sees the q.pos+t+1 cache rows from the slot's
// first.
func (s *BatchSampler) raggedRows() {
	s.rowPos, s.rowDst, s.rowBase, s.rowCnt = s.rowPos[:0], s.rowDst[:0], s.rowBase[:0], s.rowCnt[:0]
	for _, q := range s.active {
		base := int32(q.slot * s.maxSeq)
		for t := range s.fresh(q) {
			p := int32(q.pos + t)
			s.rowPos = append(s.rowPos, p)
			s.rowDst = append(s.rowDst, base+p)
			s.rowBase = append(s.rowBase, base)
			s.rowCnt = append(s.rowCnt, p+1)
		}
	}
}

// raggedAttention is layer l's per-sequence part for all rows at once:
// RoPE of q and k, the k and v rows written to the caches (one op on a
// RaggedKV backend, which adds the layer's biases too when bias is set),
// then each row's attention over its own slot's cache rows.
func (s *BatchSampler) raggedAttention(l int, bias bool) {
	d, S, P := s.d, s.slots, s.maxSeq
	kc := s.be.Slice(s.big, l*S*P*d.KVC, S*P*d.KVC)
	vc := s.be.Slice(s.big, (d.L+l)*S*P*d.KVC, S*P*d.KVC)
	if bias {
		w := &s.params.Layers[l]
		s.ra.(RaggedKVBias).RoPEScatterRowsBias(s.q, s.k, s.v, kc, vc, s.cos, s.sin, w.QBias, w.KBias, w.VBias,
			s.rowPos, s.rowDst, d.NH, d.NKV, d.HS)
	} else if kv, ok := s.ra.(RaggedKV); ok {
		kv.RoPEScatterRows(s.q, s.k, s.v, kc, vc, s.cos, s.sin, s.rowPos, s.rowDst, d.NH, d.NKV, d.HS)
	} else {
		s.ra.RoPERows(s.q, s.cos, s.sin, s.rowPos, d.NH, d.HS)
		s.ra.RoPERows(s.k, s.cos, s.sin, s.rowPos, d.NKV, d.HS)
		s.ra.ScatterRows(kc, s.k, s.rowDst, d.KVC)
		s.ra.ScatterRows(vc, s.v, s.rowDst, d.KVC)
	}
	s.ra.AttentionRows(s.atty, s.q, kc, vc, s.rowBase, s.rowCnt, d.NH, d.NKV, d.HS)
}

// pick samples the next token of every active sequence from its logits
// row, spreading the sequences over the pickers.
func (s *BatchSampler) pick() {
	V := s.d.V
	one := func(pk *picker, q *Seq) {
		var tok int32
		var lp float32
		row := s.hostLogits[q.row*V : (q.row+1)*V]
		forced := len(q.out.Tokens) < len(q.p.Forced)
		switch {
		case s.onDevice:
			tok, lp = s.devTok[q.row], s.devLogp[q.row]
		case forced:
			tok = q.p.Forced[len(q.out.Tokens)]
			lp = pk.logProbOf(row, tok)
		default:
			tok, lp = pk.pick(row, q.p, q.rng)
		}
		if q.p.TopLogProbs > 0 {
			top, rank := pk.top(row, q.p.TopLogProbs, tok)
			q.out.Top = append(q.out.Top, top)
			q.out.Ranks = append(q.out.Ranks, rank)
		}
		q.toks = append(q.toks, tok)
		q.out.Tokens = append(q.out.Tokens, tok)
		q.out.LogProbs = append(q.out.LogProbs, lp)
		switch {
		case !forced && slices.Contains(q.p.StopTokens, tok):
			q.done, q.out.FinishReason = true, "stop"
		case len(q.out.Tokens) >= q.limit:
			q.done, q.out.FinishReason = true, "length"
		}
	}
	n := min(len(s.pickers), len(s.active))
	if n <= 1 {
		for _, q := range s.active {
			one(&s.pickers[0], q)
		}
		return
	}
	var wg sync.WaitGroup
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(s.active); i += n {
				one(&s.pickers[w], s.active[i])
			}
		}()
	}
	wg.Wait()
}
