// wmma_tiles.cuh: the WMMA (bf16 tensor core, 16x16x16 fragments, float32
// accumulation) tile types and helpers of the flash attention kernels that
// run on them: kernels.cu's flash_tc_dkv, and the standalone variant in
// bench/gpu/kernels/attention_flash_wmma.cu. Included inside an extern "C"
// block, after <mma.h> and <cuda_bf16.h>.
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
