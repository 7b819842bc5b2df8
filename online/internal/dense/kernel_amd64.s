//go:build amd64 && !purego

#include "textflag.h"

// STEP is one step p of the product: B[p, 0:8] (two loads at boff) times
// A[p, 0:6] (six broadcasts at aoff) into the accumulators Y4–Y15.
#define STEP(aoff, boff) \
	VMOVUPD      boff(DI), Y0            \
	VMOVUPD      boff+32(DI), Y1         \
	VBROADCASTSD aoff(SI), Y2            \
	VBROADCASTSD aoff+8(SI), Y3          \
	VFMADD231PD  Y0, Y2, Y4              \
	VFMADD231PD  Y1, Y2, Y5              \
	VFMADD231PD  Y0, Y3, Y6              \
	VFMADD231PD  Y1, Y3, Y7              \
	VBROADCASTSD aoff+16(SI), Y2         \
	VBROADCASTSD aoff+24(SI), Y3         \
	VFMADD231PD  Y0, Y2, Y8              \
	VFMADD231PD  Y1, Y2, Y9              \
	VFMADD231PD  Y0, Y3, Y10             \
	VFMADD231PD  Y1, Y3, Y11             \
	VBROADCASTSD aoff+32(SI), Y2         \
	VBROADCASTSD aoff+40(SI), Y3         \
	VFMADD231PD  Y0, Y2, Y12             \
	VFMADD231PD  Y1, Y2, Y13             \
	VFMADD231PD  Y0, Y3, Y14             \
	VFMADD231PD  Y1, Y3, Y15

// ROW adds alpha (Y0) times the accumulators lo, hi to the row of C at DX.
#define ROW(lo, hi) \
	VMOVUPD     0(DX), Y1  \
	VMOVUPD     32(DX), Y2 \
	VFMADD231PD lo, Y0, Y1 \
	VFMADD231PD hi, Y0, Y2 \
	VMOVUPD     Y1, 0(DX)  \
	VMOVUPD     Y2, 32(DX)

