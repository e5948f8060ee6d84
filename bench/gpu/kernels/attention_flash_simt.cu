// attention_flash_simt.cu: causal GQA flash attention for training in
// float32 SIMT lanes, FlashAttention's tiling without tensor cores: no
// [B,NH,T,T] matrix, exact to float32 rounding. It was the backend's
// SWERL_CUDA_ATTN=flash; see README.md for what it measured.
//
//	nvcc -O3 -std=c++17 -arch=sm_80 -o flash_simt attention_flash_simt.cu
//	./flash_simt
//
// checks out, lse, dq, dk and dv against attention in double precision
// and times the forward and the backward at the 0.5B model's shapes.
#include "common.cuh"

extern "C" {

// Flash attention for training (gpu.FlashAttention): causal GQA attention
// in tiles of FT query rows by FT keys without the [B,NH,T,T] matrix. A
// block of 8 warps owns FT = 32 rows (forward, dq) or keys (dk, dv); each
// warp 4 of them; the lanes index the other side of the tile, and a lane
// keeps channels lane, lane+32, ... of its rows' accumulators (HS a
// multiple of 32, at most 128). Tiles shared by the warps sit in shared
// memory with a row stride of 129 floats, so that lanes reading a column
// hit distinct banks.

#define FT 32
#define FMAXC 4
#define FSTRIDE 129

// FlashBlock is a flash kernel block's place: its tile of rows (or keys)
// tile of tiles, batch b, query head h, kv head kh, and the thread's warp,
// lane and channels per lane nc.
struct FlashBlock : HeadTile {
    int warp, lane, nc;
    __device__ FlashBlock(int T, int NH, int NKV, int HS) : HeadTile(T, FT, NH, NKV) {
        warp = threadIdx.x >> 5;
        lane = threadIdx.x & 31;
        nc = HS >> 5;
    }
    // own is row (or key) r of the warp's four, clamped to T-1 for loads.
    __device__ int own(int r, int T) const { return min(tile * FT + warp * 4 + r, T - 1); }
};

// flashLoad copies rows first..first+FT-1 of head `head` of two
// [B,T,heads,HS] tensors (batch bi) into the shared tiles sa and sb,
// zeros past T; the block synchronizes before and after.
__device__ void flashLoad(float* sa, float* sb, const float* a, const float* b, int bi, int head, int heads,
                          int first, int T, int HS) {
    __syncthreads();
    for (int e = threadIdx.x; e < FT * HS; e += blockDim.x) {
        int j = e / HS, c = e % HS, row = first + j;
        float x = 0.f, y = 0.f;
        if (row < T) {
            long o = (((long)bi * T + row) * heads + head) * HS + c;
            x = a[o];
            y = b[o];
        }
        sa[j * FSTRIDE + c] = x;
        sb[j * FSTRIDE + c] = y;
    }
    __syncthreads();
}

// flash_fwd: one block per (b, h, query tile). out = softmax(q k^T scale) v
// over keys <= the row; lse[b,h,t] = log-sum-exp of the row's scaled scores.
__global__ void flash_fwd(float* out, float* lse, const float* q, const float* k, const float* v,
                          int B, int T, int NH, int NKV, int HS, float scale) {
    __shared__ float ks[FT * FSTRIDE];
    __shared__ float vs[FT * FSTRIDE];
    FlashBlock fb(T, NH, NKV, HS);
    int it = fb.tile, b = fb.b, h = fb.h, kh = fb.kh, warp = fb.warp, lane = fb.lane, nc = fb.nc;
    int rows[4];
    float m[4], l[4], acc[4][FMAXC];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        rows[r] = fb.own(r, T);
        m[r] = -INFINITY;
        l[r] = 0.f;
#pragma unroll
        for (int t = 0; t < FMAXC; t++) acc[r][t] = 0.f;
    }
    for (int jt = 0; jt <= it; jt++) {
        flashLoad(ks, vs, k, v, b, kh, NKV, jt * FT, T, HS);
        int key = jt * FT + lane;
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const float* qr = q + (((long)b * T + rows[r]) * NH + h) * HS;
            float s = 0.f;
            for (int c = 0; c < HS; c++) s += qr[c] * ks[lane * FSTRIDE + c];
            bool ok = key <= rows[r];
            s = ok ? s * scale : -INFINITY;
            float mx = s;
            for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, o));
            float mn = fmaxf(m[r], mx);
            float p = ok ? __expf(s - mn) : 0.f;
            float ps = p;
            for (int o = 16; o > 0; o >>= 1) ps += __shfl_xor_sync(0xffffffff, ps, o);
            float corr = __expf(m[r] - mn);
            l[r] = l[r] * corr + ps;
