// flash_fwd.cc checks flash_mma_fwd (../../flash_mma.cuh) on the CPU
// emulator of emu.h against causal GQA attention in double precision over
// the same bf16-rounded q, k and v, for head sizes 16 to 128, partial
// tiles, GQA and T = 1. It prints one line a shape and exits 1 when an
// output or log-sum-exp is off by more than bf16's precision allows.
#include "emu.h"
#include "../../flash_mma.cuh"

#include <cstdio>
#include <random>

struct Shape {
    int B, T, NH, NKV, HS;
};

static float round16(float x) { return bf16f(__float2bfloat16(x).x); }

int main() {
    const Shape shapes[] = {{1, 64, 2, 1, 64}, {2, 100, 4, 2, 64}, {1, 130, 3, 3, 16}, {1, 70, 2, 1, 128},
                            {1, 1, 2, 2, 32},  {1, 129, 4, 1, 48}, {2, 65, 2, 2, 80}};
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 1.f);
    bool ok = true;
    for (const Shape& s : shapes) {
        int nq = s.B * s.T * s.NH * s.HS, nk = s.B * s.T * s.NKV * s.HS;
        std::vector<float> q(nq), k(nk), v(nk), out(nq, NAN), lse(s.B * s.NH * s.T, NAN);
        for (auto* x : {&q, &k, &v})
            for (float& e : *x) e = nd(rng);
        float scale = 1.f / std::sqrt(float(s.HS));
        int grid = s.B * s.NH * ((s.T + MQ - 1) / MQ);
        launch(grid, [&] { flash_mma_fwd(out.data(), lse.data(), q.data(), k.data(), v.data(), s.B, s.T, s.NH, s.NKV, s.HS, scale); });
        double maxOut = 0, maxLse = 0;
        for (int b = 0; b < s.B; b++)
            for (int h = 0; h < s.NH; h++) {
                int kh = h / (s.NH / s.NKV);
                for (int i = 0; i < s.T; i++) {
                    std::vector<double> p(i + 1);
                    double m = -INFINITY;
                    for (int j = 0; j <= i; j++) {
                        double d = 0;
                        for (int c = 0; c < s.HS; c++)
                            d += double(round16(q[((b * s.T + i) * s.NH + h) * s.HS + c])) *
                                 round16(k[((b * s.T + j) * s.NKV + kh) * s.HS + c]);
                        p[j] = d * scale;
                        m = std::max(m, p[j]);
                    }
                    double l = 0;
                    for (int j = 0; j <= i; j++) l += p[j] = std::exp(p[j] - m);
                    maxLse = std::max(maxLse, std::fabs(lse[(b * s.NH + h) * s.T + i] - (m + std::log(l))));
                    for (int c = 0; c < s.HS; c++) {
                        double o = 0;
                        for (int j = 0; j <= i; j++) o += p[j] * round16(v[((b * s.T + j) * s.NKV + kh) * s.HS + c]);
                        double got = out[((b * s.T + i) * s.NH + h) * s.HS + c];
                        double e = std::fabs(got - o / l);
                        maxOut = std::isnan(got) ? INFINITY : std::max(maxOut, e);
                    }
                }
            }
        // P is rounded to bf16 before P·V (relative 2^-9 a term), the sum
        // l is not: outputs of magnitude ~1 are good to ~1e-2.
        bool good = maxOut < 2e-2 && maxLse < 1e-3;
        ok = ok && good;
        printf("B=%d T=%d NH=%d NKV=%d HS=%d: max |out error| %.3g, max |lse error| %.3g %s\n", s.B, s.T, s.NH, s.NKV,
               s.HS, maxOut, maxLse, good ? "ok" : "FAIL");
    }
    return ok ? 0 : 1;
}
