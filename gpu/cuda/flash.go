//go:build cuda

package cuda

import (
	"math"

	"gorgonia.org/cu"

	"swerl/gpu"
)

var _ gpu.FlashAttention = (*Backend)(nil)

// flashTile is the kernels' tile (FT in kernels.cu): rows or keys a block owns.
const flashTile = 32

// FlashSupported implements gpu.FlashAttention: with SWERL_CUDA_ATTN=flash,
// head sizes that are a multiple of 32, up to 128 (a lane keeps at most
// four channels); with SWERL_CUDA_ATTN=tc, multiples of 16 (the tensor
// cores' tile) up to 128, and so with SWERL_CUDA_ATTN=mma.
func (be *Backend) FlashSupported(NH, NKV, HS int) bool {
	step := 0
	switch be.attn {
	case "flash":
		step = 32
	case "tc", "mma":
		step = 16
	}
	return step > 0 && HS > 0 && HS%step == 0 && HS <= 128 && NKV > 0 && NH%NKV == 0
}

// tcThreads is a tensor-core flash block (TCW warps in kernels.cu); each
// block owns 64 rows or keys.
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
	o, l, qd, kd, vd := be.get(op, out), be.get(op, lse), be.get(op, q), be.get(op, k), be.get(op, v)
	if !be.flashShapes(op, B, T, NH, NKV, HS) ||
		!be.need(op, B*T*NH*HS, "out", o, "q", qd) || !be.need(op, B*T*NKV*HS, "k", kd, "v", vd) ||
		!be.need(op, B*NH*T, "lse", l) || B*T == 0 {
		return
	}
	tiles := (T + flashTile - 1) / flashTile
	scale := float32(1 / math.Sqrt(float64(HS)))
	if be.attn == "tc" || be.attn == "mma" {
		kernel := "flash_tc_fwd"
		if be.attn == "mma" {
			kernel = mmaKernel("flash_mma_fwd", HS) // the same blocks: 4 warps, 64 rows
		}
		be.post(func() {
			be.launchDims(kernel, B*NH*((T+63)/64), 1, tcThreads, o, l, qd, kd, vd, B, T, NH, NKV, HS, scale)
		})
		return
	}
	be.post(func() { be.launch("flash_fwd", B*NH*tiles, o, l, qd, kd, vd, B, T, NH, NKV, HS, scale) })
}

// AttentionBackwardLSE implements gpu.FlashAttention.
func (be *Backend) AttentionBackwardLSE(dq, dk, dv, delta, dout, out, q, k, v, lse gpu.Buf, B, T, NH, NKV, HS int) {
	const op = "flash attention backward"
	dqd, dkd, dvd, dl, do := be.get(op, dq), be.get(op, dk), be.get(op, dv), be.get(op, delta), be.get(op, dout)
	o, qd, kd, vd, l := be.get(op, out), be.get(op, q), be.get(op, k), be.get(op, v), be.get(op, lse)
	if !be.flashShapes(op, B, T, NH, NKV, HS) ||
		!be.need(op, B*T*NH*HS, "dout", do, "out", o, "q", qd) || !be.need(op, B*T*NKV*HS, "k", kd, "v", vd) ||
		!be.need(op, B*NH*T, "lse", l, "delta", dl) ||
		dq != nil && !be.need(op, B*T*NH*HS, "dq", dqd) ||
		dk != nil && !be.need(op, B*T*NKV*HS, "dk", dkd) || dv != nil && !be.need(op, B*T*NKV*HS, "dv", dvd) {
		return
	}
	if B*T == 0 || dq == nil && dk == nil && dv == nil {
		return
	}
	tiles := (T + flashTile - 1) / flashTile
	scale := float32(1 / math.Sqrt(float64(HS)))
	be.post(func() {
		be.launch("flash_delta", be.gridFor(B*T*NH*32), dl, do, o, B, T, NH, HS)
		if be.attn == "tc" || be.attn == "mma" {
			tiles := B * NH * ((T + 63) / 64)
			dqk, dkvk := "flash_tc_dq", "flash_tc_dkv"
			if be.attn == "mma" {
				dqk = mmaKernel("flash_mma_dq", HS)
				if HS <= 64 {
					dkvk = "flash_mma_dkv64" // larger heads: flash_tc_dkv (see flash_mma.cuh)
				}
			}
			if dq != nil {
				be.launchDims(dqk, tiles, 1, tcThreads, dqd, do, qd, kd, vd, l, dl, B, T, NH, NKV, HS, scale)
			}
			if dk != nil || dv != nil {
				dkp, dvp := be.flashOutputs(op, dkd, dvd, B*T*NKV*HS)
				be.launchDims(dkvk, tiles, 1, tcThreads, dkp, dvp, do, qd, kd, vd, l, dl, B, T, NH, NKV, HS, scale)
			}
			return
		}
		if dq != nil {
			be.launch("flash_bwd_dq", B*NH*tiles, dqd, do, qd, kd, vd, l, dl, B, T, NH, NKV, HS, scale)
		}
		if dk != nil || dv != nil {
			dkp, dvp := be.flashOutputs(op, dkd, dvd, B*T*NKV*HS)
			be.launch("flash_bwd_dkv", B*NH*tiles, dkp, dvp, do, qd, kd, vd, l, dl, B, T, NH, NKV, HS, scale)
		}
	})
}

// mmaKernel names the instance of an mma kernel for head size HS: its
// registers hold up to 64 channels (suffix 64) or 128.
func mmaKernel(name string, HS int) string {
	if HS <= 64 {
		return name + "64"
	}
	return name + "128"
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
