package gpu_test

import (
	"math"
	"slices"
	"testing"

	"swerl/gpu"
	"swerl/gpu/cpu"
	"swerl/gpu/gputest"
)

// rowwise is the CPU backend with gpu.RaggedAttention composed from its
// per-sequence ops, one row at a time: a second implementation of the
// ragged contract, so that the gputest references of the ragged ops and
// the BatchSampler's ragged path (one KV cache for all slots, row indices
// per step) run here, without a GPU.
type rowwise struct{ *cpu.Backend[float32] }

func (r rowwise) RoPERows(x, cos, sin gpu.Buf, pos []int32, H, HS int) {
	for n, p := range pos {
		r.RoPEForward(r.Slice(x, n*H*HS, H*HS), cos, sin, 1, 1, H, HS, int(p))
	}
}

func (r rowwise) ScatterRows(dst, src gpu.Buf, idx []int32, W int) {
	for n, i := range idx {
		r.Copy(r.Slice(dst, int(i)*W, W), r.Slice(src, n*W, W))
	}
}

func (r rowwise) AttentionRows(out, q, k, v gpu.Buf, start, cnt []int32, NH, NKV, HS int) {
	W, QW := NKV*HS, NH*HS
	for n := range start {
		c := int(cnt[n])
		att, err := r.Alloc(NH * c)
		if err != nil {
			panic(err)
		}
		r.AttentionForward(r.Slice(out, n*QW, QW), att, r.Slice(q, n*QW, QW),
			r.Slice(k, int(start[n])*W, c*W), r.Slice(v, int(start[n])*W, c*W), 1, 1, c, NH, NKV, HS)
		r.Free(att)
	}
}

func TestRaggedContract(t *testing.T) {
	be := rowwise{cpu.New()}
	defer be.Close()
	gputest.TestBackend(t, be)
}

// TestRaggedBatchSampler: the BatchSampler's ragged path (one cache for
// every slot, the per-sequence ops for all rows at once) samples what its
// per-sequence path samples, through slot reuse and shared prefills.
func TestRaggedBatchSampler(t *testing.T) {
	m := sharpModel(t)
	prompts, ps := batchRequests(30, m.Config.VocabSize)
	want := perSequenceAll(t, m, prompts, ps)
	c := cpu.New()
	defer c.Close()
	// fusedKV also takes the RaggedKV path of the sampler (its queries
	// and cache rows in one op).
	for _, be := range []gpu.Backend{rowwise{c}, fusedKV{rowwise{c}}} {
		got := gputest.SampleAll(t, m, be, 7, prompts, ps)
		for i := range got {
			if !slices.Equal(got[i].Tokens, want[i].Tokens) || got[i].FinishReason != want[i].FinishReason {
				t.Fatalf("%T, request %d: ragged %v (%s), per sequence %v (%s)", be, i, got[i].Tokens, got[i].FinishReason, want[i].Tokens, want[i].FinishReason)
			}
			for j, lp := range got[i].LogProbs {
				if math.Abs(float64(lp-want[i].LogProbs[j])) > 1e-5 {
					t.Fatalf("%T, request %d token %d: log-prob %v, per sequence %v", be, i, j, lp, want[i].LogProbs[j])
				}
			}
		}
	}
}

// fusedKV is rowwise with gpu.RaggedKV composed from its ragged ops, as
// the contract states it (k rotated in place here, which the contract
// allows).
type fusedKV struct{ rowwise }

func (f fusedKV) RoPEScatterRows(q, k, v, kc, vc, cos, sin gpu.Buf, pos, dst []int32, NH, NKV, HS int) {
	f.RoPERows(q, cos, sin, pos, NH, HS)
	f.RoPERows(k, cos, sin, pos, NKV, HS)
	f.ScatterRows(kc, k, dst, NKV*HS)
	f.ScatterRows(vc, v, dst, NKV*HS)
}
