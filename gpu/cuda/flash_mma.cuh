// Flash attention forward on mma.sync tensor cores, FlashAttention-2's
// layout (SWERL_CUDA_ATTN=mma): a warp owns 16 query rows and keeps its
// scores, probabilities and output in registers, in the m16n8k16 fragment
// layouts of the PTX ISA, so the online softmax needs no shared-memory
// round trip: a row's values sit in the four lanes of a quad (lane/4), and
// the score accumulators of two adjacent 8-key tiles are, packed to bf16,
// exactly the A fragment of the probabilities for the P·V product.
//
// This file is included by kernels.cu, and by the CPU emulator of
// testdata/mmaemu (go test ./gpu/cuda without the cuda tag), which runs it
// with one thread a lane and implements the primitives below from the
// documented fragment layouts. The primitives each side provides:
//   mma_bf16(d, a, b0, b1)  d += A(16x16 bf16, row) · B(16x8 bf16, col), f32
//   pack_bf16(lo, hi)       two floats rounded to bf16 in one 32-bit word
//   lds32(p)                two adjacent bf16 of shared memory as one word
//   shfl_xor(v, m)          the value of lane ^ m in the warp
// and __syncthreads, __float2bfloat16, __expf, logf, fmaxf, min, INFINITY.

#define MW 4              // warps a block
#define MQ (16 * MW)      // query rows a block
#define MK 64             // keys a tile
#define MLD (128 + 8)     // bf16 row stride of the Q and K tiles (HS <= 128)
#define MVT (MK + 8)      // bf16 row stride of the transposed V tile

// mmaRows copies rows first..first+MK-1 (or MQ) of head `head` of a
// [B,T,heads,HS] float32 tensor (batch b) into shared memory as bf16, row
// by row with stride ld (trans false), or transposed, channel by channel
// with stride ld (trans true); rows at or past T are zeros. The block's
// threads share the work; consecutive threads read consecutive channels.
__device__ __forceinline__ void mmaRows(__nv_bfloat16* dst, int ld, bool trans, const float* src, int b, int head,
                                        int heads, int first, int rows, int T, int HS) {
    for (int e = threadIdx.x; e < rows * HS; e += MW * 32) {
        int j = e / HS, c = e - j * HS, row = first + j;
        float x = row < T ? src[(((long)b * T + row) * heads + head) * HS + c] : 0.f;
        dst[trans ? c * ld + j : j * ld + c] = __float2bfloat16(x);
    }
}

