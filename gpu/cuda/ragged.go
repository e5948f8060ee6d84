//go:build cuda

package cuda

import (
	"math"
	"slices"
	"unsafe"

	"gorgonia.org/cu"

	"swerl/gpu"
)

var _ gpu.RaggedAttention = (*Backend)(nil)

// intSlot is a device copy of a host []int32 that is re-sent only when it
// changes: a decoding step passes the same row indices to every layer.
type intSlot struct {
	dev  *buf
	host []int32
}

// cachedInts returns a device copy of ids in the slot named key, copying
// only when ids differ from the last ones sent there (driver thread).
func (be *Backend) cachedInts(op, key string, ids []int32) *buf {
	if be.ints == nil {
		be.ints = map[string]*intSlot{}
	}
	sl := be.ints[key]
	if sl == nil {
		sl = &intSlot{}
		be.ints[key] = sl
	}
	if sl.dev != nil && slices.Equal(sl.host, ids) {
		return sl.dev
	}
	if sl.dev == nil || sl.dev.n < len(ids) {
		if sl.dev != nil {
			_ = cu.MemFree(sl.dev.a.ptr)
		}
		b, err := be.alloc(max(len(ids), 1024))
		if err != nil {
			be.fail(op, "%v", err)
			return nil
		}
		sl.dev = b
	}
	if len(ids) > 0 {
		if err := cu.MemcpyHtoD(sl.dev.ptr(), unsafe.Pointer(&ids[0]), int64(4*len(ids))); err != nil {
			be.fail(op, "upload ids: %v", err)
			return nil
		}
	}
	sl.host = append(sl.host[:0], ids...)
	return sl.dev
}

// RoPERows implements gpu.RaggedAttention.
func (be *Backend) RoPERows(x, cos, sin gpu.Buf, pos []int32, H, HS int) {
	const op = "rope rows"
	d, cs, sn := be.get(op, x), be.get(op, cos), be.get(op, sin)
	N := len(pos)
	if !be.ropeShape(op, H, HS) || !be.need(op, N*H*HS, "x", d) || !be.positions(op, pos, cs, sn, HS) || N == 0 {
		return
	}
	pos = slices.Clone(pos) // read later on the driver thread
	be.post(func() {
		t := be.cachedInts(op, "pos", pos)
		be.launch("rope_rows", be.gridFor(N*H*HS/2), d, cs, sn, t, N, H, HS, float32(1))
	})
}

// ropeShape fails op unless there are heads of an even, positive size.
func (be *Backend) ropeShape(op string, H, HS int) bool {
	if be.error() == nil && (HS <= 0 || HS%2 != 0 || H <= 0) {
		be.fail(op, "head size %d is not positive and even, or %d heads", HS, H)
	}
	return be.error() == nil
}

// positions fails op unless every position has a row in the RoPE tables
// cs and sn ([P, HS/2]).
func (be *Backend) positions(op string, pos []int32, cs, sn *buf, HS int) bool {
	if !be.need(op, 0, "cos", cs, "sin", sn) {
		return false
	}
	P := min(cs.n, sn.n) / (HS / 2)
	for n, p := range pos {
		if p < 0 || int(p) >= P {
			be.fail(op, "row %d at position %d outside the %d positions of the tables", n, p, P)
			return false
		}
	}
	return true
}

// destinations fails op unless every index names one of rows rows of dst.
func (be *Backend) destinations(op string, idx []int32, rows int) bool {
	for n, i := range idx {
		if i < 0 || int(i) >= rows {
			be.fail(op, "row %d goes to row %d outside the %d rows of dst", n, i, rows)
			return false
		}
	}
	return be.error() == nil
}

// ScatterRows implements gpu.RaggedAttention.
func (be *Backend) ScatterRows(dst, src gpu.Buf, idx []int32, W int) {
	const op = "scatter rows"
	d, s := be.get(op, dst), be.get(op, src)
	N := len(idx)
	if !be.need(op, N*W, "src", s) || !be.need(op, 0, "dst", d) || N*W == 0 || !be.destinations(op, idx, d.n/W) {
		return
	}
	idx = slices.Clone(idx)
	be.post(func() {
		t := be.cachedInts(op, "scatter", idx)
		be.launch("scatter_rows", be.gridFor(N*W), d, s, t, N, W)
	})
}

var _ gpu.RaggedKV = (*Backend)(nil)

// RoPEScatterRows implements gpu.RaggedKV with one launch of rope_kv_rows
// (attn_rows.cuh) instead of RoPERows twice and ScatterRows twice; k is
// not written.
func (be *Backend) RoPEScatterRows(q, k, v, kc, vc, cos, sin gpu.Buf, pos, dst []int32, NH, NKV, HS int) {
	be.RoPEScatterRowsBias(q, k, v, kc, vc, cos, sin, nil, nil, nil, pos, dst, NH, NKV, HS)
}

