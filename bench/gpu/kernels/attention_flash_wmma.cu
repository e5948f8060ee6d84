// attention_flash_wmma.cu: causal GQA flash attention for training with
// the tile products on bf16 tensor cores through WMMA (16x16x16 fragments,
// float32 accumulation). It was the backend's SWERL_CUDA_ATTN=tc; the
// backend's mma kernels (gpu/cuda/flash_mma.cuh) replaced its forward and
// dq; its tile helpers and its dk/dv kernel, flash_tc_dkv, are still the
// backend's for heads over 64 channels, and come from there
// (gpu/cuda/wmma_tiles.cuh). See README.md for what it measured.
//
//	nvcc -O3 -std=c++17 -arch=sm_80 -o flash_wmma attention_flash_wmma.cu
//	./flash_wmma
//
// checks out, lse, dq, dk and dv against attention in double precision
// (bf16 operands: 3e-2 relative) and times the forward and the backward at
// the 0.5B model's shapes.
#include <mma.h>

#include "common.cuh"

extern "C" {

// Tensor-core flash attention: the tiling of attention_flash_simt.cu, with
// the tile products on bf16 tensor cores (WMMA 16x16x16, float32
// accumulation) instead of float32 lanes. A block is TCW warps; a warp owns
// 16 query rows (forward, dq) or 16 keys (dk, dv) of the block's 64 and
// walks tiles of TCK keys (or query rows) staged in shared memory as bf16.
// Scores, probabilities and softmax statistics stay float32; P and dS are
// rounded to bf16 for their products, as FlashAttention-2 does. HS is a
// multiple of 16, at most 128. The fragments' element layout is opaque, so
// per-row work goes through a per-warp float32 tile in shared memory.

#include "../../../gpu/cuda/wmma_tiles.cuh"

// flash_tc_fwd: one block per (b, h, 64 query rows).
__global__ void __launch_bounds__(TCW * 32) flash_tc_fwd(float* out, float* lse, const float* q, const float* k,
                                                          const float* v, int B, int T, int NH, int NKV, int HS, float scale) {
    using namespace nvcuda;
    __shared__ __align__(32) __nv_bfloat16 kv[2 * TCK * (128 + 8)]; // K, V tiles; first the Q tile (64 rows)
    __shared__ __align__(32) float sc[TCW][16 * STS];                // the warp's scores; O staging
    __shared__ __align__(32) __nv_bfloat16 pb[TCW][16 * PTS];        // the warp's probabilities
    TcTile t(T, NH, NKV, HS);
    int ld = t.ld, q0 = t.tile * 64;
    tcLoad(kv, ld, q, t.b, t.h, NH, q0, 64, T, HS, threadIdx.x, blockDim.x);
    __syncthreads();
    TcA qf[TCMAXF];
    TcC acc[TCMAXF];
#pragma unroll
    for (int f = 0; f < TCMAXF; f++)
        if (f < t.nf) {
            wmma::load_matrix_sync(qf[f], kv + t.warp * 16 * ld + f * 16, ld);
            wmma::fill_fragment(acc[f], 0.f);
        }
    float m = -INFINITY, l = 0.f;
    __nv_bfloat16 *ks = kv, *vs = kv + TCK * ld;
    float* st = sc[t.warp];
    int ktiles = min(q0 + 63, T - 1) / TCK + 1;
    for (int jt = 0; jt < ktiles; jt++) {
        int k0 = jt * TCK;
        __syncthreads();
        tcLoad(ks, ld, k, t.b, t.kh, NKV, k0, TCK, T, HS, threadIdx.x, blockDim.x);
        tcLoad(vs, ld, v, t.b, t.kh, NKV, k0, TCK, T, HS, threadIdx.x, blockDim.x);
        __syncthreads();
        if (k0 > t.r0 + 15 || t.r0 >= T) continue; // every key after the warp's rows
#pragma unroll
        for (int n = 0; n < TCK / 16; n++) {
            TcC s;
            wmma::fill_fragment(s, 0.f);
#pragma unroll
            for (int f = 0; f < TCMAXF; f++)
                if (f < t.nf) {
                    TcBt kf;
                    wmma::load_matrix_sync(kf, ks + n * 16 * ld + f * 16, ld);
                    wmma::mma_sync(s, qf[f], kf, s);
                }
            wmma::store_matrix_sync(st + n * 16, s, STS, wmma::mem_row_major);
        }
        __syncwarp();
        // Online softmax over the lane's 16 keys; the lane pair shares a row.
        float sv[16], mx = -INFINITY;
        const float* srow = st + t.myr * STS + t.half * 16;
#pragma unroll
        for (int j = 0; j < 16; j++) {
            int key = k0 + t.half * 16 + j;
            sv[j] = key <= t.row && t.row < T ? srow[j] * scale : -INFINITY;
            mx = fmaxf(mx, sv[j]);
        }
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
        float mn = fmaxf(m, mx);
        float corr = mn == -INFINITY ? 1.f : __expf(m - mn);
        float ps = 0.f;
        __nv_bfloat16* prow = pb[t.warp] + t.myr * PTS + t.half * 16;
#pragma unroll
        for (int j = 0; j < 16; j++) {
            float p = sv[j] == -INFINITY ? 0.f : __expf(sv[j] - mn);
            ps += p;
            prow[j] = __float2bfloat16(p);
        }
        ps += __shfl_xor_sync(0xffffffff, ps, 1);
        l = l * corr + ps;
        m = mn;
        __syncwarp();
        if (!__all_sync(0xffffffff, corr == 1.f)) {
#pragma unroll
            for (int f = 0; f < TCMAXF; f++)
                if (f < t.nf) {
                    wmma::store_matrix_sync(st, acc[f], 16, wmma::mem_row_major);
                    __syncwarp();
                    for (int j = 0; j < 8; j++) st[t.myr * 16 + t.half * 8 + j] *= corr;
                    __syncwarp();
                    wmma::load_matrix_sync(acc[f], st, 16, wmma::mem_row_major);
                    __syncwarp();
                }
        }
        tcAccumulate(acc, pb[t.warp], vs, ld, t.nf);
    }
    tcStore(out, acc, st, t, NH, t.h, T, HS, l, false, false);
    if (t.row < T && t.half == 0) lse[((long)t.b * NH + t.h) * T + t.row] = m + logf(l);
}

// flash_tc_dq: one block per (b, h, 64 query rows): dq += dS k with
// dS = P (dP - delta) scale, P = exp(s scale - lse), dP = dout v^T.
__global__ void __launch_bounds__(TCW * 32) flash_tc_dq(float* dq, const float* dout, const float* q, const float* k,
                                                         const float* v, const float* lse, const float* delta, int B, int T,
                                                         int NH, int NKV, int HS, float scale) {
    using namespace nvcuda;
    __shared__ __align__(32) __nv_bfloat16 kv[2 * TCK * (128 + 8)];
    __shared__ __align__(32) float sc[TCW][16 * STS];
    __shared__ __align__(32) float sd[TCW][16 * STS];
    __shared__ __align__(32) __nv_bfloat16 pb[TCW][16 * PTS];
    TcTile t(T, NH, NKV, HS);
    int ld = t.ld, q0 = t.tile * 64;
    TcA qf[TCMAXF], of[TCMAXF];
    TcC acc[TCMAXF];
    tcFragments(qf, of, kv, q, dout, NH, t.h, q0, T, HS, t);
#pragma unroll
    for (int f = 0; f < TCMAXF; f++)
        if (f < t.nf) wmma::fill_fragment(acc[f], 0.f);
    long rl = ((long)t.b * NH + t.h) * T + t.row;
    float lrow = t.row < T ? lse[rl] : 0.f, drow = t.row < T ? delta[rl] : 0.f;
    __nv_bfloat16 *ks = kv, *vs = kv + TCK * ld;
    float *st = sc[t.warp], *sdp = sd[t.warp];
    int ktiles = min(q0 + 63, T - 1) / TCK + 1;
    for (int jt = 0; jt < ktiles; jt++) {
        int k0 = jt * TCK;
        __syncthreads();
        tcLoad(ks, ld, k, t.b, t.kh, NKV, k0, TCK, T, HS, threadIdx.x, blockDim.x);
        tcLoad(vs, ld, v, t.b, t.kh, NKV, k0, TCK, T, HS, threadIdx.x, blockDim.x);
        __syncthreads();
        if (k0 > t.r0 + 15 || t.r0 >= T) continue;
        tcTwoProducts(st, sdp, qf, of, ks, vs, ld, t.nf); // S = q k^T, dP = dout v^T
        __syncwarp();
        __nv_bfloat16* prow = pb[t.warp] + t.myr * PTS + t.half * 16;
#pragma unroll
        for (int j = 0; j < 16; j++) {
            int key = k0 + t.half * 16 + j, e = t.myr * STS + t.half * 16 + j;
            float p = key <= t.row && t.row < T ? __expf(st[e] * scale - lrow) : 0.f;
            prow[j] = __float2bfloat16(p * (sdp[e] - drow) * scale);
        }
        __syncwarp();
        tcAccumulate(acc, pb[t.warp], ks, ld, t.nf); // dq += dS k
    }
    tcStore(dq, acc, st, t, NH, t.h, T, HS, 1.f, true, false);
}

} // extern "C"

