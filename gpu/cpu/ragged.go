package cpu

import "swerl/gpu"

// The ops of gpu.RaggedAttention: a BatchSampler step's per-sequence part
// of a decoder layer for all its rows in one call each, instead of a
// RoPEForward, two Copy and an AttentionForward per sequence, each of
// them a round of the worker pool. Every row is computed alone (RoPE at
// its position, attention over its own cache rows with the same code as
// AttentionForward), so a row's result does not depend on the others.

// RoPERows implements gpu.RaggedAttention.
func (be *Backend[F]) RoPERows(x, cos, sin gpu.Buf, pos []int32, H, HS int) {
	const op = "rope rows"
	d, cs, sn := be.get(op, x), be.get(op, cos), be.get(op, sin)
	if HS <= 0 || HS%2 != 0 || H <= 0 {
		be.fail(op, "bad shape H=%d HS=%d", H, HS)
		return
	}
	half := HS / 2
	if !be.need(op, len(pos)*H*HS, "x", d) {
		return
	}
	for n, p := range pos {
		if p < 0 || (int(p)+1)*half > min(len(cs), len(sn)) {
			be.fail(op, "row %d at position %d outside the table of %d positions", n, p, min(len(cs), len(sn))/half)
			return
		}
	}
	runJob(be.pool, &be.jobs.ropeJob, ropeJob[F]{d: d, cs: cs, sn: sn, pos: pos, T: 1, NH: H, HS: HS, half: half, s: 1}, len(pos), 8)
}

// ScatterRows implements gpu.RaggedAttention.
func (be *Backend[F]) ScatterRows(dst, src gpu.Buf, idx []int32, W int) {
	const op = "scatter rows"
	d, s := be.get(op, dst), be.get(op, src)
	if !be.need(op, len(idx)*W, "src", s) {
		return
	}
	for n, i := range idx {
		if i < 0 || (int(i)+1)*W > len(d) {
			be.fail(op, "row %d to row %d outside dst of %d rows", n, i, len(d)/max(W, 1))
			return
		}
		copy(d[int(i)*W:][:W], s[n*W:][:W])
	}
}

// AttentionRows implements gpu.RaggedAttention.
func (be *Backend[F]) AttentionRows(out, q, k, v gpu.Buf, start, cnt []int32, NH, NKV, HS int) {
	const op = "attention rows"
	o, qd, kd, vd := be.get(op, out), be.get(op, q), be.get(op, k), be.get(op, v)
	N := len(start)
	if len(cnt) != N {
		be.fail(op, "%d starts and %d counts", N, len(cnt))
		return
	}
	if !be.attnShapes(op, N, 1, 1, NH, NKV, HS) || !be.need(op, N*NH*HS, "out", o, "q", qd) {
		return
	}
	W := NKV * HS
	maxCnt := 0
	for n := range N {
		s, c := int(start[n]), int(cnt[n])
		if s < 0 || c < 1 || (s+c)*W > min(len(kd), len(vd)) {
			be.fail(op, "row %d reads %d cache rows from row %d, outside k and v of %d rows", n, c, s, min(len(kd), len(vd))/W)
			return
		}
		maxCnt = max(maxCnt, c)
	}
	runJob(be.pool, &be.jobs.attnRows, attnRows[F]{o: o, qd: qd, kd: kd, vd: vd, start: start, cnt: cnt, NH: NH, NKV: NKV, HS: HS,
		scale: 1 / sqrt(F(HS)), maxCnt: maxCnt, vec: &be.vec}, N*NH, 1)
}
