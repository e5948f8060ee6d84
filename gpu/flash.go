package gpu

// FlashAttention is an optional Backend capability: causal attention for
// training (Tq = Tk = T) that never forms the [B,NH,T,T] probabilities.
// The forward keeps each query row's log-sum-exp; the backward recomputes
// the probabilities tile by tile from it. The Trainer uses it when the
// backend has it and FlashSupported accepts the shape, and then holds
// [B,NH,T] per layer where AttentionForward needs [B,NH,T,T].
type FlashAttention interface {
	// FlashSupported reports whether the two ops below take these heads.
	FlashSupported(NH, NKV, HS int) bool
	// AttentionForwardLSE is AttentionForward with Tq = Tk = T that writes
	// lse[B,NH,T] = log(sum_j exp(score_j)) of each row's scaled scores
	// instead of the probabilities.
	AttentionForwardLSE(out, lse, q, k, v Buf, B, T, NH, NKV, HS int)
	// AttentionBackwardLSE accumulates dq, dk, dv (each may be nil) from
	// dout[B,T,NH,HS], given the forward's out and lse; delta[B,NH,T] is
	// scratch (overwritten).
	AttentionBackwardLSE(dq, dk, dv, delta, dout, out, q, k, v, lse Buf, B, T, NH, NKV, HS int)
}

// flashOf returns be's FlashAttention when it takes d's heads.
func flashOf(be Backend, d dims) FlashAttention {
	if fa, ok := be.(FlashAttention); ok && fa.FlashSupported(d.NH, d.NKV, d.HS) {
		return fa
	}
	return nil
}

// attLen is the per-layer size of the attention buffer the backward pass
// needs for B sequences of T tokens: log-sum-exps with FlashAttention, the
// probabilities otherwise.
func attLen(be Backend, d dims, B, T int) int {
	if flashOf(be, d) != nil {
		return B * d.NH * T
	}
	return B * d.NH * T * T
}