// tcThreads is a block of the kernels above (TCW warps); each block owns
// 64 query rows or keys.
const int tcThreads = TCW * 32;

int main() {
    const Shape shapes[] = {{1, 5, 2, 1, 32},  {1, 35, 2, 1, 32},  {2, 70, 4, 2, 64},
                            {1, 9, 4, 2, 16},  {1, 130, 14, 2, 64}, {1, 100, 4, 2, 128}, {1, 64, 3, 1, 96}};
    auto blocks = [](const Shape& s) { return s.B * s.NH * ((s.T + 63) / 64); };
    return runAttention(
        3e-2, shapes, 9, // bf16 operands
        [&](const Shape& s, Bufs& b) {
            flash_tc_fwd<<<blocks(s), tcThreads>>>(b.out.p, b.lse.p, b.q.p, b.k.p, b.v.p, s.B, s.T, s.NH, s.NKV, s.HS,
                                                   1 / sqrtf((float)s.HS));
        },
        [&](const Shape& s, Bufs& b) {
            float scale = 1 / sqrtf((float)s.HS);
            flash_tc_dq<<<blocks(s), tcThreads>>>(b.dq.p, b.dout.p, b.q.p, b.k.p, b.v.p, b.lse.p, b.delta.p, s.B, s.T,
                                                  s.NH, s.NKV, s.HS, scale);
            flash_tc_dkv<<<blocks(s), tcThreads>>>(b.dk.p, b.dv.p, b.dout.p, b.q.p, b.k.p, b.v.p, b.lse.p, b.delta.p,
                                                   s.B, s.T, s.NH, s.NKV, s.HS, scale);
        });
}
