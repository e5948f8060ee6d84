package gpu

import (
	"fmt"
	"math"
)

// Buf is a buffer of floats owned by a Backend: host memory for the CPU
// backend, device memory for a GPU backend. Element type and precision are
// the backend's business (the reference CPU backend has a float64 variant for
// gradient checks); every exchange with the host goes through Upload and
// Download as float32.
//
// A Buf is only valid with the Backend that allocated it, and a view made
// by Backend.Slice aliases its parent.
type Buf interface {
	// Len is the number of elements.
	Len() int
}

// AdamWParams are the hyper-parameters of one AdamW update.
type AdamWParams struct {
	LR          float32 // learning rate of this step
	Beta1       float32 // first-moment decay
	Beta2       float32 // second-moment decay
	Eps         float32 // denominator epsilon
	WeightDecay float32 // decoupled weight decay (0 for norms and biases)
	GradScale   float32 // multiplies every gradient first (clipping and accumulation averaging)
	Step        int     // 1-based step count for bias correction
}

// BiasCorrections returns AdamW's bias corrections 1-Beta1^Step and
// 1-Beta2^Step, computed in float64, or an error when Step is not a
// 1-based count (a correction of 0 would divide by zero).
func (h AdamWParams) BiasCorrections() (c1, c2 float64, err error) {
	if h.Step < 1 {
		return 0, 0, fmt.Errorf("step %d, want >= 1", h.Step)
	}
	return 1 - math.Pow(float64(h.Beta1), float64(h.Step)), 1 - math.Pow(float64(h.Beta2), float64(h.Step)), nil
}

// AttentionShapeError is the error of an attention op over B sequences
// of Tq query rows and Tk keys, NH query heads in NKV groups of HS
// channels, nil for a shape every backend takes: queries are the last Tq
// of the Tk positions, and query heads share key heads in equal groups.
func AttentionShapeError(B, Tq, Tk, NH, NKV, HS int) error {
	switch {
	case B < 0 || Tq < 0 || HS <= 0 || NKV <= 0 || NH <= 0:
		return fmt.Errorf("bad shape B=%d Tq=%d HS=%d NH=%d NKV=%d", B, Tq, HS, NH, NKV)
	case Tq > Tk:
		return fmt.Errorf("Tq=%d exceeds Tk=%d", Tq, Tk)
	case NH%NKV != 0:
		return fmt.Errorf("NH=%d is not a multiple of NKV=%d", NH, NKV)
	}
	return nil
}

