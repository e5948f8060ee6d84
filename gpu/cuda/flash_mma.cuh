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
// with a fiber a lane and implements the primitives below from the
// documented fragment layouts. The primitives each side provides:
//   mma_bf16(d, a, b0, b1)  d += A(16x16 bf16, row) · B(16x8 bf16, col), f32
//   pack_bf16(lo, hi)       two floats rounded to bf16 in one 32-bit word
//   lds32(p)                two adjacent bf16 of shared memory as one word
//   ldsm4<TRANS>(r, p)      ldmatrix .m8n8.x4 (.trans) of bf16: lane l gives
//                           p, row l%8 of matrix l/8; r[m] gets lane l's
//                           part of matrix m: row l/4, columns 2(l%4) and
//                           2(l%4)+1, or with TRANS column l/4 of rows
//                           2(l%4) and 2(l%4)+1
//   ex2(x)                  2^x (ex2.approx)
//   sts32(p, w)             stores a word of two bf16 at p (4-byte aligned)
//   ldg4(p)                 four floats at p (16-byte aligned) as a float4
//   cp16(d, s)              copies eight bf16 from s to d (both 16-byte aligned)
//   cp_async16(d, s)        cp16 without waiting (cp.async): the copy lands by
//                           the cp_async_wait that covers its group
//   cp_async_commit()       closes the group of this lane's cp_async16 so far
//   cp_async_wait<N>()      waits until at most the N latest groups are pending
//   shfl_xor(v, m)          the value of lane ^ m in the warp
// and __syncthreads, __float2bfloat16, __expf, logf, fmaxf, fmaf, min, atomicAdd,
// float4, make_float4, INFINITY. The kernels are templates over NF, the most 16-channel chunks
// of a head they hold in registers (HS <= 16*NF), and over the storage of
// q, k and v (S: float, or bf16 as rope_qkv writes them, which are the
// values the float loads round to, so the results are the same), with
// extern "C" entry points per NF and S at the end.

#include "tile.cuh"

#define MW 4              // warps a block
#define MQ (16 * MW)      // query rows a block
#define MK 64             // keys a tile
#define MLD (128 + 8)     // bf16 row stride of the Q and K tiles (HS <= 128)

// log2e turns scores into the base-2 units of ex2.
#define MMA_LOG2E 1.4426950408889634f

// mmaRowsHS copies rows first..first+rows-1 of head `head` of a
// [B,T,heads,HS] float32 tensor (batch b) into shared memory as bf16, row
// by row with stride ld; rows at or past T are zeros. The block's threads
// share the work, four channels a load when src is 16-byte aligned (then
// every row is: HS is a multiple of 16), else one. HSC > 0 is HS known
// when compiling, so the divisions by it are shifts.
template <int HSC, bool ASYNC>
__device__ __forceinline__ void mmaRowsHS(__nv_bfloat16* dst, int ld, const float* src, int b, int head, int heads,
                                          int first, int rows, int T, int HS) {
    if (HSC > 0) HS = HSC;
    const float* base = src + (((long)b * T + first) * heads + head) * HS;
    long rs = (long)heads * HS; // one row to the next
    int have = T - first;       // rows j < have exist
    if (((unsigned long)src & 15) == 0) {
        int q4 = HS / 4;
        for (int e = threadIdx.x; e < rows * q4; e += MW * 32) {
            int j = e / q4, c = (e - j * q4) * 4;
            float4 x = make_float4(0.f, 0.f, 0.f, 0.f);
            if (j < have) x = ldg4(base + j * rs + c);
            sts32(dst + j * ld + c, pack_bf16(x.x, x.y));
            sts32(dst + j * ld + c + 2, pack_bf16(x.z, x.w));
        }
        return;
    }
    for (int e = threadIdx.x; e < rows * HS; e += MW * 32) {
        int j = e / HS, c = e - j * HS;
        dst[j * ld + c] = __float2bfloat16(j < have ? base[j * rs + c] : 0.f);
    }
}

