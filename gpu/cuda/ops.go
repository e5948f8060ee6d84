//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"slices"
	"unsafe"

	"gorgonia.org/cu"

	"swerl/gpu"
)

// Copy implements gpu.Backend.
func (be *Backend) Copy(dst, src gpu.Buf) {
	d, s := be.get("copy", dst), be.get("copy", src)
	if !be.need("copy", s.Len(), "dst", d) || s.n == 0 {
		return
	}
	be.post(func() {
		be.wrote(d)
		t := be.begin()
		if err := cu.MemcpyDtoD(d.ptr(), s.ptr(), int64(4*s.n)); err != nil {
			be.fail("copy", "%v", err)
		}
		be.end(t, "memcpy DtoD", 0)
	})
}

// Add implements gpu.Backend.
func (be *Backend) Add(out, a, b gpu.Buf, n int) {
	const op = "add"
	o, x, y := be.get(op, out), be.get(op, a), be.get(op, b)
	if !be.need(op, n, "out", o, "a", x, "b", y) {
		return
	}
	be.post(func() { be.launch("add_f32", be.gridFor(n), o, x, y, int64(n)) })
}

// Axpy implements gpu.Backend.
func (be *Backend) Axpy(y, x gpu.Buf, alpha float32, n int) {
	const op = "axpy"
	yd, xd := be.get(op, y), be.get(op, x)
	if !be.need(op, n, "y", yd, "x", xd) {
		return
	}
	be.post(func() {
		be.wrote(yd)
		be.launch("axpy_f32", be.gridFor(n), yd, xd, alpha, int64(n))
	})
}

// SumSquares implements gpu.Backend.
func (be *Backend) SumSquares(x gpu.Buf) (float64, error) {
	d := be.get("sum squares", x)
	if !be.need("sum squares", 0, "x", d) {
		return 0, be.error()
	}
	var s float64
	be.do(func() {
		if err := cu.MemsetD32(be.acc.ptr(), 0, 2); err != nil {
			be.fail("sum squares", "%v", err)
			return
		}
		be.launch("sumsq_f32", be.gridFor(d.n), be.acc, d, int64(d.n))
		if be.error() != nil {
			return
		}
		if err := cu.MemcpyDtoH(unsafe.Pointer(&s), be.acc.ptr(), 8); err != nil {
			be.fail("sum squares", "%v", err)
		}
	})
	return s, be.error()
}

// checkIDs fails unless every id is in [0, V).
func (be *Backend) checkIDs(op, what string, ids []int32, V int) bool {
	for n, t := range ids {
		if t < 0 || int(t) >= V {
			be.fail(op, "%s %d at row %d outside the vocabulary of %d", what, t, n, V)
			return false
		}
	}
	return be.error() == nil
}

// EmbeddingForward implements gpu.Backend.
func (be *Backend) EmbeddingForward(out, wte gpu.Buf, tokens []int32, C int) {
	be.embedding("embedding forward", "embedding_fwd", "out", out, "wte", wte, tokens, C)
}

// EmbeddingBackward implements gpu.Backend.
func (be *Backend) EmbeddingBackward(dwte, dout gpu.Buf, tokens []int32, C int) {
	be.embedding("embedding backward", "embedding_bwd", "dout", dout, "dwte", dwte, tokens, C)
}

// embedding launches kernel(table-side and row-side buffers in the
// kernel's order, ids, N, C): rows is [N, C], table [V, C] with the ids
// checked against V.
func (be *Backend) embedding(op, kernel, rowsName string, rows gpu.Buf, tableName string, table gpu.Buf, tokens []int32, C int) {
	r := be.get(op, rows)
	var w *buf
	if kernel == "embedding_fwd" {
		w = be.weight(op, table) // a frozen bf16-only table is read too
	} else {
		w = be.get(op, table)
	}
	N := len(tokens)
	if !be.need(op, N*C, rowsName, r) || !be.need(op, 0, tableName, w) || !be.checkIDs(op, "token", tokens, w.n/max(C, 1)) || N*C == 0 {
		return
	}
	tokens = slices.Clone(tokens) // read later on the driver thread
	be.post(func() {
		t := be.uploadInts(op, tokens)
		if kernel == "embedding_fwd" && w.a.only16 {
			be.launch("embedding_fwd_bf16", be.gridFor(N*C), r, w.ptr16(), t, N, C)
		} else if kernel == "embedding_fwd" {
			be.launch(kernel, be.gridFor(N*C), r, w, t, N, C) // out, wte
		} else {
			be.launch(kernel, be.gridFor(N*C), w, r, t, N, C) // dwte, dout
		}
	})
}

// readable fails op when an operand is held in bf16 only but the
// products are not in the bf16 mode (driver thread): SetMatmul changed
// after UploadFrozen or AllocBF16.
func (be *Backend) readable(op string, bufs ...*buf) bool {
	for _, b := range bufs {
		if b != nil && b.a.only16 && be.blas.compute != computeFastBF {
			be.fail(op, "an operand is a bf16-only buffer, which needs the bf16 matmul mode (SWERL_CUDA_MATMUL=bf16)")
			return false
		}
	}
	return true
}

