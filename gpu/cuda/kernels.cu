// Kernels of the swerl CUDA backend (gpu/cuda). Compiled to PTX by
// scripts/cuda-ptx.sh and embedded in the Go package; every entry point is
// extern "C" so that its name survives into the PTX. Shapes and semantics are
// those of gpu.Backend (gpu/backend.go): backward kernels accumulate (+=).
#include <cuda_bf16.h>
#include <mma.h>

#include "tile.cuh"

#define BLOCK 256

// blockSum reduces v over a block of BLOCK threads; every thread gets the sum.
__device__ float blockSum(float v) {
    __shared__ float sh[32];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = lane < nw ? sh[lane] : 0.f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}

__device__ float blockMax(float v) {
    __shared__ float sh[32];
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    __syncthreads();
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    int nw = (blockDim.x + 31) >> 5;
    v = lane < nw ? sh[lane] : -INFINITY;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}

// storeAct writes y to an activation: float32, or bf16 rounded to nearest
// even (an activation only products read, AllocBF16: the value
// f32_to_bf16 would give the product from the float32 one).
__device__ __forceinline__ void storeAct(float* p, float y) { *p = y; }
__device__ __forceinline__ void storeAct(__nv_bfloat16* p, float y) { *p = __float2bfloat16(y); }

// loadAct reads what storeAct writes: a float32 or bf16 activation or
// gradient element, as float32.
__device__ __forceinline__ float loadAct(const float* p) { return *p; }
__device__ __forceinline__ float loadAct(const __nv_bfloat16* p) { return __bfloat162float(*p); }

// rmsnormRow is the block of rmsnorm_fwd and add_rmsnorm_fwd: row
// blockIdx.x of out[N,C] = x * rstd * w, rstd = 1/sqrt(mean(x^2) + eps),
// where x is inp or, with ADD, the sum inp + b, which it writes to sum
// first (sum may be inp or b: each thread reads its elements before it
// writes them).
template <class O, bool ADD = false>
__device__ void rmsnormRow(O* out, float* rstd, const float* inp, const float* w, int C, float eps,
                           float* sum = nullptr, const float* b = nullptr) {
    long o = (long)blockIdx.x * C;
    const float* x = ADD ? sum + o : inp + o;
    float s = 0;
    for (int i = threadIdx.x; i < C; i += blockDim.x) {
        if (ADD) sum[o + i] = inp[o + i] + b[o + i];
        s += x[i] * x[i];
    }
    s = blockSum(s);
    float r = rsqrtf(s / C + eps);
    if (threadIdx.x == 0) rstd[blockIdx.x] = r;
    for (int i = threadIdx.x; i < C; i += blockDim.x) storeAct(out + o + i, x[i] * r * w[i]);
}

__device__ __forceinline__ float swiglu1(float x, float u) { return x / (1.f + expf(-x)) * u; }

extern "C" {

__global__ void add_f32(float* out, const float* a, const float* b, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        out[i] = a[i] + b[i];
}

// axpy_f32: y += alpha * x.
__global__ void axpy_f32(float* y, const float* x, float alpha, long n) {
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] += alpha * x[i];
}

// sumsq_f32 adds the squares of x into *acc (double).
__global__ void sumsq_f32(double* acc, const float* x, long n) {
    __shared__ double sh[BLOCK];
    double s = 0;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x) {
        double v = x[i];
        s += v * v;
    }
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int o = blockDim.x / 2; o > 0; o >>= 1) {
        if (threadIdx.x < o) sh[threadIdx.x] += sh[threadIdx.x + o];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(acc, sh[0]);
}

__global__ void embedding_fwd(float* out, const float* wte, const int* tokens, int N, int C) {
    long total = (long)N * C;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
        int n = i / C, c = i % C;
        out[i] = wte[(long)tokens[n] * C + c];
    }
}

// embedding_fwd_bf16 is embedding_fwd over a table held in bf16 only (a
// frozen base, UploadFrozen).
__global__ void embedding_fwd_bf16(float* out, const __nv_bfloat16* wte, const int* tokens, int N, int C) {
    long total = (long)N * C;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
        int n = i / C, c = i % C;
        out[i] = __bfloat162float(wte[(long)tokens[n] * C + c]);
    }
}

__global__ void embedding_bwd(float* dwte, const float* dout, const int* tokens, int N, int C) {
    long total = (long)N * C;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
        int n = i / C, c = i % C;
        atomicAdd(&dwte[(long)tokens[n] * C + c], dout[i]);
    }
}

// bias_fill sets out[n, oc] = bias[oc].
__global__ void bias_fill(float* out, const float* bias, int N, int OC) {
    long total = (long)N * OC;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x)
        out[i] = bias[i % OC];
}

// col_sum: dst[c] += sum_n a[n,c] * (b ? b[n,c] : 1) * (r ? r[n] : 1) over
// a[N,C]. Grid (ceil(C/32), ceil(N/rows)); a block of 256 threads is 8
// row lanes of 32 columns over `rows` rows; each block adds its partial
// sums atomically.
__global__ void col_sum(float* dst, const float* a, const float* b, const float* r, int N, int C, int rows) {
    __shared__ float sh[8][33];
    int lane = threadIdx.x & 31, rl = threadIdx.x >> 5;
    int c = blockIdx.x * 32 + lane;
    int n0 = blockIdx.y * rows, n1 = min(n0 + rows, N);
    float s = 0;
    if (c < C) {
        for (int n = n0 + rl; n < n1; n += 8) {
            float v = a[(long)n * C + c];
            if (b) v *= b[(long)n * C + c];
            if (r) v *= r[n];
            s += v;
        }
    }
    sh[rl][lane] = s;
    __syncthreads();
    if (rl == 0 && c < C) {
        for (int i = 1; i < 8; i++) s += sh[i][lane];
        atomicAdd(&dst[c], s);
    }
}