// mmaRowsHS from a bf16 tensor copies the values: eight channels a load
// when src is 16-byte aligned (then every row is), else one. With ASYNC
// the aligned copies are cp.async (the caller commits and waits; the
// zeros past T and the unaligned loads are stored at once); a float
// tensor is always converted at once.
template <int HSC, bool ASYNC>
__device__ __forceinline__ void mmaRowsHS(__nv_bfloat16* dst, int ld, const __nv_bfloat16* src, int b, int head,
                                          int heads, int first, int rows, int T, int HS) {
    if (HSC > 0) HS = HSC;
    const __nv_bfloat16* base = src + (((long)b * T + first) * heads + head) * HS;
    long rs = (long)heads * HS;
    int have = T - first;
    if (((unsigned long)src & 15) == 0) {
        int q8 = HS / 8;
        for (int e = threadIdx.x; e < rows * q8; e += MW * 32) {
            int j = e / q8, c = (e - j * q8) * 8;
            __nv_bfloat16* d = dst + j * ld + c;
            if (j < have) {
                if (ASYNC) cp_async16(d, base + j * rs + c);
                else cp16(d, base + j * rs + c);
            } else {
                for (int w = 0; w < 4; w++) sts32(d + 2 * w, 0u);
            }
        }
        return;
    }
    for (int e = threadIdx.x; e < rows * HS; e += MW * 32) {
        int j = e / HS, c = e - j * HS;
        dst[j * ld + c] = j < have ? base[j * rs + c] : __float2bfloat16(0.f);
    }
}

// mmaRows is mmaRowsHS, with HS known when compiling where it is 16*NF.
template <int NF, typename S, bool ASYNC = false>
__device__ __forceinline__ void mmaRows(__nv_bfloat16* dst, int ld, const S* src, int b, int head, int heads,
                                        int first, int rows, int T, int HS) {
    if (HS == 16 * NF) mmaRowsHS<16 * NF, ASYNC>(dst, ld, src, b, head, heads, first, rows, T, HS);
    else mmaRowsHS<0, ASYNC>(dst, ld, src, b, head, heads, first, rows, T, HS);
}

// MmaPlace is a thread's place in a block of the mma kernels: the block's
// tile of MQ rows (or keys), counted from the end when reversed (the
// forward and dq blocks with the most work first), the warp, the lane's
// quad g and place tg in it, and HS in 16- (nf) and 8-channel (nn) chunks.
struct MmaPlace : HeadTile {
    int warp, g, tg, nf, nn;
    __device__ MmaPlace(int T, int NH, int NKV, int HS, bool reversed) : HeadTile(T, MQ, NH, NKV) {
        if (reversed) tile = tiles - 1 - tile;
        warp = threadIdx.x >> 5;
        g = (threadIdx.x & 31) >> 2;
        tg = threadIdx.x & 3;
        nf = HS / 16;
        nn = HS / 8;
    }
};

// mmaFragA loads rows r..r+15 of a row-major bf16 tile (stride LD) as A
// fragments, one per 16 channels, for the lane of quad g, place tg.
template <int NF, int LD = MLD>
__device__ __forceinline__ void mmaFragA(unsigned (&a)[NF][4], const __nv_bfloat16* tile, int r, int nf, int g, int tg) {
#pragma unroll
    for (int f = 0; f < NF; f++)
        if (f < nf) {
            const __nv_bfloat16* p = tile + (r + g) * LD + f * 16 + tg * 2;
            a[f][0] = lds32(p);
            a[f][1] = lds32(p + 8 * LD);
            a[f][2] = lds32(p + 8);
            a[f][3] = lds32(p + 8 * LD + 8);
        }
}

// mmaFragPair loads the block's MQ rows from row first of head `head` of
// the [B,T,heads,HS] tensors x and y into the tiles tx and ty (stride
// LD), and the warp's 16 of them as A fragments ax and ay.
template <int NF, int LD, typename SX, typename SY>
__device__ __forceinline__ void mmaFragPair(unsigned (&ax)[NF][4], unsigned (&ay)[NF][4], __nv_bfloat16* tx,
                                            __nv_bfloat16* ty, const SX* x, const SY* y, int b, int head,
                                            int heads, int first, int T, int HS, const MmaPlace& at) {
    mmaRows<NF>(tx, LD, x, b, head, heads, first, MQ, T, HS);
    mmaRows<NF>(ty, LD, y, b, head, heads, first, MQ, T, HS);
    __syncthreads();
    mmaFragA<NF, LD>(ax, tx, at.warp * 16, at.nf, at.g, at.tg);
    mmaFragA<NF, LD>(ay, ty, at.warp * 16, at.nf, at.g, at.tg);
}

