//go:build amd64 && !purego

#include "textflag.h"

// func kern6x16(k int, a, b, c *float32, ldc int)
//
// C[6,16] += A·B over k steps: a is packed 6 floats per step, b 16 floats
// per step; c is row-major with a row stride of ldc floats. Twelve ymm
// accumulators (Y4-Y15), two B vectors (Y0, Y1), two broadcasts (Y2, Y3).
TEXT ·kern6x16(SB), NOSPLIT, $0-40
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
	TESTQ CX, CX
	JZ store
loop:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VBROADCASTSS 0(SI), Y2
	VFMADD231PS Y0, Y2, Y4
	VFMADD231PS Y1, Y2, Y5
	VBROADCASTSS 4(SI), Y3
	VFMADD231PS Y0, Y3, Y6
	VFMADD231PS Y1, Y3, Y7
	VBROADCASTSS 8(SI), Y2
	VFMADD231PS Y0, Y2, Y8
	VFMADD231PS Y1, Y2, Y9
	VBROADCASTSS 12(SI), Y3
	VFMADD231PS Y0, Y3, Y10
	VFMADD231PS Y1, Y3, Y11
	VBROADCASTSS 16(SI), Y2
	VFMADD231PS Y0, Y2, Y12
	VFMADD231PS Y1, Y2, Y13
	VBROADCASTSS 20(SI), Y3
	VFMADD231PS Y0, Y3, Y14
	VFMADD231PS Y1, Y3, Y15
	ADDQ $24, SI
	ADDQ $64, DI
	DECQ CX
	JNZ loop
store:
	VADDPS (DX), Y4, Y4
	VMOVUPS Y4, (DX)
	VADDPS 32(DX), Y5, Y5
	VMOVUPS Y5, 32(DX)
	ADDQ R8, DX
	VADDPS (DX), Y6, Y6
	VMOVUPS Y6, (DX)
	VADDPS 32(DX), Y7, Y7
	VMOVUPS Y7, 32(DX)
	ADDQ R8, DX
	VADDPS (DX), Y8, Y8
	VMOVUPS Y8, (DX)
	VADDPS 32(DX), Y9, Y9
	VMOVUPS Y9, 32(DX)
	ADDQ R8, DX
	VADDPS (DX), Y10, Y10
	VMOVUPS Y10, (DX)
	VADDPS 32(DX), Y11, Y11
	VMOVUPS Y11, 32(DX)
	ADDQ R8, DX
	VADDPS (DX), Y12, Y12
	VMOVUPS Y12, (DX)
	VADDPS 32(DX), Y13, Y13
	VMOVUPS Y13, 32(DX)
	ADDQ R8, DX
	VADDPS (DX), Y14, Y14
	VMOVUPS Y14, (DX)
	VADDPS 32(DX), Y15, Y15
	VMOVUPS Y15, 32(DX)
	VZEROUPPER
	RET

// func sdot(n int, a, b *float32) float32
//
// The dot product of a[0:n] and b[0:n]: four ymm accumulators over 32
// elements a step, then 8 at a time, then a scalar tail.
TEXT ·sdot(SB), NOSPLIT, $0-28
	MOVQ n+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
