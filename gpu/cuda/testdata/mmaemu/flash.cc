// flash.cc checks the kernels of ../../flash_mma.cuh on the CPU emulator
// of emu.h against causal GQA attention in double precision over the same
// bf16-rounded inputs: the forward (out, lse) and the backward (dq, dk,
// dv, which add to what the buffers hold) for head sizes 16 to 128,
// partial tiles, GQA and T = 1; and that the _b16 entry points, given q,
// k and v already rounded to bf16, give the float ones' results bit for
// bit, and so do the double-buffered _pipe ones (marked | in the output,
// with cp.async copies landing only when waited for). It prints a line a shape and kernel, and exits 1 when any is off by
// more than bf16's precision allows, or a _b16 result differs.
#include "emu.h"
#include "../../flash_mma.cuh"

#include <cstdio>
#include <random>

struct Shape {
    int B, T, NH, NKV, HS;
    bool odd; // inputs one float past a 16-byte boundary: the one-float loads
};

static float round16(float x) { return bf16f(__float2bfloat16(x).x); }

// worst returns max |got - base - want| / max |want| (got holds base plus
// what a kernel added), infinite when got has a NaN.
static double worst(const std::vector<float>& got, const std::vector<float>& base, const std::vector<double>& want) {
    double e = 0, m = 1e-30;
    for (size_t i = 0; i < want.size(); i++) {
        double d = double(got[i]) - (base.empty() ? 0 : base[i]);
        if (std::isnan(d)) return INFINITY;
        e = std::max(e, std::fabs(d - want[i]));
        m = std::max(m, std::fabs(want[i]));
    }
    return e / m;
}

