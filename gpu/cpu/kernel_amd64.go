//go:build amd64 && !purego

package cpu

import "golang.org/x/sys/cpu"

// haveFMA reports whether the AVX2+FMA kernels of kernel_amd64.s can run.
// The vector kernels use 256-bit registers only, so AVX2 and FMA (and the
// OS saving ymm state, which x/sys/cpu folds into HasAVX) are all it needs.
var haveFMA = cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasFMA

// haveAVX512 reports whether kern8x16z can run (AVX-512 Foundation, with
// the OS saving zmm state, which x/sys/cpu folds into HasAVX512F).
var haveAVX512 = haveFMA && cpu.X86.HasAVX512F

// kern6x16 adds the product of a packed 6×k strip of A and a packed k×16
// strip of B to the 6×16 tile at c (row stride ldc floats).
//
//go:noescape
func kern6x16(k int, a, b, c *float32, ldc int)

// kern8x16z is kern6x16 for an 8-row strip of A, with AVX-512.
//
//go:noescape
func kern8x16z(k int, a, b, c *float32, ldc int)

// kern4x16z is kern8x16z over the first 4 rows of the strip only.
//
//go:noescape
func kern4x16z(k int, a, b, c *float32, ldc int)

// fmaLoop runs n steps of 12 independent 8-wide FMA chains.
func fmaLoop(n int)

// sdots sets out[j] to the dot product of q[0:n] and k[j*stride:][0:n]
// for j < m.
//
//go:noescape
func sdots(n int, q, k *float32, stride, m int, out *float32)

// saxpys adds alpha[j]*x[j*stride:][0:n] to y[0:n] for j < m in order,
// one fused multiply-add per element and j.
//
//go:noescape
func saxpys(n int, alpha, x *float32, stride, m int, y *float32)

// sexpsub sets y[i] to exp(x[i]-sub) for i < n, n a multiple of 8; y may
// be x. The exp is Cephes expf (a polynomial after range reduction), within
// 2 ulp of the float32 exp, clamped to [exp(-87.3), exp(88)].
//
//go:noescape
func sexpsub(n int, x *float32, sub float32, y *float32)

// sswiglu sets out[i] to gate[i]/(1+exp(-gate[i]))*up[i] for i < n, n a multiple
// of 8, with the exp of sexpsub.
//
//go:noescape
func sswiglu(n int, gate, up, out *float32)