// mmaScore sets s to A·Xᵀ for rows 8j..8j+7 of the row-major tile X
// (stride LD): B[c][x] = X[x][c], two adjacent channels a register; one
// ldmatrix gives the B fragments of two 16-channel chunks.
template <int NF, int LD = MLD>
__device__ __forceinline__ void mmaScore(float (&s)[4], const unsigned (&a)[NF][4], const __nv_bfloat16* X, int j,
                                         int nf, int g, int tg) {
    s[0] = s[1] = s[2] = s[3] = 0.f;
    int l = threadIdx.x & 31;
    const __nv_bfloat16* p = X + (j * 8 + (l & 7)) * LD + (l >> 3) * 8;
#pragma unroll
    for (int f = 0; f < NF; f += 2)
        if (f + 1 < nf) {
            unsigned b[4];
            ldsm4<false>(b, p + f * 16);
            mma_bf16(s, a[f], b[0], b[1]);
            mma_bf16(s, a[f + 1], b[2], b[3]);
        } else if (f < nf) { // an odd last chunk
            const __nv_bfloat16* q = X + (j * 8 + g) * LD + f * 16 + tg * 2;
            mma_bf16(s, a[f], lds32(q), lds32(q + 8));
        }
}

// mmaPack rounds the accumulators of eight 8-column tiles (16 rows by 64)
// to bf16 as the A fragments of four 16-column chunks: tile 2kk gives a
// chunk's columns 0-7, tile 2kk+1 its columns 8-15.
__device__ __forceinline__ void mmaPack(unsigned (&a)[4][4], const float (&s)[8][4]) {
#pragma unroll
    for (int j = 0; j < 8; j++) {
        a[j / 2][(j % 2) * 2] = pack_bf16(s[j][0], s[j][1]);
        a[j / 2][(j % 2) * 2 + 1] = pack_bf16(s[j][2], s[j][3]);
    }
}

// mmaTimes adds A·X to acc: A the four 16-column chunks of a 16×64 tile,
// X 64 rows by HS channels, row-major with stride LD (B[x][c] = X[x][c]:
// two rows of a column a register, which ldmatrix's transpose gives, for
// two 8-channel tiles at once; nn is even, HS being a multiple of 16).
template <int NF, int LD = MLD>
__device__ __forceinline__ void mmaTimes(float (&acc)[2 * NF][4], const unsigned (&a)[4][4], const __nv_bfloat16* X,
                                         int nn, int g, int tg) {
    int l = threadIdx.x & 31;
    const __nv_bfloat16* p = X + ((l & 7) + ((l >> 3) & 1) * 8) * LD + (l >> 4) * 8;
#pragma unroll
    for (int n = 0; n < 2 * NF; n += 2)
        if (n < nn) {
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                unsigned b[4];
                ldsm4<true>(b, p + kk * 16 * LD + n * 8);
                mma_bf16(acc[n], a[kk], b[0], b[1]);
                mma_bf16(acc[n + 1], a[kk], b[2], b[3]);
            }
        }
}

// mmaStore adds (atomic false: +=; with write, =) or atomically adds the accumulators
// times mul into rows rlo, rhi of head `head` of a [B,T,heads,HS] tensor,
// skipping rows at or past T.
template <int NF>
__device__ __forceinline__ void mmaStore(float* dst, const float (&acc)[2 * NF][4], float mul, int b, int head,
                                         int heads, int rlo, int rhi, int T, int HS, int nn, int tg, bool atomic,
                                         bool write = false) {
#pragma unroll
    for (int n = 0; n < 2 * NF; n++)
        if (n < nn)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int row = i < 2 ? rlo : rhi;
                if (row >= T) continue;
                float* d = dst + (((long)b * T + row) * heads + head) * HS + n * 8 + tg * 2 + (i & 1);
                if (atomic) atomicAdd(d, acc[n][i] * mul);
                else if (write) *d = acc[n][i] * mul;
                else *d += acc[n][i] * mul;
            }
}

