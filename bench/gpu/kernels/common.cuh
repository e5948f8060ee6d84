// common.cuh is what the standalone attention files of this folder share:
// the device helpers their kernels call, from gpu/cuda (HeadTile of
// tile.cuh and flash_delta.cuh, included; storeBF16x4, a copy of
// kernels.cu's), and the host side of each file's main: random inputs,
// causal GQA attention in double precision, error checks and timing with
// CUDA events.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <vector>

#define BLOCK 256 // gpu/cuda's threads a block for kernels launched without their own

#define cudaCheck(x)                                                                                   \
    do {                                                                                               \
        cudaError_t e_ = (x);                                                                          \
        if (e_ != cudaSuccess) {                                                                       \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));        \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

#include "../../../gpu/cuda/tile.cuh" // HeadTile

// storeBF16x4 rounds v to bf16 (to nearest even, as __float2bfloat16)
// and stores the four at dst, which is 8-byte aligned.
__device__ __forceinline__ void storeBF16x4(__nv_bfloat16* dst, float4 v) {
    __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
    uint2 u;
    u.x = *(const unsigned*)&a;
    u.y = *(const unsigned*)&b;
    *(uint2*)dst = u;
}

extern "C" {
#include "../../../gpu/cuda/flash_delta.cuh"
}

// ---------------------------------------------------------------------------
// Host side.

// Shape is one attention: B sequences of T tokens, NH query heads, NKV kv
// heads, HS channels a head; q, out [B,T,NH,HS], k, v [B,T,NKV,HS], lse
// [B,NH,T].
struct Shape {
    int B, T, NH, NKV, HS;
    long nq() const { return (long)B * T * NH * HS; }
    long nkv() const { return (long)B * T * NKV * HS; }
    long nl() const { return (long)B * NH * T; }
};

// Inputs are q, k, v and the output gradient dout, standard normal (a
// 64-bit LCG and Box-Muller: nvcc 11.8 cannot parse g++ 12's <random>).
struct Inputs {
    std::vector<float> q, k, v, dout;
    Inputs(const Shape& s, unsigned long long seed) {
        auto uniform = [&] {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            return ((seed >> 11) + 0.5) / 9007199254740992.0; // (0, 1)
        };
        for (auto* x : {&q, &dout}) x->resize(s.nq());
        for (auto* x : {&k, &v}) x->resize(s.nkv());
        for (auto* x : {&q, &k, &v, &dout})
            for (float& e : *x) e = (float)(std::sqrt(-2 * std::log(uniform())) * std::cos(6.283185307179586 * uniform()));
    }
};

// Reference is causal GQA attention in double precision: out and lse, and
// dq, dk, dv from dout.
struct Reference {
    std::vector<double> out, lse, dq, dk, dv;
    Reference(const Shape& s, const Inputs& in) : out(s.nq()), lse(s.nl()), dq(s.nq()), dk(s.nkv()), dv(s.nkv()) {
        int T = s.T, NH = s.NH, NKV = s.NKV, HS = s.HS;
        double scale = 1 / std::sqrt(double(HS));
        auto qi = [&](int b, int i, int h) { return &in.q[((long)(b * T + i) * NH + h) * HS]; };
        auto kj = [&](int b, int j, int g) { return &in.k[((long)(b * T + j) * NKV + g) * HS]; };
        auto vj = [&](int b, int j, int g) { return &in.v[((long)(b * T + j) * NKV + g) * HS]; };
        auto di = [&](int b, int i, int h) { return &in.dout[((long)(b * T + i) * NH + h) * HS]; };
        std::vector<double> p(T), dp(T);
        for (int b = 0; b < s.B; b++)
            for (int h = 0; h < NH; h++) {
                int g = h / (NH / NKV);
                for (int i = 0; i < T; i++) {
                    double m = -INFINITY, z = 0;
                    for (int j = 0; j <= i; j++) {
                        double x = 0;
                        for (int c = 0; c < HS; c++) x += double(qi(b, i, h)[c]) * kj(b, j, g)[c];
                        p[j] = x * scale;
                        m = std::max(m, p[j]);
                    }
                    for (int j = 0; j <= i; j++) z += p[j] = std::exp(p[j] - m);
                    long o = ((long)(b * T + i) * NH + h) * HS;
                    lse[((long)b * NH + h) * T + i] = m + std::log(z);
                    for (int j = 0; j <= i; j++) {
                        p[j] /= z;
                        for (int c = 0; c < HS; c++) out[o + c] += p[j] * vj(b, j, g)[c];
                    }
                    // dP = dout v^T, delta = rowsum(dout * out), dS = P (dP - delta).
                    double delta = 0;
                    for (int c = 0; c < HS; c++) delta += double(di(b, i, h)[c]) * out[o + c];
                    for (int j = 0; j <= i; j++) {
                        double x = 0;
                        for (int c = 0; c < HS; c++) x += double(di(b, i, h)[c]) * vj(b, j, g)[c];
                        double ds = p[j] * (x - delta) * scale;
                        long kv = ((long)(b * T + j) * NKV + g) * HS;
                        for (int c = 0; c < HS; c++) {
                            dq[o + c] += ds * kj(b, j, g)[c];
                            dk[kv + c] += ds * qi(b, i, h)[c];
                            dv[kv + c] += p[j] * di(b, i, h)[c];
                        }
                    }
                }
            }
    }
};