int main() {
    const Shape shapes[] = {{1, 64, 2, 1, 64},  {2, 100, 4, 2, 64}, {1, 130, 3, 3, 16, true}, {1, 70, 2, 1, 128},
                            {1, 1, 2, 2, 32},   {1, 129, 4, 1, 48}, {2, 65, 2, 2, 80},       {1, 77, 2, 1, 64, true},
                            {1, 256, 2, 1, 64}, {2, 192, 4, 2, 32}};
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 1.f);
    bool ok = true;
    auto report = [&](const Shape& s, const char* what, double err, double tol) {
        bool good = err < tol;
        ok = ok && good;
        printf("B=%d T=%d NH=%d NKV=%d HS=%d%s %-4s relative error %.3g %s\n", s.B, s.T, s.NH, s.NKV, s.HS,
               s.odd ? " (unaligned)" : "", what, err, good ? "ok" : "FAIL");
    };
    for (const Shape& s : shapes) {
        int B = s.B, T = s.T, NH = s.NH, NKV = s.NKV, HS = s.HS;
        int nq = B * T * NH * HS, nk = B * T * NKV * HS, nl = B * NH * T;
        // Each input sits `off` floats into its own allocation.
        int off = s.odd ? 1 : 0;
        std::vector<float> qa(nq + 4), ka(nk + 4), va(nk + 4), da(nq + 4);
        for (auto* x : {&qa, &ka, &va, &da})
            for (float& e : *x) e = nd(rng);
        struct View {
            float* p;
            float* data() const { return p; }
            float& operator[](size_t i) const { return p[i]; }
        };
        View q{qa.data() + off}, k{ka.data() + off}, v{va.data() + off}, dout{da.data() + off};
        auto Q = [&](int b, int i, int h, int c) { return double(round16(q[((b * T + i) * NH + h) * HS + c])); };
        auto K = [&](int b, int j, int h, int c) { return double(round16(k[((b * T + j) * NKV + h) * HS + c])); };
        auto V = [&](int b, int j, int h, int c) { return double(round16(v[((b * T + j) * NKV + h) * HS + c])); };
        auto dO = [&](int b, int i, int h, int c) { return double(round16(dout[((b * T + i) * NH + h) * HS + c])); };
        double scale = 1 / std::sqrt(double(HS));

        // The reference: forward, then the backward from its lse and delta.
        std::vector<double> out(nq), lse(nl), delta(nl), dq(nq), dk(nk), dv(nk);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++) {
                int kh = h / (NH / NKV);
                for (int i = 0; i < T; i++) {
                    std::vector<double> p(i + 1), dp(i + 1);
                    double m = -INFINITY, l = 0;
                    for (int j = 0; j <= i; j++) {
                        for (int c = 0; c < HS; c++) p[j] += Q(b, i, h, c) * K(b, j, kh, c);
                        p[j] *= scale;
                        m = std::max(m, p[j]);
                    }
                    for (int j = 0; j <= i; j++) l += p[j] = std::exp(p[j] - m);
                    int r = (b * NH + h) * T + i;
                    lse[r] = m + std::log(l);
                    for (int j = 0; j <= i; j++) p[j] /= l;
                    for (int c = 0; c < HS; c++) {
                        double o = 0;
                        for (int j = 0; j <= i; j++) o += p[j] * V(b, j, kh, c);
                        out[((b * T + i) * NH + h) * HS + c] = o;
                        delta[r] += o * dO(b, i, h, c);
                    }
                    for (int j = 0; j <= i; j++) {
                        for (int c = 0; c < HS; c++) dp[j] += dO(b, i, h, c) * V(b, j, kh, c);
                        double ds = p[j] * (dp[j] - delta[r]);
                        for (int c = 0; c < HS; c++) {
                            dv[((b * T + j) * NKV + kh) * HS + c] += p[j] * dO(b, i, h, c);
                            dq[((b * T + i) * NH + h) * HS + c] += scale * ds * K(b, j, kh, c);
                            dk[((b * T + j) * NKV + kh) * HS + c] += scale * ds * Q(b, i, h, c);
                        }
                    }
                }
            }

        float fs = float(scale);
        int grid = B * NH * ((T + MQ - 1) / MQ);
        std::vector<float> gout(nq, NAN), glse(nl, NAN);
        launch(grid, MW * 32, [&] {
            (HS <= 64 ? flash_mma_fwd64 : flash_mma_fwd128)(gout.data(), glse.data(), q.data(),
                                                            k.data(), v.data(), B, T, NH, NKV, HS, fs);
        });
        std::vector<double> wantLse(lse);
        report(s, "out", worst(gout, {}, out), 2e-2);
        report(s, "lse", worst(glse, {}, wantLse), 1e-4);

        std::vector<float> flse(lse.begin(), lse.end()), fdelta(delta.begin(), delta.end());
        std::vector<float> base(nq), gdq(nq);
        for (int i = 0; i < nq; i++) gdq[i] = base[i] = nd(rng);
        launch(grid, MW * 32, [&] {
            (HS <= 64 ? flash_mma_dq64 : flash_mma_dq128)(gdq.data(), dout.data(), q.data(), k.data(), v.data(),
                                                          flse.data(), fdelta.data(), B, T, NH, NKV, HS, fs, 0);
        });
        report(s, "dq", worst(gdq, base, dq), 2e-2);
        // zero 1 writes dq (over what was there) instead of adding to it.
        std::vector<float> wdq(nq, NAN);
        launch(grid, MW * 32, [&] {
            (HS <= 64 ? flash_mma_dq64 : flash_mma_dq128)(wdq.data(), dout.data(), q.data(), k.data(), v.data(),
                                                          flse.data(), fdelta.data(), B, T, NH, NKV, HS, fs, 1);
        });
        report(s, "dq=", worst(wdq, {}, dq), 2e-2);

        // The same kernels over q, k and v stored in bf16 (at the same
        // offsets, so the unaligned shapes take the one-value loads).
        std::vector<__nv_bfloat16> qh(nq + 8), kh(nk + 8), vh(nk + 8);
        for (int i = 0; i < nq; i++) qh[off + i] = __float2bfloat16(q[i]);
        for (int i = 0; i < nk; i++) {
            kh[off + i] = __float2bfloat16(k[i]);
            vh[off + i] = __float2bfloat16(v[i]);
        }
        const __nv_bfloat16 *q16 = qh.data() + off, *k16 = kh.data() + off, *v16 = vh.data() + off;
        auto same = [&](const char* what, const std::vector<float>& a, const std::vector<float>& b) {
            bool eq = memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
            ok = ok && eq;
            printf("B=%d T=%d NH=%d NKV=%d HS=%d%s %-7s bf16 q, k, v: %s\n", s.B, s.T, s.NH, s.NKV, s.HS,
                   s.odd ? " (unaligned)" : "", what, eq ? "the same" : "DIFFERENT FAIL");
        };
        std::vector<float> hout(nq, NAN), hlse(nl, NAN), hdq(base);
        launch(grid, MW * 32, [&] {
            (HS <= 64 ? flash_mma_fwd64_b16 : flash_mma_fwd128_b16)(hout.data(), hlse.data(), q16, k16, v16, B, T,
                                                                    NH, NKV, HS, fs);
        });
        same("out", hout, gout);
        same("lse", hlse, glse);
        launch(grid, MW * 32, [&] {
            (HS <= 64 ? flash_mma_dq64_b16 : flash_mma_dq128_b16)(hdq.data(), dout.data(), q16, k16, v16, flse.data(),
                                                                  fdelta.data(), B, T, NH, NKV, HS, fs, 0);
        });
        same("dq", hdq, gdq);
        if (HS <= 64) {
            // The double-buffered kernels: the same products over the same
            // tiles, so the same bits, however the copies land.
            std::vector<float> pout(nq, NAN), plse(nl, NAN), pdq(base), pwdq(nq, NAN);
            launch(grid, MW * 32, [&] {
                flash_mma_fwd64_pipe(pout.data(), plse.data(), q16, k16, v16, B, T, NH, NKV, HS, fs);
            });
            same("out|", pout, gout);
            same("lse|", plse, glse);
            launch(grid, MW * 32, [&] {
                flash_mma_dq64_pipe(pdq.data(), dout.data(), q16, k16, v16, flse.data(), fdelta.data(), B, T, NH,
                                    NKV, HS, fs, 0);
            });
            same("dq|", pdq, gdq);
            launch(grid, MW * 32, [&] {
                flash_mma_dq64_pipe(pwdq.data(), dout.data(), q16, k16, v16, flse.data(), fdelta.data(), B, T, NH,
                                    NKV, HS, fs, 1);
            });
            same("dq=|", pwdq, wdq);
        }
        if (HS <= 64) {
            std::vector<float> kbase(nk), gdk(nk), vbase(nk), gdv(nk);
            for (int i = 0; i < nk; i++) {
                gdk[i] = kbase[i] = nd(rng);
                gdv[i] = vbase[i] = nd(rng);
            }
            launch(grid, MW * 32, [&] {
                flash_mma_dkv64(gdk.data(), gdv.data(), dout.data(), q.data(), k.data(), v.data(), flse.data(),
                                fdelta.data(), B, T, NH, NKV, HS, fs);
            });
            report(s, "dk", worst(gdk, kbase, dk), 2e-2);
            report(s, "dv", worst(gdv, vbase, dv), 2e-2);
            std::vector<float> hdk(kbase), hdv(vbase);
            launch(grid, MW * 32, [&] {
                flash_mma_dkv64_b16(hdk.data(), hdv.data(), dout.data(), q16, k16, v16, flse.data(), fdelta.data(), B,
                                    T, NH, NKV, HS, fs);
            });
            same("dk", hdk, gdk);
            same("dv", hdv, gdv);
        }
    }
    return ok ? 0 : 1;
}