// MmaTiles walks the K and V tiles of key head kh (batch b) for the
// forward and dq kernels: at(jt) gives tile jt in shared memory. It
// starts at a barrier (every warp is done with the buffer about to be
// filled, and with the Q tile before the loop), fills, and ends at a
// barrier. Without PIPE it loads tile jt into the one buffer. With PIPE
// the constructor starts tile 0's cp.async copies into buffer 0 (the
// caller stages Q in buffer 1 meanwhile), and at(jt) starts tile jt+1's
// into the other buffer and waits only for tile jt's, so that those
// copies run while the warps compute on tile jt.
template <int NF, typename S, bool PIPE>
struct MmaTiles {
    static constexpr int LD = PIPE ? 16 * NF + 8 : MLD;
    __nv_bfloat16 *ks, *vs;
    const S *k, *v;
    int b, kh, NKV, T, HS;
    __device__ MmaTiles(__nv_bfloat16* ks, __nv_bfloat16* vs, const S* k, const S* v, int b, int kh, int NKV, int T,
                        int HS)
        : ks(ks), vs(vs), k(k), v(v), b(b), kh(kh), NKV(NKV), T(T), HS(HS) {
        if (PIPE) load(0, 0);
    }
    // load starts the copies of tile jt into buffer buf.
    __device__ void load(int jt, int buf) {
        mmaRows<NF, S, PIPE>(ks + buf * MK * LD, LD, k, b, kh, NKV, jt * MK, MK, T, HS);
        mmaRows<NF, S, PIPE>(vs + buf * MK * LD, LD, v, b, kh, NKV, jt * MK, MK, T, HS);
        if (PIPE) cp_async_commit();
    }
    __device__ void at(int jt, int tiles, const __nv_bfloat16*& kt, const __nv_bfloat16*& vt) {
        __syncthreads();
        if (!PIPE) {
            load(jt, 0);
        } else if (jt + 1 < tiles) {
            load(jt + 1, (jt + 1) & 1);
            cp_async_wait<1>();
        } else {
            cp_async_wait<0>();
        }
        __syncthreads();
        int buf = PIPE ? jt & 1 : 0;
        kt = ks + buf * MK * LD;
        vt = vs + buf * MK * LD;
    }
};

