// rows.cc checks attn_rows_gqa (../../attn_rows.cuh) on the CPU emulator
// of emu.h against double-precision attention: rows that see 1 to 300 key
// rows of a shared cache at any start (as decoding's slots do), GQA groups
// of 1 to 8 heads, head sizes 32 to 128. It prints a line a shape and
// exits 1 when an output is off by more than float32 sums allow.
#include "emu.h"
#include "../../attn_rows.cuh"

#include <cstdio>
#include <random>

int main() {
    struct Shape {
        int NH, NKV, HS;
    };
    const Shape shapes[] = {{14, 2, 64}, {28, 4, 128}, {4, 4, 32}, {8, 1, 64}, {6, 2, 96}};
    const int cnts[] = {1, 7, 300, 33, 64};
    std::mt19937 rng(11);
    std::normal_distribution<float> nd(0.f, 1.f);
    bool ok = true;
    for (const Shape& s : shapes) {
        int N = 5, rows = 700, KVC = s.NKV * s.HS;
        std::vector<float> q(N * s.NH * s.HS), k(rows * KVC), v(rows * KVC), out(q.size(), NAN);
        for (auto* x : {&q, &k, &v})
            for (float& e : *x) e = nd(rng);
        std::vector<int> start(N), cnt(N);
        for (int n = 0; n < N; n++) {
            cnt[n] = cnts[n];
            start[n] = (n * 131) % (rows - cnt[n]);
        }
        float scale = 1.f / std::sqrt(float(s.HS));
        launch(N * s.NKV, RW * 32, [&] {
            attn_rows_gqa(out.data(), q.data(), k.data(), v.data(), start.data(), cnt.data(), s.NH, s.NKV, s.HS, scale);
        });
        double worst = 0;
        int G = s.NH / s.NKV;
        for (int n = 0; n < N; n++)
            for (int h = 0; h < s.NH; h++) {
                int kh = h / G;
                std::vector<double> p(cnt[n]);
                double m = -INFINITY, l = 0;
                for (int j = 0; j < cnt[n]; j++) {
                    for (int c = 0; c < s.HS; c++)
                        p[j] += double(q[(n * s.NH + h) * s.HS + c]) * k[(start[n] + j) * KVC + kh * s.HS + c];
                    p[j] *= scale;
                    m = std::max(m, p[j]);
                }
                for (int j = 0; j < cnt[n]; j++) l += p[j] = std::exp(p[j] - m);
                for (int c = 0; c < s.HS; c++) {
                    double o = 0;
                    for (int j = 0; j < cnt[n]; j++) o += p[j] / l * v[(start[n] + j) * KVC + kh * s.HS + c];
                    double got = out[(n * s.NH + h) * s.HS + c];
                    worst = std::isnan(got) ? INFINITY : std::max(worst, std::fabs(got - o));
                }
            }
        bool good = worst < 1e-4;
        ok = ok && good;
        printf("NH=%d NKV=%d HS=%d: max |out error| %.3g %s\n", s.NH, s.NKV, s.HS, worst, good ? "ok" : "FAIL");
    }
    return ok ? 0 : 1;
}