// storeBF16x4 rounds v to bf16 (to nearest even, as __float2bfloat16)
// and stores the four at dst, which is 8-byte aligned.
__device__ __forceinline__ void storeBF16x4(__nv_bfloat16* dst, float4 v) {
    __nv_bfloat162 a = __floats2bfloat162_rn(v.x, v.y), b = __floats2bfloat162_rn(v.z, v.w);
    uint2 u;
    u.x = *(const unsigned*)&a;
    u.y = *(const unsigned*)&b;
    *(uint2*)dst = u;
}

// f32_to_bf16 converts n elements (matmul operands in bf16 mode), four at
// a time (16-byte loads, 8-byte stores) where both pointers allow it.
__global__ void f32_to_bf16(__nv_bfloat16* out, const float* in, long n) {
    long t = blockIdx.x * (long)blockDim.x + threadIdx.x, stride = (long)gridDim.x * blockDim.x, i0 = 0;
    if (((unsigned long)in & 15) == 0 && ((unsigned long)out & 7) == 0) {
        long n4 = n / 4;
        for (long i = t; i < n4; i += stride) storeBF16x4(out + 4 * i, ((const float4*)in)[i]);
        i0 = 4 * n4;
    }
    for (long i = i0 + t; i < n; i += stride) out[i] = __float2bfloat16(in[i]);
}

// head_group_sum adds the query heads of each kv group: dst[b,t,g,:] +=
// sum over r < NH/NKV of src[b,t,g*rep+r,:], src [B,T,NH,HS], dst
// [B,T,NKV,HS] (GQA's dK and dV from per-query-head products).
__global__ void head_group_sum(float* dst, const float* src, long BT, int NH, int NKV, int HS) {
    long total = BT * NKV * HS;
    int rep = NH / NKV;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x) {
        long bt = i / ((long)NKV * HS);
        int j = i % ((long)NKV * HS); // g*HS + d
        int g = j / HS, d = j % HS;
        const float* s = src + (bt * NH + (long)g * rep) * HS + d;
        float acc = 0;
        for (int r = 0; r < rep; r++) acc += s[(long)r * HS];
        dst[i] += acc;
    }
}

// rmsnorm_fwd: one block per row.
__global__ void rmsnorm_fwd(float* out, float* rstd, const float* inp, const float* w, int N, int C, float eps) {
    rmsnormRow(out, rstd, inp, w, C, eps);
}

// rmsnorm_fwd_bf16 is rmsnorm_fwd into a bf16 activation.
__global__ void rmsnorm_fwd_bf16(__nv_bfloat16* out, float* rstd, const float* inp, const float* w, int N, int C,
                                 float eps) {
    rmsnormRow(out, rstd, inp, w, C, eps);
}

// add_rmsnorm_fwd: sum = a + b, then rmsnorm_fwd of sum; one block per row.
__global__ void add_rmsnorm_fwd(float* sum, float* out, float* rstd, const float* a, const float* b, const float* w,
                                int N, int C, float eps) {
    rmsnormRow<float, true>(out, rstd, a, w, C, eps, sum, b);
}

// add_rmsnorm_fwd_bf16 is add_rmsnorm_fwd into a bf16 activation.
__global__ void add_rmsnorm_fwd_bf16(float* sum, __nv_bfloat16* out, float* rstd, const float* a, const float* b,
                                     const float* w, int N, int C, float eps) {
    rmsnormRow<__nv_bfloat16, true>(out, rstd, a, w, C, eps, sum, b);
}

// rmsnorm_bwd_inp: one block per row; dx = r*w*dy - x*r^3/C*sum(w*dy*x).
__global__ void rmsnorm_bwd_inp(float* dinp, const float* dout, const float* inp, const float* w, const float* rstd, int N, int C) {
    int n = blockIdx.x;
    const float* x = inp + (long)n * C;
    const float* g = dout + (long)n * C;
    float r = rstd[n];
    float dot = 0;
    for (int i = threadIdx.x; i < C; i += blockDim.x) dot += w[i] * g[i] * x[i];
    dot = blockSum(dot);
    float c = dot * r * r * r / C;
    float* d = dinp + (long)n * C;
    for (int i = threadIdx.x; i < C; i += blockDim.x) d[i] += r * w[i] * g[i] - x[i] * c;
}


// rope rotates pairs (i, i+HS/2) of x[B,T,NH,HS] by dir*angle in place.
__global__ void rope(float* x, const float* cs, const float* sn, int B, int T, int NH, int HS, int pos0, float dir) {
    int half = HS / 2;
    long total = (long)B * T * NH * half;
    for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < total; idx += (long)gridDim.x * blockDim.x) {
        int i = idx % half;
        long bth = idx / half;
        int t = (bth / NH) % T;
        int p = pos0 + t;
        float c = cs[(long)p * half + i], s = dir * sn[(long)p * half + i];
        float* v = x + bth * HS;
        float x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c - x2 * s;
        v[i + half] = x2 * c + x1 * s;
    }
}

// AttnRow is the query row of a block of the one-block-a-row attention
// kernels (a tile of one row): row i of Tq, the last key it sees (queries
// sit at the end of Tk keys) and the score scale.
struct AttnRow : HeadTile {
    int i, last;
    float scale;
    __device__ AttnRow(int Tq, int Tk, int NH, int NKV, int HS) : HeadTile(Tq, 1, NH, NKV) {
        i = tile;
        last = Tk - Tq + i;
        scale = rsqrtf((float)HS);
    }
};