// mmaFwd (flash_mma_fwd*): out[B,T,NH,HS] and lse[B,NH,T] of causal GQA
// attention, as gpu.FlashAttention defines them (scores scaled by scale, the
// log-sum-exp in the same units); one block per (b, h, MQ query rows), the
// blocks of the longest rows first. HS is a multiple of 16, at most 16*NF.
// The running maximum is kept in base-2 units (scores times
// scale·log2e), so each probability is one fma and one ex2; only the
// tiles that reach past a row of the warp or past T are masked.
//
// With PIPE (a bf16 S, HS <= 64: the flash_mma_*_pipe entries) the K and
// V tiles are double-buffered at a stride of 16*NF + 8 (MmaTiles): the
// next tile's copies are in flight while the warps compute on this one.
template <int NF, typename S, bool PIPE = false>
__device__ __forceinline__ void mmaFwd(float* out, float* lse, const S* q, const S* k, const S* v, int B,
                                       int T, int NH, int NKV, int HS, float scale) {
    constexpr int LD = PIPE ? 16 * NF + 8 : MLD, NB = PIPE ? 2 : 1;
    __shared__ __align__(16) __nv_bfloat16 ks[NB * MQ * LD]; // the Q tile, then each K tile
    __shared__ __align__(16) __nv_bfloat16 vs[NB * MK * LD]; // each V tile, row-major
    MmaPlace at(T, NH, NKV, HS, true);
    int tile = at.tile, b = at.b, h = at.h, kh = at.kh, warp = at.warp, g = at.g, tg = at.tg;
    int q0 = tile * MQ, r0 = q0 + warp * 16, rlo = r0 + g, rhi = rlo + 8;
    int nf = at.nf, nn = at.nn;
    float sl2 = scale * MMA_LOG2E;

    MmaTiles<NF, S, PIPE> tl(ks, vs, k, v, b, kh, NKV, T, HS);
    // Q goes where the second K tile will (the first is on its way).
    __nv_bfloat16* qt = ks + (NB - 1) * MK * LD;
    mmaRows<NF>(qt, LD, q, b, h, NH, q0, MQ, T, HS);
    __syncthreads();
    unsigned qa[NF][4]; // the warp's 16 rows of Q
    mmaFragA<NF, LD>(qa, qt, warp * 16, nf, g, tg);
    float o[2 * NF][4]; // the output: 8 channels a tile, rows rlo (0, 1) and rhi (2, 3)
#pragma unroll
    for (int n = 0; n < 2 * NF; n++)
        o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
    float mlo = -INFINITY, mhi = -INFINITY, llo = 0.f, lhi = 0.f; // maxima in base-2 units
    int ktiles = min(q0 + MQ - 1, T - 1) / MK + 1;
    for (int jt = 0; jt < ktiles; jt++) {
        int k0 = jt * MK;
        const __nv_bfloat16 *kt, *vt;
        tl.at(jt, ktiles, kt, vt);
        if (k0 > r0 + 15 || r0 >= T) continue; // every key after the warp's rows

        // S = Q·Kᵀ, unscaled; the lane holds keys k0 + 8j + 2tg + {0,1}
        // of rows rlo (s[j][0..1]) and rhi (s[j][2..3]); the quad holds
        // the row. Masked scores are -inf.
        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++) mmaScore<NF, LD>(s[j], qa, kt, j, nf, g, tg);
        bool full = k0 + MK - 1 <= r0 && k0 + MK <= T; // every key at or before every row, and < T
        if (!full) {
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    int key = k0 + j * 8 + tg * 2 + e;
                    if (key > rlo || key >= T) s[j][e] = -INFINITY;
                    if (key > rhi || key >= T) s[j][2 + e] = -INFINITY;
                }
        }
        float mxlo = -INFINITY, mxhi = -INFINITY;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            mxlo = fmaxf(mxlo, fmaxf(s[j][0], s[j][1]));
            mxhi = fmaxf(mxhi, fmaxf(s[j][2], s[j][3]));
        }
        mxlo = fmaxf(mxlo, shfl_xor(mxlo, 1));
        mxlo = fmaxf(mxlo, shfl_xor(mxlo, 2));
        mxhi = fmaxf(mxhi, shfl_xor(mxhi, 1));
        mxhi = fmaxf(mxhi, shfl_xor(mxhi, 2));
        float mnlo = fmaxf(mlo, mxlo * sl2), mnhi = fmaxf(mhi, mxhi * sl2);
        float clo = mnlo == -INFINITY ? 1.f : ex2(mlo - mnlo);
        float chi = mnhi == -INFINITY ? 1.f : ex2(mhi - mnhi);
        // A row with no key yet (mn -inf) takes zeros: its scores are all
        // -inf, and fma(-inf, sl2, inf) would be NaN.
        float nlo = mnlo == -INFINITY ? 0.f : -mnlo, nhi = mnhi == -INFINITY ? 0.f : -mnhi;
        float pslo = 0.f, pshi = 0.f;
#pragma unroll
        for (int j = 0; j < 8; j++) {
            s[j][0] = ex2(fmaf(s[j][0], sl2, nlo));
            s[j][1] = ex2(fmaf(s[j][1], sl2, nlo));
            s[j][2] = ex2(fmaf(s[j][2], sl2, nhi));
            s[j][3] = ex2(fmaf(s[j][3], sl2, nhi));
            pslo += s[j][0] + s[j][1];
            pshi += s[j][2] + s[j][3];
        }
        unsigned pa[4][4]; // P as A fragments
        mmaPack(pa, s);
        pslo += shfl_xor(pslo, 1);
        pslo += shfl_xor(pslo, 2);
        pshi += shfl_xor(pshi, 1);
        pshi += shfl_xor(pshi, 2);
        llo = llo * clo + pslo;
        lhi = lhi * chi + pshi;
        mlo = mnlo;
        mhi = mnhi;

        // O = O·corr + P·V.
#pragma unroll
        for (int n = 0; n < 2 * NF; n++) {
            o[n][0] *= clo;
            o[n][1] *= clo;
            o[n][2] *= chi;
            o[n][3] *= chi;
        }
        mmaTimes<NF, LD>(o, pa, vt, nn, g, tg);
    }
    if (r0 >= T) return; // after the last __syncthreads
