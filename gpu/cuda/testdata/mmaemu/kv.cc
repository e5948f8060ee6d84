// kv.cc checks rope_kv_rows (../../attn_rows.cuh) on the CPU emulator of
// emu.h against RoPE and the cache writes done one by one in double: q
// rotated in place, k's rotated rows and v's rows at their cache rows,
// every other cache row untouched, for GQA and plain heads, without and
// with the q, k and v biases added first.
#include "emu.h"
#include "../../attn_rows.cuh"

#include <cstdio>
#include <random>

int main() {
    struct Shape {
        int N, NH, NKV, HS;
    };
    std::mt19937 rng(13);
    std::normal_distribution<float> nd(0.f, 1.f);
    bool ok = true;
    for (Shape s : {Shape{5, 14, 2, 64}, Shape{3, 4, 4, 32}, Shape{1, 28, 4, 128}, Shape{7, 6, 2, 16}})
    for (bool biased : {false, true}) {
        int half = s.HS / 2, W = s.NKV * s.HS, rows = 40, P = 50;
        std::vector<float> q(s.N * s.NH * s.HS), k(s.N * W), v(s.N * W), kc(rows * W), vc(rows * W);
        std::vector<float> cs(P * half), sn(P * half), qb(s.NH * s.HS), kb(W), vb(W);
        for (auto* x : {&q, &k, &v, &kc, &vc, &qb, &kb, &vb})
            for (float& e : *x) e = nd(rng);
        if (!biased) std::fill(qb.begin(), qb.end(), 0.f), std::fill(kb.begin(), kb.end(), 0.f), std::fill(vb.begin(), vb.end(), 0.f);
        for (int p = 0; p < P; p++)
            for (int i = 0; i < half; i++) {
                double a = p * std::pow(10000.0, -2.0 * i / s.HS);
                cs[p * half + i] = float(std::cos(a));
                sn[p * half + i] = float(std::sin(a));
            }
        std::vector<int> pos(s.N), dst(s.N);
        for (int n = 0; n < s.N; n++) pos[n] = (n * 17 + 3) % P, dst[n] = (n * 7 + 1) % rows;
        std::vector<float> q0(q), kc0(kc), vc0(vc);
        long total = (long)s.N * (s.NH + 3 * s.NKV) * half;
        launch(int((total + 255) / 256), 256, [&] {
            rope_kv_rows(q.data(), k.data(), v.data(), kc.data(), vc.data(), cs.data(), sn.data(), pos.data(), dst.data(),
                         biased ? qb.data() : nullptr, biased ? kb.data() : nullptr, biased ? vb.data() : nullptr, s.N,
                         s.NH, s.NKV, s.HS);
        });
        double worst = 0;
        // rot is channel c of head row x plus its bias row b, rotated to
        // position p.
        auto rot = [&](const float* x, const float* b, int p, int c) {
            int i = c % half;
            double co = cs[p * half + i], si = sn[p * half + i];
            double x1 = double(x[i]) + b[i], x2 = double(x[i + half]) + b[i + half];
            return c < half ? x1 * co - x2 * si : x2 * co + x1 * si;
        };
        std::vector<char> written(rows);
        for (int n = 0; n < s.N; n++) {
            written[dst[n]] = 1;
            for (int h = 0; h < s.NH; h++)
                for (int c = 0; c < s.HS; c++)
                    worst = std::max(worst, std::fabs(q[(n * s.NH + h) * s.HS + c] -
                                                      rot(&q0[(n * s.NH + h) * s.HS], &qb[h * s.HS], pos[n], c)));
            for (int e = 0; e < W; e++) {
                int hk = e / s.HS;
                worst = std::max(worst, std::fabs(kc[dst[n] * W + e] - rot(&k[n * W + hk * s.HS], &kb[hk * s.HS], pos[n], e % s.HS)));
                worst = std::max(worst, std::fabs(vc[dst[n] * W + e] - (double(v[n * W + e]) + vb[e])));
            }
        }
        for (int r = 0; r < rows; r++)
            if (!written[r])
                for (int e = 0; e < W; e++)
                    if (kc[r * W + e] != kc0[r * W + e] || vc[r * W + e] != vc0[r * W + e]) worst = INFINITY;
        bool good = worst < 1e-5;
        ok = ok && good;
        printf("N=%d NH=%d NKV=%d HS=%d%s: max error %.3g %s\n", s.N, s.NH, s.NKV, s.HS, biased ? " biased" : "", worst,
               good ? "ok" : "FAIL");
    }
    return ok ? 0 : 1;
}