// MatmulForward implements gpu.Backend: in column-major terms
// out(OC×N) = w(C×OC)ᵀ · inp(C×N).
func (be *Backend) MatmulForward(out, inp, w, bias gpu.Buf, N, C, OC int) {
	const op = "matmul forward"
	o, x, wt, bs := be.out16(op, out), be.weight(op, inp), be.weight(op, w), be.get(op, bias)
	if !be.need(op, N*OC, "out", o) || !be.need(op, N*C, "inp", x) || !be.need(op, OC*C, "w", wt) ||
		bias != nil && !be.need(op, OC, "bias", bs) || N*OC == 0 {
		return
	}
	// A bf16 activation out (the paired gate and up product, which only
	// SwiGLU reads) gets the bf16 product rounded once from its float32
	// sum, without a bias.
	out16 := o.a.only16
	if out16 && (bias != nil || be.blas.compute != computeFastBF || C == 0) {
		be.fail(op, "out is a bf16 activation: only a bf16-mode product without a bias writes one")
		return
	}
	be.post(func() {
		beta := float32(0)
		if bias != nil {
			be.launch("bias_fill", be.gridFor(N*OC), o, bs, N, OC)
			beta = 1
		}
		if be.error() != nil {
			return
		}
		if C == 0 {
			if bias == nil {
				be.fail(op, "C = 0") // nothing to multiply; keep the CPU's answer of zeros out of reach
			}
			return
		}
		defer be.wroteProducts(o)
		if !be.readable(op, wt, x) {
			return
		}
		if out16 {
			be.gemm16to(op, opT, opN, OC, N, C, be.weight16(0, wt, OC*C), C, be.weight16(1, x, N*C), C, 0, o.ptr16(), OC, true)
			return
		}
		if be.blas.compute == computeFastBF {
			be.gemm16(op, opT, opN, OC, N, C, be.weight16(0, wt, OC*C), C, be.weight16(1, x, N*C), C, beta, o.ptr(), OC)
			return
		}
		be.gemm(op, opT, opN, OC, N, C, wt.ptr(), C, x.ptr(), C, beta, o.ptr(), OC)
	})
}

// MatmulBackward implements gpu.Backend:
// dinp(C×N) += w(C×OC)·dout(OC×N); dw(C×OC) += inp(C×N)·dout(OC×N)ᵀ.
func (be *Backend) MatmulBackward(dinp, dw, dbias, dout, inp, w gpu.Buf, N, C, OC int) {
	const op = "matmul backward"
	// dinp may be a bf16 activation: the down projection's input
	// gradient, which only the paired SwiGLU reads (gpu.PairedSwiGLU).
	di, dwt, db := be.grad16(op, dinp), be.get(op, dw), be.get(op, dbias)
	do, x, wt := be.weight(op, dout), be.weight(op, inp), be.weight(op, w)
	if !be.need(op, N*OC, "dout", do) || !be.need(op, N*C, "inp", x) || !be.need(op, OC*C, "w", wt) ||
		dinp != nil && !be.need(op, N*C, "dinp", di) || dw != nil && !be.need(op, OC*C, "dw", dwt) ||
		dbias != nil && !be.need(op, OC, "dbias", db) {
		return
	}
	if do.a.only16 && (!do.a.act || dbias != nil) {
		// A bf16 gradient (grad16) is read by the products only; its
		// layer has no bias. Frozen weights are no gradient.
		be.fail(op, "dout is a bf16-only buffer: a bf16 gradient without a bias is allowed, not a frozen weight or one with a bias")
		return
	}
	di16 := di != nil && di.a.only16
	if di16 && be.blas.compute != computeFastBF {
		be.fail(op, "dinp is a bf16 activation: only a bf16-mode product writes one")
		return
	}
	if N == 0 || C == 0 || OC == 0 {
		return
	}
	beta := float32(1) // dinp += ...; 0 where it takes a pending zero
	if dinp != nil && be.take(di, N*C) {
		beta = 0
	}
	be.post(func() {
		defer be.wroteProducts(di, dwt, db)
		if dinp != nil && !be.readable(op, wt) || dw != nil && !be.readable(op, x) || !be.readable(op, do) {
			return
		}
		if be.blas.compute == computeFastBF {
			// dout is converted once for both products (a bf16
			// gradient is read as it is).
			do16 := be.weight16(1, do, N*OC)
			if di16 {
				be.gemm16to(op+" dinp", opN, opN, C, N, OC, be.weight16(0, wt, OC*C), C, do16, OC, beta, di.ptr16(), C, true)
			} else if dinp != nil {
				be.gemm16(op+" dinp", opN, opN, C, N, OC, be.weight16(0, wt, OC*C), C, do16, OC, beta, di.ptr(), C)
			}
			if dw != nil {
				be.gemm16(op+" dw", opN, opT, C, OC, N, be.weight16(0, x, N*C), C, do16, OC, 1, dwt.ptr(), C)
			}
		} else {
			if dinp != nil {
				be.gemm(op+" dinp", opN, opN, C, N, OC, wt.ptr(), C, do.ptr(), OC, beta, di.ptr(), C)
			}
			if dw != nil {
				be.gemm(op+" dw", opN, opT, C, OC, N, x.ptr(), C, do.ptr(), OC, 1, dwt.ptr(), C)
			}
		}
		if dbias != nil {
			be.colSum(db, do, nil, nil, N, OC)
		}
	})
}

