// emu.h runs CUDA kernels on the CPU, so that the warp-level kernels of
// flash_mma.cuh, attn_rows.cuh and pick.cuh can be checked where there is
// no GPU. Every lane is a fiber with a stack of its own, all on one OS
// thread: a lane runs until it reaches a barrier (__syncthreads,
// __syncwarp, and the two inside every warp-wide operation), then the
// next lane runs, so that lanes meet at barriers as a warp's do, in a
// fixed order, with no OS threads to schedule. Blocks run one after
// another; __shared__ arrays are function statics, shared by the block's
// lanes. Warp-wide operations (shuffles, mma.sync) exchange through
// per-warp staging memory between two warp barriers, and mma_bf16
// scatters each lane's registers into whole matrices by the fragment
// layouts of the PTX ISA (m16n8k16, .bf16, .row.col, .f32), multiplies,
// and gathers each lane's results back: a wrong layout assumption in a
// kernel gives a wrong answer here too. x86-64 only (the fiber switch).
#pragma once
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

// EMU_WARPS is the most warps a block the emulator runs.
#define EMU_WARPS 8

struct dim3 {
    unsigned x = 0, y = 0, z = 0;
};
inline dim3 threadIdx; // the running lane's: the scheduler sets it before resuming one
inline dim3 blockIdx;  // one block at a time
inline dim3 blockDim;
inline dim3 gridDim;

#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
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

// emu_switch saves the callee-saved registers on the running stack,
// stores its pointer in *from, loads *to and resumes what was saved there.
extern "C" void emu_switch(void** from, void* const* to);
asm(R"(
.text
.globl emu_switch
emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq (%rsi), %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
)");

namespace emu {
inline float A[EMU_WARPS][16][16], Bm[EMU_WARPS][16][8];
inline int warp() { return threadIdx.x >> 5; }
inline int lane() { return threadIdx.x & 31; }

// The scheduler: lanes[i] is lane i's saved stack pointer, main the
// scheduler's; cur the running lane; done whether a lane's kernel has
// returned; kernel the block's body.
inline std::vector<void*> lanes;
inline void* main;
inline int cur;
inline std::vector<char> done;
inline const std::function<void()>* kernel;

// yield returns to the scheduler, which resumes the next lane.
inline void yield() { emu_switch(&lanes[cur], &main); }

// progress counts arrivals at barriers and finished lanes: a round of
// the scheduler that leaves it unchanged is a deadlock.
inline unsigned long progress;

// Barrier is a barrier for n lanes: arrive waits until n have arrived.
struct Barrier {
    int n = 0, count = 0;
    unsigned gen = 0;
    void arrive() {
        progress++;
        unsigned g = gen;
        if (++count == n) {
            count = 0;
            gen++;
            return;
        }
        while (gen == g) yield();
    }
};
inline Barrier block;
inline Barrier warps[EMU_WARPS];

// start is where a lane's fiber begins: it runs the kernel, marks the
// lane done and goes back to the scheduler for good.
inline void start() {
    (*kernel)();
    done[cur] = 1;
    progress++;
    yield();
    abort(); // never resumed
}
} // namespace emu

inline void __syncthreads() { emu::block.arrive(); }
inline void __syncwarp() { emu::warps[emu::warp()].arrive(); }

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
inline void cp16(__nv_bfloat16* d, const __nv_bfloat16* s) { memcpy(d, s, 16); }

// cp.async: a lane's copies wait in its open group until committed, and
// committed groups are copied only when a cp_async_wait needs them, the
// latest moment the device may complete them, so that a kernel reading a
// tile before its wait, or another lane's copies before the barrier
// after theirs, reads stale memory here. A block that ends with copies
// pending, or an unaligned address, aborts.
namespace emu {
struct Copy {
    void* d;
    const void* s;
};
inline std::vector<std::vector<Copy>> open;                // per lane
inline std::vector<std::vector<std::vector<Copy>>> groups; // per lane, oldest first
} // namespace emu

inline void cp_async16(__nv_bfloat16* d, const __nv_bfloat16* s) {
    if (((reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(s)) & 15) != 0) {
        fprintf(stderr, "emu: cp.async of %p to %p is not 16-byte aligned\n", (const void*)s, (void*)d);
        abort();
    }
    emu::open[emu::cur].push_back({d, s});
}

