// pick.cc checks pick_part and pick_merge (../../pick.cuh) on the CPU
// emulator of emu.h against a double-precision scan: each row's first
// largest logit (NaN never, ties to the lowest id, wherever the tie falls
// among the blocks' slices) and its log-softmax (NaN when a logit is), for a 152k vocabulary,
// a small one and one smaller than the blocks a row (empty slices). It
// exits 1 on a wrong token or a log-prob off by more than 1e-6.
#include "emu.h"
#include "../../pick.cuh"

#include <cstdio>
#include <random>

int main() {
    std::mt19937 rng(5);
    std::normal_distribution<float> nd(0.f, 3.f);
    bool ok = true;
    for (int V : {151936, 1000, 7}) {
        const int N = 6;
        std::vector<float> logits((size_t)N * V);
        for (float& x : logits) x = nd(rng);
        // Row 1: the max twice, in different slices; row 2: a NaN and -inf
        // before the max; row 3: every logit equal; row 4: max at the end.
        float* r1 = &logits[(size_t)V];
        r1[V - 1] = r1[V / 3] = 40.f;
        float* r2 = &logits[(size_t)2 * V];
        r2[0] = NAN;
        if (V > 2) r2[1] = -INFINITY;
        r2[V - 1] = 30.f;
        for (int v = 0; v < V; v++) logits[(size_t)3 * V + v] = 0.5f;
        logits[(size_t)5 * V - 1] = 50.f;
        // Row 5: -inf everywhere: id 0, as the CPU's scan picks.
        for (int v = 0; v < V; v++) logits[(size_t)5 * V + v] = -INFINITY;
        std::vector<PickPart> parts(N * PP);
        std::vector<int> tok(N, -1);
        std::vector<float> logp(N, NAN);
        launch(N * PP, PT, [&] { pick_part(parts.data(), logits.data(), N, V); });
        launch(N, 32, [&] { pick_merge(tok.data(), logp.data(), parts.data(), logits.data(), N, V); });
        for (int n = 0; n < N; n++) {
            const float* row = &logits[(size_t)n * V];
            int best = 0; // the CPU's scan: the first logit above every earlier one, from -inf
            double mx = -INFINITY;
            for (int v = 0; v < V; v++)
                if (row[v] > mx) best = v, mx = row[v];
            double s = 0; // a NaN logit makes the sum NaN, as on the CPU
            for (int v = 0; v < V; v++) s += std::exp(double(row[v]) - mx);
            double want = double(row[best]) - (mx + std::log(s));
            bool good = tok[n] == best && (std::isnan(want) ? std::isnan(logp[n]) : std::fabs(logp[n] - want) <= 1e-6);
            ok = ok && good;
            printf("V=%d row %d: token %d (want %d), log-prob %.9g (want %.9g) %s\n", V, n, tok[n], best, logp[n], want,
                   good ? "ok" : "FAIL");
        }
    }
    return ok ? 0 : 1;
}