// Backend is the small set of ops the model needs, forward and backward.
//
// # Conventions
//
// Dimensions: N rows (tokens, B*T), C channels, OC output channels, V
// vocabulary, NH query heads, NKV key/value heads, HS head size, I the MLP
// width. Every tensor is a dense row-major Buf; shapes are stated per op.
//
// Forward ops overwrite their outputs. Backward ops ACCUMULATE (+=) into
// every gradient output, like llm.c, so that gradients of parameters add up
// over micro-batches and a gradient flowing into one activation from two
// places needs no extra op; the caller zeroes scratch gradients with Zero.
// The RoPE ops are the exception: they rotate in place.
//
// A nil gradient output of a backward op means "not needed" and is skipped.
//
// Errors are sticky, as in bufio.Writer: ops return nothing, and the first
// failure (a bad shape, a failed launch) is kept and returned by Err,
// Download or SumSquares; later ops are then no-ops. This keeps the model
// code readable and lets a GPU backend queue ops asynchronously.
//
// Host slices passed to ops ([]int32 token ids) are read during the call
// only; a GPU backend copies them.
//
// A Backend is not safe for concurrent use.
type Backend interface {
	// Name identifies the backend ("cpu", "cpu64", "cuda").
	Name() string

	// Alloc returns a zeroed buffer of n elements.
	Alloc(n int) (Buf, error)
	// Slice returns the view b[off : off+n]; it aliases b.
	Slice(b Buf, off, n int) Buf
	// Free releases a buffer from Alloc (not a view). Using it after is an error.
	Free(b Buf)
	// Upload copies len(src) floats into dst[0:len(src)].
	Upload(dst Buf, src []float32)
	// Download waits for queued ops and copies src[0:len(dst)] into dst.
	// It returns the sticky error, if any.
	Download(dst []float32, src Buf) error
	// Err waits for queued ops and returns the sticky error.
	Err() error

	// Zero sets every element of x to 0.
	Zero(x Buf)
	// Copy sets dst[0:src.Len()] = src.
	Copy(dst, src Buf)
	// Add sets out = a + b over n elements; out may alias a or b.
	Add(out, a, b Buf, n int)
	// Axpy sets y[0:n] += alpha * x[0:n]: the scaled sums of LoRA's
	// low-rank path (alpha/r) forward and backward.
	Axpy(y, x Buf, alpha float32, n int)
	// SumSquares returns the sum of x*x over x, accumulated in float64.
	SumSquares(x Buf) (float64, error)

	// EmbeddingForward: out[N,C] = wte[tokens[n], :], N = len(tokens).
	EmbeddingForward(out, wte Buf, tokens []int32, C int)
	// EmbeddingBackward: dwte[tokens[n], :] += dout[n, :].
	EmbeddingBackward(dwte, dout Buf, tokens []int32, C int)

	// MatmulForward: out[N,OC] = inp[N,C] @ w[OC,C]^T + bias[OC]; bias may be nil.
	// w is in the Hugging Face linear layout [out, in].
	MatmulForward(out, inp, w, bias Buf, N, C, OC int)
	// MatmulBackward: dinp[N,C] += dout[N,OC] @ w[OC,C];
	// dw[OC,C] += dout^T @ inp; dbias[OC] += column sums of dout.
	MatmulBackward(dinp, dw, dbias, dout, inp, w Buf, N, C, OC int)

	// RMSNormForward: rstd[N] = 1/sqrt(mean(inp[n,:]^2) + eps);
	// out[N,C] = inp * rstd * w[C].
	RMSNormForward(out, rstd, inp, w Buf, N, C int, eps float32)
	// RMSNormBackward: dinp[N,C] += ..., dw[C] += ... given the forward's rstd.
	RMSNormBackward(dinp, dw, dout, inp, w, rstd Buf, N, C int)

	// RoPEForward rotates x[B,T,NH,HS] in place at positions pos0+t, with
	// the Hugging Face "rotate_half" pairing (i, i+HS/2) and the tables
	// cos[P,HS/2], sin[P,HS/2], P >= pos0+T. HS must be even.
	RoPEForward(x, cos, sin Buf, B, T, NH, HS, pos0 int)
	// RoPEBackward applies the inverse rotation to the gradient dx in place.
	RoPEBackward(dx, cos, sin Buf, B, T, NH, HS, pos0 int)

	// AttentionForward is causal grouped-query attention.
	// q[B,Tq,NH,HS], k[B,Tk,NKV,HS], v[B,Tk,NKV,HS], NH a multiple of NKV
	// (query head h uses kv head h/(NH/NKV)); query i sits at position
	// Tk-Tq+i and attends to keys 0..Tk-Tq+i (Tq = Tk in training, Tq = 1
	// when decoding from a KV cache). Scale 1/sqrt(HS).
	// att[B,NH,Tq,Tk] receives the probabilities (0 above the diagonal),
	// out[B,Tq,NH,HS] the weighted values.
	AttentionForward(out, att, q, k, v Buf, B, Tq, Tk, NH, NKV, HS int)
	// AttentionBackward accumulates dq, dk, dv from dout[B,Tq,NH,HS] and the
	// forward's att; datt[B,NH,Tq,Tk] is scratch (overwritten).
	AttentionBackward(dq, dk, dv, datt, dout, q, k, v, att Buf, B, Tq, Tk, NH, NKV, HS int)

	// SwiGLUForward: out[n] = silu(gate[n]) * up[n] over n elements.
	SwiGLUForward(out, gate, up Buf, n int)
	// SwiGLUBackward: dgate += ..., dup += ... from dout.
	SwiGLUBackward(dgate, dup, dout, gate, up Buf, n int)

	// LogProbForward is log-softmax and gather: with N = len(targets),
	// lse[n] = log(sum_v exp(logits[n,v])) and logp[n] = logits[n,targets[n]] - lse[n].
	// Cross-entropy is -logp. A target outside [0,V) is an error.
	LogProbForward(logp, lse, logits Buf, targets []int32, V int)
	// LogProbBackward: dlogits[n,v] += dlogp[n] * (1[v==targets[n]] - exp(logits[n,v]-lse[n])).
	LogProbBackward(dlogits, dlogp, logits, lse Buf, targets []int32, V int)

	// AdamW updates n elements of p with gradient g and moments m, v
	// (decoupled weight decay: p -= lr*(mhat/(sqrt(vhat)+eps) + wd*p)).
	AdamW(p, g, m, v Buf, n int, h AdamWParams)
}

