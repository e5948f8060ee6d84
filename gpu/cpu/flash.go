package cpu

import (
	"math"

	"swerl/gpu"
)

// gpu.FlashAttention on the CPU: training keeps each row's log-sum-exp,
// [B,NH,T] a layer, instead of its probabilities, [B,NH,T,T] a layer (at
// SmolLM2's 9 heads and 8 sequences of 1,024 tokens: 2.3 MB against 2.3 GB
// over 30 layers). The backward recomputes one head's probabilities at a
// time, row by row with the forward's own kernel (vecOps.probs), into a
// worker's [T,T] scratch, and then runs the dense backward's per-head code
// on it: the same operations in the same order as AttentionForward and
// AttentionBackward, so the gradients are bitwise the dense path's, for
// one more q·k pass.

// FlashSupported implements gpu.FlashAttention: every shape the dense
// attention takes.
func (be *Backend[F]) FlashSupported(NH, NKV, HS int) bool {
	return NKV > 0 && HS > 0 && NH%NKV == 0
}

// AttentionForwardLSE implements gpu.FlashAttention.
func (be *Backend[F]) AttentionForwardLSE(out, lse, q, k, v gpu.Buf, B, T, NH, NKV, HS int) {
	const op = "attention forward (flash)"
	o, l, qd, kd, vd := be.get(op, out), be.get(op, lse), be.get(op, q), be.get(op, k), be.get(op, v)
	if !be.attnShapes(op, B, T, T, NH, NKV, HS) ||
		!be.need(op, B*T*NH*HS, "out", o, "q", qd) || !be.need(op, B*T*NKV*HS, "k", kd, "v", vd) ||
		!be.need(op, B*NH*T, "lse", l) {
		return
	}
	runJob(be.pool, &be.jobs.flashForward, flashForward[F]{o: o, lse: l, qd: qd, kd: kd, vd: vd, NH: NH, NKV: NKV, T: T, HS: HS, scale: 1 / sqrt(F(HS)), vec: &be.vec}, B*NH, 1)
}

// AttentionBackwardLSE implements gpu.FlashAttention. It recomputes the
// probabilities from q and k as the forward did, so it reads neither out
// nor lse, and leaves delta as it is.
func (be *Backend[F]) AttentionBackwardLSE(dq, dk, dv, delta, dout, out, q, k, v, lse gpu.Buf, B, T, NH, NKV, HS int) {
	const op = "attention backward (flash)"
	dqd, dkd, dvd, do := be.get(op, dq), be.get(op, dk), be.get(op, dv), be.get(op, dout)
	qd, kd, vd := be.get(op, q), be.get(op, k), be.get(op, v)
	if !be.attnShapes(op, B, T, T, NH, NKV, HS) ||
		!be.need(op, B*T*NH*HS, "dout", do, "q", qd) || !be.need(op, B*T*NKV*HS, "k", kd, "v", vd) {
		return
	}
	if dq != nil && !be.need(op, B*T*NH*HS, "dq", dqd) ||
		dk != nil && !be.need(op, B*T*NKV*HS, "dk", dkd) || dv != nil && !be.need(op, B*T*NKV*HS, "dv", dvd) {
		return
	}
	runJob(be.pool, &be.jobs.flashBackward, flashBackward[F]{attnBackward[F]{dqd: dqd, dkd: dkd, dvd: dvd, do: do, qd: qd, kd: kd, vd: vd,
		NH: NH, NKV: NKV, Tq: T, Tk: T, HS: HS, group: NH / NKV, scale: 1 / sqrt(F(HS)), vec: &be.vec}}, B*NKV, 1)
}

// flashForward runs AttentionForwardLSE over (batch, query head) pairs;
// its fields are the op's operands.
type flashForward[F float] struct {
	o, lse, qd, kd, vd []F
	NH, NKV, T, HS     int
	scale              F
	vec                *vecOps[F]
}

func (j *flashForward[F]) run(lo, hi int) {
	NH, NKV, T, HS := j.NH, j.NKV, j.T, j.HS
	stride, group := NKV*HS, NH/NKV
	p := make([]F, T)
	for bh := lo; bh < hi; bh++ {
		b, h := bh/NH, bh%NH
		keys, vals := j.kd[(b*T*NKV+h/group)*HS:], j.vd[(b*T*NKV+h/group)*HS:]
		for i := range T {
			at := ((b*T+i)*NH + h) * HS
			mx, sum := j.vec.attend(j.o[at:][:HS], j.qd[at:][:HS], keys, vals, stride, p[:i+1], j.scale)
			j.lse[(b*NH+h)*T+i] = mx + F(math.Log(float64(sum)))
		}
	}
}

// flashBackward runs AttentionBackwardLSE over (batch, kv head) pairs:
// attnBackward's fields without its probabilities (a, da, cols), which
// each call of run holds for one head at a time.
type flashBackward[F float] struct{ attnBackward[F] }

func (j *flashBackward[F]) run(lo, hi int) {
	NH, NKV, T, HS := j.NH, j.NKV, j.Tq, j.HS
	stride := NKV * HS
	att, datt, col := make([]F, T*T), make([]F, T*T), make([]F, T)
	for bk := lo; bk < hi; bk++ {
		b, kh := bk/NKV, bk%NKV
		keys := j.kd[(b*T*NKV+kh)*HS:]
		for h := kh * j.group; h < (kh+1)*j.group; h++ {
			for i := range T {
				row := att[i*T:][:T]
				j.vec.probs(j.qd[((b*T+i)*NH+h)*HS:][:HS], keys, stride, row[:i+1], j.scale)
				clear(row[i+1:])
			}
			j.head(b, h, att, datt, col)
		}
	}
}
