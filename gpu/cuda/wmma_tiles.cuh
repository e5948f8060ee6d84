// wmma_tiles.cuh: flash attention on WMMA (bf16 tensor cores, 16x16x16
// fragments, float32 accumulation): the tile types and helpers, and
// flash_tc_dkv, the backend's dk/dv for heads over 64 channels. Included
// by kernels.cu and by the standalone variant in
// bench/gpu/kernels/attention_flash_wmma.cu (whose forward and dq use the
// same helpers), inside an extern "C" block, after <mma.h> and
// <cuda_bf16.h>.
#pragma once

#define TCW 4
#define TCK 32
#define TCMAXF 8
#define STS (TCK + 4) // row stride of the float32 score tiles: 4-way, not 16-way, bank conflicts
#define PTS (TCK + 8) // row stride of the bf16 probability tiles

typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> TcA;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::row_major> TcB;
typedef nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, __nv_bfloat16, nvcuda::wmma::col_major> TcBt; // X^T of a row-major X
typedef nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float> TcC;

// tcLoad copies rows first..first+rows-1 of head `head` of a [B,T,heads,HS]
// float32 tensor (batch bi) into dst as bf16 rows of stride ld, zeros past
// T; threads tid of n share the work.
__device__ void tcLoad(__nv_bfloat16* dst, int ld, const float* src, int bi, int head, int heads, int first, int rows,
                       int T, int HS, int tid, int n) {
    if (((unsigned long)src & 15) == 0) {
        // Four channels a load (rows start 16-byte aligned: HS % 16 ==
        // 0), four loads in flight before their stores.
        int q4 = HS / 4, total = rows * q4;
        for (int e0 = tid; e0 < total; e0 += 4 * n) {
            float4 x[4];
#pragma unroll
            for (int u = 0; u < 4; u++) {
                int e = e0 + u * n, j = e / q4, row = first + j;
                x[u] = make_float4(0.f, 0.f, 0.f, 0.f);
                if (e < total && row < T) x[u] = *(const float4*)(src + (((long)bi * T + row) * heads + head) * HS + (e - j * q4) * 4);
            }
#pragma unroll
            for (int u = 0; u < 4; u++) {
                int e = e0 + u * n, j = e / q4;
                if (e < total) storeBF16x4(dst + j * ld + (e - j * q4) * 4, x[u]);
            }
        }
        return;
    }
    for (int e = tid; e < rows * HS; e += n) {
        int j = e / HS, c = e % HS, row = first + j;
        float x = row < T ? src[(((long)bi * T + row) * heads + head) * HS + c] : 0.f;
        dst[j * ld + c] = __float2bfloat16(x);
    }
}

// tcTile is a block's place: 64-row tile `tile` of (b, h), kv head kh, the
// warp's first row r0 and the lane's row (r0 + lane/2) and half (lane&1:
// which 16 of a TCK-wide row the lane handles).
struct TcTile : HeadTile {
    int warp, lane, r0, row, myr, half, nf, ld;
    __device__ TcTile(int T, int NH, int NKV, int HS) : HeadTile(T, 64, NH, NKV) {
        warp = threadIdx.x >> 5;
        lane = threadIdx.x & 31;
        r0 = tile * 64 + warp * 16;
        myr = lane >> 1;
        half = lane & 1;
        row = r0 + myr;
        nf = HS / 16;
        ld = HS + 8; // bf16 elements: a 16-row step is 32*ld bytes, 32-byte aligned
    }
};