// ResidualNorm is implemented by backends that add a residual and
// normalize the sum in one op: AddRMSNormForward(sum, out, rstd, a, b, w,
// N, C, eps) does Add(sum, a, b, N*C) and then RMSNormForward(out, rstd,
// sum, w, N, C, eps), with the same results, reading a and b once. sum
// may be a or b. FusedNorm reports whether it may be used: a backend may
// offer it in some modes only. The Trainer and the BatchSampler use it
// where a residual add is followed by a norm of its sum (addNorm).
type ResidualNorm interface {
	FusedNorm() bool
	AddRMSNormForward(sum, out, rstd, a, b, w Buf, N, C int, eps float32)
}

// addNorm is AddRMSNormForward on a ResidualNorm backend that offers it,
// else Add and RMSNormForward.
func addNorm(be Backend, sum, out, rstd, a, b, w Buf, N, C int, eps float32) {
	if rn, ok := be.(ResidualNorm); ok && rn.FusedNorm() {
		rn.AddRMSNormForward(sum, out, rstd, a, b, w, N, C, eps)
		return
	}
	be.Add(sum, a, b, N*C)
	be.RMSNormForward(out, rstd, sum, w, N, C, eps)
}

// PairedSwiGLU is implemented by backends whose SwiGLU can read the gate
// and up projections side by side: gu is [N, 2I], row n holding gate[n, 0:I]
// then up[n, 0:I], the output of one product with the stacked weight
// [2I, C] (mlp.gate_proj then mlp.up_proj, adjacent in the arena).
// SwiGLUPairForward(out, gu, N, I) does SwiGLUForward over the two halves,
// and SwiGLUPairBackward(dgu, dout, gu, N, I) SwiGLUBackward into dgu's
// halves, with the same results. One product of 2I columns replaces two
// of I in the forward pass and in each backward product (the input's
// gradient then sums over 2I in one product instead of adding two).
// PairedGLU reports whether it may be used.
type PairedSwiGLU interface {
	PairedGLU() bool
	SwiGLUPairForward(out, gu Buf, N, I int)
	SwiGLUPairBackward(dgu, dout, gu Buf, N, I int)
}

// pairedGLU returns be's PairedSwiGLU where every layer's MLP can run its
// gate and up projections as one product: the backend offers it, the two
// weights lie side by side (GateUp is set) and no LoRA adapter is on
// either (an adapter adds to one projection's output alone). Else nil.
func pairedGLU(be Backend, p *Params[Buf], lo *loraRun) PairedSwiGLU {
	pg, ok := be.(PairedSwiGLU)
	if !ok || !pg.PairedGLU() {
		return nil
	}
	for l := range p.Layers {
		if p.Layers[l].GateUp == nil || lo.adapts(l, modGate) || lo.adapts(l, modUp) {
			return nil
		}
	}
	return pg
}

// PackedQKV is implemented by backends that run the attention's q, k and
// v projections as one product into qkv [N, W] (W = (NH+2·NKV)·HS: q, k
// and v side by side in each row, the output of the stacked weight
// LayerParams.QKV with bias QKVBias) and move the rows between that and
// q, k and v: SplitQKV writes q [N, NH·HS] and k [N, NKV·HS] from qkv
// rotated as RoPEForward(…, pos0) rotates them, and v copied; MergeQKV
// writes dqkv from dq and dk rotated back as RoPEBackward(…, 0) does, and
// dv (dqkv is written, not added to). One product replaces three in the
// forward pass and in each backward product, and one bias gradient three.
// PackedQKVOK reports whether it may be used. SplitQKV16 reports whether
// SplitQKV may write q, k and v as bf16 activations (AllocBF16) that the
// backend's FlashAttention reads for these heads: they are then read only
// by the attention, which rounds them so itself.
type PackedQKV interface {
	PackedQKVOK() bool
	SplitQKV16(NH, NKV, HS int) bool
	SplitQKV(q, k, v, qkv, cos, sin Buf, B, T, NH, NKV, HS, pos0 int)
	MergeQKV(dqkv, dq, dk, dv, cos, sin Buf, B, T, NH, NKV, HS int)
}