// attn_fwd: one block per (b, h, i) query row. att row gets probabilities
// (0 above the diagonal), out row the weighted values.
__global__ void attn_fwd(float* out, float* att, const float* q, const float* k, const float* v,
                         int B, int Tq, int Tk, int NH, int NKV, int HS) {
    AttnRow r(Tq, Tk, NH, NKV, HS);
    int i = r.i, b = r.b, h = r.h, kh = r.kh, last = r.last;
    float scale = r.scale;
    const float* qi = q + (((long)b * Tq + i) * NH + h) * HS;
    float* row = att + (((long)b * NH + h) * Tq + i) * Tk;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < Tk; j += blockDim.x) {
        if (j <= last) {
            const float* kj = k + (((long)b * Tk + j) * NKV + kh) * HS;
            float s = 0;
            for (int c = 0; c < HS; c++) s += qi[c] * kj[c];
            s *= scale;
            row[j] = s;
            mx = fmaxf(mx, s);
        }
    }
    mx = blockMax(mx);
    float sum = 0;
    for (int j = threadIdx.x; j < Tk; j += blockDim.x) {
        if (j <= last) {
            float e = __expf(row[j] - mx);
            row[j] = e;
            sum += e;
        }
    }
    sum = blockSum(sum);
    float inv = 1.f / sum;
    for (int j = threadIdx.x; j < Tk; j += blockDim.x) row[j] = j <= last ? row[j] * inv : 0.f;
    __syncthreads();
    float* oi = out + (((long)b * Tq + i) * NH + h) * HS;
    for (int c = threadIdx.x; c < HS; c += blockDim.x) {
        float s = 0;
        for (int j = 0; j <= last; j++) s += row[j] * v[(((long)b * Tk + j) * NKV + kh) * HS + c];
        oi[c] = s;
    }
}

// attn_bwd_scores: one block per (b, h, i): datt row = softmax backward of
// dout_i.v_j, scaled; dv_j += p_j dout_i.
__global__ void attn_bwd_scores(float* datt, float* dv, const float* dout, const float* v, const float* att,
                                int B, int Tq, int Tk, int NH, int NKV, int HS) {
    AttnRow r(Tq, Tk, NH, NKV, HS);
    int i = r.i, b = r.b, h = r.h, kh = r.kh, last = r.last;
    float scale = r.scale;
    const float* row = att + (((long)b * NH + h) * Tq + i) * Tk;
    float* drow = datt + (((long)b * NH + h) * Tq + i) * Tk;
    const float* doi = dout + (((long)b * Tq + i) * NH + h) * HS;
    float dot = 0;
    for (int j = threadIdx.x; j < Tk; j += blockDim.x) {
        float s = 0;
        if (j <= last) {
            long off = (((long)b * Tk + j) * NKV + kh) * HS;
            for (int c = 0; c < HS; c++) s += doi[c] * v[off + c];
            if (dv) {
                float p = row[j];
                for (int c = 0; c < HS; c++) atomicAdd(&dv[off + c], p * doi[c]);
            }
            dot += row[j] * s;
        }
        drow[j] = s;
    }
    dot = blockSum(dot);
    for (int j = threadIdx.x; j < Tk; j += blockDim.x)
        drow[j] = j <= last ? row[j] * (drow[j] - dot) * scale : 0.f;
}

// attn_bwd_qk: one block per (b, h, i): dq_i += sum_j ds_j k_j, dk_j += ds_j q_i.
__global__ void attn_bwd_qk(float* dq, float* dk, const float* datt, const float* q, const float* k,
                            int B, int Tq, int Tk, int NH, int NKV, int HS) {
    AttnRow r(Tq, Tk, NH, NKV, HS);
    int i = r.i, b = r.b, h = r.h, kh = r.kh, last = r.last;
    const float* drow = datt + (((long)b * NH + h) * Tq + i) * Tk;
    const float* qi = q + (((long)b * Tq + i) * NH + h) * HS;
    if (dq) {
        float* dqi = dq + (((long)b * Tq + i) * NH + h) * HS;
        for (int c = threadIdx.x; c < HS; c += blockDim.x) {
            float s = 0;
            for (int j = 0; j <= last; j++) s += drow[j] * k[(((long)b * Tk + j) * NKV + kh) * HS + c];
            dqi[c] += s;
        }
    }
    if (dk) {
        for (long idx = threadIdx.x; idx < (long)(last + 1) * HS; idx += blockDim.x) {
            int j = idx / HS, c = idx % HS;
            atomicAdd(&dk[(((long)b * Tk + j) * NKV + kh) * HS + c], drow[j] * qi[c]);
        }
    }
}

// GluRows maps element i of an [N, I] SwiGLU operand (gate, up and their
// gradients) to its place in a buffer whose rows lie ld apart: the place
// itself where ld == I (a contiguous operand); else gate and up side by
// side in one [N, 2I] buffer (gpu.PairedSwiGLU: up is gate + I, ld 2I),
// where i stays below 2^32 (the caller checks) so that finding the row is
// a 32-bit division. In units of four elements (at4) I is a multiple of 4.
struct GluRows {
    long I, ld;
    __device__ __forceinline__ long at(long i) const {
        if (ld == I) return i;
        unsigned r = (unsigned)i / (unsigned)I;
        return (long)r * ld + (i - (long)r * I);
    }
    __device__ __forceinline__ long at4(long i) const { return GluRows{I / 4, ld / 4}.at(i); }
    // vec4 reports whether rows keep four-element groups together.
    __device__ __forceinline__ bool vec4() const { return (I & 3) == 0 && (ld & 3) == 0; }
};

// swiglu_bwd1 adds element i's gradients: dup += dout silu(x), dgate +=
// dout up silu'(x).
__device__ __forceinline__ void swiglu_bwd1(float& dg, float& du, float d, float x, float u) {
    float sig = 1.f / (1.f + expf(-x));
    du += d * x * sig;
    dg += d * u * sig * (1.f + x * (1.f - sig));
}

} // extern "C": the SwiGLU bodies below are templates over float and bf16 storage