loop32:
	CMPQ CX, $32
	JLT loop8
	VMOVUPS 0(SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS 0(DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP loop32
loop8:
	CMPQ CX, $8
	JLT reduce
	VMOVUPS (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP loop8
reduce:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
tail:
	TESTQ CX, CX
	JZ done
	VMOVSS (SI), X4
	VFMADD231SS (DI), X4, X0
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JMP tail
done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func fmaLoop(n int)
//
// n steps of 12 independent ymm FMA chains (12*8*2 flops a step): the
// throughput ceiling of the matmul kernel on this core.
TEXT ·fmaLoop(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	TESTQ CX, CX
	JZ fdone
floop:
	VFMADD231PS Y0, Y1, Y4
	VFMADD231PS Y0, Y1, Y5
	VFMADD231PS Y0, Y1, Y6
	VFMADD231PS Y0, Y1, Y7
	VFMADD231PS Y0, Y1, Y8
	VFMADD231PS Y0, Y1, Y9
	VFMADD231PS Y0, Y1, Y10
	VFMADD231PS Y0, Y1, Y11
	VFMADD231PS Y0, Y1, Y12
	VFMADD231PS Y0, Y1, Y13
	VFMADD231PS Y0, Y1, Y14
	VFMADD231PS Y0, Y1, Y15
	DECQ CX
	JNZ floop
fdone:
	VZEROUPPER
	RET

// func saxpy(n int, alpha float32, x, y *float32)
//
// y[0:n] += alpha*x[0:n]: 32 elements a step, then 8, then a scalar tail.
TEXT ·saxpy(SB), NOSPLIT, $0-32
	MOVQ n+0(FP), CX
	VBROADCASTSS alpha+8(FP), Y0
	MOVQ x+16(FP), SI
	MOVQ y+24(FP), DI
aloop32:
	CMPQ CX, $32
	JLT aloop8
	VMOVUPS 0(DI), Y1
	VMOVUPS 32(DI), Y2
	VMOVUPS 64(DI), Y3
	VMOVUPS 96(DI), Y4
	VFMADD231PS 0(SI), Y0, Y1
	VFMADD231PS 32(SI), Y0, Y2
	VFMADD231PS 64(SI), Y0, Y3
	VFMADD231PS 96(SI), Y0, Y4
	VMOVUPS Y1, 0(DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y3, 64(DI)
	VMOVUPS Y4, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP aloop32
aloop8:
	CMPQ CX, $8
	JLT atail
	VMOVUPS (DI), Y1
	VFMADD231PS (SI), Y0, Y1
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP aloop8
atail:
	TESTQ CX, CX
	JZ adone
	VMOVSS (DI), X1
	VFMADD231SS (SI), X0, X1
	VMOVSS X1, (DI)
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JMP atail
adone:
	VZEROUPPER
	RET

// func sdots(n int, q, k *float32, stride, m int, out *float32)
//
// out[j] = sdot(n, q, k + j*stride) for j < m: the attention scores of
// one query against m keys in one call, each dot product summed exactly
// as sdot sums it.
TEXT ·sdots(SB), NOSPLIT, $0-48
	MOVQ n+0(FP), R9
	MOVQ q+8(FP), R10
	MOVQ k+16(FP), R11
	MOVQ stride+24(FP), R12
	SHLQ $2, R12
	MOVQ m+32(FP), R13
	MOVQ out+40(FP), R8
	TESTQ R13, R13
	JZ ddone
drow:
	MOVQ R9, CX
	MOVQ R10, SI
	MOVQ R11, DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
dloop32:
	CMPQ CX, $32
	JLT dloop8
	VMOVUPS 0(SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VFMADD231PS 0(DI), Y4, Y0
	VFMADD231PS 32(DI), Y5, Y1
	VFMADD231PS 64(DI), Y6, Y2
	VFMADD231PS 96(DI), Y7, Y3
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP dloop32
dloop8:
	CMPQ CX, $8
	JLT dreduce
	VMOVUPS (SI), Y4
	VFMADD231PS (DI), Y4, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP dloop8
dreduce:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
dtail:
	TESTQ CX, CX
	JZ dstore
	VMOVSS (SI), X4
	VFMADD231SS (DI), X4, X0
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JMP dtail
dstore:
	MOVSS X0, (R8)
	ADDQ $4, R8
	ADDQ R12, R11
	DECQ R13
	JNZ drow
ddone:
	VZEROUPPER
	RET

// func saxpys(n int, alpha, x *float32, stride, m int, y *float32)
//
// y[0:n] += alpha[j]*x[j*stride:][0:n] for j = 0..m-1 in order: the
// attention output of one query in one call. Each element of y stays in
// a register over all j and gets the same fused multiply-adds, in the
// same order, as m calls of saxpy.
TEXT ·saxpys(SB), NOSPLIT, $0-48
	MOVQ n+0(FP), CX
	MOVQ alpha+8(FP), R8
	MOVQ x+16(FP), SI
	MOVQ stride+24(FP), R12
	SHLQ $2, R12
	MOVQ m+32(FP), R13
	MOVQ y+40(FP), DI
	TESTQ R13, R13
	JZ xdone
xloop32:
	CMPQ CX, $32
	JLT xloop8
	VMOVUPS 0(DI), Y1
	VMOVUPS 32(DI), Y2
	VMOVUPS 64(DI), Y3
	VMOVUPS 96(DI), Y4
	MOVQ R8, AX
	MOVQ SI, BX
	MOVQ R13, DX
xrow32:
	VBROADCASTSS (AX), Y0
	VFMADD231PS 0(BX), Y0, Y1
	VFMADD231PS 32(BX), Y0, Y2
	VFMADD231PS 64(BX), Y0, Y3
	VFMADD231PS 96(BX), Y0, Y4
	ADDQ $4, AX
	ADDQ R12, BX
	DECQ DX
	JNZ xrow32
	VMOVUPS Y1, 0(DI)
	VMOVUPS Y2, 32(DI)
	VMOVUPS Y3, 64(DI)
	VMOVUPS Y4, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP xloop32
xloop8:
	CMPQ CX, $8
	JLT xtail
	VMOVUPS (DI), Y1
	MOVQ R8, AX
	MOVQ SI, BX
	MOVQ R13, DX
xrow8:
	VBROADCASTSS (AX), Y0
	VFMADD231PS (BX), Y0, Y1
	ADDQ $4, AX
	ADDQ R12, BX
	DECQ DX
	JNZ xrow8
	VMOVUPS Y1, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP xloop8
xtail:
	TESTQ CX, CX
	JZ xdone
	VMOVSS (DI), X1
	MOVQ R8, AX
	MOVQ SI, BX
	MOVQ R13, DX
xrow1:
	VMOVSS (AX), X0
	VFMADD231SS (BX), X0, X1
	ADDQ $4, AX
	ADDQ R12, BX
	DECQ DX
	JNZ xrow1
	VMOVSS X1, (DI)
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JMP xtail
xdone:
	VZEROUPPER
	RET

// Constants of the float32 exp below (Cephes expf): the clamp bounds,
// log2(e), ln(2) in two parts, the degree-5 polynomial of exp on
// [-ln2/2, ln2/2], and 1.
DATA expc<>+0(SB)/4, $88.0
DATA expc<>+4(SB)/4, $-87.3
DATA expc<>+8(SB)/4, $1.44269504088896341
DATA expc<>+12(SB)/4, $0.693359375
DATA expc<>+16(SB)/4, $-2.12194440e-4
DATA expc<>+20(SB)/4, $1.9875691500e-4
DATA expc<>+24(SB)/4, $1.3981999507e-3
DATA expc<>+28(SB)/4, $8.3334519073e-3
DATA expc<>+32(SB)/4, $4.1665795894e-2
DATA expc<>+36(SB)/4, $1.6666665459e-1
DATA expc<>+40(SB)/4, $5.0000001201e-1
DATA expc<>+44(SB)/4, $1.0
GLOBL expc<>(SB), RODATA|NOPTR, $48

// EXPCONST broadcasts the exp constants into Y4-Y15.
#define EXPCONST \
	VBROADCASTSS expc<>+0(SB), Y4; \
	VBROADCASTSS expc<>+4(SB), Y5; \
	VBROADCASTSS expc<>+8(SB), Y6; \
	VBROADCASTSS expc<>+12(SB), Y7; \
	VBROADCASTSS expc<>+16(SB), Y8; \
	VBROADCASTSS expc<>+20(SB), Y9; \
	VBROADCASTSS expc<>+24(SB), Y10; \
	VBROADCASTSS expc<>+28(SB), Y11; \
	VBROADCASTSS expc<>+32(SB), Y12; \
	VBROADCASTSS expc<>+36(SB), Y13; \
	VBROADCASTSS expc<>+40(SB), Y14; \
	VBROADCASTSS expc<>+44(SB), Y15

// EXP sets Y0 to exp(Y0), 8 lanes, with Y1 and Y2 as scratch and the
// constants of EXPCONST: x is clamped to [-87.3, 88] (a NaN stays NaN:
// it is the operand VMINPS and VMAXPS return), split as x = n*ln2 + r
// with n = round(x*log2e), exp(r) = (p(r)*r + 1)*r + 1, and 2^n is built
// in the exponent bits (n+127)<<23, which for 1.0 = 127<<23 is an
// integer add of n<<23 to the bits of 1.0.
#define EXP \
	VMINPS Y0, Y4, Y0; \
	VMAXPS Y0, Y5, Y0; \
	VMULPS Y6, Y0, Y1; \
	VROUNDPS $0, Y1, Y1; \
	VFNMADD231PS Y7, Y1, Y0; \
	VFNMADD231PS Y8, Y1, Y0; \
	VMOVAPS Y9, Y2; \
	VFMADD213PS Y10, Y0, Y2; \
	VFMADD213PS Y11, Y0, Y2; \
	VFMADD213PS Y12, Y0, Y2; \
	VFMADD213PS Y13, Y0, Y2; \
	VFMADD213PS Y14, Y0, Y2; \
	VFMADD213PS Y15, Y0, Y2; \
	VFMADD213PS Y15, Y0, Y2; \
	VCVTPS2DQ Y1, Y1; \
	VPSLLD $23, Y1, Y1; \
	VPADDD Y15, Y1, Y1; \
	VMULPS Y1, Y2, Y0

// func sexpsub(n int, x *float32, sub float32, y *float32)
//
// y[i] = exp(x[i] - sub) for i < n, n a multiple of 8 (y may be x).
TEXT ·sexpsub(SB), NOSPLIT, $0-32
	MOVQ n+0(FP), CX
	MOVQ x+8(FP), SI
	VBROADCASTSS sub+16(FP), Y3
	MOVQ y+24(FP), DI
	EXPCONST
	SHRQ $3, CX
	JZ edone
eloop:
	VMOVUPS (SI), Y0
	VSUBPS Y3, Y0, Y0
	EXP
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ eloop
edone:
	VZEROUPPER
	RET

// func sswiglu(n int, gate, up, out *float32)
//
// out[i] = gate[i]/(1+exp(-gate[i]))*up[i] for i < n, n a multiple of 8.
TEXT ·sswiglu(SB), NOSPLIT, $0-32
	MOVQ n+0(FP), CX
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), BX
	MOVQ out+24(FP), DI
	EXPCONST
	SHRQ $3, CX
	JZ sdone
sloop:
	VMOVUPS (SI), Y3
	VXORPS Y0, Y0, Y0
	VSUBPS Y3, Y0, Y0
	EXP
	VADDPS Y15, Y0, Y0
	VDIVPS Y0, Y3, Y3
	VMULPS (BX), Y3, Y3
	VMOVUPS Y3, (DI)
	ADDQ $32, SI
	ADDQ $32, BX
	ADDQ $32, DI
	DECQ CX
	JNZ sloop
sdone:
	VZEROUPPER
	RET

// func kern8x16z(k int, a, b, c *float32, ldc int)
//
// kern6x16 with AVX-512 and 8 rows: C[8,16] += A·B over k steps, a packed
// 8 floats per step, b 16 floats (one zmm) per step. Eight zmm
// accumulators (Z0-Z7), each fed by a multiply-add with an embedded
// broadcast of its row's A value; every element is the same chain of
// fused multiply-adds over k in order as in kern6x16.
TEXT ·kern8x16z(SB), NOSPLIT, $0-40
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	TESTQ CX, CX
	JZ zstore
zloop:
	VMOVUPS (DI), Z8
	VFMADD231PS.BCST 0(SI), Z8, Z0
	VFMADD231PS.BCST 4(SI), Z8, Z1
	VFMADD231PS.BCST 8(SI), Z8, Z2
	VFMADD231PS.BCST 12(SI), Z8, Z3
	VFMADD231PS.BCST 16(SI), Z8, Z4
	VFMADD231PS.BCST 20(SI), Z8, Z5
	VFMADD231PS.BCST 24(SI), Z8, Z6
	VFMADD231PS.BCST 28(SI), Z8, Z7
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ zloop
zstore:
	VADDPS (DX), Z0, Z0
	VMOVUPS Z0, (DX)
	ADDQ R8, DX
	VADDPS (DX), Z1, Z1
	VMOVUPS Z1, (DX)
	ADDQ R8, DX
	VADDPS (DX), Z2, Z2
	VMOVUPS Z2, (DX)
	ADDQ R8, DX
	VADDPS (DX), Z3, Z3
	VMOVUPS Z3, (DX)
	ADDQ R8, DX
	VADDPS (DX), Z4, Z4
	VMOVUPS Z4, (DX)
	ADDQ R8, DX
	VADDPS (DX), Z5, Z5
	VMOVUPS Z5, (DX)
	ADDQ R8, DX
	VADDPS (DX), Z6, Z6
	VMOVUPS Z6, (DX)
	ADDQ R8, DX
	VADDPS (DX), Z7, Z7
	VMOVUPS Z7, (DX)
	VZEROUPPER
	RET

// func kern4x16z(k int, a, b, c *float32, ldc int)
//
// kern8x16z for the first 4 rows of an 8-row strip of A (a still advances
// 8 floats a step): the tail of a product, where 4 accumulators keep the
// multiply-adds at full rate and 8 would do twice the work.
TEXT ·kern4x16z(SB), NOSPLIT, $0-40
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $2, R8
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	TESTQ CX, CX
	JZ z4store
z4loop:
	VMOVUPS (DI), Z8
	VFMADD231PS.BCST 0(SI), Z8, Z0
	VFMADD231PS.BCST 4(SI), Z8, Z1
	VFMADD231PS.BCST 8(SI), Z8, Z2
	VFMADD231PS.BCST 12(SI), Z8, Z3
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ z4loop
z4store:
	VADDPS (DX), Z0, Z0
	VMOVUPS Z0, (DX)
	ADDQ R8, DX
	VADDPS (DX), Z1, Z1
	VMOVUPS Z1, (DX)
	ADDQ R8, DX
	VADDPS (DX), Z2, Z2
	VMOVUPS Z2, (DX)
	ADDQ R8, DX
	VADDPS (DX), Z3, Z3
	VMOVUPS Z3, (DX)
	VZEROUPPER
	RET