// RMSNormForward implements gpu.Backend.
func (be *Backend) RMSNormForward(out, rstd, inp, w gpu.Buf, N, C int, eps float32) {
	const op = "rmsnorm forward"
	o, rs, x, wt := be.out16(op, out), be.get(op, rstd), be.get(op, inp), be.get(op, w)
	if !be.need(op, N*C, "out", o, "inp", x) || !be.need(op, N, "rstd", rs) || !be.need(op, C, "w", wt) {
		return
	}
	be.post(func() {
		if o.a.only16 {
			be.launch("rmsnorm_fwd_bf16", N, o.ptr16(), rs, x, wt, N, C, eps)
			return
		}
		be.launch("rmsnorm_fwd", N, o, rs, x, wt, N, C, eps)
	})
}

var _ gpu.ResidualNorm = (*Backend)(nil)

// FusedNorm implements gpu.ResidualNorm: unless SWERL_CUDA_FUSE=0.
func (be *Backend) FusedNorm() bool { return be.fuse }

// AddRMSNormForward implements gpu.ResidualNorm with one add_rmsnorm_fwd
// launch.
func (be *Backend) AddRMSNormForward(sum, out, rstd, a, b, w gpu.Buf, N, C int, eps float32) {
	const op = "add rmsnorm forward"
	sm, o, rs, x, y, wt := be.get(op, sum), be.out16(op, out), be.get(op, rstd), be.get(op, a), be.get(op, b), be.get(op, w)
	if !be.need(op, N*C, "sum", sm, "out", o, "a", x, "b", y) || !be.need(op, N, "rstd", rs) || !be.need(op, C, "w", wt) {
		return
	}
	be.post(func() {
		if o.a.only16 {
			be.launch("add_rmsnorm_fwd_bf16", N, sm, o.ptr16(), rs, x, y, wt, N, C, eps)
			return
		}
		be.launch("add_rmsnorm_fwd", N, sm, o, rs, x, y, wt, N, C, eps)
	})
}

// RMSNormBackward implements gpu.Backend.
func (be *Backend) RMSNormBackward(dinp, dw, dout, inp, w, rstd gpu.Buf, N, C int) {
	const op = "rmsnorm backward"
	di, dwt, do := be.get(op, dinp), be.get(op, dw), be.get(op, dout)
	x, wt, rs := be.get(op, inp), be.get(op, w), be.get(op, rstd)
	if !be.need(op, N*C, "dout", do, "inp", x) || !be.need(op, N, "rstd", rs) || !be.need(op, C, "w", wt) ||
		dinp != nil && !be.need(op, N*C, "dinp", di) || dw != nil && !be.need(op, C, "dw", dwt) {
		return
	}
	be.post(func() {
		if dw != nil {
			be.colSum(dwt, do, x, rs, N, C)
		}
		if dinp != nil {
			be.launch("rmsnorm_bwd_inp", N, di, do, x, wt, rs, N, C)
		}
	})
}

// RoPEForward implements gpu.Backend.
func (be *Backend) RoPEForward(x, cos, sin gpu.Buf, B, T, NH, HS, pos0 int) {
	be.rope("rope forward", x, cos, sin, B, T, NH, HS, pos0, 1)
}

// RoPEBackward implements gpu.Backend.
func (be *Backend) RoPEBackward(dx, cos, sin gpu.Buf, B, T, NH, HS, pos0 int) {
	be.rope("rope backward", dx, cos, sin, B, T, NH, HS, pos0, -1)
}

func (be *Backend) rope(op string, x, cos, sin gpu.Buf, B, T, NH, HS, pos0 int, dir float32) {
	d, cs, sn := be.get(op, x), be.get(op, cos), be.get(op, sin)
	if be.error() == nil && (HS <= 0 || HS%2 != 0) {
		be.fail(op, "head size %d is not positive and even", HS)
	}
	if !be.need(op, B*T*NH*HS, "x", d) || !be.need(op, (pos0+T)*(HS/2), "cos", cs, "sin", sn) {
		return
	}
	n := B * T * NH * HS / 2
	be.post(func() { be.launch("rope", be.gridFor(n), d, cs, sn, B, T, NH, HS, pos0, dir) })
}

var _ gpu.PackedQKV = (*Backend)(nil)

// PackedQKVOK implements gpu.PackedQKV: unless SWERL_CUDA_FUSE=0.
func (be *Backend) PackedQKVOK() bool { return be.fuse }

// SplitQKV16 implements gpu.PackedQKV: with bf16 activations and the mma
// attention (flash_mma.cuh's _b16 kernels) for heads it runs whole
// (HS ≤ 64: larger heads take flash_tc_dkv, which reads float32).
func (be *Backend) SplitQKV16(NH, NKV, HS int) bool {
	return be.act16 && be.mma() && HS <= 64 && be.FlashSupported(NH, NKV, HS)
}

// SplitQKV implements gpu.PackedQKV with one rope_qkv launch.
func (be *Backend) SplitQKV(q, k, v, qkv, cos, sin gpu.Buf, B, T, NH, NKV, HS, pos0 int) {
	be.ropeQKV("split qkv", q, k, v, qkv, cos, sin, B, T, NH, NKV, HS, pos0, 1, 0)
}

