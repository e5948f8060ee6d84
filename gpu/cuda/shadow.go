//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"swerl/gpu"
)

var _ gpu.BF16Weights = (*Backend)(nil)

// KeepBF16 implements gpu.BF16Weights: in the bf16 matmul mode the
// products read x's weights from a bf16 copy of the whole allocation,
// made at first use, instead of converting them at every product. AdamW
// writes the copy as it updates the weights; Upload, Copy, Axpy and Zero
// into the allocation mark it stale, and the next product converts it
// again. x must be a whole allocation (not a Slice).
func (be *Backend) KeepBF16(x gpu.Buf) error {
	const op = "keep bf16"
	b := be.get(op, x)
	if b == nil || be.error() != nil {
		return be.error()
	}
	if b.off != 0 || b.n != b.a.n {
		// A hint refused, not a failed op: the backend stays usable.
		return fmt.Errorf("cuda: %s: want a whole allocation, got a window of %d of %d elements", op, b.n, b.a.n)
	}
	be.do(func() { b.a.keep16 = true })
	return be.error()
}

var _ gpu.FrozenWeights = (*Backend)(nil)

// bf16 reports whether the products are in the bf16 mode now.
func (be *Backend) bf16() bool {
	var c int
	be.do(func() { c = be.blas.compute })
	return c == computeFastBF
}

// frozenChunk is how many floats UploadFrozen stages on the device at a
// time on their way to bf16 (128 MiB).
const frozenChunk = 32 << 20

// UploadFrozen implements gpu.FrozenWeights. In the bf16 matmul mode the
// buffer holds bf16 values only, the same ones the products would convert
// the float32 weights into at each use: data goes up in chunks through a
// float32 staging buffer and f32_to_bf16. In the f32 and tf32 modes it is
// an ordinary buffer. A product that meets a bf16-only weight after
// SetMatmul left the bf16 mode fails rather than read it as float32.
func (be *Backend) UploadFrozen(data []float32) (gpu.Buf, error) {
	const op = "upload frozen"
	if err := be.error(); err != nil {
		return nil, err
	}
	if !be.bf16() {
		b, err := be.Alloc(len(data))
		if err != nil {
			return nil, err
		}
		be.Upload(b, data)
		return b, be.error()
	}
	var out *buf
	be.do(func() {
		n := len(data)
		half, err := cu.MemAlloc(int64(2 * max(n, 1)))
		if err != nil {
			be.fail(op, "alloc %d bf16 values: %v", n, err)
			return
		}
		a := &alloc{n: n, keep16: true, half: half, halfOK: true, only16: true}
		if n > 0 {
			stage, err := be.alloc(min(n, frozenChunk))
			if err != nil {
				_ = cu.MemFree(half)
				be.fail(op, "%v", err)
				return
			}
			// The copies and conversions are ordered on the default
			// stream, so the staging buffer is refilled only after the
			// previous chunk's conversion has read it.
			for off := 0; off < n && be.error() == nil; off += frozenChunk {
				k := min(frozenChunk, n-off)
				if err := cu.MemcpyHtoD(stage.ptr(), unsafe.Pointer(&data[off]), int64(4*k)); err != nil {
					be.fail(op, "%v", err)
					break
				}
				be.launch("f32_to_bf16", be.gridFor(k), half+cu.DevicePtr(2*off), stage.ptr(), int64(k))
			}
			if err := cu.Synchronize(); err != nil {
				be.fail(op, "%v", err)
			}
			_ = cu.MemFree(stage.a.ptr)
			if be.error() != nil {
				_ = cu.MemFree(half)
				return
			}
		}
		out = &buf{a: a, n: n}
	})
	if err := be.error(); err != nil {
		return nil, err
	}
	return out, nil
}

var _ gpu.BF16Activations = (*Backend)(nil)