var _ gpu.RaggedKVBias = (*Backend)(nil)

// RaggedBias implements gpu.RaggedKVBias: unless SWERL_CUDA_FUSE=0, so
// that the q, k and v projections of a decoding step skip their
// bias_fill launches.
func (be *Backend) RaggedBias() bool { return be.fuse }

// RoPEScatterRowsBias implements gpu.RaggedKVBias: rope_kv_rows adds the
// biases that are not nil; k and v are not written.
func (be *Backend) RoPEScatterRowsBias(q, k, v, kc, vc, cos, sin, qb, kb, vb gpu.Buf, pos, dst []int32, NH, NKV, HS int) {
	const op = "rope scatter rows"
	qd, kd, vd, kcd, vcd := be.get(op, q), be.get(op, k), be.get(op, v), be.get(op, kc), be.get(op, vc)
	cs, sn := be.get(op, cos), be.get(op, sin)
	qbd, kbd, vbd := be.get(op, qb), be.get(op, kb), be.get(op, vb)
	N, W := len(pos), NKV*HS
	if be.error() == nil && len(dst) != N {
		be.fail(op, "%d positions but %d destinations", N, len(dst))
	}
	if !be.ropeShape(op, min(NH, NKV), HS) || !be.need(op, N*NH*HS, "q", qd) || !be.need(op, N*W, "k", kd, "v", vd) ||
		!be.need(op, 0, "kc", kcd, "vc", vcd) || !be.positions(op, pos, cs, sn, HS) ||
		qb != nil && !be.need(op, NH*HS, "qb", qbd) || kb != nil && !be.need(op, W, "kb", kbd) ||
		vb != nil && !be.need(op, W, "vb", vbd) || !be.destinations(op, dst, min(kcd.n, vcd.n)/W) || N == 0 {
		return
	}
	pos, dst = slices.Clone(pos), slices.Clone(dst)
	be.post(func() {
		tp := be.cachedInts(op, "pos", pos)
		td := be.cachedInts(op, "scatter", dst)
		be.launch("rope_kv_rows", be.gridFor(N*(NH+3*NKV)*HS/2), qd, kd, vd, kcd, vcd, cs, sn, tp, td, qbd, kbd, vbd, N, NH, NKV, HS)
	})
}

// gqaThreads is a block of attn_rows_gqa (RW warps in attn_rows.cuh).
const gqaThreads = 256

// gqaRows reports whether attn_rows_gqa takes the shape (attn_rows.cuh):
// one block per row and kv head for up to 8 query heads a group, head
// sizes a multiple of 32 up to 128; attn_rows takes the others.
func gqaRows(NH, NKV, HS int) bool {
	return HS%32 == 0 && HS <= 128 && NH/NKV <= 8
}

// AttentionRows implements gpu.RaggedAttention.
func (be *Backend) AttentionRows(out, q, k, v gpu.Buf, start, cnt []int32, NH, NKV, HS int) {
	const op = "attention rows"
	o, qd, kd, vd := be.get(op, out), be.get(op, q), be.get(op, k), be.get(op, v)
	N := len(start)
	switch {
	case be.error() != nil:
		return
	case len(cnt) != N:
		be.fail(op, "%d starts but %d counts", N, len(cnt))
	case HS <= 0 || HS > block || NH <= 0 || NKV <= 0 || NH%NKV != 0:
		be.fail(op, "bad shape NH=%d NKV=%d HS=%d (HS at most %d)", NH, NKV, HS, block)
	}
	if !be.need(op, N*NH*HS, "out", o, "q", qd) || !be.need(op, 0, "k", kd, "v", vd) || N == 0 {
		return
	}
	rows := min(kd.n, vd.n) / (NKV * HS)
	for n := range start {
		if cnt[n] < 1 || start[n] < 0 || int(start[n])+int(cnt[n]) > rows {
			be.fail(op, "row %d sees key rows [%d, %d) outside 1..%d rows", n, start[n], int(start[n])+int(cnt[n]), rows)
			return
		}
	}
	start, cnt = slices.Clone(start), slices.Clone(cnt)
	scale := float32(1 / math.Sqrt(float64(HS)))
	be.post(func() {
		ts := be.cachedInts(op, "start", start)
		tc := be.cachedInts(op, "count", cnt)
		if gqaRows(NH, NKV, HS) {
			be.launchDims("attn_rows_gqa", N*NKV, 1, gqaThreads, o, qd, kd, vd, ts, tc, NH, NKV, HS, scale)
			return
		}
		be.launch("attn_rows", N*NH, o, qd, kd, vd, ts, tc, NH, NKV, HS, scale)
	})
}