// MergeQKV implements gpu.PackedQKV with one rope_qkv launch.
func (be *Backend) MergeQKV(dqkv, dq, dk, dv, cos, sin gpu.Buf, B, T, NH, NKV, HS int) {
	be.ropeQKV("merge qkv", dq, dk, dv, dqkv, cos, sin, B, T, NH, NKV, HS, 0, -1, 1)
}

func (be *Backend) ropeQKV(op string, q, k, v, qkv, cos, sin gpu.Buf, B, T, NH, NKV, HS, pos0 int, dir float32, merge int) {
	// q, k and v may be bf16 activations (SplitQKV16), split into only.
	qd, kd, vd, xd, cs, sn := be.out16(op, q), be.out16(op, k), be.out16(op, v), be.get(op, qkv), be.get(op, cos), be.get(op, sin)
	if be.error() == nil && (HS <= 0 || HS%2 != 0) {
		be.fail(op, "head size %d is not positive and even", HS)
	}
	N := B * T
	if !be.need(op, N*NH*HS, "q", qd) || !be.need(op, N*NKV*HS, "k", kd, "v", vd) ||
		!be.need(op, N*(NH+2*NKV)*HS, "qkv", xd) || !be.need(op, (pos0+T)*(HS/2), "cos", cs, "sin", sn) {
		return
	}
	half := qd.a.only16
	if half != kd.a.only16 || half != vd.a.only16 || half && merge == 1 {
		be.fail(op, "q, k and v are bf16 activations all or none, and only split into")
		return
	}
	n := N * (NH + 2*NKV) * HS / 2
	be.post(func() {
		if half {
			be.launch("rope_qkv_b16", be.gridFor(n), qd.ptr16(), kd.ptr16(), vd.ptr16(), xd, cs, sn, N, T, NH, NKV, HS, pos0, dir)
			return
		}
		be.launch("rope_qkv", be.gridFor(n), qd, kd, vd, xd, cs, sn, N, T, NH, NKV, HS, pos0, dir, merge)
	})
}

func (be *Backend) attnShapes(op string, B, Tq, Tk, NH, NKV, HS int) bool {
	if be.error() != nil {
		return false
	}
	if err := gpu.AttentionShapeError(B, Tq, Tk, NH, NKV, HS); err != nil {
		be.fail(op, "%v", err)
	}
	return be.error() == nil
}

// AttentionForward implements gpu.Backend.
func (be *Backend) AttentionForward(out, att, q, k, v gpu.Buf, B, Tq, Tk, NH, NKV, HS int) {
	const op = "attention forward"
	o, a, qd, kd, vd := be.get(op, out), be.get(op, att), be.get(op, q), be.get(op, k), be.get(op, v)
	if !be.attnShapes(op, B, Tq, Tk, NH, NKV, HS) ||
		!be.need(op, B*Tq*NH*HS, "out", o, "q", qd) || !be.need(op, B*Tk*NKV*HS, "k", kd, "v", vd) ||
		!be.need(op, B*NH*Tq*Tk, "att", a) {
		return
	}
	if B*Tq == 0 {
		return
	}
	if Tq <= perRowTq {
		be.post(func() { be.launch("attn_fwd", B*NH*Tq, o, a, qd, kd, vd, B, Tq, Tk, NH, NKV, HS) })
		return
	}
	be.post(func() {
		s := attnStrides(B, Tq, Tk, NH, NKV, HS)
		scale := float32(1 / math.Sqrt(float64(HS)))
		all := s.heads(NH, 1, 0)
		// S^T(Tk×Tq) = K(HS×Tk)^T · Q(HS×Tq), scaled, for every (b, h) at once.
		be.headProducts(op, opT, opN, Tk, Tq, HS, scale, s.kvOf(kd), s.ldkv, s.skv, s.qOf(qd), s.ldq, s.sq, 0, s.attOf(a), Tk, s.satt, B, all)
		be.launch("attn_softmax", B*NH*Tq, a, B, Tq, Tk, NH)
		// out^T(HS×Tq) = V^T(HS×Tk) · P^T(Tk×Tq).
		be.headProducts(op, opN, opN, HS, Tq, Tk, 1, s.kvOf(vd), s.ldkv, s.skv, s.attOf(a), Tk, s.satt, 0, s.qOf(o), s.ldq, s.sq, B, all)
	})
}

// perRowTq is the longest query block that takes the one-block-per-row
// kernels: for decoding (Tq = 1) one launch beats 2·NH cuBLAS calls.
const perRowTq = 4

// attnLayout describes one head's matrices in the [B,T,heads,HS] and
// [B,NH,Tq,Tk] layouts as strided batches over b.
type attnLayout struct {
	NH, NKV, HS, Tq, Tk int
	ldq, ldkv           int // row strides in elements
	sq, skv, satt       int // batch (b) strides
}

func attnStrides(B, Tq, Tk, NH, NKV, HS int) attnLayout {
	return attnLayout{NH: NH, NKV: NKV, HS: HS, Tq: Tq, Tk: Tk, ldq: NH * HS, ldkv: NKV * HS,
		sq: Tq * NH * HS, skv: Tk * NKV * HS, satt: NH * Tq * Tk}
}