// tcStore writes (add=false) or adds (add=true) the warp's 16 x HS
// accumulators into rows r0.. of head `head` of a [B,T,heads,HS] tensor,
// through the warp's float32 tile st (16x16); rows at or past T are
// skipped. atomic adds with atomicAdd (other blocks add to the same rows).
__device__ __forceinline__ void tcStore(float* dst, TcC (&acc)[TCMAXF], float* st, const TcTile& t, int heads, int head,
                                        int T, int HS, float div, bool add, bool atomic) {
#pragma unroll
    for (int f = 0; f < TCMAXF; f++) {
        if (f >= t.nf) break;
        __syncwarp();
        nvcuda::wmma::store_matrix_sync(st, acc[f], 16, nvcuda::wmma::mem_row_major);
        __syncwarp();
        if (t.row < T) {
            float* o = dst + (((long)t.b * T + t.row) * heads + head) * HS + f * 16 + t.half * 8;
            const float* x = st + t.myr * 16 + t.half * 8;
            for (int j = 0; j < 8; j++) {
                float y = x[j] / div;
                if (atomic) atomicAdd(o + j, y);
                else if (add) o[j] += y;
                else o[j] = y;
            }
        }
    }
}

// tcTwoProducts writes a·X^T and b·Y^T (16 rows by TCK columns each: a
// and b are the warp's 16×HS fragments, X and Y tiles of TCK rows of
// stride ld) into the warp's float32 tiles st and sdp.
__device__ __forceinline__ void tcTwoProducts(float* st, float* sdp, const TcA (&a)[TCMAXF], const TcA (&b)[TCMAXF],
                                              const __nv_bfloat16* X, const __nv_bfloat16* Y, int ld, int nf) {
    using namespace nvcuda;
#pragma unroll
    for (int n = 0; n < TCK / 16; n++) {
        TcC s, d;
        wmma::fill_fragment(s, 0.f);
        wmma::fill_fragment(d, 0.f);
#pragma unroll
        for (int f = 0; f < TCMAXF; f++)
            if (f < nf) {
                TcBt xf, yf;
                wmma::load_matrix_sync(xf, X + n * 16 * ld + f * 16, ld);
                wmma::mma_sync(s, a[f], xf, s);
                wmma::load_matrix_sync(yf, Y + n * 16 * ld + f * 16, ld);
                wmma::mma_sync(d, b[f], yf, d);
            }
        wmma::store_matrix_sync(st + n * 16, s, STS, wmma::mem_row_major);
        wmma::store_matrix_sync(sdp + n * 16, d, STS, wmma::mem_row_major);
    }
}

// tcAccumulate adds P·X to acc: P the warp's 16×TCK bf16 tile (stride
// PTS), X a tile of TCK rows of stride ld.
__device__ __forceinline__ void tcAccumulate(TcC (&acc)[TCMAXF], const __nv_bfloat16* P, const __nv_bfloat16* X, int ld, int nf) {
    using namespace nvcuda;
#pragma unroll
    for (int kk = 0; kk < TCK / 16; kk++) {
        TcA pf;
        wmma::load_matrix_sync(pf, P + kk * 16, PTS);
#pragma unroll
        for (int f = 0; f < TCMAXF; f++)
            if (f < nf) {
                TcB xf;
                wmma::load_matrix_sync(xf, X + kk * 16 * ld + f * 16, ld);
                wmma::mma_sync(acc[f], pf, xf, acc[f]);
            }
    }
}

// tcFragments loads the warp's 16 rows of the block's 64 from row first
// of head `head` of the [B,T,heads,HS] tensors x and y as fragments fx and
// fy, staging each through the shared tile sm (64 rows of stride t.ld;
// the whole block takes part).
__device__ __forceinline__ void tcFragments(TcA (&fx)[TCMAXF], TcA (&fy)[TCMAXF], __nv_bfloat16* sm, const float* x,
                                            const float* y, int heads, int head, int first, int T, int HS, const TcTile& t) {
    tcLoad(sm, t.ld, x, t.b, head, heads, first, 64, T, HS, threadIdx.x, blockDim.x);
    __syncthreads();
#pragma unroll
    for (int f = 0; f < TCMAXF; f++)
        if (f < t.nf) nvcuda::wmma::load_matrix_sync(fx[f], sm + t.warp * 16 * t.ld + f * 16, t.ld);
    __syncthreads();
    tcLoad(sm, t.ld, y, t.b, head, heads, first, 64, T, HS, threadIdx.x, blockDim.x);
    __syncthreads();
#pragma unroll
    for (int f = 0; f < TCMAXF; f++)
        if (f < t.nf) nvcuda::wmma::load_matrix_sync(fy[f], sm + t.warp * 16 * t.ld + f * 16, t.ld);
}