// loadAct4 and storeAct4 are loadAct and storeAct of group i of four
// elements (aligned: al4).
__device__ __forceinline__ float4 loadAct4(const float* p, long i) { return ((const float4*)p)[i]; }
__device__ __forceinline__ float4 loadAct4(const __nv_bfloat16* p, long i) {
    uint2 u = ((const uint2*)p)[i];
    float2 a = __bfloat1622float2(*(const __nv_bfloat162*)&u.x), b = __bfloat1622float2(*(const __nv_bfloat162*)&u.y);
    return make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ void storeAct4(float* p, long i, float4 v) { ((float4*)p)[i] = v; }
__device__ __forceinline__ void storeAct4(__nv_bfloat16* p, long i, float4 v) { storeBF16x4(p + 4 * i, v); }
template <typename T>
__device__ __forceinline__ bool al4(const T* p) { return ((unsigned long)p & (4 * sizeof(T) - 1)) == 0; }

// swigluFwd: out = silu(gate) * up over n elements, out contiguous and
// gate, up laid out by (I, ld) (GluRows), four elements at a time where
// aligned.
template <typename O, typename G>
__device__ __forceinline__ void swigluFwd(O* out, const G* gate, const G* up, long n, long I, long ld) {
    long t = blockIdx.x * (long)blockDim.x + threadIdx.x, stride = (long)gridDim.x * blockDim.x, i0 = 0;
    GluRows gr{I, ld};
    if (al4(out) && al4(gate) && al4(up) && gr.vec4()) {
        for (long i = t; i < n / 4; i += stride) {
            long j = gr.at4(i);
            float4 g = loadAct4(gate, j), u = loadAct4(up, j);
            storeAct4(out, i, make_float4(swiglu1(g.x, u.x), swiglu1(g.y, u.y), swiglu1(g.z, u.z), swiglu1(g.w, u.w)));
        }
        i0 = n / 4 * 4;
    }
    for (long i = i0 + t; i < n; i += stride) {
        long j = gr.at(i);
        storeAct(out + i, swiglu1(loadAct(gate + j), loadAct(up + j)));
    }
}

// swigluBwd: dout contiguous, gate, up, dgate and dup laid out by (I, ld)
// (GluRows); dgate or dup may be null (float32 only). zg (zu) 1 writes
// dgate (dup) instead of adding to it (an output that takes a pending
// zero, SWERL_CUDA_ZERO=lazy): it is not read. Each element is computed
// in float32 and stored once (a bf16 gradient rounded as converting it
// before the products would round it).
template <typename D, typename G, typename O>
__device__ __forceinline__ void swigluBwd(D* dgate, D* dup, const O* dout, const G* gate, const G* up, long n,
                                          int zg, int zu, long I, long ld) {
    long t = blockIdx.x * (long)blockDim.x + threadIdx.x, stride = (long)gridDim.x * blockDim.x, i0 = 0;
    GluRows gr{I, ld};
    const float4 zero4 = make_float4(0.f, 0.f, 0.f, 0.f);
    if (dgate && dup && al4(dgate) && al4(dup) && al4(dout) && al4(gate) && al4(up) && gr.vec4()) {
        for (long i = t; i < n / 4; i += stride) {
            long j = gr.at4(i);
            float4 dg = zg ? zero4 : loadAct4(dgate, j), du = zu ? zero4 : loadAct4(dup, j);
            float4 d = loadAct4(dout, i), g = loadAct4(gate, j), u = loadAct4(up, j);
            swiglu_bwd1(dg.x, du.x, d.x, g.x, u.x);
            swiglu_bwd1(dg.y, du.y, d.y, g.y, u.y);
            swiglu_bwd1(dg.z, du.z, d.z, g.z, u.z);
            swiglu_bwd1(dg.w, du.w, d.w, g.w, u.w);
            storeAct4(dgate, j, dg);
            storeAct4(dup, j, du);
        }
        i0 = n / 4 * 4;
    }
    for (long i = i0 + t; i < n; i += stride) {
        long j = gr.at(i);
        float dg = zg || !dgate ? 0.f : loadAct(dgate + j), du = zu || !dup ? 0.f : loadAct(dup + j);
        swiglu_bwd1(dg, du, loadAct(dout + i), loadAct(gate + j), loadAct(up + j));
        if (dup) storeAct(dup + j, du);
        if (dgate) storeAct(dgate + j, dg);
    }
}

// ropeQKV moves rows between one [N, (NH+2·NKV)·HS] buffer qkv (q, k and
// v side by side in each row: the output of one product with the three
// projections stacked, gpu.PackedQKV) and q [N,NH,HS], k and v
// [N,NKV,HS], rotating the pairs (i, i+HS/2) of q and k as rope does
// (row n at position pos0 + n % T, by dir·angle) and copying v: from qkv
// with merge 0 (the forward pass, after the product), into it with merge
// 1 (the backward pass, dir -1, before the product's backward). q, k and
// v are float32 or, split only, bf16 (the mma attention's operands,
// rounded once as its loads would round them).
template <typename T>
__device__ __forceinline__ void ropeQKV(T* q, T* k, T* v, float* qkv, const float* cs, const float* sn, int N, int Tn,
                                        int NH, int NKV, int HS, int pos0, float dir, int merge) {
    int half = HS / 2, H = NH + 2 * NKV;
    long total = (long)N * H * half;
    for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < total; idx += (long)gridDim.x * blockDim.x) {
        // 32-bit divisions where the count allows (it does up to 2^31 pairs).
        long nh;
        int i, hh;
        long n;
        if (total < (1L << 31)) {
            unsigned u = (unsigned)idx, uh = u / (unsigned)half;
            i = u - uh * half;
            nh = uh;
            n = uh / (unsigned)H;
            hh = uh - (unsigned)n * H;
        } else {
            i = idx % half;
            nh = idx / half;
            hh = nh % H;
            n = nh / H;
        }
        float* wide = qkv + nh * HS;
        T* own = hh < NH ? q + (n * NH + hh) * HS
               : hh < NH + NKV ? k + (n * NKV + hh - NH) * HS
                               : v + (n * NKV + hh - NH - NKV) * HS;
        float x1 = merge ? loadAct(own + i) : wide[i], x2 = merge ? loadAct(own + i + half) : wide[i + half];
        float y1 = x1, y2 = x2;
        if (hh < NH + NKV) {
            int p = pos0 + (int)(n % Tn);
            float c = cs[(long)p * half + i], s = dir * sn[(long)p * half + i];
            y1 = x1 * c - x2 * s;
            y2 = x2 * c + x1 * s;
        }
        if (merge) {
            wide[i] = y1;
            wide[i + half] = y2;
        } else {
            storeAct(own + i, y1);
            storeAct(own + i + half, y2);
        }
    }
}

