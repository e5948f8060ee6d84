// Greedy picks on the device (gpu.GreedyPicker) in two kernels. One block
// a row would leave 64 of a card's 132 SMs idle at batch 64 and walk 152k
// logits a thread block in double-precision exp;
// here PP blocks share a row: pick_part scans a slice (its first largest
// logit, and the sum of exp(x - that max) in double), and pick_merge
// combines a row's PP parts in one warp: the max over parts (ties to the
// lowest id, so the row's first largest), the sum rescaled to it, and the
// log-probability logits[best] - (max + log(sum)) = the CPU picker's to
// rounding.
//
// Included by kernels.cu and by the CPU emulator (testdata/mmaemu), with
// shfl_xor for float, int and double.

#define PP 16 // blocks a row
#define PT 256 // threads a pick_part block

// PickPart is a slice's result.
struct PickPart {
    float mx;
    int best;
    double sum;
};

// pickBetter reports whether (x, i) beats (mx, best): a larger logit, or
// the same one at a lower id.
__device__ __forceinline__ bool pickBetter(float x, int i, float mx, int best) {
    return x > mx || (x == mx && i < best);
}

// pickWarpMax leaves the warp's best (mx, best) in every lane.
__device__ __forceinline__ void pickWarpMax(float& mx, int& best) {
    for (int o = 16; o > 0; o >>= 1) {
        float x = shfl_xor(mx, o);
        int b = shfl_xor(best, o);
        if (pickBetter(x, b, mx, best)) mx = x, best = b;
    }
}

__device__ __forceinline__ double pickWarpSum(double s) {
    for (int o = 16; o > 0; o >>= 1) s += shfl_xor(s, o);
    return s;
}

// pick_part: block (n, p) of N*PP scans logits[n, p*span : (p+1)*span).
extern "C" __global__ void __launch_bounds__(PT) pick_part(PickPart* parts, const float* logits, int N, int V) {
    __shared__ float shv[PT / 32];
    __shared__ int shi[PT / 32];
    __shared__ double shs[PT / 32];
    int n = blockIdx.x / PP, p = blockIdx.x % PP, span = (V + PP - 1) / PP;
    int lo = p * span, hi = min(V, lo + span);
    const float* row = logits + (long)n * V;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float mx = -INFINITY;
    int best = 0x7fffffff;
    for (int v = lo + threadIdx.x; v < hi; v += PT)
        if (pickBetter(row[v], v, mx, best)) mx = row[v], best = v;
    pickWarpMax(mx, best);
    if (lane == 0) shv[warp] = mx, shi[warp] = best;
    __syncthreads();
    mx = lane < PT / 32 ? shv[lane] : -INFINITY;
    best = lane < PT / 32 ? shi[lane] : 0x7fffffff;
    pickWarpMax(mx, best);
    double s = 0; // -inf adds nothing; NaN makes the sum NaN, as on the CPU
    for (int v = lo + threadIdx.x; v < hi; v += PT)
        if (row[v] != -INFINITY) s += (double)expf(row[v] - mx);
    s = pickWarpSum(s);
    if (lane == 0) shs[warp] = s;
    __syncthreads();
    s = pickWarpSum(lane < PT / 32 ? shs[lane] : 0.0);
    if (threadIdx.x == 0) parts[blockIdx.x] = PickPart{mx, best, s};
}

// pick_merge: one warp a row n of N; lane p takes part p.
extern "C" __global__ void pick_merge(int* tok, float* logp, const PickPart* parts, const float* logits, int N, int V) {
    int n = blockIdx.x, lane = threadIdx.x;
    PickPart q = lane < PP ? parts[n * PP + lane] : PickPart{-INFINITY, 0x7fffffff, 0.0};
    float mx = q.mx;
    int best = q.best;
    pickWarpMax(mx, best);
    if (best == 0x7fffffff) best = 0; // no logit above -inf: id 0, as the CPU's scan
    // A part's sum at the row's max; one that added nothing (an empty
    // slice, -inf only) stays 0, one with a NaN stays NaN.
    double s = pickWarpSum(q.sum == 0.0 ? 0.0 : q.sum * exp((double)q.mx - (double)mx));
    if (lane == 0) {
        tok[n] = best;
        logp[n] = (float)((double)logits[(long)n * V + best] - ((double)mx + log(s)));
    }
}