#pragma unroll
    for (int n = 0; n < 2 * NF; n++)
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
    // lse in the scores' units: the base-2 maximum back to natural log.
    if (tg == 0) {
        if (rlo < T) lse[((long)b * NH + h) * T + rlo] = mlo * 0.6931471805599453f + logf(llo);
        if (rhi < T) lse[((long)b * NH + h) * T + rhi] = mhi * 0.6931471805599453f + logf(lhi);
    }
}

// mmaDq (flash_mma_dq*): dq[B,T,NH,HS] += scale · dS·K with P = exp(S -
// lse), dS = P ∘ (dO·Vᵀ - delta) (delta = rowsum(dO ∘ out), flash_delta);
// one block per (b, h, MQ query rows) walking the key tiles up to the
// diagonal. dP is made one 8-key tile at a time, beside
// P, so only S, Q, dO and dq stay in registers. Each element of dq is
// stored once, so with zero it is written instead of added to (a dq that
// takes a pending zero, SWERL_CUDA_ZERO=lazy). PIPE as mmaFwd's.
template <int NF, typename S, bool PIPE = false>
__device__ __forceinline__ void mmaDq(float* dq, const float* dout, const S* q, const S* k, const S* v,
                                      const float* lse, const float* delta, int B, int T, int NH, int NKV, int HS,
                                      float scale, int zero) {
    constexpr int LD = PIPE ? 16 * NF + 8 : MLD, NB = PIPE ? 2 : 1;
    __shared__ __align__(16) __nv_bfloat16 ks[NB * MQ * LD]; // the Q tile, then each K tile
    __shared__ __align__(16) __nv_bfloat16 vs[NB * MQ * LD]; // the dO tile, then each V tile
    MmaPlace at(T, NH, NKV, HS, true);
    int tile = at.tile, b = at.b, h = at.h, kh = at.kh, warp = at.warp, g = at.g, tg = at.tg;
    int q0 = tile * MQ, r0 = q0 + warp * 16, rlo = r0 + g, rhi = rlo + 8;
    int nf = at.nf, nn = at.nn;

    MmaTiles<NF, S, PIPE> tl(ks, vs, k, v, b, kh, NKV, T, HS);
    unsigned qa[NF][4], da[NF][4]; // the warp's rows of Q and dO
    mmaFragPair<NF, LD>(qa, da, ks + (NB - 1) * MK * LD, vs + (NB - 1) * MK * LD, q, dout, b, h, NH, q0, T, HS, at);
    long st = ((long)b * NH + h) * T;
    float sl2 = scale * MMA_LOG2E; // P = 2^(S·sl2 - lse·log2e)
    float llo = rlo < T ? lse[st + rlo] * MMA_LOG2E : 0.f, lhi = rhi < T ? lse[st + rhi] * MMA_LOG2E : 0.f;
    float dlo = rlo < T ? delta[st + rlo] : 0.f, dhi = rhi < T ? delta[st + rhi] : 0.f;
    float acc[2 * NF][4];
#pragma unroll
    for (int n = 0; n < 2 * NF; n++)
        acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
    int ktiles = min(q0 + MQ - 1, T - 1) / MK + 1;
    for (int jt = 0; jt < ktiles; jt++) {
        int k0 = jt * MK;
        const __nv_bfloat16 *kt, *vt;
        tl.at(jt, ktiles, kt, vt);
        if (k0 > r0 + 15 || r0 >= T) continue;
        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float dp[4];
            mmaScore<NF, LD>(s[j], qa, kt, j, nf, g, tg);
            mmaScore<NF, LD>(dp, da, vt, j, nf, g, tg);
#pragma unroll
            for (int i = 0; i < 4; i++)
                s[j][i] = ex2(fmaf(s[j][i], sl2, -(i < 2 ? llo : lhi))) * (dp[i] - (i < 2 ? dlo : dhi));
        }
        // Only tiles that reach past a row of the warp or past T have
        // entries to drop (whatever was computed there, inf included).
        if (k0 + MK - 1 > r0 || k0 + MK > T || r0 + 15 >= T) {
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    int key = k0 + j * 8 + tg * 2 + (i & 1), row = i < 2 ? rlo : rhi;
                    if (key > row || key >= T || row >= T) s[j][i] = 0.f;
                }
        }
        unsigned sa[4][4]; // dS as A fragments
        mmaPack(sa, s);
        mmaTimes<NF, LD>(acc, sa, kt, nn, g, tg);
    }
    if (r0 >= T) return;
    mmaStore<NF>(dq, acc, scale, b, h, NH, rlo, rhi, T, HS, nn, tg, false, zero != 0);
}

