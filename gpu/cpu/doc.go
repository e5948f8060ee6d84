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
// kernel, the workers split the columns, and each output row is computed
// independently of the other rows, so a sequence decodes to the same bits
// alone or in a batch. MatmulForward is not batch-invariant in that
// sense: below 4 rows it runs dot products (gemv), which sum in another
// order.
//
// # Determinism
//
// Work is partitioned over output rows only, by a fixed rule of the size
// and the worker count, and every reduction runs in a fixed order: results
// are bitwise reproducible for a fixed worker count.
package cpu
