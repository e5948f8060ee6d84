// Package gputest is the conformance suite of gpu.Backend: every backend
// (gpu/cpu, gpu/cuda) runs TestBackend in one line, and must agree with
// the float64 reference implementations written here, naively and
// independently of any backend.
//
// # Behavior
//
// Each op runs at boundary shapes (1, odd sizes, sizes just past the CPU
// kernel's tile, block and panel sizes). Forward outputs are compared with
// the float64 reference; gradients of backward ops are compared with
// central finite differences (h = 1e-6) of the float64 reference forward,
// for the scalar loss L = sum(out * r) with a random r, so the suite
// checks backward math without trusting any backward implementation.
// Backward outputs start from random values, which checks the accumulate
// (+=) contract.
//
// # Tolerances
//
// A result passes when max|got-want| <= Tol * (1 + max|want|), with Tol =
// 2e-4 for forward ops and 1e-3 for gradients (float32 arithmetic on
// sums of up to a few hundred terms; the float32 CPU backend is typically
// 1e-6). On failure the checker prints the max abs diff and the first few
// mismatching values, as llm.c's test_gpt2 does.
package gputest