extern "C" {

// rope_qkv: ropeQKV over float32 q, k and v; rope_qkv_b16 splits into
// bf16 ones.
__global__ void rope_qkv(float* q, float* k, float* v, float* qkv, const float* cs, const float* sn, int N, int T,
                         int NH, int NKV, int HS, int pos0, float dir, int merge) {
    ropeQKV(q, k, v, qkv, cs, sn, N, T, NH, NKV, HS, pos0, dir, merge);
}
__global__ void rope_qkv_b16(__nv_bfloat16* q, __nv_bfloat16* k, __nv_bfloat16* v, float* qkv, const float* cs,
                             const float* sn, int N, int T, int NH, int NKV, int HS, int pos0, float dir) {
    ropeQKV(q, k, v, qkv, cs, sn, N, T, NH, NKV, HS, pos0, dir, 0);
}

// swiglu_fwd and swiglu_bwd: float32 everywhere. The _bf16 forms write a
// bf16 activation (out) or bf16 gradients (dgate and dup, both given),
// which only matrix products read (gpu.BF16Activations); the _bf16in
// forms also read gate and up from bf16 (the paired product's bf16
// output), and swiglu_bwd_bf16dout dout too (the down projection's bf16
// input gradient).
__global__ void swiglu_fwd(float* out, const float* gate, const float* up, long n, long I, long ld) {
    swigluFwd(out, gate, up, n, I, ld);
}
__global__ void swiglu_fwd_bf16(__nv_bfloat16* out, const float* gate, const float* up, long n, long I, long ld) {
    swigluFwd(out, gate, up, n, I, ld);
}
__global__ void swiglu_fwd_bf16in(__nv_bfloat16* out, const __nv_bfloat16* gate, const __nv_bfloat16* up, long n,
                                  long I, long ld) {
    swigluFwd(out, gate, up, n, I, ld);
}
__global__ void swiglu_bwd(float* dgate, float* dup, const float* dout, const float* gate, const float* up, long n,
                           int zg, int zu, long I, long ld) {
    swigluBwd(dgate, dup, dout, gate, up, n, zg, zu, I, ld);
}
__global__ void swiglu_bwd_bf16(__nv_bfloat16* dgate, __nv_bfloat16* dup, const float* dout, const float* gate,
                                const float* up, long n, int zg, int zu, long I, long ld) {
    swigluBwd(dgate, dup, dout, gate, up, n, zg, zu, I, ld);
}
__global__ void swiglu_bwd_bf16in(__nv_bfloat16* dgate, __nv_bfloat16* dup, const float* dout,
                                  const __nv_bfloat16* gate, const __nv_bfloat16* up, long n, int zg, int zu, long I,
                                  long ld) {
    swigluBwd(dgate, dup, dout, gate, up, n, zg, zu, I, ld);
}
__global__ void swiglu_bwd_bf16dout(__nv_bfloat16* dgate, __nv_bfloat16* dup, const __nv_bfloat16* dout,
                                    const __nv_bfloat16* gate, const __nv_bfloat16* up, long n, int zg, int zu, long I,
                                    long ld) {
    swigluBwd(dgate, dup, dout, gate, up, n, zg, zu, I, ld);
}

// logprob_fwd: one block per row.
// lseAdd adds exp(x) to the running sum s, kept relative to the running
// max m; -inf adds nothing and NaN makes the sum NaN (as the two-pass sum
// did).
__device__ __forceinline__ void lseAdd(float& m, float& s, float x) {
    if (x > m) {
        s = s * expf(m - x) + 1.f;
        m = x;
    } else if (x != x) {
        s = x;
    } else if (x > -INFINITY) {
        s += expf(x - m);
    }
}

// logprob_fwd: one block per row, one pass over it: each thread keeps a
// running max and its sum of exponentials (rescaled as the max grows),
// then the block combines them.
__global__ void logprob_fwd(float* logp, float* lse, const float* logits, const int* targets, int N, int V) {
    int n = blockIdx.x;
    const float* row = logits + (long)n * V;
    float m = -INFINITY, s = 0.f;
    int v0 = 0;
    if ((((unsigned long)row) & 15) == 0) {
        for (int v = threadIdx.x; v < V / 4; v += blockDim.x) {
            float4 x = ((const float4*)row)[v];
            lseAdd(m, s, x.x);
            lseAdd(m, s, x.y);
            lseAdd(m, s, x.z);
            lseAdd(m, s, x.w);
        }
        v0 = V / 4 * 4;
    }
    for (int v = v0 + threadIdx.x; v < V; v += blockDim.x) lseAdd(m, s, row[v]);
    float mx = blockMax(m);
    s = blockSum(m == -INFINITY ? 0.f : s * expf(m - mx));
    if (threadIdx.x == 0) {
        float l = mx + logf(s);
        lse[n] = l;
        logp[n] = row[targets[n]] - l;
    }
}

} // extern "C": the helpers below are overloaded and templated

