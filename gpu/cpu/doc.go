// Package cpu is the pure-Go reference Backend of package gpu: no cgo, it
// always builds, and every other backend is checked against it by the
// gpu/gputest suite.
//
// # Behavior
//
// New returns a float32 backend that splits every op over a fixed pool of
// GOMAXPROCS workers. NewFloat64 returns the same kernels instantiated for
// float64: buffers hold float64 internally and convert on Upload and
// Download; it exists for finite-difference gradient checks of the whole
// model.
//
// Matmul runs a cache-blocked, register-tiled (3x3) kernel in the form
// C = A·Bᵀ, where both operands stream along their contiguous axis; the
// backward products are fed to the same kernel through transposed panels
// of at most panelK rows, so the extra workspace is bounded by
// panelK*(C+OC) elements whatever N is.
//
// For decoding, the backend implements gpu.PackedMatmul (packed.go): the
// sampler's weights are packed once into the 16-column strips of the 6×16
// kernel (or, on CPUs with AVX-512F, of an 8×16 zmm kernel with a 4-row
// variant for short tails: the same multiply-add chain per element), the
// workers split the columns, and each output row is computed
// independently of the other rows, so a sequence decodes to the same bits
// alone or in a batch. MatmulForward is not batch-invariant in that
// sense: below 4 rows it runs dot products (gemv), which sum in another
// order. It also implements gpu.RaggedAttention (ragged.go): RoPE, the KV
// cache writes and attention of all of a step's rows in one call each,
// every row through the same code as AttentionForward. On AVX2+FMA the
// softmax and SwiGLU take a vectorised float32 exp (Cephes expf, relative
// error below 1e-7); the float64 backend keeps math.Exp.
//
// # Determinism
//
// Work is partitioned over output rows only, by a fixed rule of the size
// and the worker count, and every reduction runs in a fixed order: results
// are bitwise reproducible for a fixed worker count.
package cpu