#pragma unroll
            for (int t = 0; t < FMAXC; t++) acc[r][t] *= corr;
            for (int j = 0; j < FT; j++) {
                float pj = __shfl_sync(0xffffffff, p, j);
#pragma unroll
                for (int t = 0; t < FMAXC; t++)
                    if (t < nc) acc[r][t] += pj * vs[j * FSTRIDE + lane + 32 * t];
            }
            m[r] = mn;
        }
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        int row = it * FT + warp * 4 + r;
        if (row >= T) continue;
        float* o = out + (((long)b * T + row) * NH + h) * HS;
        float inv = 1.f / l[r];
#pragma unroll
        for (int t = 0; t < FMAXC; t++)
            if (t < nc) o[lane + 32 * t] = acc[r][t] * inv;
        if (lane == 0) lse[((long)b * NH + h) * T + row] = m[r] + logf(l[r]);
    }
}

// flash_bwd_dq: one block per (b, h, query tile): dq += dS k with
// dS = P (dP - delta) scale, P = exp(s scale - lse), dP = dout v^T.
__global__ void flash_bwd_dq(float* dq, const float* dout, const float* q, const float* k, const float* v,
                             const float* lse, const float* delta, int B, int T, int NH, int NKV, int HS, float scale) {
    __shared__ float ks[FT * FSTRIDE];
    __shared__ float vs[FT * FSTRIDE];
    FlashBlock fb(T, NH, NKV, HS);
    int it = fb.tile, b = fb.b, h = fb.h, kh = fb.kh, warp = fb.warp, lane = fb.lane, nc = fb.nc;
    int rows[4];
    float lr[4], dr[4], acc[4][FMAXC];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        rows[r] = fb.own(r, T);
        lr[r] = lse[((long)b * NH + h) * T + rows[r]];
        dr[r] = delta[((long)b * NH + h) * T + rows[r]];
#pragma unroll
        for (int t = 0; t < FMAXC; t++) acc[r][t] = 0.f;
    }
    for (int jt = 0; jt <= it; jt++) {
        flashLoad(ks, vs, k, v, b, kh, NKV, jt * FT, T, HS);
        int key = jt * FT + lane;
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const float* qr = q + (((long)b * T + rows[r]) * NH + h) * HS;
            const float* dr_ = dout + (((long)b * T + rows[r]) * NH + h) * HS;
            float s = 0.f, dp = 0.f;
            for (int c = 0; c < HS; c++) {
                s += qr[c] * ks[lane * FSTRIDE + c];
                dp += dr_[c] * vs[lane * FSTRIDE + c];
            }
            bool ok = key <= rows[r];
            float p = ok ? __expf(s * scale - lr[r]) : 0.f;
            float ds = p * (dp - dr[r]) * scale;
            for (int j = 0; j < FT; j++) {
                float dsj = __shfl_sync(0xffffffff, ds, j);
#pragma unroll
                for (int t = 0; t < FMAXC; t++)
                    if (t < nc) acc[r][t] += dsj * ks[j * FSTRIDE + lane + 32 * t];
            }
        }
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        int row = it * FT + warp * 4 + r;
        if (row >= T) continue;
        float* o = dq + (((long)b * T + row) * NH + h) * HS;
#pragma unroll
        for (int t = 0; t < FMAXC; t++)
            if (t < nc) o[lane + 32 * t] += acc[r][t];
    }
}

