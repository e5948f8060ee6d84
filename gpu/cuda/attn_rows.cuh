// attn_rows_gqa: the ragged attention of decoding (gpu.RaggedAttention)
// for grouped-query heads. attn_rows gives each (row, query head) a block,
// so the G = NH/NKV query heads of a kv head each read its keys and values
// again (7 times for the Qwen2.5 shapes), and a thread reads a whole key
// row with a stride between threads. Here a block serves one (row, kv
// head) and all G query heads: a warp takes every 8th key, its lanes read
// the key's and the value's row together (channel lane + 32i), and each
// head's score is a warp sum; every warp keeps its own online softmax per
// head, and the block merges the warps' at the end. HS is a multiple of 32
// up to 128, G at most 8, cnt[n] >= 1; blocks of 256 threads.
//
// Included by kernels.cu and by the CPU emulator (testdata/mmaemu), with
// shfl_xor and the other primitives of flash_mma.cuh.

#define RG 8 // most query heads a kv head serves
#define RC 4 // most channels a lane holds (HS <= 128)
#define RW 8 // warps a block

extern "C" __global__ void __launch_bounds__(RW * 32)
    attn_rows_gqa(float* out, const float* q, const float* k, const float* v, const int* start, const int* cnt, int NH,
                  int NKV, int HS, float scale) {
    __shared__ float qs[RG * 128];
    __shared__ float wm[RW][RG], wl[RW][RG]; // each warp's max and sum, per head
    __shared__ float wacc[RW][RG * 128];     // each warp's unnormalised outputs
    int n = blockIdx.x / NKV, kh = blockIdx.x % NKV, G = NH / NKV;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nc = HS >> 5;
    long qrow = ((long)n * NH + (long)kh * G) * HS; // the group's heads are adjacent in q and out
    for (int e = threadIdx.x; e < G * HS; e += RW * 32) qs[e] = q[qrow + e] * scale;
    __syncthreads();
    float qr[RG][RC], acc[RG][RC], m[RG], l[RG];
#pragma unroll
    for (int g = 0; g < RG; g++) {
        m[g] = -INFINITY;
        l[g] = 0.f;
#pragma unroll
        for (int i = 0; i < RC; i++) {
            qr[g][i] = g < G && i < nc ? qs[g * HS + lane + 32 * i] : 0.f;
            acc[g][i] = 0.f;
        }
    }
    long base = start[n], KVC = (long)NKV * HS;
    int len = cnt[n];
    for (int j = warp; j < len; j += RW) {
        const float* kj = k + (base + j) * KVC + (long)kh * HS;
        const float* vj = v + (base + j) * KVC + (long)kh * HS;
        float kv[RC], vv[RC];
#pragma unroll
        for (int i = 0; i < RC; i++) {
            kv[i] = i < nc ? kj[lane + 32 * i] : 0.f;
            vv[i] = i < nc ? vj[lane + 32 * i] : 0.f;
        }
#pragma unroll
        for (int g = 0; g < RG; g++)
            if (g < G) {
                float s = 0.f;
#pragma unroll
                for (int i = 0; i < RC; i++) s += qr[g][i] * kv[i];
#pragma unroll
                for (int o = 16; o > 0; o >>= 1) s += shfl_xor(s, o);
                float mn = fmaxf(m[g], s);
                float corr = __expf(m[g] - mn), p = __expf(s - mn);
                l[g] = l[g] * corr + p;
#pragma unroll
                for (int i = 0; i < RC; i++) acc[g][i] = acc[g][i] * corr + p * vv[i];
                m[g] = mn;
            }
    }
#pragma unroll
    for (int g = 0; g < RG; g++)
        if (g < G) {
            if (lane == 0) {
                wm[warp][g] = m[g];
                wl[warp][g] = l[g];
            }
#pragma unroll
            for (int i = 0; i < RC; i++)
                if (i < nc) wacc[warp][g * HS + lane + 32 * i] = acc[g][i];
        }
    __syncthreads();
    for (int e = threadIdx.x; e < G * HS; e += RW * 32) {
        int g = e / HS;
        float M = -INFINITY, L = 0.f, o = 0.f;
        for (int w = 0; w < RW; w++) M = fmaxf(M, wm[w][g]);
        for (int w = 0; w < RW; w++)
            if (wm[w][g] != -INFINITY) { // a warp that saw no key
                float c = __expf(wm[w][g] - M);
                L += wl[w][g] * c;
                o += wacc[w][e] * c;
            }
        out[qrow + e] = o / L;
    }
}

// rope_kv_rows prepares a decoding step's attention in one launch
// (gpu.RaggedKV): it rotates q[N,NH,HS] in place as rope_rows does, and
// writes k[N,NKV,HS]'s rows rotated, and v's as they are, to rows dst[n]
// of the caches kc and vc (rows of NKV*HS), each row n at position
// pos[n] of the tables cs, sn [P, HS/2]. The biases qb [NH*HS], kb and
// vb [NKV*HS], where not null, are added to every row first
// (gpu.RaggedKVBias: the projections then run without them). A thread
// takes a rotation pair of q, then of k, then a value of v (grid-stride
// over the three).
extern "C" __global__ void rope_kv_rows(float* q, const float* k, const float* v, float* kc, float* vc, const float* cs,
                                        const float* sn, const int* pos, const int* dst, const float* qb,
                                        const float* kb, const float* vb, int N, int NH, int NKV, int HS) {
    int half = HS / 2;
    long W = (long)NKV * HS, nq = (long)N * NH * half, nk = (long)N * NKV * half, nv = (long)N * W;
    for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < nq + nk + nv;
         idx += (long)gridDim.x * blockDim.x) {
        if (idx >= nq + nk) {
            long e = idx - nq - nk, n = e / W;
            long c = e - n * W;
            vc[(long)dst[n] * W + c] = vb ? v[e] + vb[c] : v[e];
            continue;
        }
        bool isq = idx < nq;
        long e = isq ? idx : idx - nq;
        int i = (int)(e % half);
        long nh = e / half; // row n, head h of q (NH heads) or of k (NKV)
        int heads = isq ? NH : NKV;
        long n = nh / heads;
        int p = pos[n];
        float c = cs[(long)p * half + i], s = sn[(long)p * half + i];
        const float* x = isq ? q + nh * HS : k + nh * HS;
        const float* bias = isq ? qb : kb;
        float* o = isq ? q + nh * HS : kc + (long)dst[n] * W + (nh - n * heads) * HS;
        float x1 = x[i], x2 = x[i + half];
        if (bias) {
            const float* bh = bias + (nh - n * heads) * HS;
            x1 += bh[i];
            x2 += bh[i + half];
        }
        o[i] = x1 * c - x2 * s;
        o[i + half] = x2 * c + x1 * s;
    }
}
