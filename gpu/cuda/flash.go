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
// four channels).
func (be *Backend) FlashSupported(NH, NKV, HS int) bool {
	return be.attn == "flash" && HS > 0 && HS%32 == 0 && HS <= 128 && NKV > 0 && NH%NKV == 0
}

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
		if dq != nil {
			be.launch("flash_bwd_dq", B*NH*tiles, dqd, do, qd, kd, vd, l, dl, B, T, NH, NKV, HS, scale)
		}
		if dk != nil || dv != nil {
			// The kernel writes both; a missing one goes to scratch.
			dkp, dvp := dkd, dvd
			if dkp == nil || dvp == nil {
				s := be.flashScratch(op, B*T*NKV*HS)
				if dkp == nil {
					dkp = s
				}
				if dvp == nil {
					dvp = s
				}
			}
			be.launch("flash_bwd_dkv", B*NH*tiles, dkp, dvp, do, qd, kd, vd, l, dl, B, T, NH, NKV, HS, scale)
		}
	})
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