// flash_bwd_dkv: one block per (b, query head, key tile), looping over the
// query tiles at or after the key tile: dv += P^T dout, dk += dS^T q for
// the head's kv head. Warps own keys, lanes query rows. The query heads of
// a group add into the same kv rows, so the block's sums go in with
// atomicAdd, once per element at the end.
__global__ void flash_bwd_dkv(float* dk, float* dv, const float* dout, const float* q, const float* k, const float* v,
                              const float* lse, const float* delta, int B, int T, int NH, int NKV, int HS, float scale) {
    __shared__ float qs[FT * FSTRIDE];
    __shared__ float ds_[FT * FSTRIDE];
    FlashBlock fb(T, NH, NKV, HS);
    int jt = fb.tile, tiles = fb.tiles, b = fb.b, h = fb.h, kh = fb.kh, warp = fb.warp, lane = fb.lane, nc = fb.nc;
    int keys[4];
    float ak[4][FMAXC], av[4][FMAXC];
#pragma unroll
    for (int r = 0; r < 4; r++) {
        keys[r] = fb.own(r, T);
#pragma unroll
        for (int t = 0; t < FMAXC; t++) ak[r][t] = av[r][t] = 0.f;
    }
    for (int it = jt; it < tiles; it++) {
        flashLoad(qs, ds_, q, dout, b, h, NH, it * FT, T, HS);
        int row = it * FT + lane;
        bool rowOK = row < T;
        float lrow = rowOK ? lse[((long)b * NH + h) * T + row] : 0.f;
        float drow = rowOK ? delta[((long)b * NH + h) * T + row] : 0.f;
#pragma unroll
        for (int r = 0; r < 4; r++) {
            int key = jt * FT + warp * 4 + r;
            const float* kr = k + (((long)b * T + keys[r]) * NKV + kh) * HS;
            const float* vr = v + (((long)b * T + keys[r]) * NKV + kh) * HS;
            float s = 0.f, dp = 0.f;
            for (int c = 0; c < HS; c++) {
                s += qs[lane * FSTRIDE + c] * kr[c];
                dp += ds_[lane * FSTRIDE + c] * vr[c];
            }
            bool ok = rowOK && key < T && key <= row;
            float p = ok ? __expf(s * scale - lrow) : 0.f;
            float dsv = p * (dp - drow) * scale;
            for (int j = 0; j < FT; j++) {
                float pj = __shfl_sync(0xffffffff, p, j);
                float sj = __shfl_sync(0xffffffff, dsv, j);
#pragma unroll
                for (int t = 0; t < FMAXC; t++)
                    if (t < nc) {
                        av[r][t] += pj * ds_[j * FSTRIDE + lane + 32 * t];
                        ak[r][t] += sj * qs[j * FSTRIDE + lane + 32 * t];
                    }
            }
        }
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        int key = jt * FT + warp * 4 + r;
        if (key >= T) continue;
        long o = (((long)b * T + key) * NKV + kh) * HS;
#pragma unroll
        for (int t = 0; t < FMAXC; t++)
            if (t < nc) {
                atomicAdd(dk + o + lane + 32 * t, ak[r][t]);
                atomicAdd(dv + o + lane + 32 * t, av[r][t]);
            }
    }
}

} // extern "C"

int main() {
    const Shape shapes[] = {{1, 5, 2, 1, 32}, {1, 35, 2, 1, 32}, {2, 70, 4, 2, 64}, {1, 100, 4, 2, 128}, {1, 64, 3, 1, 96}};
    auto blocks = [](const Shape& s) { return s.B * s.NH * ((s.T + FT - 1) / FT); };
    return runAttention(
        1e-3, shapes, 7, // float32 sums, __expf
        [&](const Shape& s, Bufs& b) {
            flash_fwd<<<blocks(s), BLOCK>>>(b.out.p, b.lse.p, b.q.p, b.k.p, b.v.p, s.B, s.T, s.NH, s.NKV, s.HS,
                                            1 / sqrtf((float)s.HS));
        },
        [&](const Shape& s, Bufs& b) {
            float scale = 1 / sqrtf((float)s.HS);
            flash_bwd_dq<<<blocks(s), BLOCK>>>(b.dq.p, b.dout.p, b.q.p, b.k.p, b.v.p, b.lse.p, b.delta.p, s.B, s.T, s.NH,
                                               s.NKV, s.HS, scale);
            flash_bwd_dkv<<<blocks(s), BLOCK>>>(b.dk.p, b.dv.p, b.dout.p, b.q.p, b.k.p, b.v.p, b.lse.p, b.delta.p, s.B,
                                                s.T, s.NH, s.NKV, s.HS, scale);
        });
}