// AllocBF16 implements gpu.BF16Activations: in the bf16 matmul mode
// (unless SWERL_CUDA_ACT=f32), n zeroed bf16 values (2 bytes each) that
// RMSNormForward and SwiGLUForward write and the products read as their
// input without converting it; otherwise an ordinary buffer.
func (be *Backend) AllocBF16(n int) (gpu.Buf, error) {
	if n < 0 {
		return nil, fmt.Errorf("cuda: alloc bf16: negative size %d", n)
	}
	if !be.act16 || !be.bf16() {
		return be.Alloc(n)
	}
	var out *buf
	var err error
	be.do(func() {
		var p cu.DevicePtr
		if p, err = cu.MemAlloc(int64(2 * max(n, 2))); err != nil {
			err = fmt.Errorf("cuda: alloc %d bf16 values: %w", n, err)
			return
		}
		if err = cu.MemsetD32(p, 0, int64((max(n, 2)+1)/2)); err != nil {
			_ = cu.MemFree(p)
			err = fmt.Errorf("cuda: alloc %d bf16 values: zero: %w", n, err)
			return
		}
		out = &buf{a: &alloc{n: n, half: p, keep16: true, halfOK: true, only16: true, act: true}, n: n}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// out16 unwraps the output of a producer of activations (op): a bf16
// activation is accepted, frozen weights are not.
func (be *Backend) out16(op string, x gpu.Buf) *buf {
	b := be.weight(op, x)
	if b != nil && b.a.only16 && !b.a.act {
		be.fail(op, "a frozen bf16 weight buffer (UploadFrozen) is not written")
		return nil
	}
	return b
}

// grad16 unwraps x as dest does (no settling: x may take a pending
// zero), but accepts a bf16 activation: the gradients only products read
// (dgate, dup, dlogits) are held in bf16, and Zero, SwiGLUBackward and
// LogProbBackward write them.
func (be *Backend) grad16(op string, x gpu.Buf) *buf {
	b := be.unwrap(op, x)
	if b != nil && b.a.only16 && !b.a.act {
		return be.get(op, x) // a frozen weight: refused there
	}
	return b
}

// ptr16 is the device address of b's window in its allocation's bf16
// values: a bf16-only buffer, or the bf16 copy kept beside float32 ones.
func (b *buf) ptr16() cu.DevicePtr { return b.a.half + cu.DevicePtr(2*b.off) }

// wrote marks the bf16 copy of b's allocation stale (driver thread): an op
// other than AdamW wrote into it.
func (be *Backend) wrote(b *buf) {
	if b != nil && b.a.half != 0 && !b.a.only16 { // bf16-only: the copy is the buffer
		b.a.halfOK = false
	}
}

// weight16 returns the bf16 form of the n elements of product operand w,
// a weight or an input (driver thread): a window of its allocation's bf16
// copy when the allocation keeps one (bf16-only buffers are that copy),
// else a conversion into scratch slot. 0 after a failure.
func (be *Backend) weight16(slot int, w *buf, n int) cu.DevicePtr {
	a := w.a
	if !a.keep16 {
		return be.half(slot, w.ptr(), n)
	}
	if a.half == 0 {
		p, err := cu.MemAlloc(int64(2 * max(a.n, 1)))
		if err != nil {
			// Out of memory for the copy: convert at every use, as
			// without KeepBF16.
			a.keep16 = false
			return be.half(slot, w.ptr(), n)
		}
		a.half = p
	}
	if !a.halfOK {
		be.launch("f32_to_bf16", be.gridFor(a.n), a.half, a.ptr, int64(a.n))
		a.halfOK = be.error() == nil
	}
	return w.ptr16()
}

// fresh16 is the bf16 copy of p's window for AdamW to write (driver
// thread): 0 when p's allocation keeps none or it is stale (then the next
// product converts it whole).
func fresh16(p *buf) cu.DevicePtr {
	if p.a.half == 0 || !p.a.halfOK {
		return 0
	}
	return p.ptr16()
}

var _ gpu.GreedyPicker = (*Backend)(nil)

// pickParts is PP in pick.cuh: the blocks that share a row of logits.
const pickParts = 16

// PickGreedy implements gpu.GreedyPicker with the kernels of pick.cuh
// (pickParts blocks a row, then a warp a row merging their parts), then
// one download of 2·rows words.
func (be *Backend) PickGreedy(logits gpu.Buf, rows, V int, tok []int32, logp []float32) error {
	const op = "pick greedy"
	lg := be.get(op, logits)
	if !be.need(op, rows*V, "logits", lg) {
		return be.error()
	}
	if rows < 0 || V <= 0 || len(tok) < rows || len(logp) < rows {
		be.fail(op, "rows %d, V %d with room for %d tokens and %d log-probs", rows, V, len(tok), len(logp))
		return be.error()
	}
	if rows == 0 {
		return nil
	}
	be.do(func() {
		// tok and logp, then the parts: 16 bytes each (float, int, double),
		// 8-byte aligned after 2·rows words.
		need := 2*rows + 4*pickParts*rows
		if be.pickBuf == nil || be.pickBuf.n < need {
			if be.pickBuf != nil {
				_ = cu.MemFree(be.pickBuf.a.ptr)
				be.pickBuf = nil
			}
			b, err := be.alloc(need)
			if err != nil {
				be.fail(op, "%v", err)
				return
			}
			be.pickBuf = b
		}
		out := be.pickBuf.ptr()
		parts := out + cu.DevicePtr(8*rows)
		be.launch("pick_part", rows*pickParts, parts, lg, rows, V)
		be.launchDims("pick_merge", rows, 1, 32, out, out+cu.DevicePtr(4*rows), parts, lg, rows, V)
		if be.error() != nil {
			return
		}
		if err := cu.Synchronize(); err != nil {
			be.fail(op, "kernel failure: %v", err)
			return
		}
		t := be.begin()
		err1 := cu.MemcpyDtoH(unsafe.Pointer(&tok[0]), out, int64(4*rows))
		err2 := cu.MemcpyDtoH(unsafe.Pointer(&logp[0]), out+cu.DevicePtr(4*rows), int64(4*rows))
		be.end(t, "memcpy DtoH", 0)
		if err := errors.Join(err1, err2); err != nil {
			be.fail(op, "%v", err)
		}
	})
	return be.error()
}