// mmaDkv (flash_mma_dkv*): dk and dv[B,T,NKV,HS] += the share of query
// head h: dV = Pᵀ·dO, dK = scale · dSᵀ·Q; one block per (b, h, MQ keys), a
// warp's 16 keys held as A fragments (K and V), walking the query tiles
// from the diagonal on, as flash_tc_dkv; the heads of a group add
// atomically.
template <int NF, typename S>
__device__ __forceinline__ void mmaDkv(float* dk, float* dv, const float* dout, const S* q, const S* k,
                                       const S* v, const float* lse, const float* delta, int B, int T, int NH,
                                       int NKV, int HS, float scale) {
    __shared__ __align__(16) __nv_bfloat16 qs[MQ * MLD]; // the K tile, then each Q tile
    __shared__ __align__(16) __nv_bfloat16 ds[MQ * MLD]; // the V tile, then each dO tile
    __shared__ float ls[MQ], dl[MQ];                      // each Q tile's lse and delta
    MmaPlace at(T, NH, NKV, HS, false);
    int tiles = at.tiles, tile = at.tile, b = at.b, h = at.h, kh = at.kh, warp = at.warp, g = at.g, tg = at.tg;
    int key0 = tile * MQ, kr0 = key0 + warp * 16, klo = kr0 + g, khi = klo + 8;
    int nf = at.nf, nn = at.nn;

    unsigned ka[NF][4], va[NF][4]; // the warp's keys of K and V
    mmaFragPair<NF, MLD>(ka, va, qs, ds, k, v, b, kh, NKV, key0, T, HS, at);
    float ak[2 * NF][4], av[2 * NF][4];
#pragma unroll
    for (int n = 0; n < 2 * NF; n++)
#pragma unroll
        for (int i = 0; i < 4; i++) ak[n][i] = av[n][i] = 0.f;
    long st = ((long)b * NH + h) * T;
    float sl2 = scale * MMA_LOG2E; // P = 2^(S·sl2 - lse·log2e)
    for (int it = tile; it < tiles; it++) {
        int q0 = it * MQ;
        __syncthreads();
        mmaRows<NF>(qs, MLD, q, b, h, NH, q0, MQ, T, HS);
        mmaRows<NF>(ds, MLD, dout, b, h, NH, q0, MQ, T, HS);
        for (int j = threadIdx.x; j < MQ; j += MW * 32) {
            ls[j] = q0 + j < T ? lse[st + q0 + j] * MMA_LOG2E : 0.f;
            dl[j] = q0 + j < T ? delta[st + q0 + j] : 0.f;
        }
        __syncthreads();
        if (kr0 >= T) continue;
        // Pᵀ for the warp's keys (rows of these tiles) and the tile's
        // query rows q0 + 8j + 2tg + {0,1} (columns).
        float s[8][4];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            mmaScore<NF>(s[j], ka, qs, j, nf, g, tg);
#pragma unroll
            for (int i = 0; i < 4; i++) s[j][i] = ex2(fmaf(s[j][i], sl2, -ls[j * 8 + tg * 2 + (i & 1)]));
        }
        // Only tiles with a query before a key of the warp, or past T,
        // have entries to drop (whatever was computed there).
        if (q0 < kr0 + 15 || q0 + MQ > T || kr0 + 15 >= T) {
#pragma unroll
            for (int j = 0; j < 8; j++)
#pragma unroll
                for (int i = 0; i < 4; i++) {
                    int r = j * 8 + tg * 2 + (i & 1), key = i < 2 ? klo : khi;
                    if (q0 + r < key || q0 + r >= T || key >= T) s[j][i] = 0.f;
                }
        }
        unsigned pa[4][4];
        mmaPack(pa, s);
        mmaTimes<NF>(av, pa, ds, nn, g, tg); // dV += Pᵀ·dO
#pragma unroll
        for (int j = 0; j < 8; j++) {
            float dp[4]; // dPᵀ = V·dOᵀ
            mmaScore<NF>(dp, va, ds, j, nf, g, tg);
#pragma unroll
            for (int i = 0; i < 4; i++) s[j][i] *= dp[i] - dl[j * 8 + tg * 2 + (i & 1)];
        }
        mmaPack(pa, s);
        mmaTimes<NF>(ak, pa, qs, nn, g, tg); // dK += dSᵀ·Q (scaled at the end)
    }
    if (kr0 >= T) return;
    mmaStore<NF>(dv, av, 1.f, b, kh, NKV, klo, khi, T, HS, nn, tg, true);
    mmaStore<NF>(dk, ak, scale, b, kh, NKV, klo, khi, T, HS, nn, tg, true);
}

