//go:build cuda

package cuda

import (
	"math"

	"gorgonia.org/cu"

	"swerl/gpu"
)

var _ gpu.FlashAttention = (*Backend)(nil)

// FlashSupported implements gpu.FlashAttention: with SWERL_CUDA_ATTN=mma
// or pipe (mma is the default in the bf16 matmul mode), head sizes that
// are a multiple of 16 (the tensor cores' tile) up to 128.
func (be *Backend) FlashSupported(NH, NKV, HS int) bool {
	return be.mma() && HS > 0 && HS%16 == 0 && HS <= 128 && NKV > 0 && NH%NKV == 0
}

// tcThreads is a block of the mma kernels and of flash_tc_dkv (TCW warps
// in kernels.cu); each block owns 64 rows or keys.
const tcThreads = 128

func (be *Backend) flashShapes(op string, B, T, NH, NKV, HS int) bool {
	if be.error() == nil && (B < 0 || T < 0 || !be.FlashSupported(NH, NKV, HS)) {
		be.fail(op, "unsupported shape B=%d T=%d NH=%d NKV=%d HS=%d", B, T, NH, NKV, HS)
	}
	return be.error() == nil
}

// AttentionForwardLSE implements gpu.FlashAttention.
func (be *Backend) AttentionForwardLSE(out, lse, q, k, v gpu.Buf, B, T, NH, NKV, HS int) {
	const op = "flash attention forward"
	o, l, qd, kd, vd := be.get(op, out), be.get(op, lse), be.out16(op, q), be.out16(op, k), be.out16(op, v)
	qkv16, ok := be.qkv16(op, qd, kd, vd, HS)
	if !ok || !be.flashShapes(op, B, T, NH, NKV, HS) ||
		!be.need(op, B*T*NH*HS, "out", o, "q", qd) || !be.need(op, B*T*NKV*HS, "k", kd, "v", vd) ||
		!be.need(op, B*NH*T, "lse", l) || B*T == 0 {
		return
	}
	scale := float32(1 / math.Sqrt(float64(HS)))
	kernel := mmaKernel("flash_mma_fwd", HS, qkv16, be.attn == "pipe") // 4 warps, 64 rows a block
	be.post(func() {
		be.launchDims(kernel, B*NH*((T+63)/64), 1, tcThreads, o, l, qkvPtr(qd, qkv16), qkvPtr(kd, qkv16), qkvPtr(vd, qkv16), B, T, NH, NKV, HS, scale)
	})
}

// AttentionBackwardLSE implements gpu.FlashAttention.
func (be *Backend) AttentionBackwardLSE(dq, dk, dv, delta, dout, out, q, k, v, lse gpu.Buf, B, T, NH, NKV, HS int) {
	const op = "flash attention backward"
	// dq is not settled here: flash_mma_dq stores each element of dq
	// once, so a pending zero of dq is taken (written, not added to)
	// instead of cleared first. With pipe it is taken before dk and dv are
	// unwrapped: the trainer zeroes dq, dk and dv together, Zero merges
	// the three into one pending range, and settling dk's would clear
	// dq's part too. With mma only a zero of dq alone is taken (below)
	// until the early take has run on a card.
	dqd := be.dest(op, dq)
	zq := 0
	if be.attn == "pipe" && dqd != nil && be.take(dqd, B*T*NH*HS) {
		zq = 1
	}
	dkd, dvd, dl, do := be.get(op, dk), be.get(op, dv), be.get(op, delta), be.get(op, dout)
	o, qd, kd, vd, l := be.get(op, out), be.out16(op, q), be.out16(op, k), be.out16(op, v), be.get(op, lse)
	qkv16, ok := be.qkv16(op, qd, kd, vd, HS)
	if !ok || !be.flashShapes(op, B, T, NH, NKV, HS) ||
		!be.need(op, B*T*NH*HS, "dout", do, "out", o, "q", qd) || !be.need(op, B*T*NKV*HS, "k", kd, "v", vd) ||
		!be.need(op, B*NH*T, "lse", l, "delta", dl) ||
		dq != nil && !be.need(op, B*T*NH*HS, "dq", dqd) ||
		dk != nil && !be.need(op, B*T*NKV*HS, "dk", dkd) || dv != nil && !be.need(op, B*T*NKV*HS, "dv", dvd) {
		return
	}
	if B*T == 0 || dq == nil && dk == nil && dv == nil {
		be.settle(dqd)
		return
	}
	if zq == 0 && be.attn == "mma" && dq != nil && be.take(dqd, B*T*NH*HS) {
		zq = 1
	}
	if zq == 0 {
		be.settle(dqd)
	}
	scale := float32(1 / math.Sqrt(float64(HS)))
	be.post(func() {
		be.launch("flash_delta", be.gridFor(B*T*NH*32), dl, do, o, B, T, NH, HS)
		tiles := B * NH * ((T + 63) / 64)
		dqk, dkvk := mmaKernel("flash_mma_dq", HS, qkv16, be.attn == "pipe"), "flash_tc_dkv"
		if HS <= 64 {
			dkvk = mmaKernel("flash_mma_dkv", HS, qkv16, false) // larger heads: flash_tc_dkv (see flash_mma.cuh)
		}
		qp, kp, vp := qkvPtr(qd, qkv16), qkvPtr(kd, qkv16), qkvPtr(vd, qkv16)
		if dq != nil {
			be.launchDims(dqk, tiles, 1, tcThreads, dqd, do, qp, kp, vp, l, dl, B, T, NH, NKV, HS, scale, zq)
		}
		if dk != nil || dv != nil {
			dkp, dvp := be.flashOutputs(op, dkd, dvd, B*T*NKV*HS)
			be.launchDims(dkvk, tiles, 1, tcThreads, dkp, dvp, do, qp, kp, vp, l, dl, B, T, NH, NKV, HS, scale)
		}
	})
}