// logprobBwd is row blockIdx.x of logprob_bwd: dlogits += dlogp ·
// (onehot(target) - softmax); a row whose dlogp is 0 adds nothing. zero
// 1 writes dlogits instead of adding to it (it takes a pending zero),
// zeros on those rows. Into bf16 (logprob_bwd_bf16: dlogits that only the
// LM head's products read) each element is computed in float32 and
// rounded once, as converting the float32 output would round it.
template <class G>
__device__ __forceinline__ void logprobBwd(G* dlogits, const float* dlogp, const float* logits, const float* lse,
                                           const int* targets, int V, int zero) {
    int n = blockIdx.x;
    float g = dlogp[n];
    G* drow = dlogits + (long)n * V;
    if (g == 0.f) {
        if (zero)
            for (int v = threadIdx.x; v < V; v += blockDim.x) storeAct(drow + v, 0.f);
        return;
    }
    const float* row = logits + (long)n * V;
    float l = lse[n];
    int t = targets[n];
    for (int v = threadIdx.x; v < V; v += blockDim.x) {
        float d = -g * expf(row[v] - l);
        if (v == t) d += g;
        storeAct(drow + v, (zero ? 0.f : loadAct(drow + v)) + d);
    }
}

extern "C" {
__global__ void logprob_bwd(float* dlogits, const float* dlogp, const float* logits, const float* lse, const int* targets,
                            int N, int V, int zero) {
    logprobBwd(dlogits, dlogp, logits, lse, targets, V, zero);
}

__global__ void logprob_bwd_bf16(__nv_bfloat16* dlogits, const float* dlogp, const float* logits, const float* lse,
                                 const int* targets, int N, int V, int zero) {
    logprobBwd(dlogits, dlogp, logits, lse, targets, V, zero);
}

// adamw updates p, m and v; where p16 is not null it also writes the
// updated weights to p16 in bf16 (the weight copy the bf16 matmuls read).
// Four elements at a time where every pointer allows 16-byte access.
__device__ __forceinline__ float adamw1(float& p, float g, float& m, float& v, float lr, float b1, float b2,
                                        float eps, float wd, float gs, float c1, float c2) {
    float grad = g * gs;
    float mi = b1 * m + (1.f - b1) * grad;
    float vi = b2 * v + (1.f - b2) * grad * grad;
    m = mi;
    v = vi;
    p -= lr * ((mi / c1) / (sqrtf(vi / c2) + eps) + wd * p);
    return p;
}

// adamw_groups is adamw over ng adjacent groups of elements: tab holds
// three ints a group (its start, counted from p, in a low and a high
// word, and 1 where weight decay wd applies, 0 where none does); the last
// group ends at n. A thread walks its elements in order, so it finds each
// one's group by moving a cursor forward.
#define ADAMW_GROUPS 512
__global__ void adamw_groups(float* p, const float* g, float* m, float* v, __nv_bfloat16* p16, const int* tab, int ng,
                             long n, float lr, float b1, float b2, float eps, float wd, float gs, float c1, float c2) {
    __shared__ long st[ADAMW_GROUPS + 1];
    __shared__ float wds[ADAMW_GROUPS];
    for (int k = threadIdx.x; k < ng; k += blockDim.x) {
        st[k] = ((long)tab[3 * k + 1] << 32) | (unsigned)tab[3 * k];
        wds[k] = tab[3 * k + 2] ? wd : 0.f;
    }
    if (threadIdx.x == 0) st[ng] = n;
    __syncthreads();
    long t = blockIdx.x * (long)blockDim.x + threadIdx.x, stride = (long)gridDim.x * blockDim.x, i0 = 0;
    int k = 0;
    if ((((unsigned long)p | (unsigned long)g | (unsigned long)m | (unsigned long)v) & 15) == 0 && ((unsigned long)p16 & 7) == 0) {
        long n4 = n / 4;
        for (long i = t; i < n4; i += stride) {
            long e = 4 * i;
            while (st[k + 1] <= e) k++;
            float w[4];
            for (int j = 0, kj = k; j < 4; j++) { // a group may end inside the four
                while (st[kj + 1] <= e + j) kj++;
                w[j] = wds[kj];
            }
            float4 P = ((float4*)p)[i], G = ((const float4*)g)[i], M = ((float4*)m)[i], V = ((float4*)v)[i];
            adamw1(P.x, G.x, M.x, V.x, lr, b1, b2, eps, w[0], gs, c1, c2);
            adamw1(P.y, G.y, M.y, V.y, lr, b1, b2, eps, w[1], gs, c1, c2);
            adamw1(P.z, G.z, M.z, V.z, lr, b1, b2, eps, w[2], gs, c1, c2);
            adamw1(P.w, G.w, M.w, V.w, lr, b1, b2, eps, w[3], gs, c1, c2);
            ((float4*)p)[i] = P;
            ((float4*)m)[i] = M;
            ((float4*)v)[i] = V;
            if (p16) storeBF16x4(p16 + 4 * i, P);
        }
        i0 = 4 * n4;
        k = 0;
    }
    for (long i = i0 + t; i < n; i += stride) {
        while (st[k + 1] <= i) k++;
        float w = adamw1(p[i], g[i], m[i], v[i], lr, b1, b2, eps, wds[k], gs, c1, c2);
        if (p16) p16[i] = __float2bfloat16(w);
    }
}

__global__ void adamw(float* p, const float* g, float* m, float* v, __nv_bfloat16* p16, long n, float lr, float b1, float b2,
                      float eps, float wd, float gs, float c1, float c2) {
    long t = blockIdx.x * (long)blockDim.x + threadIdx.x, stride = (long)gridDim.x * blockDim.x, i0 = 0;
    if ((((unsigned long)p | (unsigned long)g | (unsigned long)m | (unsigned long)v) & 15) == 0 && ((unsigned long)p16 & 7) == 0) {
        long n4 = n / 4;
        for (long i = t; i < n4; i += stride) {
            float4 P = ((float4*)p)[i], G = ((const float4*)g)[i], M = ((float4*)m)[i], V = ((float4*)v)[i];
            adamw1(P.x, G.x, M.x, V.x, lr, b1, b2, eps, wd, gs, c1, c2);
            adamw1(P.y, G.y, M.y, V.y, lr, b1, b2, eps, wd, gs, c1, c2);
            adamw1(P.z, G.z, M.z, V.z, lr, b1, b2, eps, wd, gs, c1, c2);
            adamw1(P.w, G.w, M.w, V.w, lr, b1, b2, eps, wd, gs, c1, c2);
            ((float4*)p)[i] = P;
            ((float4*)m)[i] = M;
            ((float4*)v)[i] = V;
            if (p16) storeBF16x4(p16 + 4 * i, P);
        }
        i0 = 4 * n4;
    }
    for (long i = i0 + t; i < n; i += stride) {
        float w = adamw1(p[i], g[i], m[i], v[i], lr, b1, b2, eps, wd, gs, c1, c2);
        if (p16) p16[i] = __float2bfloat16(w);
    }
}

// attn_softmax: one block per (b, h, i) row of att[B,NH,Tq,Tk] holding
// scaled scores; writes causal probabilities, 0 above the diagonal.
__global__ void attn_softmax(float* att, int B, int Tq, int Tk, int NH) {
    int i = blockIdx.x % Tq;
    float* row = att + (long)blockIdx.x * Tk;
    int last = Tk - Tq + i;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j <= last; j += blockDim.x) mx = fmaxf(mx, row[j]);
    mx = blockMax(mx);
    float sum = 0;
    for (int j = threadIdx.x; j <= last; j += blockDim.x) {
        float e = __expf(row[j] - mx);
        row[j] = e;
        sum += e;
    }
    sum = blockSum(sum);
    float inv = 1.f / sum;
    for (int j = threadIdx.x; j < Tk; j += blockDim.x) row[j] = j <= last ? row[j] * inv : 0.f;
}