// q is head h of a [B,Tq,NH,HS] buffer, kv the kv head of query head h in
// a [B,Tk,NKV,HS] buffer, att head h of [B,NH,Tq,Tk]; each at b = 0.
func (l attnLayout) q(b *buf, h int) cu.DevicePtr { return b.ptr() + cu.DevicePtr(4*h*l.HS) }
func (l attnLayout) kv(b *buf, h int) cu.DevicePtr {
	return b.ptr() + cu.DevicePtr(4*(h/(l.NH/l.NKV))*l.HS)
}
func (l attnLayout) att(b *buf, h int) cu.DevicePtr { return b.ptr() + cu.DevicePtr(4*h*l.Tq*l.Tk) }

// qOf, kvOf and attOf are q, kv and att of one buffer, as functions of h.
func (l attnLayout) qOf(b *buf) func(int) cu.DevicePtr {
	return func(h int) cu.DevicePtr { return l.q(b, h) }
}
func (l attnLayout) kvOf(b *buf) func(int) cu.DevicePtr {
	return func(h int) cu.DevicePtr { return l.kv(b, h) }
}
func (l attnLayout) attOf(b *buf) func(int) cu.DevicePtr {
	return func(h int) cu.DevicePtr { return l.att(b, h) }
}

// heads lists n query heads first, first+step, first+2·step, ...
func (l attnLayout) heads(n, step, first int) []int {
	hs := make([]int, n)
	for i := range hs {
		hs[i] = first + i*step
	}
	return hs
}

// headProducts runs, for every b < B and every head h of hs, the product
// of the operands A(h)+b·sA, B(h)+b·sB into C(h)+b·sC, as one batched cuBLAS
// call over device arrays of pointers (driver thread). The arrays are kept
// by content: a layer's buffers are the same at every step, so after the
// first step no call copies anything to the device.
func (be *Backend) headProducts(op string, ta, tb, m, n, k int, alpha float32, A func(int) cu.DevicePtr, lda, sA int,
	Bp func(int) cu.DevicePtr, ldb, sB int, beta float32, C func(int) cu.DevicePtr, ldc, sC int, B int, hs []int) {
	if be.error() != nil {
		return
	}
	cnt := B * len(hs)
	ptrs := make([]uint64, 3*cnt)
	for i, h := range hs {
		for b := range B {
			j := i*B + b
			ptrs[j] = uint64(A(h)) + uint64(4*b*sA)
			ptrs[cnt+j] = uint64(Bp(h)) + uint64(4*b*sB)
			ptrs[2*cnt+j] = uint64(C(h)) + uint64(4*b*sC)
		}
	}
	d := be.ptrArrays(op, ptrs)
	if d == 0 {
		return
	}
	t := be.begin()
	if err := be.blas.gemmPtrs(ta, tb, m, n, k, alpha, d, lda, d+cu.DevicePtr(8*cnt), ldb, beta, d+cu.DevicePtr(16*cnt), ldc, cnt); err != nil {
		be.fail(op, "%v", err)
	}
	be.endGemm(t, "gemm batched", ta, tb, m, n, k, cnt)
}

// maxPtrArrays bounds the pointer arrays kept; past it they are all freed
// and made again as needed.
const maxPtrArrays = 4096

// ptrArrays returns a device copy of ptrs, made once per distinct content
// (driver thread); 0 after a failure.
func (be *Backend) ptrArrays(op string, ptrs []uint64) cu.DevicePtr {
	key := string(unsafe.Slice((*byte)(unsafe.Pointer(&ptrs[0])), 8*len(ptrs)))
	if p, ok := be.ptrs[key]; ok {
		return p
	}
	if be.ptrs == nil || len(be.ptrs) >= maxPtrArrays {
		for _, p := range be.ptrs {
			_ = cu.MemFree(p)
		}
		be.ptrs = map[string]cu.DevicePtr{}
	}
	p, err := cu.MemAlloc(int64(8 * len(ptrs)))
	if err == nil {
		err = cu.MemcpyHtoD(p, unsafe.Pointer(&ptrs[0]), int64(8*len(ptrs)))
	}
	if err != nil {
		be.fail(op, "pointer arrays: %v", err)
		return 0
	}
	be.ptrs[key] = p
	return p
}

