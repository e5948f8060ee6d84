// emu.h runs CUDA kernels on the CPU, one std::thread a lane, so that
// the warp-level kernels of flash_mma.cuh and attn_rows.cuh
// can be checked where there is no GPU. Blocks run one after another;
// __shared__ arrays are function statics, shared by the block's threads.
// Warp-wide operations (shuffles, mma.sync) exchange through per-warp
// staging memory between two warp barriers, and mma_bf16 scatters each
// lane's registers into whole matrices by the fragment layouts of the PTX
// ISA (m16n8k16, .bf16, .row.col, .f32), multiplies, and gathers each
// lane's results back: a wrong layout assumption in a kernel gives a wrong
// answer here too.
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

// EMU_WARPS is the most warps a block the emulator runs.
#define EMU_WARPS 8

struct dim3 {
    unsigned x = 0, y = 0, z = 0;
};
inline thread_local dim3 threadIdx;
inline dim3 blockIdx; // one block at a time: the same for every thread
inline dim3 blockDim;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

using std::max;
using std::min;

struct __nv_bfloat16 {
    uint16_t x;
};

// __float2bfloat16 rounds to nearest, ties to even (NaN kept quiet), as
// the device's __float2bfloat16 and cvt.rn.bf16x2.f32 do.
inline __nv_bfloat16 __float2bfloat16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000) return {uint16_t((u >> 16) | 0x40)};
    u += 0x7fff + ((u >> 16) & 1);
    return {uint16_t(u >> 16)};
}

inline float bf16f(uint16_t h) {
    uint32_t u = uint32_t(h) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

inline float __expf(float x) { return expf(x); }

namespace emu {
inline std::barrier<>* block;
inline std::barrier<>* warps[EMU_WARPS];
inline float A[EMU_WARPS][16][16], Bm[EMU_WARPS][16][8];
inline int warp() { return threadIdx.x >> 5; }
inline int lane() { return threadIdx.x & 31; }
} // namespace emu

inline void __syncthreads() { emu::block->arrive_and_wait(); }
inline void __syncwarp() { emu::warps[emu::warp()]->arrive_and_wait(); }

template <class T>
inline T shfl_xor(T v, int m) {
    static T xch[EMU_WARPS][32];
    int w = emu::warp(), l = emu::lane();
    xch[w][l] = v;
    __syncwarp();
    T r = xch[w][l ^ m];
    __syncwarp();
    return r;
}

inline unsigned pack_bf16(float lo, float hi) {
    return unsigned(__float2bfloat16(lo).x) | unsigned(__float2bfloat16(hi).x) << 16;
}

inline unsigned lds32(const __nv_bfloat16* p) {
    unsigned r;
    memcpy(&r, p, 4);
    return r;
}

struct float4 {
    float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline float4 ldg4(const float* p) { return {p[0], p[1], p[2], p[3]}; }
inline void sts32(__nv_bfloat16* p, unsigned w) { memcpy(p, &w, 4); }

inline unsigned lds16x2(const __nv_bfloat16* p, int stride) { return unsigned(p[0].x) | unsigned(p[stride].x) << 16; }

inline float atomicAdd(float* p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }

// mma_bf16: d += A·B over the warp. Lane l (group g = l/4, thread in
// group t = l%4) holds A's rows g and g+8, columns 2t, 2t+1 (a[0]: row g;
// a[1]: row g+8) and columns 2t+8, 2t+9 (a[2]: row g; a[3]: row g+8); B's
// rows 2t, 2t+1 (b0) and 2t+8, 2t+9 (b1) of column g; d's rows g (d[0],
// d[1]) and g+8 (d[2], d[3]), columns 2t, 2t+1. The lower index is in the
// low half of a register.
inline void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    int w = emu::warp(), l = emu::lane(), g = l >> 2, t = l & 3;
    auto lo = [](unsigned r) { return bf16f(uint16_t(r & 0xffff)); };
    auto hi = [](unsigned r) { return bf16f(uint16_t(r >> 16)); };
    auto& A = emu::A[w];
    auto& B = emu::Bm[w];
    for (int i = 0; i < 4; i++) {
        int row = g + (i & 1) * 8, col = 2 * t + (i >> 1) * 8;
        A[row][col] = lo(a[i]);
        A[row][col + 1] = hi(a[i]);
    }
    B[2 * t][g] = lo(b0);
    B[2 * t + 1][g] = hi(b0);
    B[2 * t + 8][g] = lo(b1);
    B[2 * t + 9][g] = hi(b1);
    __syncwarp();
    float r[4];
    for (int i = 0; i < 4; i++) {
        int row = g + (i >> 1) * 8, col = 2 * t + (i & 1);
        float acc = 0.f;
        for (int kk = 0; kk < 16; kk++) acc += A[row][kk] * B[kk][col];
        r[i] = d[i] + acc;
    }
    __syncwarp();
    for (int i = 0; i < 4; i++) d[i] = r[i];
}

// launch runs kernel over grid blocks of threads threads (whole warps,
// at most EMU_WARPS).
inline void launch(int grid, int threads, const std::function<void()>& kernel) {
    const int n = threads, nw = threads / 32;
    blockDim.x = n;
    std::barrier<> blk(n);
    std::vector<std::barrier<>*> ws;
    for (int w = 0; w < nw; w++) ws.push_back(new std::barrier<>(32));
    emu::block = &blk;
    for (int w = 0; w < nw; w++) emu::warps[w] = ws[w];
    std::barrier<> start(n), done(n);
    std::vector<std::thread> th;
    for (int i = 0; i < n; i++)
        th.emplace_back([&, i] {
            threadIdx.x = i;
            for (int bi = 0; bi < grid; bi++) {
                if (i == 0) blockIdx.x = bi;
                start.arrive_and_wait();
                kernel();
                done.arrive_and_wait();
            }
        });
    for (auto& t : th) t.join();
    for (auto* w : ws) delete w;
}