// mma reports whether training attention runs flash_mma.cuh's kernels
// (SWERL_CUDA_ATTN=mma or pipe).
func (be *Backend) mma() bool { return be.attn == "mma" || be.attn == "pipe" }

// mmaKernel names the instance of an mma kernel for head size HS (its
// registers hold up to 64 channels, suffix 64, or 128) and q, k and v in
// bf16 (suffix _b16) or float32; with pipe (the forward and dq under
// SWERL_CUDA_ATTN=pipe) bf16 heads up to 64 take the double-buffered
// _pipe entry.
func mmaKernel(name string, HS int, qkv16, pipe bool) string {
	if pipe && qkv16 && HS <= 64 {
		return name + "64_pipe"
	}
	if HS <= 64 {
		name += "64"
	} else {
		name += "128"
	}
	if qkv16 {
		name += "_b16"
	}
	return name
}

// qkv16 reports whether q, k and v are bf16 activations (SplitQKV16
// wrote them), all three or none; only the mma kernels for heads up to
// 64 channels read them so. ok false: refused, the op failed.
func (be *Backend) qkv16(op string, q, k, v *buf, HS int) (half, ok bool) {
	if q == nil || k == nil || v == nil {
		return false, be.error() == nil
	}
	half = q.a.only16
	if half != k.a.only16 || half != v.a.only16 || half && (!be.mma() || HS > 64) {
		be.fail(op, "q, k and v are bf16 activations all or none, and only for the mma attention with heads up to 64 channels (SWERL_CUDA_ATTN=%s, HS=%d)", be.attn, HS)
		return false, false
	}
	return half, true
}

// qkvPtr is an attention operand's device address: its bf16 values when
// half, else its float32 ones.
func qkvPtr(b *buf, half bool) cu.DevicePtr {
	if half {
		return b.ptr16()
	}
	return b.ptr()
}

// flashOutputs returns dk and dv for a kernel that writes both, a
// missing one replaced by scratch of n floats (driver thread).
func (be *Backend) flashOutputs(op string, dk, dv *buf, n int) (*buf, *buf) {
	if dk == nil || dv == nil {
		s := be.flashScratch(op, n)
		if dk == nil {
			dk = s
		}
		if dv == nil {
			dv = s
		}
	}
	return dk, dv
}

// flashScratch returns a device buffer of at least n floats (driver thread).
func (be *Backend) flashScratch(op string, n int) *buf {
	if be.flashTmp == nil || be.flashTmp.n < n {
		if be.flashTmp != nil {
			_ = cu.MemFree(be.flashTmp.a.ptr)
		}
		b, err := be.alloc(n)
		if err != nil {
			be.fail(op, "%v", err)
			return nil
		}
		be.flashTmp = b
	}
	return be.flashTmp
}
