// LEVELSUMS(zero, wacc, tacc, vr, cr, lanes): the body of levelSums8 (Z
// registers, lanes 8, zero VPXORQ) and levelSums4 (Y, 4, VXORPD), the
// kernels of LevelSums (levelsum.go) on blocks of lanes elements, n a
// multiple of lanes, m ≥ 1: per block, for each level in order, vr = s +
// sC, wacc += coef·vr (the product rounded), tacc += vr, both from +0.
// R8 is the levels' stride in bytes.
#define LEVELSUMS(zero, wacc, tacc, vr, cr, lanes) \
	MOVQ n+0(FP), CX \
	MOVQ p+8(FP), R8 \
	SHLQ $3, R8 \
	MOVQ w+16(FP), DX \
	MOVQ tot+24(FP), BX \
	MOVQ sum+32(FP), SI \
	MOVQ sumC+40(FP), DI \
	MOVQ coef+48(FP), R9 \
	MOVQ m+56(FP), R10 \
	XORQ AX, AX \
lsblock: \
	zero wacc, wacc, wacc \
	zero tacc, tacc, tacc \
	LEAQ (SI)(AX*8), R11 \
	LEAQ (DI)(AX*8), R12 \
	XORQ R13, R13 \
lslevel: \
	VMOVUPD (R11), vr \
	VADDPD (R12), vr, vr \
	VBROADCASTSD (R9)(R13*8), cr \
	VMULPD vr, cr, cr \
	VADDPD cr, wacc, wacc \
	VADDPD vr, tacc, tacc \
	ADDQ R8, R11 \
	ADDQ R8, R12 \
	INCQ R13 \
	CMPQ R13, R10 \
	JL lslevel \
	VMOVUPD wacc, (DX)(AX*8) \
	VMOVUPD tacc, (BX)(AX*8) \
	ADDQ $lanes, AX \
	CMPQ AX, CX \
	JL lsblock \
	VZEROUPPER \
	RET
