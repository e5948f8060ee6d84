// flash_delta.cuh: the delta kernel of the flash attention backward, in
// kernels.cu and in the standalone variants of bench/gpu/kernels. Included
// inside an extern "C" block.
#pragma once

// flash_delta: delta[b,h,t] = sum_c dout[b,t,h,c] * out[b,t,h,c]; one warp
// per row.
__global__ void flash_delta(float* delta, const float* dout, const float* out, int B, int T, int NH, int HS) {
    long rows = (long)B * T * NH;
    int lane = threadIdx.x & 31;
    long nw = ((long)gridDim.x * blockDim.x) >> 5;
    for (long r = (blockIdx.x * (long)blockDim.x + threadIdx.x) >> 5; r < rows; r += nw) {
        float s = 0.f;
        for (int c = lane; c < HS; c += 32) s += dout[r * HS + c] * out[r * HS + c];
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
        if (lane == 0) {
            long b = r / ((long)T * NH), t = (r / NH) % T, h = r % NH;
            delta[(b * NH + h) * T + t] = s;
        }
    }
}