// func kern6x8(k int, a, b, c *float64, ldc int, alpha float64)
//
// C[0:6, 0:8] += alpha · Σ_p a[p·6 + r] · b[p·8 + j]: a 6 × 8 tile of C
// (row-major, ldc elements between rows) from packed slivers of A (6 per
// step) and B (8 per step). Twelve YMM accumulators (Y4–Y15), two B loads
// and six broadcasts per step: 12 FMAs, 96 flops.
TEXT ·kern6x8(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $3, R8

	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7
	VXORPD Y8, Y8, Y8
	VXORPD Y9, Y9, Y9
	VXORPD Y10, Y10, Y10
	VXORPD Y11, Y11, Y11
	VXORPD Y12, Y12, Y12
	VXORPD Y13, Y13, Y13
	VXORPD Y14, Y14, Y14
	VXORPD Y15, Y15, Y15

	MOVQ CX, R9
	SHRQ $2, R9
	ANDQ $3, CX
	TESTQ R9, R9
	JE   tail

loop4:
	PREFETCHT0 512(DI)
	PREFETCHT0 384(SI)
	STEP(0, 0)
	STEP(48, 64)
	STEP(96, 128)
	STEP(144, 192)

	ADDQ $192, SI
	ADDQ $256, DI
	DECQ R9
	JNE  loop4

tail:
	TESTQ CX, CX
	JE    store

loop1:
	STEP(0, 0)
	ADDQ $48, SI
	ADDQ $64, DI
	DECQ CX
	JNE  loop1

store:
	VBROADCASTSD alpha+40(FP), Y0

	ROW(Y4, Y5)
	ADDQ R8, DX
	ROW(Y6, Y7)
	ADDQ R8, DX
	ROW(Y8, Y9)
	ADDQ R8, DX
	ROW(Y10, Y11)
	ADDQ R8, DX
	ROW(Y12, Y13)
	ADDQ R8, DX
	ROW(Y14, Y15)

	VZEROUPPER
	RET

// func axpy(n int, alpha float64, x, y *float64)
//
// y[0:n] += alpha · x[0:n].
TEXT ·axpy(SB), NOSPLIT, $0-32
	MOVQ         n+0(FP), CX
	VBROADCASTSD alpha+8(FP), Y0
	MOVQ         x+16(FP), SI
	MOVQ         y+24(FP), DI
	MOVQ         CX, R9
	SHRQ         $4, R9
	ANDQ         $15, CX
	TESTQ        R9, R9
	JE           axtail

ax16:
	VMOVUPD     0(DI), Y1
	VMOVUPD     32(DI), Y2
	VMOVUPD     64(DI), Y3
	VMOVUPD     96(DI), Y4
	VFMADD231PD 0(SI), Y0, Y1
	VFMADD231PD 32(SI), Y0, Y2
	VFMADD231PD 64(SI), Y0, Y3
	VFMADD231PD 96(SI), Y0, Y4
	VMOVUPD     Y1, 0(DI)
	VMOVUPD     Y2, 32(DI)
	VMOVUPD     Y3, 64(DI)
	VMOVUPD     Y4, 96(DI)
	ADDQ        $128, SI
	ADDQ        $128, DI
	DECQ        R9
	JNE         ax16

axtail:
	TESTQ CX, CX
	JE    axdone

ax1:
	VMOVSD      0(DI), X1
	VFMADD231SD 0(SI), X0, X1
	VMOVSD      X1, 0(DI)
	ADDQ        $8, SI
	ADDQ        $8, DI
	DECQ        CX
	JNE         ax1

axdone:
	VZEROUPPER
	RET

// STEP16 is one step p of kern6x16: the two B slivers' rows p (one ZMM
// load each, at boff(DI) and boff(R10)) times A[p, 0:6] (six broadcasts at
// aoff) into the accumulators Z4–Z15 (row r in Z(4+2r), Z(5+2r)).
#define STEP16(aoff, boff) \
	VMOVUPD      boff(DI), Z0            \
	VMOVUPD      boff(R10), Z1           \
	VBROADCASTSD aoff(SI), Z2            \
	VBROADCASTSD aoff+8(SI), Z3          \
	VFMADD231PD  Z0, Z2, Z4              \
	VFMADD231PD  Z1, Z2, Z5              \
	VFMADD231PD  Z0, Z3, Z6              \
	VFMADD231PD  Z1, Z3, Z7              \
	VBROADCASTSD aoff+16(SI), Z2         \
	VBROADCASTSD aoff+24(SI), Z3         \
	VFMADD231PD  Z0, Z2, Z8              \
	VFMADD231PD  Z1, Z2, Z9              \
	VFMADD231PD  Z0, Z3, Z10             \
	VFMADD231PD  Z1, Z3, Z11             \
	VBROADCASTSD aoff+32(SI), Z2         \
	VBROADCASTSD aoff+40(SI), Z3         \
	VFMADD231PD  Z0, Z2, Z12             \
	VFMADD231PD  Z1, Z2, Z13             \
	VFMADD231PD  Z0, Z3, Z14             \
	VFMADD231PD  Z1, Z3, Z15

// ROW16 adds alpha (Z0) times the accumulators lo, hi to the row of C at
// DX (16 columns).
#define ROW16(lo, hi) \
	VMOVUPD     0(DX), Z1  \
	VMOVUPD     64(DX), Z2 \
	VFMADD231PD lo, Z0, Z1 \
	VFMADD231PD hi, Z0, Z2 \
	VMOVUPD     Z1, 0(DX)  \
	VMOVUPD     Z2, 64(DX)

// func kern6x16(k int, a, b, c *float64, ldc int, alpha float64)
//
// kern6x8 on two tiles side by side, C[0:6, 0:16], AVX-512: b holds two
// packed B slivers one after the other (8 per step each, the second at
// b + 8k), every element summed as kern6x8 sums it (the steps in order,
// then C + alpha·sum by one FMA). Twelve ZMM accumulators, two loads and
// six broadcasts per step: 12 FMAs, 192 flops.
TEXT ·kern6x16(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DI
	MOVQ c+24(FP), DX
	MOVQ ldc+32(FP), R8
	SHLQ $3, R8
	MOVQ CX, R10
	SHLQ $6, R10
	ADDQ DI, R10 // the second sliver: b + 8k

	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z6, Z6, Z6
	VPXORQ Z7, Z7, Z7
	VPXORQ Z8, Z8, Z8
	VPXORQ Z9, Z9, Z9
	VPXORQ Z10, Z10, Z10
	VPXORQ Z11, Z11, Z11
	VPXORQ Z12, Z12, Z12
	VPXORQ Z13, Z13, Z13
	VPXORQ Z14, Z14, Z14
	VPXORQ Z15, Z15, Z15

	MOVQ CX, R9
	SHRQ $2, R9
	ANDQ $3, CX
	TESTQ R9, R9
	JE   tail16

loop16:
	PREFETCHT0 512(DI)
	PREFETCHT0 512(R10)
	PREFETCHT0 384(SI)
	STEP16(0, 0)
	STEP16(48, 64)
	STEP16(96, 128)
	STEP16(144, 192)

	ADDQ $192, SI
	ADDQ $256, DI
	ADDQ $256, R10
	DECQ R9
	JNE  loop16

tail16:
	TESTQ CX, CX
	JE    store16

step16:
	STEP16(0, 0)
	ADDQ $48, SI
	ADDQ $64, DI
	ADDQ $64, R10
	DECQ CX
	JNE  step16

store16:
	VBROADCASTSD alpha+40(FP), Z0

	ROW16(Z4, Z5)
	ADDQ R8, DX
	ROW16(Z6, Z7)
	ADDQ R8, DX
	ROW16(Z8, Z9)
	ADDQ R8, DX
	ROW16(Z10, Z11)
	ADDQ R8, DX
	ROW16(Z12, Z13)
	ADDQ R8, DX
	ROW16(Z14, Z15)

	VZEROUPPER
	RET
