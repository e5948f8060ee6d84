package gpu

// RaggedAttention is an optional Backend capability for decoding many
// sequences at once: the per-sequence part of a decoder layer (RoPE at
// each token's own position, the KV cache write, attention over the
// token's own cache rows) for every row of a step in one call each,
// instead of one call per sequence. A BatchSampler over a backend with it
// keeps the KV caches of all its slots in one buffer; without it, it
// calls RoPEForward, Copy and AttentionForward once per sequence.
//
// Host slices are read during the call only, as for Backend.
type RaggedAttention interface {
	// RoPERows rotates x[N,H,HS] in place like RoPEForward, row n at
	// position pos[n], N = len(pos).
	RoPERows(x, cos, sin Buf, pos []int32, H, HS int)
	// ScatterRows copies row n of src[N,W] to row idx[n] of dst,
	// N = len(idx).
	ScatterRows(dst, src Buf, idx []int32, W int)
	// AttentionRows is attention for query rows q[N,NH,HS], N = len(start):
	// row n attends to the key and value rows start[n] .. start[n]+cnt[n]-1
	// of k and v (rows of NKV*HS; query head h reads kv head h/(NH/NKV)),
	// scale 1/sqrt(HS); out[N,NH,HS] receives the weighted values. Every
	// cnt[n] is at least 1. Causality is the caller's: it names the rows a
	// query may see.
	AttentionRows(out, q, k, v Buf, start, cnt []int32, NH, NKV, HS int)
}

// RaggedKV is implemented by RaggedAttention backends that prepare a
// decoding step's queries and cache rows in one op: RoPEScatterRows
// rotates q[N,NH,HS] in place as RoPERows does, and writes the rows of
// k[N,NKV,HS], rotated likewise, and of v to rows dst[n] of kc and vc
// (rows of NKV*HS), N = len(pos) = len(dst): RoPERows on q and on k, then
// ScatterRows of k and of v, except that k itself may be left unrotated.
type RaggedKV interface {
	RoPEScatterRows(q, k, v, kc, vc, cos, sin Buf, pos, dst []int32, NH, NKV, HS int)
}

// RaggedKVBias is implemented by RaggedKV backends that can also add the
// attention's biases in that op: RoPEScatterRowsBias is RoPEScatterRows
// with qb [NH*HS] added to every row of q, and kb and vb [NKV*HS] to
// every row of k and v, before the rotation and the cache writes (a nil
// bias adds nothing), so that the q, k and v projections before it run
// without theirs. k and v themselves may be left without them. RaggedBias
// reports whether it may be used: a backend may offer it in some modes
// only.
type RaggedKVBias interface {
	RaggedBias() bool
	RoPEScatterRowsBias(q, k, v, kc, vc, cos, sin, qb, kb, vb Buf, pos, dst []int32, NH, NKV, HS int)
}