// flash_mma_fwd: out[B,T,NH,HS] and lse[B,NH,T] of causal GQA attention,
// as flash_tc_fwd computes them (scores scaled by scale, the log-sum-exp
// in the same units); one block per (b, h, MQ query rows), the blocks of
// the longest rows first. HS is a multiple of 16, at most 128.
__global__ void __launch_bounds__(MW * 32) flash_mma_fwd(float* out, float* lse, const float* q, const float* k,
                                                         const float* v, int B, int T, int NH, int NKV, int HS,
                                                         float scale) {
    __shared__ __align__(16) __nv_bfloat16 ks[MQ * MLD]; // the Q tile, then each K tile
    __shared__ __align__(16) __nv_bfloat16 vt[128 * MVT]; // each V tile, transposed: [channel][key]
    int tiles = (T + MQ - 1) / MQ;
    int tile = tiles - 1 - (int)(blockIdx.x % tiles);
    int bh = blockIdx.x / tiles, b = bh / NH, h = bh % NH, kh = h / (NH / NKV);
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;
    int q0 = tile * MQ, r0 = q0 + warp * 16, rlo = r0 + g, rhi = rlo + 8;
    int nf = HS / 16, nn = HS / 8;

    mmaRows(ks, MLD, false, q, b, h, NH, q0, MQ, T, HS);
    __syncthreads();
    unsigned qa[8][4]; // the warp's 16 rows of Q as A fragments, 16 channels each
#pragma unroll
    for (int f = 0; f < 8; f++)
        if (f < nf) {
            const __nv_bfloat16* p = ks + (warp * 16 + g) * MLD + f * 16 + tg * 2;
            qa[f][0] = lds32(p);
            qa[f][1] = lds32(p + 8 * MLD);
            qa[f][2] = lds32(p + 8);
            qa[f][3] = lds32(p + 8 * MLD + 8);
        }
    float o[16][4]; // the output accumulators: 8 channels a tile, rows g and g+8
#pragma unroll
    for (int n = 0; n < 16; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float mlo = -INFINITY, mhi = -INFINITY, llo = 0.f, lhi = 0.f;
    int ktiles = min(q0 + MQ - 1, T - 1) / MK + 1;
    for (int jt = 0; jt < ktiles; jt++) {
        int k0 = jt * MK;
        __syncthreads(); // every warp is done with the previous tile (and with Q)
        mmaRows(ks, MLD, false, k, b, kh, NKV, k0, MK, T, HS);
        mmaRows(vt, MVT, true, v, b, kh, NKV, k0, MK, T, HS);
        __syncthreads();
        if (k0 > r0 + 15 || r0 >= T) continue; // every key after the warp's rows

        // S = Q·Kᵀ: 8 tiles of 8 keys; B[c][key] = K[key][c].
        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
            for (int f = 0; f < 8; f++)
                if (f < nf) {
                    const __nv_bfloat16* p = ks + (j * 8 + g) * MLD + f * 16 + tg * 2;
                    mma_bf16(s[j], qa[f], lds32(p), lds32(p + 8));
                }
        }

        // Online softmax over the lane's keys j*8 + tg*2 + {0,1} of rows
        // rlo (s[j][0..1]) and rhi (s[j][2..3]); the quad holds the row.
        float mxlo = -INFINITY, mxhi = -INFINITY;
#pragma unroll
        for (int j = 0; j < 8; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int key = k0 + j * 8 + tg * 2 + e;
                s[j][e] = key <= rlo && key < T ? s[j][e] * scale : -INFINITY;
                s[j][2 + e] = key <= rhi && key < T ? s[j][2 + e] * scale : -INFINITY;
                mxlo = fmaxf(mxlo, s[j][e]);
                mxhi = fmaxf(mxhi, s[j][2 + e]);
            }
        mxlo = fmaxf(mxlo, shfl_xor(mxlo, 1));
        mxlo = fmaxf(mxlo, shfl_xor(mxlo, 2));
        mxhi = fmaxf(mxhi, shfl_xor(mxhi, 1));
        mxhi = fmaxf(mxhi, shfl_xor(mxhi, 2));
        float mnlo = fmaxf(mlo, mxlo), mnhi = fmaxf(mhi, mxhi);
        float clo = mnlo == -INFINITY ? 1.f : __expf(mlo - mnlo);
        float chi = mnhi == -INFINITY ? 1.f : __expf(mhi - mnhi);
        float pslo = 0.f, pshi = 0.f;
        unsigned pa[4][4]; // P as A fragments, 16 keys each
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float p0 = s[j][0] == -INFINITY ? 0.f : __expf(s[j][0] - mnlo);
            float p1 = s[j][1] == -INFINITY ? 0.f : __expf(s[j][1] - mnlo);
            float p2 = s[j][2] == -INFINITY ? 0.f : __expf(s[j][2] - mnhi);
            float p3 = s[j][3] == -INFINITY ? 0.f : __expf(s[j][3] - mnhi);
            pslo += p0 + p1;
            pshi += p2 + p3;
            pa[j / 2][(j % 2) * 2] = pack_bf16(p0, p1);
            pa[j / 2][(j % 2) * 2 + 1] = pack_bf16(p2, p3);
        }
        pslo += shfl_xor(pslo, 1);
        pslo += shfl_xor(pslo, 2);
        pshi += shfl_xor(pshi, 1);
        pshi += shfl_xor(pshi, 2);
        llo = llo * clo + pslo;
        lhi = lhi * chi + pshi;
        mlo = mnlo;
        mhi = mnhi;

        // O = O·corr + P·V: B[key][c] = V[key][c] = vt[c][key].
#pragma unroll
        for (int n = 0; n < 16; n++)
            if (n < nn) {
                o[n][0] *= clo;
                o[n][1] *= clo;
                o[n][2] *= chi;
                o[n][3] *= chi;
#pragma unroll
                for (int kk = 0; kk < 4; kk++) {
                    const __nv_bfloat16* p = vt + (n * 8 + g) * MVT + kk * 16 + tg * 2;
                    mma_bf16(o[n], pa[kk], lds32(p), lds32(p + 8));
                }
            }
    }
    if (r0 >= T) return; // after the last __syncthreads
#pragma unroll
    for (int n = 0; n < 16; n++)
        if (n < nn) {
            int c = n * 8 + tg * 2;
            if (rlo < T) {
                float* d = out + (((long)b * T + rlo) * NH + h) * HS + c;
                d[0] = o[n][0] / llo;
                d[1] = o[n][1] / llo;
            }
            if (rhi < T) {
                float* d = out + (((long)b * T + rhi) * NH + h) * HS + c;
                d[0] = o[n][2] / lhi;
                d[1] = o[n][3] / lhi;
            }
        }
    if (tg == 0) {
        if (rlo < T) lse[((long)b * NH + h) * T + rlo] = mlo + logf(llo);
        if (rhi < T) lse[((long)b * NH + h) * T + rhi] = mhi + logf(lhi);
    }
}