inline void cp_async_commit() {
    emu::groups[emu::cur].push_back(std::move(emu::open[emu::cur]));
    emu::open[emu::cur].clear();
}

template <int N>
inline void cp_async_wait() {
    auto& g = emu::groups[emu::cur];
    while (g.size() > size_t(N)) {
        for (const emu::Copy& c : g.front()) memcpy(c.d, c.s, 16);
        g.erase(g.begin());
    }
}

inline unsigned lds16x2(const __nv_bfloat16* p, int stride) { return unsigned(p[0].x) | unsigned(p[stride].x) << 16; }

inline float ex2(float x) { return exp2f(x); }

// ldsm4 is ldmatrix .m8n8.x4 (.trans): lane l gives the address of row
// l%8 of matrix l/8; lane l receives, of matrix m, row l/4 at columns
// 2(l%4), 2(l%4)+1, or with TRANS column l/4 of rows 2(l%4), 2(l%4)+1
// (the lower column or row in the low half). The addresses pass through
// the warp's staging memory, as a shuffle's values do.
template <bool TRANS>
inline void ldsm4(unsigned (&r)[4], const __nv_bfloat16* p) {
    static const __nv_bfloat16* rows[EMU_WARPS][32];
    int w = emu::warp(), l = emu::lane();
    if ((reinterpret_cast<uintptr_t>(p) & 15) != 0) {
        fprintf(stderr, "emu: ldmatrix row address %p is not 16-byte aligned\n", (const void*)p);
        abort();
    }
    rows[w][l] = p;
    __syncwarp();
    for (int m = 0; m < 4; m++) {
        const __nv_bfloat16* const* mat = rows[w] + 8 * m;
        int g = l >> 2, t = l & 3;
        if (TRANS) r[m] = unsigned(mat[2 * t][g].x) | unsigned(mat[2 * t + 1][g].x) << 16;
        else r[m] = unsigned(mat[g][2 * t].x) | unsigned(mat[g][2 * t + 1].x) << 16;
    }
    __syncwarp();
}

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
// at most EMU_WARPS), each lane a fiber; it aborts when every unfinished
// lane waits at a barrier that cannot complete (a lane returned before a
// barrier the others reach).
inline void launch(int grid, int threads, const std::function<void()>& kernel) {
    const int n = threads;
    const size_t stack = 64 << 10;
    std::vector<char> stacks((size_t)n * stack);
    blockDim.x = n;
    gridDim.x = grid;
    emu::kernel = &kernel;
    emu::lanes.assign(n, nullptr);
    for (int bi = 0; bi < grid; bi++) {
        blockIdx.x = bi;
        emu::block = emu::Barrier{n};
        for (int w = 0; w < n / 32; w++) emu::warps[w] = emu::Barrier{32};
        emu::done.assign(n, 0);
        emu::open.assign(n, {});
        emu::groups.assign(n, {});
        for (int i = 0; i < n; i++) {
            // A fresh stack: six zeroed registers for emu_switch to pop,
            // then start as its return address, 16-byte aligned as at a
            // call's entry once popped.
            uintptr_t top = (uintptr_t)(stacks.data() + (size_t)(i + 1) * stack) & ~(uintptr_t)15;
            void** sp = (void**)(top - 16);
            sp[0] = (void*)&emu::start;
            sp -= 6;
            for (int r = 0; r < 6; r++) sp[r] = nullptr;
            emu::lanes[i] = sp;
        }
        for (int live = n; live > 0;) {
            unsigned long before = emu::progress;
            live = 0;
            for (int i = 0; i < n; i++) {
                if (emu::done[i]) continue;
                emu::cur = i;
                threadIdx.x = i;
                emu_switch(&emu::main, &emu::lanes[i]);
                live += !emu::done[i];
            }
            if (live > 0 && emu::progress == before) {
                fprintf(stderr, "emu: block %d: %d lanes wait at barriers that cannot complete\n", bi, live);
                abort();
            }
        }
        for (int i = 0; i < n; i++)
            if (!emu::open[i].empty() || !emu::groups[i].empty()) {
                fprintf(stderr, "emu: block %d: lane %d ended with cp.async copies not waited for\n", bi, i);
                abort();
            }
    }
}