// AttentionBackward implements gpu.Backend.
func (be *Backend) AttentionBackward(dq, dk, dv, datt, dout, q, k, v, att gpu.Buf, B, Tq, Tk, NH, NKV, HS int) {
	const op = "attention backward"
	dqd, dkd, dvd, da, do := be.get(op, dq), be.get(op, dk), be.get(op, dv), be.get(op, datt), be.get(op, dout)
	qd, kd, vd, a := be.get(op, q), be.get(op, k), be.get(op, v), be.get(op, att)
	if !be.attnShapes(op, B, Tq, Tk, NH, NKV, HS) ||
		!be.need(op, B*Tq*NH*HS, "dout", do, "q", qd) || !be.need(op, B*Tk*NKV*HS, "k", kd, "v", vd) ||
		!be.need(op, B*NH*Tq*Tk, "att", a, "datt", da) ||
		dq != nil && !be.need(op, B*Tq*NH*HS, "dq", dqd) ||
		dk != nil && !be.need(op, B*Tk*NKV*HS, "dk", dkd) || dv != nil && !be.need(op, B*Tk*NKV*HS, "dv", dvd) {
		return
	}
	if B*Tq == 0 {
		return
	}
	if Tq <= perRowTq {
		be.post(func() {
			be.launch("attn_bwd_scores", B*NH*Tq, da, dvd, do, vd, a, B, Tq, Tk, NH, NKV, HS)
			be.launch("attn_bwd_qk", B*NH*Tq, dqd, dkd, da, qd, kd, B, Tq, Tk, NH, NKV, HS)
		})
		return
	}
	be.post(func() {
		s := attnStrides(B, Tq, Tk, NH, NKV, HS)
		all, rep := s.heads(NH, 1, 0), NH/NKV
		// dP^T(Tk×Tq) = V(HS×Tk)^T · dO^T(HS×Tq).
		be.headProducts(op, opT, opN, Tk, Tq, HS, 1, s.kvOf(vd), s.ldkv, s.skv, s.qOf(do), s.ldq, s.sq, 0, s.attOf(da), Tk, s.satt, B, all)
		// dX^T(HS×Tk) += A^T(HS×Tq) · M(Tq×Tk) into the kv heads: dV from
		// dO and P, dK from Q and dS. Every query head at once into
		// scratch, then each group's heads summed; without scratch one
		// group member at a time (heads r, r+rep, ... have distinct kv
		// heads), since the query heads of a group add into the same rows.
		kvGrad := func(dst, A, M *buf) {
			if dst == nil {
				return
			}
			if tmp := be.groupTmp(op, rep, B*Tk*NH*HS); tmp != nil {
				be.headProducts(op, opN, opT, HS, Tk, Tq, 1, s.qOf(A), s.ldq, s.sq, s.attOf(M), Tk, s.satt, 0, tmpOf(tmp, HS), NH*HS, Tk*NH*HS, B, all)
				be.launch("head_group_sum", be.gridFor(B*Tk*NKV*HS), dst, tmp, int64(B*Tk), NH, NKV, HS)
				return
			}
			for r := range rep {
				be.headProducts(op, opN, opT, HS, Tk, Tq, 1, s.qOf(A), s.ldq, s.sq, s.attOf(M), Tk, s.satt, 1, s.kvOf(dst), s.ldkv, s.skv, B, s.heads(NKV, rep, r))
			}
		}
		kvGrad(dvd, do, a)
		be.launch("attn_softmax_bwd", B*NH*Tq, da, a, B, Tq, Tk, NH, float32(1/math.Sqrt(float64(HS))))
		if dq != nil {
			// dQ^T(HS×Tq) += K^T(HS×Tk) · dS^T(Tk×Tq).
			be.headProducts(op, opN, opN, HS, Tq, Tk, 1, s.kvOf(kd), s.ldkv, s.skv, s.attOf(da), Tk, s.satt, 1, s.qOf(dqd), s.ldq, s.sq, B, all)
		}
		kvGrad(dkd, qd, da)
	})
}

// SwiGLUForward implements gpu.Backend.
func (be *Backend) SwiGLUForward(out, gate, up gpu.Buf, n int) {
	const op = "swiglu forward"
	o, g, u := be.out16(op, out), be.get(op, gate), be.get(op, up)
	if !be.need(op, n, "out", o, "gate", g, "up", u) {
		return
	}
	be.swigluFwd(o, g, u, n, n, n)
}

// SwiGLUBackward implements gpu.Backend.
func (be *Backend) SwiGLUBackward(dgate, dup, dout, gate, up gpu.Buf, n int) {
	const op = "swiglu backward"
	dg, du, do, g, u := be.grad16(op, dgate), be.grad16(op, dup), be.get(op, dout), be.get(op, gate), be.get(op, up)
	if !be.need(op, n, "dout", do, "gate", g, "up", u) ||
		dgate != nil && !be.need(op, n, "dgate", dg) || dup != nil && !be.need(op, n, "dup", du) {
		return
	}
	half := dg != nil && dg.a.only16 || du != nil && du.a.only16
	if half && (dg == nil || du == nil || !dg.a.only16 || !du.a.only16) {
		be.fail(op, "dgate and dup are both bf16 activations or neither")
		return
	}
	// Outputs that take a pending zero are written, not added to.
	zg, zu := 0, 0
	if dgate != nil && be.take(dg, n) {
		zg = 1
	}
	if dup != nil && be.take(du, n) {
		zu = 1
	}
	be.swigluBwd(dg, du, do, g, u, n, zg, zu, n, n, half)
}

// swigluFwd queues the SwiGLU forward kernel for its operands' storage:
// out contiguous, gate and up laid out by (I, ld) (GluRows in
// kernels.cu: ld == I contiguous, ld == 2I side by side); bf16 gate and
// up only with a bf16 out.
func (be *Backend) swigluFwd(o, g, u *buf, n, I, ld int) {
	be.post(func() {
		switch {
		case g.a.only16:
			be.launch("swiglu_fwd_bf16in", be.gridFor(n), o.ptr16(), g.ptr16(), u.ptr16(), int64(n), int64(I), int64(ld))
		case o.a.only16:
			be.launch("swiglu_fwd_bf16", be.gridFor(n), o.ptr16(), g, u, int64(n), int64(I), int64(ld))
		default:
			be.launch("swiglu_fwd", be.gridFor(n), o, g, u, int64(n), int64(I), int64(ld))
		}
	})
}

