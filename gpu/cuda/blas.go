//go:build cuda

package cuda

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stddef.h>

// cuBLAS is loaded at run time so that the binary asks for no particular
// libcublas.so.N: it is built against CUDA 11.8 headers here and runs
// against the device machine's own CUDA 12 or 13 libraries. Only the v2
// entry points below are used; their signatures are the same in 11, 12
// and 13.
typedef int (*swerl_create_fn)(void**);
typedef int (*swerl_mathmode_fn)(void*, int);
typedef int (*swerl_gemmex_fn)(void*, int, int, int, int, int, const void*, const void*, int, int,
	const void*, int, int, const void*, void*, int, int, int, int);

static void* swerl_blas_lib;
static swerl_create_fn swerl_blas_create;
static swerl_mathmode_fn swerl_blas_mathmode;
static swerl_gemmex_fn swerl_blas_gemmex;
typedef int (*swerl_gemmptrs_fn)(void*, int, int, int, int, int, const void*, const void* const*, int, int,
	const void* const*, int, int, const void*, void* const*, int, int, int, int, int);
static swerl_gemmptrs_fn swerl_blas_gemmptrs;

static const char* swerl_blas_open(void) {
	const char* names[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12", "libcublas.so.11", NULL};
	for (int i = 0; names[i] && !swerl_blas_lib; i++) swerl_blas_lib = dlopen(names[i], RTLD_NOW | RTLD_GLOBAL);
	if (!swerl_blas_lib) return "no libcublas.so, .so.13, .so.12 or .so.11 on the library path (LD_LIBRARY_PATH)";
	swerl_blas_create = (swerl_create_fn)dlsym(swerl_blas_lib, "cublasCreate_v2");
	swerl_blas_mathmode = (swerl_mathmode_fn)dlsym(swerl_blas_lib, "cublasSetMathMode");
	swerl_blas_gemmex = (swerl_gemmex_fn)dlsym(swerl_blas_lib, "cublasGemmEx");
	swerl_blas_gemmptrs = (swerl_gemmptrs_fn)dlsym(swerl_blas_lib, "cublasGemmBatchedEx");
	if (!swerl_blas_create || !swerl_blas_mathmode || !swerl_blas_gemmex || !swerl_blas_gemmptrs)
		return "libcublas lacks cublasCreate_v2, cublasSetMathMode, cublasGemmEx or cublasGemmBatchedEx";
	return NULL;
}

static int swerl_blas_new(void** h) { return swerl_blas_create(h); }
static int swerl_blas_set_math(void* h, int mode) { return swerl_blas_mathmode(h, mode); }

// swerl_gemm16: like swerl_gemm with bf16 A and B, f32 accumulation, and
// C in f32 (c16 0) or bf16 (c16 1).
static int swerl_gemm16(void* h, int ta, int tb, int m, int n, int k, float alpha, uint64_t A, int lda,
	uint64_t B, int ldb, float beta, uint64_t C, int ldc, int c16) {
	const int R32F = 0, R16BF = 14, COMPUTE32F = 68, GEMM_DEFAULT = -1;
	return swerl_blas_gemmex(h, ta, tb, m, n, k, &alpha, (const void*)(uintptr_t)A, R16BF, lda,
		(const void*)(uintptr_t)B, R16BF, ldb, &beta, (void*)(uintptr_t)C, c16 ? R16BF : R32F, ldc, COMPUTE32F, GEMM_DEFAULT);
}

// swerl_gemm: C = alpha*op(A)op(B) + beta*C in column-major, f32 storage.
static int swerl_gemm(void* h, int ta, int tb, int m, int n, int k, float alpha, uint64_t A, int lda,
	uint64_t B, int ldb, float beta, uint64_t C, int ldc, int compute) {
	const int R32F = 0, GEMM_DEFAULT = -1;
	return swerl_blas_gemmex(h, ta, tb, m, n, k, &alpha, (const void*)(uintptr_t)A, R32F, lda,
		(const void*)(uintptr_t)B, R32F, ldb, &beta, (void*)(uintptr_t)C, R32F, ldc, compute, GEMM_DEFAULT);
}

// swerl_gemm_ptrs: batch products whose operands are listed in device
// arrays of pointers, f32 storage.
static int swerl_gemm_ptrs(void* h, int ta, int tb, int m, int n, int k, float alpha, uint64_t A, int lda,
	uint64_t B, int ldb, float beta, uint64_t C, int ldc, int batch, int compute) {
	const int R32F = 0, GEMM_DEFAULT = -1;
	return swerl_blas_gemmptrs(h, ta, tb, m, n, k, &alpha, (const void* const*)(uintptr_t)A, R32F, lda,
		(const void* const*)(uintptr_t)B, R32F, ldb, &beta, (void* const*)(uintptr_t)C, R32F, ldc, batch, compute, GEMM_DEFAULT);
}
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// Matmul precisions: the compute types handed to cublasGemmEx. Storage is
// float32 in every mode.
const (
	computeF32     = 68 // CUBLAS_COMPUTE_32F: exact float32 (the default; passes gputest)
	computeFastBF  = 75 // CUBLAS_COMPUTE_32F_FAST_16BF: bf16 tensor cores, f32 accumulate
	computeFastTF  = 77 // CUBLAS_COMPUTE_32F_FAST_TF32: tf32 tensor cores
	opN, opT       = 0, 1
	mathTensorOp   = 0 // CUBLAS_DEFAULT_MATH
	mathPedanticFP = 2 // CUBLAS_PEDANTIC_MATH
)

type blas struct {
	h       unsafe.Pointer
	compute int
}

// newBlas loads cuBLAS and makes a handle in the current context; call it
// on the driver thread.
func newBlas() (*blas, error) {
	if msg := C.swerl_blas_open(); msg != nil {
		return nil, errors.New("cuda: cublas: " + C.GoString(msg))
	}
	var h unsafe.Pointer
	if st := C.swerl_blas_new(&h); st != 0 {
		return nil, fmt.Errorf("cuda: cublasCreate: status %d", int(st))
	}
	return &blas{h: h, compute: computeF32}, nil
}

// gemm runs one column-major product on the legacy default stream.
func (b *blas) gemm(ta, tb, m, n, k int, alpha float32, A cu.DevicePtr, lda int, B cu.DevicePtr, ldb int, beta float32, Cp cu.DevicePtr, ldc int) error {
	st := C.swerl_gemm(b.h, C.int(ta), C.int(tb), C.int(m), C.int(n), C.int(k), C.float(alpha),
		C.uint64_t(A), C.int(lda), C.uint64_t(B), C.int(ldb), C.float(beta), C.uint64_t(Cp), C.int(ldc), C.int(b.compute))
	if st != 0 {
		return fmt.Errorf("cublasGemmEx m=%d n=%d k=%d: status %d", m, n, k, int(st))
	}
	return nil
}

// gemm16 is gemm with A and B in bf16, and C too with c16 (the product
// rounded once from its float32 sum).
func (b *blas) gemm16(ta, tb, m, n, k int, alpha float32, A cu.DevicePtr, lda int, B cu.DevicePtr, ldb int, beta float32, Cp cu.DevicePtr, ldc int, c16 bool) error {
	c := C.int(0)
	if c16 {
		c = 1
	}
	st := C.swerl_gemm16(b.h, C.int(ta), C.int(tb), C.int(m), C.int(n), C.int(k), C.float(alpha),
		C.uint64_t(A), C.int(lda), C.uint64_t(B), C.int(ldb), C.float(beta), C.uint64_t(Cp), C.int(ldc), c)
	if st != 0 {
		return fmt.Errorf("cublasGemmEx (bf16) m=%d n=%d k=%d: status %d", m, n, k, int(st))
	}
	return nil
}

// gemmPtrs runs batch column-major products whose operand addresses are
// the device arrays A, B and C (batch pointers each).
func (b *blas) gemmPtrs(ta, tb, m, n, k int, alpha float32, A cu.DevicePtr, lda int, B cu.DevicePtr, ldb int, beta float32, Cp cu.DevicePtr, ldc, batch int) error {
	st := C.swerl_gemm_ptrs(b.h, C.int(ta), C.int(tb), C.int(m), C.int(n), C.int(k), C.float(alpha),
		C.uint64_t(A), C.int(lda), C.uint64_t(B), C.int(ldb), C.float(beta), C.uint64_t(Cp), C.int(ldc), C.int(batch), C.int(b.compute))
	if st != 0 {
		return fmt.Errorf("cublasGemmBatchedEx m=%d n=%d k=%d batch=%d: status %d", m, n, k, batch, int(st))
	}
	return nil
}