// relErr is max |got - want| / max |want|, infinite when got has a NaN.
inline double relErr(const std::vector<float>& got, const std::vector<double>& want) {
    double e = 0, m = 1e-30;
    for (size_t i = 0; i < want.size(); i++) {
        if (std::isnan(got[i])) return INFINITY;
        e = std::max(e, std::fabs(got[i] - want[i]));
        m = std::max(m, std::fabs(want[i]));
    }
    return e / m;
}

// DevBuf is a float32 device buffer.
struct DevBuf {
    float* p = nullptr;
    long n = 0;
    explicit DevBuf(long n_) : n(n_) {
        cudaCheck(cudaMalloc(&p, n * sizeof(float)));
        cudaCheck(cudaMemset(p, 0, n * sizeof(float)));
    }
    explicit DevBuf(const std::vector<float>& x) : DevBuf((long)x.size()) {
        cudaCheck(cudaMemcpy(p, x.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    }
    DevBuf(const DevBuf&) = delete;
    ~DevBuf() { cudaFree(p); }
    void zero() { cudaCheck(cudaMemset(p, 0, n * sizeof(float))); }
    std::vector<float> get() const {
        std::vector<float> x(n);
        cudaCheck(cudaDeviceSynchronize());
        cudaCheck(cudaMemcpy(x.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost));
        return x;
    }
};

// Checker prints one line a compared output and remembers a failure.
struct Checker {
    double tol;
    bool ok = true;
    void operator()(const Shape& s, const char* what, const DevBuf& got, const std::vector<double>& want) {
        double e = relErr(got.get(), want);
        bool good = e < tol;
        ok = ok && good;
        printf("B=%d T=%d NH=%d NKV=%d HS=%d %-4s relative error %.3g %s\n", s.B, s.T, s.NH, s.NKV, s.HS, what, e,
               good ? "ok" : "FAIL");
    }
};

// timeMs is the mean time of f in milliseconds over reps calls after one
// warm-up call, by CUDA events.
inline float timeMs(const std::function<void()>& f, int reps = 10) {
    f();
    cudaCheck(cudaGetLastError());
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    cudaCheck(cudaEventRecord(a));
    for (int i = 0; i < reps; i++) f();
    cudaCheck(cudaEventRecord(b));
    cudaCheck(cudaEventSynchronize(b));
    cudaCheck(cudaGetLastError());
    float ms;
    cudaCheck(cudaEventElapsedTime(&ms, a, b));
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return ms / reps;
}

// gridFor is gpu/cuda's grid for a grid-stride kernel over n elements:
// blocks of BLOCK threads, at most 32 an SM.
inline int gridFor(long n) {
    int dev, sms;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    return (int)std::min<long>((n + BLOCK - 1) / BLOCK, 32L * sms);
}

// The shapes each file times: Qwen2.5-0.5B's attention (14 query heads, 2
// kv heads, 64 channels) at BenchmarkTrainStep's 8x512 and 4x2048.
inline const Shape timedShapes[] = {{8, 512, 14, 2, 64}, {4, 2048, 14, 2, 64}};

// Bufs are the device buffers of one attention: the inputs copied from in,
// the outputs, their statistics and the gradients zeroed.
struct Bufs {
    DevBuf q, k, v, dout, out, lse, delta, dq, dk, dv;
    Bufs(const Shape& s, const Inputs& in)
        : q(in.q), k(in.k), v(in.v), dout(in.dout), out(s.nq()), lse(s.nl()), delta(s.nl()), dq(s.nq()),
          dk(s.nkv()), dv(s.nkv()) {}
};

// runAttention is a file's main: it checks fwd (out and lse) and bwd (dq,
// dk and dv, after flash_delta) against the double-precision reference on
// each of shapes, to relative error tol, then times both on timedShapes.
// fwd and bwd launch the file's kernels on a shape's buffers; seed draws
// the checked inputs (seed+1 the timed ones).
template <int N, class Fwd, class Bwd>
int runAttention(double tol, const Shape (&shapes)[N], unsigned seed, Fwd fwd, Bwd bwd) {
    Checker check{tol};
    auto backward = [&](const Shape& s, Bufs& b) {
        flash_delta<<<gridFor(s.nl() * 32), BLOCK>>>(b.delta.p, b.dout.p, b.out.p, s.B, s.T, s.NH, s.HS);
        bwd(s, b);
    };
    for (const Shape& s : shapes) {
        Inputs in(s, seed);
        Reference ref(s, in);
        Bufs b(s, in);
        fwd(s, b);
        backward(s, b);
        cudaCheck(cudaGetLastError());
        check(s, "out", b.out, ref.out);
        check(s, "lse", b.lse, ref.lse);
        check(s, "dq", b.dq, ref.dq);
        check(s, "dk", b.dk, ref.dk);
        check(s, "dv", b.dv, ref.dv);
    }
    for (const Shape& s : timedShapes) {
        Inputs in(s, seed + 1);
        Bufs b(s, in);
        float f = timeMs([&] { fwd(s, b); });
        float w = timeMs([&] { backward(s, b); });
        printf("B=%d T=%d NH=%d NKV=%d HS=%d forward %.3f ms, backward %.3f ms (a layer)\n", s.B, s.T, s.NH, s.NKV,
               s.HS, f, w);
    }
    printf(check.ok ? "ok\n" : "FAIL\n");
    return check.ok ? 0 : 1;
}