// The entry points: NF 4 for head sizes up to 64, 8 up to 128, and _b16
// for q, k and v in bf16. dk and dv take NF 4 only: K, V and both
// accumulators in registers need more than a thread has at 128 channels,
// so larger heads use flash_tc_dkv. dk/dv asks for three blocks an SM
// (168 registers, no spills, where it would take 186 and fit two).
extern "C" {
#define MMA_ARGS_FWD(S) float *out, float *lse, const S *q, const S *k, const S *v, int B, int T, int NH, int NKV, int HS, float scale
#define MMA_ARGS_DQ(S)                                                                                                   \
    float *dq, const float *dout, const S *q, const S *k, const S *v, const float *lse, const float *delta, int B,      \
        int T, int NH, int NKV, int HS, float scale, int zero
#define MMA_ARGS_DKV(S)                                                                                                  \
    float *dk, float *dv, const float *dout, const S *q, const S *k, const S *v, const float *lse, const float *delta,  \
        int B, int T, int NH, int NKV, int HS, float scale
#define MMA_ENTRIES(SUF, S)                                                                                              \
    __global__ void __launch_bounds__(MW * 32) flash_mma_fwd64##SUF(MMA_ARGS_FWD(S)) {                                 \
        mmaFwd<4>(out, lse, q, k, v, B, T, NH, NKV, HS, scale);                                                        \
    }                                                                                                                  \
    __global__ void __launch_bounds__(MW * 32) flash_mma_fwd128##SUF(MMA_ARGS_FWD(S)) {                                \
        mmaFwd<8>(out, lse, q, k, v, B, T, NH, NKV, HS, scale);                                                        \
    }                                                                                                                  \
    __global__ void __launch_bounds__(MW * 32) flash_mma_dq64##SUF(MMA_ARGS_DQ(S)) {                                   \
        mmaDq<4>(dq, dout, q, k, v, lse, delta, B, T, NH, NKV, HS, scale, zero);                                       \
    }                                                                                                                  \
    __global__ void __launch_bounds__(MW * 32) flash_mma_dq128##SUF(MMA_ARGS_DQ(S)) {                                  \
        mmaDq<8>(dq, dout, q, k, v, lse, delta, B, T, NH, NKV, HS, scale, zero);                                       \
    }                                                                                                                  \
    __global__ void __launch_bounds__(MW * 32, 3) flash_mma_dkv64##SUF(MMA_ARGS_DKV(S)) {                              \
        mmaDkv<4>(dk, dv, dout, q, k, v, lse, delta, B, T, NH, NKV, HS, scale);                                        \
    }
MMA_ENTRIES(, float)
MMA_ENTRIES(_b16, __nv_bfloat16)
// The double-buffered forward and dq (SWERL_CUDA_ATTN=pipe), for heads up
// to 64 in bf16: four tiles at stride 72 fit the 48 KiB of static shared
// memory, where stride 136 would not.
__global__ void __launch_bounds__(MW * 32) flash_mma_fwd64_pipe(MMA_ARGS_FWD(__nv_bfloat16)) {
    mmaFwd<4, __nv_bfloat16, true>(out, lse, q, k, v, B, T, NH, NKV, HS, scale);
}
__global__ void __launch_bounds__(MW * 32) flash_mma_dq64_pipe(MMA_ARGS_DQ(__nv_bfloat16)) {
    mmaDq<4, __nv_bfloat16, true>(dq, dout, q, k, v, lse, delta, B, T, NH, NKV, HS, scale, zero);
}
#undef MMA_ENTRIES
#undef MMA_ARGS_FWD
#undef MMA_ARGS_DQ
#undef MMA_ARGS_DKV
}