// flash_tc_dkv: one block per (b, query head h, 64 keys), looping over the
// query tiles that can see them: dv += P^T dout, dk += dS^T q for h's kv
// head. The query heads of a group add into the same rows, so the block's
// sums go in with atomicAdd at the end.
__global__ void __launch_bounds__(TCW * 32) flash_tc_dkv(float* dk, float* dv, const float* dout, const float* q,
                                                          const float* k, const float* v, const float* lse, const float* delta,
                                                          int B, int T, int NH, int NKV, int HS, float scale) {
    using namespace nvcuda;
    __shared__ __align__(32) __nv_bfloat16 qd[2 * TCK * (128 + 8)]; // q, dout tiles; first the K, V tiles (64 rows)
    __shared__ __align__(32) float sc[TCW][16 * STS];
    __shared__ __align__(32) float sd[TCW][16 * STS];
    __shared__ __align__(32) __nv_bfloat16 pt[TCW][16 * PTS];
    __shared__ __align__(32) __nv_bfloat16 dt[TCW][16 * PTS];
    __shared__ float lrow[TCK], drow[TCK];
    TcTile t(T, NH, NKV, HS); // rows are keys here
    int ld = t.ld, k0 = t.tile * 64, key = t.row;
    TcA kf[TCMAXF], vf[TCMAXF];
    TcC ak[TCMAXF], av[TCMAXF];
    tcFragments(kf, vf, qd, k, v, NKV, t.kh, k0, T, HS, t);
#pragma unroll
    for (int f = 0; f < TCMAXF; f++)
        if (f < t.nf) {
            wmma::fill_fragment(ak[f], 0.f);
            wmma::fill_fragment(av[f], 0.f);
        }
    __nv_bfloat16 *qs = qd, *os = qd + TCK * ld;
    float *st = sc[t.warp], *sdp = sd[t.warp];
    for (int i0 = k0; i0 < T; i0 += TCK) {
        __syncthreads();
        tcLoad(qs, ld, q, t.b, t.h, NH, i0, TCK, T, HS, threadIdx.x, blockDim.x);
        tcLoad(os, ld, dout, t.b, t.h, NH, i0, TCK, T, HS, threadIdx.x, blockDim.x);
        if (threadIdx.x < TCK) {
            int r = i0 + threadIdx.x;
            long o = ((long)t.b * NH + t.h) * T + r;
            lrow[threadIdx.x] = r < T ? lse[o] : 0.f;
            drow[threadIdx.x] = r < T ? delta[o] : 0.f;
        }
        __syncthreads();
        if (i0 + TCK - 1 < t.r0 || t.r0 >= T) continue; // every row of the tile before the warp's keys
        tcTwoProducts(st, sdp, kf, vf, qs, os, ld, t.nf); // S^T = k q^T, dP^T = v dout^T
        __syncwarp();
#pragma unroll
        for (int j = 0; j < 16; j++) {
            int c = t.half * 16 + j, r = i0 + c, e = t.myr * STS + c, o = t.myr * PTS + c;
            float p = key < T && r < T && key <= r ? __expf(st[e] * scale - lrow[c]) : 0.f;
            pt[t.warp][o] = __float2bfloat16(p);
            dt[t.warp][o] = __float2bfloat16(p * (sdp[e] - drow[c]) * scale);
        }
        __syncwarp();
        tcAccumulate(av, pt[t.warp], os, ld, t.nf); // dv += P^T dout
        tcAccumulate(ak, dt[t.warp], qs, ld, t.nf); // dk += dS^T q
    }
    tcStore(dv, av, st, t, NKV, t.kh, T, HS, 1.f, true, true);
    tcStore(dk, ak, st, t, NKV, t.kh, T, HS, 1.f, true, true);
}