// attn_softmax_bwd: one block per row; datt holds dP on entry and
// dS = P*(dP - sum(P*dP))*scale on exit (0 above the diagonal).
__global__ void attn_softmax_bwd(float* datt, const float* att, int B, int Tq, int Tk, int NH, float scale) {
    int i = blockIdx.x % Tq;
    const float* row = att + (long)blockIdx.x * Tk;
    float* drow = datt + (long)blockIdx.x * Tk;
    int last = Tk - Tq + i;
    float dot = 0;
    for (int j = threadIdx.x; j <= last; j += blockDim.x) dot += row[j] * drow[j];
    dot = blockSum(dot);
    for (int j = threadIdx.x; j < Tk; j += blockDim.x)
        drow[j] = j <= last ? row[j] * (drow[j] - dot) * scale : 0.f;
}


// ---------------------------------------------------------------------------
// Ragged decoding (gpu.RaggedAttention): rows of many sequences, each at its
// own position over its own KV cache rows, in one launch per op.

// rope_rows rotates x[N,H,HS] in place, row n at position pos[n].
__global__ void rope_rows(float* x, const float* cs, const float* sn, const int* pos, int N, int H, int HS, float dir) {
    int half = HS / 2;
    long total = (long)N * H * half;
    for (long idx = blockIdx.x * (long)blockDim.x + threadIdx.x; idx < total; idx += (long)gridDim.x * blockDim.x) {
        int i = idx % half;
        long nh = idx / half;
        int p = pos[nh / H];
        float c = cs[(long)p * half + i], s = dir * sn[(long)p * half + i];
        float* v = x + nh * HS;
        float x1 = v[i], x2 = v[i + half];
        v[i] = x1 * c - x2 * s;
        v[i + half] = x2 * c + x1 * s;
    }
}

// scatter_rows copies row n of src[N,W] to row idx[n] of dst.
__global__ void scatter_rows(float* dst, const float* src, const int* idx, int N, int W) {
    long total = (long)N * W;
    for (long i = blockIdx.x * (long)blockDim.x + threadIdx.x; i < total; i += (long)gridDim.x * blockDim.x)
        dst[(long)idx[i / W] * W + i % W] = src[i];
}