// swigluBwd queues the SwiGLU backward kernel for its operands' storage,
// laid out as swigluFwd's; half: dgate and dup are bf16 (both given). A
// bf16 dout comes only with bf16 gate and up, and those only with bf16
// gradients.
func (be *Backend) swigluBwd(dg, du, do, g, u *buf, n, zg, zu, I, ld int, half bool) {
	be.post(func() {
		switch {
		case do.a.only16:
			be.launch("swiglu_bwd_bf16dout", be.gridFor(n), dg.ptr16(), du.ptr16(), do.ptr16(), g.ptr16(), u.ptr16(), int64(n), zg, zu, int64(I), int64(ld))
		case g.a.only16:
			be.launch("swiglu_bwd_bf16in", be.gridFor(n), dg.ptr16(), du.ptr16(), do, g.ptr16(), u.ptr16(), int64(n), zg, zu, int64(I), int64(ld))
		case half:
			be.launch("swiglu_bwd_bf16", be.gridFor(n), dg.ptr16(), du.ptr16(), do, g, u, int64(n), zg, zu, int64(I), int64(ld))
		default:
			be.launch("swiglu_bwd", be.gridFor(n), dg, du, do, g, u, int64(n), zg, zu, int64(I), int64(ld))
		}
	})
}

var _ gpu.PairedSwiGLU = (*Backend)(nil)

// PairedGLU implements gpu.PairedSwiGLU: unless SWERL_CUDA_FUSE=0.
func (be *Backend) PairedGLU() bool { return be.fuse }

// pairedFits reports (failing op otherwise) whether the SwiGLU kernels
// can address n elements of a paired operand: their row is a 32-bit
// division (GluRows).
func (be *Backend) pairedFits(op string, n int) bool {
	if n >= 1<<32 {
		be.fail(op, "%d elements: the paired layout takes fewer than 2^32", n)
		return false
	}
	return true
}

// upHalf is the window of a paired [N, 2I] buffer from its first up
// element: up's rows, 2I apart, start I into gu.
func upHalf(gu *buf, N, I int) *buf { return &buf{a: gu.a, off: gu.off + I, n: 2*N*I - I} }

// SwiGLUPairForward implements gpu.PairedSwiGLU: the SwiGLU kernels with
// gate at gu and up at gu + I, rows 2I apart. gu may be a bf16 activation
// (the paired product writes it so in the bf16 mode; out16 accepts one),
// and then out is one too.
func (be *Backend) SwiGLUPairForward(out, gu gpu.Buf, N, I int) {
	const op = "paired swiglu forward"
	n := N * I
	o, x := be.out16(op, out), be.out16(op, gu)
	if !be.need(op, n, "out", o) || !be.need(op, 2*n, "gu", x) || !be.pairedFits(op, n) {
		return
	}
	if x.a.only16 && !o.a.only16 {
		be.fail(op, "gu is a bf16 activation and out is not")
		return
	}
	be.swigluFwd(o, x, upHalf(x, N, I), n, I, 2*I)
}

// SwiGLUPairBackward implements gpu.PairedSwiGLU, as SwiGLUPairForward.
func (be *Backend) SwiGLUPairBackward(dgu, dout, gu gpu.Buf, N, I int) {
	const op = "paired swiglu backward"
	n := N * I
	dx, do, x := be.grad16(op, dgu), be.out16(op, dout), be.out16(op, gu)
	if !be.need(op, n, "dout", do) || !be.need(op, 2*n, "dgu", dx, "gu", x) || !be.pairedFits(op, n) {
		return
	}
	if x.a.only16 && !dx.a.only16 || do.a.only16 && !x.a.only16 {
		be.fail(op, "bf16 activations: gu only with dgu, dout only with gu")
		return
	}
	// dgu taking a pending zero is written, not added to.
	z := 0
	if be.take(dx, 2*n) {
		z = 1
	}
	be.swigluBwd(dx, upHalf(dx, N, I), do, x, upHalf(x, N, I), n, z, z, I, 2*I, dx.a.only16)
}

// LogProbForward implements gpu.Backend.
func (be *Backend) LogProbForward(logp, lse, logits gpu.Buf, targets []int32, V int) {
	const op = "logprob forward"
	lp, ls, lg := be.get(op, logp), be.get(op, lse), be.get(op, logits)
	N := len(targets)
	if !be.need(op, N, "logp", lp, "lse", ls) || !be.need(op, N*V, "logits", lg) || !be.checkIDs(op, "target", targets, V) || N == 0 {
		return
	}
	targets = slices.Clone(targets) // read later on the driver thread
	be.post(func() {
		t := be.uploadInts(op, targets)
		be.launch("logprob_fwd", N, lp, ls, lg, t, N, V)
	})
}

