//go:build amd64 && !purego

#include "textflag.h"

// The matmul kernels: C[rows,16] += A·B over k steps, A packed a strip
// of rows per step, B 16 floats per step, C row-major with a row stride
// of ldc floats (R8, in bytes). KARGS loads the arguments: k in CX, a in
// SI, b in DI, c in DX.
#define KARGS \
	MOVQ k+0(FP), CX; \
	MOVQ a+8(FP), SI; \
	MOVQ b+16(FP), DI; \
	MOVQ c+24(FP), DX; \
	MOVQ ldc+32(FP), R8; \
	SHLQ $2, R8

// YZERO12 clears the twelve accumulators Y4-Y15.
#define YZERO12 \
	VXORPS Y4, Y4, Y4; \
	VXORPS Y5, Y5, Y5; \
	VXORPS Y6, Y6, Y6; \
	VXORPS Y7, Y7, Y7; \
	VXORPS Y8, Y8, Y8; \
	VXORPS Y9, Y9, Y9; \
	VXORPS Y10, Y10, Y10; \
	VXORPS Y11, Y11, Y11; \
	VXORPS Y12, Y12, Y12; \
	VXORPS Y13, Y13, Y13; \
	VXORPS Y14, Y14, Y14; \
	VXORPS Y15, Y15, Y15

// YROW adds the product of row r's broadcast A value (OFF(SI), into T)
// and the B vectors Y0, Y1 to the row's accumulators R0, R1.
#define YROW(OFF, T, R0, R1) \
	VBROADCASTSS OFF(SI), T; \
	VFMADD231PS Y0, T, R0; \
	VFMADD231PS Y1, T, R1

// YSTORE adds the accumulators R0, R1 to the 16 floats of a row of C at
// DX and moves DX to the next row.
#define YSTORE(R0, R1) \
	VADDPS (DX), R0, R0; \
	VMOVUPS R0, (DX); \
	VADDPS 32(DX), R1, R1; \
	VMOVUPS R1, 32(DX); \
	ADDQ R8, DX

// ZROW4 adds the products of rows OFF/4..OFF/4+3's broadcast A values
// (embedded broadcasts from OFF(SI)..) and the B vector Z8 to R0-R3.
#define ZROW4(OFF, R0, R1, R2, R3) \
	VFMADD231PS.BCST OFF+0(SI), Z8, R0; \
	VFMADD231PS.BCST OFF+4(SI), Z8, R1; \
	VFMADD231PS.BCST OFF+8(SI), Z8, R2; \
	VFMADD231PS.BCST OFF+12(SI), Z8, R3

// ZSTORE adds the accumulator R to a row of C at DX and moves DX on.
#define ZSTORE(R) \
	VADDPS (DX), R, R; \
	VMOVUPS R, (DX); \
	ADDQ R8, DX

// ZZERO4 clears four zmm accumulators; ZSTORE4 stores them to four rows.
#define ZZERO4(R0, R1, R2, R3) \
	VPXORD R0, R0, R0; \
	VPXORD R1, R1, R1; \
	VPXORD R2, R2, R2; \
	VPXORD R3, R3, R3

#define ZSTORE4(R0, R1, R2, R3) \
	ZSTORE(R0); \
	ZSTORE(R1); \
	ZSTORE(R2); \
	ZSTORE(R3)

// func kern6x16(k int, a, b, c *float32, ldc int)
//
// 6 rows, A packed 6 floats per step. Twelve ymm accumulators (Y4-Y15),
// two B vectors (Y0, Y1), two broadcasts (Y2, Y3).
TEXT ·kern6x16(SB), NOSPLIT, $0-40
	KARGS
	YZERO12
	TESTQ CX, CX
	JZ store
loop:
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	YROW(0, Y2, Y4, Y5)
	YROW(4, Y3, Y6, Y7)
	YROW(8, Y2, Y8, Y9)
	YROW(12, Y3, Y10, Y11)
	YROW(16, Y2, Y12, Y13)
	YROW(20, Y3, Y14, Y15)
	ADDQ $24, SI
	ADDQ $64, DI
	DECQ CX
	JNZ loop
store:
	YSTORE(Y4, Y5)
	YSTORE(Y6, Y7)
	YSTORE(Y8, Y9)
	YSTORE(Y10, Y11)
	YSTORE(Y12, Y13)
	YSTORE(Y14, Y15)
	VZEROUPPER
	RET

// func fmaLoop(n int)
//
// n steps of 12 independent ymm FMA chains (12*8*2 flops a step): the
// throughput ceiling of the matmul kernel on this core.
TEXT ·fmaLoop(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	YZERO12
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

// func sdots(n int, q, k *float32, stride, m int, out *float32)
//
// out[j] = q[0:n]·k[j*stride:][0:n] for j < m: the attention scores of
// one query against m keys in one call. Each dot product runs four ymm
// accumulators over 32 elements a step, then 8 at a time, then a scalar
// tail.
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
// a register over all j (32, then 8, then 1 element at a time) and gets
// one fused multiply-add per j, in order.
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
// kern6x16 with AVX-512 and 8 rows, A packed 8 floats per step, B one
// zmm (Z8) per step. Eight zmm accumulators (Z0-Z7), each fed by
// multiply-adds with an embedded broadcast of its row's A value; every
// element is the same chain of fused multiply-adds over k in order as in
// kern6x16.
TEXT ·kern8x16z(SB), NOSPLIT, $0-40
	KARGS
	ZZERO4(Z0, Z1, Z2, Z3)
	ZZERO4(Z4, Z5, Z6, Z7)
	TESTQ CX, CX
	JZ zstore
zloop:
	VMOVUPS (DI), Z8
	ZROW4(0, Z0, Z1, Z2, Z3)
	ZROW4(16, Z4, Z5, Z6, Z7)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ zloop
zstore:
	ZSTORE4(Z0, Z1, Z2, Z3)
	ZSTORE4(Z4, Z5, Z6, Z7)
	VZEROUPPER
	RET

// func kern4x16z(k int, a, b, c *float32, ldc int)
//
// kern8x16z for the first 4 rows of an 8-row strip of A (a still advances
// 8 floats a step): the tail of a product, where 4 accumulators keep the
// multiply-adds at full rate and 8 would do twice the work.
TEXT ·kern4x16z(SB), NOSPLIT, $0-40
	KARGS
	ZZERO4(Z0, Z1, Z2, Z3)
	TESTQ CX, CX
	JZ z4store
z4loop:
	VMOVUPS (DI), Z8
	ZROW4(0, Z0, Z1, Z2, Z3)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ z4loop
z4store:
	ZSTORE4(Z0, Z1, Z2, Z3)
	VZEROUPPER
	RET