// attn_rows: one block per (row n, head h) of q[N,NH,HS]; attends to the
// cnt[n] key rows k[start[n]..] (rows of NKV*HS, kv head h/(NH/NKV)) with
// an online softmax over chunks of BLOCK keys: each thread scores one key
// of the chunk, then the threads split into BLOCK/HS groups that each sum
// a share of the chunk's p·v for every channel. HS <= BLOCK, cnt[n] >= 1.
__global__ void attn_rows(float* out, const float* q, const float* k, const float* v,
                          const int* start, const int* cnt, int NH, int NKV, int HS, float scale) {
    __shared__ float qs[BLOCK];
    __shared__ float ps[BLOCK];
    __shared__ float part[BLOCK];
    int n = blockIdx.x / NH, h = blockIdx.x % NH;
    int kh = h / (NH / NKV);
    long KVC = (long)NKV * HS;
    const float* qn = q + ((long)n * NH + h) * HS;
    for (int c = threadIdx.x; c < HS; c += blockDim.x) qs[c] = qn[c] * scale;
    __syncthreads();
    long base = start[n];
    int len = cnt[n];
    int groups = blockDim.x / HS;
    int d = threadIdx.x % HS, g = threadIdx.x / HS;
    float m = -INFINITY, l = 0.f, acc = 0.f;
    for (int j0 = 0; j0 < len; j0 += blockDim.x) {
        int j = j0 + threadIdx.x;
        float s = -INFINITY;
        if (j < len) {
            const float* kj = k + (base + j) * KVC + (long)kh * HS;
            s = 0.f;
            for (int c = 0; c < HS; c++) s += qs[c] * kj[c];
        }
        float mn = fmaxf(m, blockMax(s));
        float e = j < len ? __expf(s - mn) : 0.f;
        ps[threadIdx.x] = e;
        float corr = __expf(m - mn);
        l = l * corr + blockSum(e);
        acc *= corr;
        __syncthreads();
        int cl = min((int)blockDim.x, len - j0);
        if (g < groups)
            for (int jj = g; jj < cl; jj += groups) acc += ps[jj] * v[(base + j0 + jj) * KVC + (long)kh * HS + d];
        m = mn;
        __syncthreads();
    }
    part[threadIdx.x] = g < groups ? acc : 0.f;
    __syncthreads();
    if (threadIdx.x < HS) {
        float s = 0.f;
        for (int gg = 0; gg < groups; gg++) s += part[gg * HS + threadIdx.x];
        out[((long)n * NH + h) * HS + threadIdx.x] = s / l;
    }
}

// ---------------------------------------------------------------------------
// Flash attention for training (gpu.FlashAttention): the kernels are in
// flash_mma.cuh; flash_delta and flash_tc_dkv below serve them.

#include "flash_delta.cuh"

// ---------------------------------------------------------------------------
// dk and dv of the mma attention for heads over 64 channels (flash_mma.cuh
// keeps at most 64 channels of a row in registers): the tile products on
// bf16 tensor cores (WMMA 16x16x16, float32 accumulation). A block is TCW
// warps; a warp owns 16 keys of the block's 64 and walks tiles of TCK query
// rows staged in shared memory as bf16. Scores, probabilities and softmax
// statistics stay float32; P and dS are rounded to bf16 for their products,
// as FlashAttention-2 does. HS is a multiple of 16, at most 128. The
// fragments' element layout is opaque, so per-row work goes through a
// per-warp float32 tile in shared memory.

#include "wmma_tiles.cuh"

} // extern "C"

// ---------------------------------------------------------------------------
// The primitives of the .cuh kernels on the device (their
// CPU emulator has its own, in testdata/mmaemu/emu.h).

// mma_bf16 is d += A·B, one m16n8k16 tensor-core product of a warp: A
// 16x16 bf16 row-major in four registers a lane, B 16x8 bf16 "col" in two,
// d 16x8 float32 in four (the PTX ISA's fragment layouts).
__device__ __forceinline__ void mma_bf16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// pack_bf16 rounds lo and hi to bf16, lo in the low half.
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<unsigned*>(&v);
}

// lds32 loads the two bf16 at p (4-byte aligned) as one register.
__device__ __forceinline__ unsigned lds32(const __nv_bfloat16* p) { return *reinterpret_cast<const unsigned*>(p); }

// shfl_xor is the value of lane ^ m, for float, int and double.
__device__ __forceinline__ float shfl_xor(float v, int m) { return __shfl_xor_sync(0xffffffff, v, m); }
__device__ __forceinline__ int shfl_xor(int v, int m) { return __shfl_xor_sync(0xffffffff, v, m); }
__device__ __forceinline__ double shfl_xor(double v, int m) { return __shfl_xor_sync(0xffffffff, v, m); }

__device__ __forceinline__ void sts32(__nv_bfloat16* p, unsigned w) { *reinterpret_cast<unsigned*>(p) = w; }

__device__ __forceinline__ float4 ldg4(const float* p) { return *reinterpret_cast<const float4*>(p); }

// cp16 copies eight bf16 (16 bytes, both addresses 16-byte aligned).
__device__ __forceinline__ void cp16(__nv_bfloat16* d, const __nv_bfloat16* s) {
    *reinterpret_cast<uint4*>(d) = *reinterpret_cast<const uint4*>(s);
}

// cp_async16 starts a copy of eight bf16 (16 bytes, both addresses
// 16-byte aligned) from global to shared memory (cp.async, bypassing L1);
// cp_async_commit closes this thread's group of copies so far and
// cp_async_wait<N> waits until at most its N latest groups are pending.
// The memory clobbers keep the compiler from moving shared-memory reads
// across them.
__device__ __forceinline__ void cp_async16(__nv_bfloat16* d, const __nv_bfloat16* s) {
    unsigned a = (unsigned)__cvta_generic_to_shared(d);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(a), "l"(__cvta_generic_to_global(s)) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// ldsm4 is ldmatrix.sync.aligned.m8n8.x4 (.trans with TRANS) of bf16: lane
// l gives p, 16-byte aligned, the row l%8 of matrix l/8; r[m] is lane l's
// fragment of matrix m (see flash_mma.cuh).
template <bool TRANS>
__device__ __forceinline__ void ldsm4(unsigned (&r)[4], const __nv_bfloat16* p) {
    unsigned a = (unsigned)__cvta_generic_to_shared(p);
    if (TRANS)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(a));
}

// ex2 is 2^x by the special-function unit (what __expf uses after
// scaling by log2e).
__device__ __forceinline__ float ex2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

// lds16x2 loads p[0] and p[stride] as one register, p[0] in the low half.
__device__ __forceinline__ unsigned lds16x2(const __nv_bfloat16* p, int stride) {
    return (unsigned)__bfloat16_as_ushort(p[0]) | (unsigned)__bfloat16_as_ushort(p[stride]) << 16;
}

// Kernels written to run on the CPU emulator too, with extern "C" entry
// points of their own.
#include "flash_mma.cuh"
#include "attn_rows.cuh"
#include "pick.cuh"