// LogProbBackward implements gpu.Backend.
func (be *Backend) LogProbBackward(dlogits, dlogp, logits, lse gpu.Buf, targets []int32, V int) {
	const op = "logprob backward"
	dl, dp, lg, ls := be.grad16(op, dlogits), be.get(op, dlogp), be.get(op, logits), be.get(op, lse)
	N := len(targets)
	if !be.need(op, N, "dlogp", dp, "lse", ls) || !be.need(op, N*V, "logits", lg, "dlogits", dl) || !be.checkIDs(op, "target", targets, V) || N == 0 {
		return
	}
	z := 0 // 1: dlogits takes a pending zero, every row written
	if be.take(dl, N*V) {
		z = 1
	}
	targets = slices.Clone(targets) // read later on the driver thread
	be.post(func() {
		t := be.uploadInts(op, targets)
		if dl.a.only16 {
			be.launch("logprob_bwd_bf16", N, dl.ptr16(), dp, lg, ls, t, N, V, z)
			return
		}
		be.launch("logprob_bwd", N, dl, dp, lg, ls, t, N, V, z)
	})
}

// AdamW implements gpu.Backend.
func (be *Backend) AdamW(p, g, m, v gpu.Buf, n int, h gpu.AdamWParams) {
	pd, gd, md, vd, c1, c2, ok := be.adamwArgs(p, g, m, v, n, h)
	if !ok {
		return
	}
	be.post(func() {
		be.launch("adamw", be.gridFor(n), pd, gd, md, vd, fresh16(pd), int64(n), h.LR, h.Beta1, h.Beta2, h.Eps, h.WeightDecay, h.GradScale, c1, c2)
	})
}

// adamwArgs unwraps the operands of an AdamW over n elements and checks
// them and the step; ok false after a failure (or when n is 0). c1 and c2
// are the bias corrections.
func (be *Backend) adamwArgs(p, g, m, v gpu.Buf, n int, h gpu.AdamWParams) (pd, gd, md, vd *buf, c1, c2 float32, ok bool) {
	const op = "adamw"
	pd, gd, md, vd = be.get(op, p), be.get(op, g), be.get(op, m), be.get(op, v)
	if !be.need(op, n, "p", pd, "g", gd, "m", md, "v", vd) {
		return
	}
	b1, b2, err := h.BiasCorrections()
	if err != nil {
		be.fail(op, "%v", err)
		return
	}
	return pd, gd, md, vd, float32(b1), float32(b2), n > 0
}

// adamwGroups is ADAMW_GROUPS in kernels.cu: the groups one adamw_groups
// launch takes.
const adamwGroups = 512

var _ gpu.GroupedAdamW = (*Backend)(nil)

// AdamWGroups implements gpu.GroupedAdamW: one adamw_groups launch for
// each adamwGroups groups. Its table of group starts is re-sent only when
// it changes, so a trainer's steps upload it once.
func (be *Backend) AdamWGroups(p, g, m, v gpu.Buf, groups []gpu.AdamWGroup, h gpu.AdamWParams) {
	const op = "adamw"
	n := 0
	for i, gr := range groups {
		if gr.Off != n || gr.N < 0 {
			be.fail(op, "group %d at %d of %d elements: groups must be adjacent from 0 (want it at %d)", i, gr.Off, gr.N, n)
			return
		}
		n += gr.N
	}
	pd, gd, md, vd, c1, c2, ok := be.adamwArgs(p, g, m, v, n, h)
	if !ok {
		return
	}
	for c := 0; c*adamwGroups < len(groups); c++ {
		chunk := groups[c*adamwGroups : min((c+1)*adamwGroups, len(groups))]
		off, last := chunk[0].Off, chunk[len(chunk)-1]
		cn := last.Off + last.N - off
		tab := make([]int32, 0, 3*len(chunk))
		for _, gr := range chunk {
			rel := int64(gr.Off - off)
			dec := int32(0)
			if gr.Decay {
				dec = 1
			}
			tab = append(tab, int32(uint32(rel)), int32(rel>>32), dec)
		}
		win := func(b *buf) *buf { return &buf{a: b.a, off: b.off + off, n: cn} }
		pw, gw, mw, vw := win(pd), win(gd), win(md), win(vd)
		key := fmt.Sprintf("adamw/%d", c)
		be.post(func() {
			t := be.cachedInts(op, key, tab)
			if t == nil {
				return
			}
			be.launch("adamw_groups", be.gridFor(cn), pw, gw, mw, vw, fresh16(pw), t, len(chunk), int64(cn),
				h.LR, h.Beta1, h.Beta2, h.Eps, h.WeightDecay, h.GradScale, c1, c2)
		})
	}
}

// groupTmp returns scratch of n floats for GQA's per-query-head dK and dV
// products (driver thread): nil without grouping (rep 1) or when it
// cannot be allocated, and then the products add one group member at a
// time.
func (be *Backend) groupTmp(op string, rep, n int) *buf {
	if rep == 1 {
		return nil
	}
	if be.gqaTmp == nil || be.gqaTmp.n < n {
		if be.gqaTmp != nil {
			_ = cu.MemFree(be.gqaTmp.a.ptr)
			be.gqaTmp = nil
		}
		b, err := be.alloc(n)
		if err != nil {
			return nil
		}
		be.gqaTmp = b
	}
	return be.gqaTmp
}

// tmpOf is query head h of a [B,Tk,NH,HS] scratch buffer at b = 0.
func tmpOf(b *buf, HS int) func(int) cu.DevicePtr {
	return func(h int) cu.DevicePtr { return b.ptr() + cu.DevicePtr(4*h*HS) }
}