// packedQKV returns be's PackedQKV where every layer can run its q, k
// and v projections as one product: the backend offers it, the weights
// (and biases, where the model has them) lie side by side, and no LoRA
// adapter is on any of the three. Else nil.
func packedQKV(be Backend, p *Params[Buf], lo *loraRun, bias bool) PackedQKV {
	pq, ok := be.(PackedQKV)
	if !ok || !pq.PackedQKVOK() {
		return nil
	}
	for l, w := range p.Layers {
		if w.QKV == nil || bias && w.QKVBias == nil || lo.adapts(l, modQ) || lo.adapts(l, modK) || lo.adapts(l, modV) {
			return nil
		}
	}
	return pq
}

// AdamWGroup is one tensor of the window an AdamWGroups call updates: N
// elements from Off (counted from the window's start), with the call's
// weight decay where Decay is set and none elsewhere (norms, biases).
type AdamWGroup struct {
	Off, N int
	Decay  bool
}

// GroupedAdamW is implemented by backends that update many tensors of one
// arena in one pass instead of one AdamW call each. AdamWGroups does what
// AdamW(p, g, m, v, N, h) does on each group's window, with h.WeightDecay
// on the groups with Decay and 0 on the others. The groups are adjacent
// and in order: the first starts at 0 and each starts where the last one
// ended; p, g, m and v hold at least their total.
type GroupedAdamW interface {
	AdamWGroups(p, g, m, v Buf, groups []AdamWGroup, h AdamWParams)
}

// HostBacked is implemented by backends whose buffers live in host memory
// as float32. Wrap returns a Buf that aliases data without copying, so the
// model's host parameter arena is trained in place; Host returns the
// float32 memory of a buffer. Both return nil when this backend instance
// cannot alias float32 memory (the float64 CPU backend).
type HostBacked interface {
	Wrap(data []float32) Buf
	Host(b Buf) []float32
}

// BF16Weights is implemented by backends whose bf16 matrix products can
// read a weight buffer from a bf16 copy kept beside it, instead of
// converting the weights at every product. The Trainer asks for one over
// its weights; the backend keeps the copy equal to the float32 values
// through its own writes (AdamW updates both), so callers see no
// difference. A backend not in a bf16 mode ignores it.
type BF16Weights interface {
	KeepBF16(weights Buf) error
}

// FrozenWeights is implemented by backends that can hold weights nothing
// writes in less memory than float32. UploadFrozen returns a buffer with
// data in it that the model's weight reads accept (MatmulForward and
// MatmulBackward's w, EmbeddingForward's wte, and views of it from Slice)
// and every other op refuses. A backend whose products read bf16 keeps
// only the bf16 values (2 bytes an element instead of 4, rounded as its
// products would round them at each use); in other modes the buffer is
// ordinary float32. A LoRA Trainer uploads its frozen base's matrices this
// way.
type FrozenWeights interface {
	UploadFrozen(data []float32) (Buf, error)
}

// BF16Activations is implemented by backends that can hold the
// activations only matrix products read (the normed inputs of the
// attention and MLP projections and of the LM head, the SwiGLU output)
// and the gradients only they read (of the logits and of the gate and up
// projections' outputs) in bf16 only. AllocBF16 returns such a buffer of
// n elements: RMSNormForward, SwiGLUForward, SwiGLUBackward and
// LogProbBackward write it (rounded to bf16, as the products would round
// it), Zero clears it, MatmulForward and MatmulBackward read it as inp
// and MatmulBackward as a dout without bias, Slice views it, and every
// other op refuses it. A PairedSwiGLU backend also takes one as gu and
// dgu: MatmulForward writes the paired product into it (no bias), rounded
// once from its float32 sum, and the paired SwiGLU reads it; and as the
// down projection's input gradient, which MatmulBackward writes as dinp
// and the paired SwiGLU's backward reads as dout. A backend not in such a
// mode returns an ordinary buffer. The Trainer takes those buffers from
// it.
type BF16Activations interface {
	AllocBF16(n int) (Buf, error)
}

// GreedyPicker is implemented by backends that pick greedy tokens where
// the logits are: for each of the first rows rows of logits [rows, V], the
// id of the first largest logit (as the CPU picker chooses, ties to the
// lowest id) into tok and its log-probability (log-softmax at temperature
// 1, the sum in float64, equal to the CPU picker's to rounding) into
// logp. A decoding step then moves two numbers a row off the device
// instead of V.
type GreedyPicker interface {
	PickGreedy(logits Buf, rows, V int, tok []int32, logp []float32) error
}
