//go:build amd64 && !purego

#include "textflag.h"
#include "twosum.h"
#include "levelsums.h"

// AVX-512F kernels: eight lanes per register, element i of a sum in lane
// i mod 8. Every kernel computes its Go definition (vmath.go, mam.go) bit
// for bit, as the AVX2 ones in kernel_amd64.s do. Only AVX-512F
// instructions are used (integer forms of the logical operations, KMOVW).

#define K_ABS ·sincosK+0(SB)
#define K_LIMIT ·sincosK+32(SB)
#define K_INVTHETA ·sincosK+64(SB)
#define K_MAGIC ·sincosK+96(SB)
#define K_THETAA ·sincosK+128(SB)
#define K_THETAB ·sincosK+160(SB)
#define K_S3 ·sincosK+192(SB)
#define K_S5 ·sincosK+224(SB)
#define K_S7 ·sincosK+256(SB)
#define K_C2 ·sincosK+288(SB)
#define K_C4 ·sincosK+320(SB)
#define K_C6 ·sincosK+352(SB)
#define K_C8 ·sincosK+384(SB)
#define K_SIGN ·sincosK+416(SB)
#define K_HALF ·sincosK+448(SB)

// EXP_CONSTS loads ExpNeg's constants for EXPNEG8: the table of 16 in
// Z16–Z19 (hi, lo), rbfK's first ten in Z20–Z29 and −707 in Z14.
#define EXP_CONSTS \
	VMOVUPD      ·expHi+0(SB), Z16 \
	VMOVUPD      ·expHi+64(SB), Z17 \
	VMOVUPD      ·expLo+0(SB), Z18 \
	VMOVUPD      ·expLo+64(SB), Z19 \
	VBROADCASTSD ·rbfK+0(SB), Z20 \
	VBROADCASTSD ·rbfK+8(SB), Z21 \
	VBROADCASTSD ·rbfK+16(SB), Z22 \
	VBROADCASTSD ·rbfK+24(SB), Z23 \
	VBROADCASTSD ·rbfK+32(SB), Z24 \
	VBROADCASTSD ·rbfK+40(SB), Z25 \
	VBROADCASTSD ·rbfK+48(SB), Z26 \
	VBROADCASTSD ·rbfK+56(SB), Z27 \
	VBROADCASTSD ·rbfK+64(SB), Z28 \
	VBROADCASTSD ·rbfK+72(SB), Z29 \
	VBROADCASTSD ·rbfK+80(SB), Z14

// EXPNEG8 sets Z11 = ExpNeg(Z2) in eight lanes (rbf.go: k and the reduced
// r by two FMAs with ln2/16 in two parts, e^r − 1 by Horner to r⁷, the
// table entry by two-register permutes of the low bits of k, 2^(k>>4) added
// to the exponent), lanes with Z2 < −707 or NaN zeroed; K1 and Z3–Z10 are
// clobbered.
#define EXPNEG8 \
	VCMPPD       $0x1d, Z14, Z2, K1 \
	VMOVAPD      Z21, Z3 \
	VFMADD231PD  Z20, Z2, Z3 \
	VSUBPD       Z21, Z3, Z4 \
	VMOVAPD      Z2, Z5 \
	VFNMADD231PD Z22, Z4, Z5 \
	VFNMADD231PD Z23, Z4, Z5 \
	VMOVAPD      Z25, Z6 \
	VFMADD231PD  Z24, Z5, Z6 \
	VFMADD213PD  Z26, Z5, Z6 \
	VFMADD213PD  Z27, Z5, Z6 \
	VFMADD213PD  Z28, Z5, Z6 \
	VFMADD213PD  Z29, Z5, Z6 \
	VMULPD       Z5, Z5, Z7 \
	VFMADD213PD  Z5, Z6, Z7 \
	VPSUBQ       Z21, Z3, Z8 \
	VMOVAPD      Z8, Z9 \
	VPERMI2PD    Z17, Z16, Z9 \
	VMOVAPD      Z8, Z10 \
	VPERMI2PD    Z19, Z18, Z10 \
	VFMADD213PD  Z10, Z9, Z7 \
	VADDPD       Z7, Z9, Z7 \
	VPSRAQ       $4, Z8, Z8 \
	VPSLLQ       $52, Z8, Z8 \
	VPADDQ       Z8, Z7, Z7 \
	VPXORQ       Z11, Z11, Z11 \
	VMOVAPD      Z7, K1, Z11

// func sincos8(n int, cs, sn, z *float64, s, a float64) int
//
// sincos4 (kernel_amd64.s) on blocks of eight: for k = 0, 8, 16, … < n (n
// a multiple of 8), while every argument x = s·z[k:k+8] is below the
// fast-path limit in magnitude. The table lookups are two-register
// permutes of the 16 scaled entries of sinHalf and cosHalf (Z16–Z19), the
// index being the low bits of t; bit 4 of t (the half turn) negates both.
// Z12 holds s.
TEXT ·sincos8(SB), NOSPLIT, $0-56
	MOVQ         n+0(FP), CX
	MOVQ         cs+8(FP), DI
	MOVQ         sn+16(FP), SI
	MOVQ         z+24(FP), R9
	VBROADCASTSD s+32(FP), Z12
	VBROADCASTSD a+40(FP), Z31
	VMULPD       ·sinHalf+0(SB), Z31, Z16
	VMULPD       ·sinHalf+64(SB), Z31, Z17
	VMULPD       ·cosHalf+0(SB), Z31, Z18
	VMULPD       ·cosHalf+64(SB), Z31, Z19
	VBROADCASTSD K_INVTHETA, Z20
	VBROADCASTSD K_MAGIC, Z21
	VBROADCASTSD K_THETAA, Z22
	VBROADCASTSD K_THETAB, Z23
	VBROADCASTSD K_S7, Z24
	VBROADCASTSD K_S5, Z25
	VBROADCASTSD K_C8, Z26
	VBROADCASTSD K_C6, Z27
	VBROADCASTSD K_SIGN, Z28
	VBROADCASTSD K_HALF, Z15
	VBROADCASTSD K_LIMIT, Z14
	VBROADCASTSD K_ABS, Z13
	XORQ         AX, AX
	TESTQ        CX, CX
	JE           zdone

zloop:
	VMOVUPD          (R9)(AX*8), Z0
	VMULPD           Z12, Z0, Z0
	VPANDQ           Z13, Z0, Z1
	VCMPPD           $0x11, Z14, Z1, K1
	KMOVW            K1, BX
	CMPQ             BX, $0xff
	JNE              zdone
	VMOVAPD          Z21, Z1
	VFMADD231PD      Z20, Z0, Z1
	VSUBPD           Z21, Z1, Z2
	VFNMADD231PD     Z22, Z2, Z0
	VFNMADD231PD     Z23, Z2, Z0
	VMOVAPD          Z1, Z3
	VPERMI2PD        Z17, Z16, Z3
	VMOVAPD          Z1, Z4
	VPERMI2PD        Z19, Z18, Z4
	VPTESTMQ         Z15, Z1, K2
	VPXORQ           Z28, Z3, K2, Z3
	VPXORQ           Z28, Z4, K2, Z4
	VMULPD           Z0, Z0, Z5
	VMULPD           Z0, Z5, Z6
	VMOVAPD          Z25, Z7
	VFMADD231PD      Z24, Z5, Z7
	VFMADD213PD.BCST K_S3, Z5, Z7
	VFMADD213PD      Z0, Z6, Z7
	VMOVAPD          Z27, Z8
	VFMADD231PD      Z26, Z5, Z8
	VFMADD213PD.BCST K_C4, Z5, Z8
	VFMADD213PD.BCST K_C2, Z5, Z8
	VMULPD           Z8, Z5, Z8
	VMULPD           Z8, Z3, Z9
	VFMADD231PD      Z7, Z4, Z9
	VADDPD           Z9, Z3, Z9
	VMULPD           Z8, Z4, Z10
	VFNMADD231PD     Z7, Z3, Z10
	VADDPD           Z10, Z4, Z10
	VMOVUPD          Z10, (DI)(AX*8)
	VMOVUPD          Z9, (SI)(AX*8)
	ADDQ             $8, AX
	CMPQ             AX, CX
	JL               zloop

zdone:
	MOVQ AX, ret+48(FP)
	VZEROUPPER
	RET

// func dot8(n int, a, b *float64, s *[8]float64)
//
// dot4 on eight lanes: s[i mod 8] = fma(a[i], b[i], s[i mod 8]) for i < n
// (a multiple of 8).
TEXT ·dot8(SB), NOSPLIT, $0-32
	MOVQ    n+0(FP), CX
	MOVQ    a+8(FP), SI
	MOVQ    b+16(FP), DI
	MOVQ    s+24(FP), DX
	VMOVUPD 0(DX), Z0
	SHRQ    $3, CX

d8loop:
	VMOVUPD     0(SI), Z1
	VFMADD231PD 0(DI), Z1, Z0
	ADDQ        $64, SI
	ADDQ        $64, DI
	DECQ        CX
	JNE         d8loop

	VMOVUPD Z0, 0(DX)
	VZEROUPPER
	RET

// func plain8(n int, w, s, c, x *float64, y float64, acc *[16]float64)
//
// plain4 on eight lanes (f in Z8, ww in Z10, y in Z15). w = t + c' runs as
// the FMA t·1 + c' (the same rounding) on the multiply pipes, which are
// less busy than the adders here.
TEXT ·plain8(SB), NOSPLIT, $0-56
	MOVQ         n+0(FP), CX
	MOVQ         w+8(FP), DX
	MOVQ         s+16(FP), SI
	MOVQ         c+24(FP), DI
	MOVQ         x+32(FP), R8
	VBROADCASTSD y+40(FP), Z15
	VBROADCASTSD ·one(SB), Z14
	MOVQ         acc+48(FP), R9
	VMOVUPD      0(R9), Z8
	VMOVUPD      64(R9), Z10
	XORQ         AX, AX

p8loop:
	VMOVUPD     (R8)(AX*8), Z0
	VFMADD231PD (DX)(AX*8), Z0, Z8
	VMULPD      Z15, Z0, Z0
	VMOVUPD     (SI)(AX*8), Z1
	VADDPD      Z0, Z1, Z2
	VSUBPD      Z1, Z2, Z3
	VSUBPD      Z3, Z2, Z4
	VSUBPD      Z4, Z1, Z4
	VSUBPD      Z3, Z0, Z3
	VADDPD      Z3, Z4, Z4
	VADDPD      (DI)(AX*8), Z4, Z4
	VMOVUPD     Z2, (SI)(AX*8)
	VMOVUPD     Z4, (DI)(AX*8)
	VFMADD213PD Z4, Z14, Z2
	VMOVUPD     Z2, (DX)(AX*8)
	VFMADD231PD Z2, Z2, Z10
	ADDQ        $8, AX
	CMPQ        AX, CX
	JL          p8loop

	VMOVUPD Z8, 0(R9)
	VMOVUPD Z10, 64(R9)
	VZEROUPPER
	RET

// func balanced8(n int, w, t, tc, o, oc, x *float64, it, io float64, acc *[32]float64)
//
// balanced4 on eight lanes (f, ww, pt, po in Z6, Z8, Z10, Z12; it in Z14,
// io in Z15). O = o + oc and T = s + tc' run as the FMAs o·1 + oc and
// s·1 + tc' (the same rounding) on the multiply pipes, which are less busy
// than the adders here.
TEXT ·balanced8(SB), NOSPLIT, $0-80
	MOVQ         n+0(FP), CX
	MOVQ         w+8(FP), DX
	MOVQ         t+16(FP), SI
	MOVQ         tc+24(FP), DI
	MOVQ         o+32(FP), R8
	MOVQ         oc+40(FP), R9
	MOVQ         x+48(FP), R10
	VBROADCASTSD it+56(FP), Z14
	VBROADCASTSD io+64(FP), Z15
	VBROADCASTSD ·one(SB), Z13
	MOVQ         acc+72(FP), R11
	VMOVUPD      0(R11), Z6
	VMOVUPD      64(R11), Z8
	VMOVUPD      128(R11), Z10
	VMOVUPD      192(R11), Z12
	XORQ         AX, AX

b8loop:
	VMOVUPD     (R10)(AX*8), Z0
	VFMADD231PD (DX)(AX*8), Z0, Z6
	VMOVUPD     (R8)(AX*8), Z3
	VFMADD213PD (R9)(AX*8), Z13, Z3
	VMOVUPD     (SI)(AX*8), Z1
	VADDPD      Z0, Z1, Z4
	VSUBPD      Z1, Z4, Z5
	VSUBPD      Z5, Z4, Z2
	VSUBPD      Z2, Z1, Z2
	VSUBPD      Z5, Z0, Z5
	VADDPD      Z5, Z2, Z2
	VADDPD      (DI)(AX*8), Z2, Z2
	VMOVUPD     Z4, (SI)(AX*8)
	VMOVUPD     Z2, (DI)(AX*8)
	VFMADD213PD Z2, Z13, Z4
	VMULPD      Z14, Z4, Z4
	VMULPD      Z15, Z3, Z3
	VSUBPD      Z3, Z4, Z5
	VMOVUPD     Z5, (DX)(AX*8)
	VFMADD231PD Z5, Z5, Z8
	VFMADD231PD Z4, Z5, Z10
	VFMADD231PD Z3, Z5, Z12
	ADDQ        $8, AX
	CMPQ        AX, CX
	JL          b8loop

	VMOVUPD Z6, 0(R11)
	VMOVUPD Z8, 64(R11)
	VMOVUPD Z10, 128(R11)
	VMOVUPD Z12, 192(R11)
	VZEROUPPER
	RET

// func double8(n int, dc, ds, sc, ss *float64, k float64)
//
// double4 (kernel_amd64.s) on eight lanes, k in Z15.
TEXT ·double8(SB), NOSPLIT, $0-48
	MOVQ         n+0(FP), CX
	MOVQ         dc+8(FP), DI
	MOVQ         ds+16(FP), DX
	MOVQ         sc+24(FP), SI
	MOVQ         ss+32(FP), R8
	VBROADCASTSD k+40(FP), Z15
	XORQ         AX, AX

d8dbl:
	VMOVUPD (SI)(AX*8), Z0
	VMOVUPD (R8)(AX*8), Z1
	VSUBPD  Z1, Z0, Z2
	VADDPD  Z1, Z0, Z3
	VMULPD  Z3, Z2, Z2
	VMULPD  Z15, Z2, Z2
	VMULPD  Z1, Z0, Z4
	VADDPD  Z4, Z4, Z4
	VMULPD  Z15, Z4, Z4
	VMOVUPD Z2, (DI)(AX*8)
	VMOVUPD Z4, (DX)(AX*8)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JL      d8dbl

	VZEROUPPER
	RET

// func rbf8(panels, d int, p, x, alpha *float64, ng float64, acc *[8]float64)
//
// Rows.RBFSum's panels (rbf.go) on eight lanes, row i of a panel in lane
// i: the squared distance to x by FMA over the d columns, v = d2·ng (ng =
// −g), ExpNeg(v) (the table of 16 by two-register permutes of expHi in
// Z16–Z17 and expLo in Z18–Z19, the lanes with v < −707 or NaN zeroed),
// then acc[l] += α·e by FMA. acc is read and written.
TEXT ·rbf8(SB), NOSPLIT, $0-56
	MOVQ         panels+0(FP), CX
	MOVQ         d+8(FP), BX
	MOVQ         p+16(FP), SI
	MOVQ         x+24(FP), DI
	MOVQ         alpha+32(FP), R8
	VBROADCASTSD ng+40(FP), Z12
	MOVQ         acc+48(FP), R10
	VMOVUPD      (R10), Z31
	EXP_CONSTS

rpanel:
	VXORPD Z0, Z0, Z0
	MOVQ   DI, R9
	MOVQ   BX, DX

rcol:
	VMOVUPD      (SI), Z1
	VSUBPD.BCST  (R9), Z1, Z1
	VFMADD231PD  Z1, Z1, Z0
	ADDQ         $64, SI
	ADDQ         $8, R9
	DECQ         DX
	JNE          rcol
	VMULPD       Z12, Z0, Z2
	EXPNEG8
	VFMADD231PD  (R8), Z11, Z31
	ADDQ         $64, R8
	DECQ         CX
	JNE          rpanel
	VMOVUPD      Z31, (R10)
	VZEROUPPER
	RET

// func exp8(n int, dst, src *float64, s float64) int
//
// ExpNegScaled (rbf.go) on blocks of eight, n a multiple of 8: v = s·src,
// ExpNeg(v) as rbf8 computes it (lanes with v < −707 or NaN zeroed), until
// a block holds a v above 707 (ExpNeg's math.Exp path, left to the Go
// code). Returns the number of elements written.
TEXT ·exp8(SB), NOSPLIT, $0-40
	MOVQ         n+0(FP), CX
	MOVQ         dst+8(FP), DI
	MOVQ         src+16(FP), SI
	VBROADCASTSD s+24(FP), Z12
	EXP_CONSTS
	VBROADCASTSD ·rbfK+88(SB), Z15
	XORQ         AX, AX

eblock:
	VMULPD       (SI)(AX*8), Z12, Z2
	VCMPPD       $0x1e, Z15, Z2, K2
	KORTESTW     K2, K2
	JNE          edone
	EXPNEG8
	VMOVUPD      Z11, (DI)(AX*8)
	ADDQ         $8, AX
	CMPQ         AX, CX
	JL           eblock

edone:
	MOVQ AX, ret+32(FP)
	VZEROUPPER
	RET

// func sqd8(panels, d int, p, x, dst *float64)
//
// Rows.SqDists (rbf.go) on eight lanes: per panel, rbf8's squared
// distances (FMA over the d columns in order), stored to dst.
TEXT ·sqd8(SB), NOSPLIT, $0-40
	MOVQ panels+0(FP), CX
	MOVQ d+8(FP), BX
	MOVQ p+16(FP), SI
	MOVQ x+24(FP), DI
	MOVQ dst+32(FP), R8

spanel:
	VXORPD Z0, Z0, Z0
	MOVQ   DI, R9
	MOVQ   BX, DX

scol:
	VMOVUPD     (SI), Z1
	VSUBPD.BCST (R9), Z1, Z1
	VFMADD231PD Z1, Z1, Z0
	ADDQ        $64, SI
	ADDQ        $8, R9
	DECQ        DX
	JNE         scol
	VMOVUPD     Z0, (R8)
	ADDQ        $64, R8
	DECQ        CX
	JNE         spanel
	VZEROUPPER
	RET

// func rbfRow8(n int, dst *float32, dots, sqs, ys *float64, sq, yi, s float64) int
//
// RBFRow32 (rbf.go) on blocks of eight, n a multiple of 8: the squared
// distance t = max((sq + sqs) − 2·dots, 0) (2·dots as dots + dots, exact),
// v = t·s, EXPNEG8, times yi·ys, rounded to float32. It stops before the
// first block with a v above 707 (ExpNeg's math.Exp range) and returns the
// number of elements it ran. Z0 holds sq, Z1 yi, Z12 s, Z15 707.
TEXT ·rbfRow8(SB), NOSPLIT, $0-72
	MOVQ         n+0(FP), CX
	MOVQ         dst+8(FP), DI
	MOVQ         dots+16(FP), SI
	MOVQ         sqs+24(FP), R8
	MOVQ         ys+32(FP), R9
	VBROADCASTSD sq+40(FP), Z0
	VBROADCASTSD yi+48(FP), Z1
	VBROADCASTSD s+56(FP), Z12
	EXP_CONSTS
	VBROADCASTSD ·rbfK+88(SB), Z15
	XORQ         AX, AX

rrblock:
	VADDPD       (R8)(AX*8), Z0, Z2
	VMOVUPD      (SI)(AX*8), Z3
	VADDPD       Z3, Z3, Z3
	VSUBPD       Z3, Z2, Z2
	VPXORQ       Z4, Z4, Z4
	VMAXPD       Z2, Z4, Z2
	VMULPD       Z12, Z2, Z2
	VCMPPD       $0x1e, Z15, Z2, K2
	KORTESTW     K2, K2
	JNE          rrdone
	EXPNEG8
	VMULPD       (R9)(AX*8), Z1, Z3
	VMULPD       Z3, Z11, Z11
	VCVTPD2PS    Z11, Y11
	VMOVUPS      Y11, (DI)(AX*4)
	ADDQ         $8, AX
	CMPQ         AX, CX
	JL           rrblock

rrdone:
	MOVQ AX, ret+64(FP)
	VZEROUPPER
	RET

// func wssMax8(n int, y, gr *float64, st *int8, c *wssConsts, v *[8]float64, idx *[8]int64)
//
// WSSMax (wss.go) on blocks of eight, n a multiple of 8: each lane keeps
// its largest eligible v_t, with ≥, and that t, from −Inf and −1, and
// stores them to v and idx. Z0: the lanes' maxima, Z1 their indices, Z2 the
// block's indices, Z3 eight, Z4 skipPos, Z5 skipNeg, Z6 zero, Z7 −0.
TEXT ·wssMax8(SB), NOSPLIT, $0-56
	MOVQ         n+0(FP), CX
	MOVQ         y+8(FP), SI
	MOVQ         gr+16(FP), DI
	MOVQ         st+24(FP), R8
	MOVQ         c+32(FP), R9
	MOVQ         v+40(FP), R10
	MOVQ         idx+48(FP), R11
	VBROADCASTSD ·wssNegInf(SB), Z0
	VPTERNLOGQ   $0xff, Z1, Z1, Z1
	VMOVDQU64    ·wssIota(SB), Z2
	VPBROADCASTQ ·wssInc(SB), Z3
	VPADDQ       Z3, Z3, Z3
	VPBROADCASTQ 0(R9), Z4
	VPBROADCASTQ 32(R9), Z5
	VPXORQ       Z6, Z6, Z6
	VPBROADCASTQ ·wssSign(SB), Z7
	XORQ         AX, AX

wm8block:
	VMOVUPD   (SI)(AX*8), Z8
	VCMPPD    $0x1e, Z6, Z8, K1
	VPMOVSXBQ (R8)(AX*1), Z9
	VMOVDQA64 Z5, Z10
	VMOVDQA64 Z4, K1, Z10
	VPCMPQ    $4, Z10, Z9, K2
	VMOVUPD   (DI)(AX*8), Z11
	VPXORQ    Z7, Z11, Z12
	VMOVDQA64 Z12, K1, Z11
	VCMPPD    $0x1d, Z0, Z11, K2, K3
	VMOVDQA64 Z11, K3, Z0
	VMOVDQA64 Z2, K3, Z1
	VPADDQ    Z3, Z2, Z2
	ADDQ      $8, AX
	CMPQ      AX, CX
	JL        wm8block
	VMOVUPD   Z0, (R10)
	VMOVDQU64 Z1, (R11)
	VZEROUPPER
	RET

// func wssSecond8(n int, q *float32, qd, y, gr *float64, st *int8, c *wssConsts, v2, vm *[8]float64, idx *[8]int64)
//
// WSSSecond (wss.go) on blocks of eight, n a multiple of 8: each lane
// keeps its largest eligible w_t (≥) and its least −d²/quad with d > 0
// (≤) and that t. Z0: the lanes' maxima, Z1 their minima, Z2 the minima's
// indices, Z3 the block's indices, Z4 eight, Z5 skipPos, Z6 skipNeg, Z7
// zero, Z8 −0, Z9 gmax, Z10 qdi, Z11 2·yi, Z12 tau. quad is a + b, then
// a − b where y > 0 (a masked subtraction), with a = qdi + qd, b = (2·yi)·q.
TEXT ·wssSecond8(SB), NOSPLIT, $0-80
	MOVQ         n+0(FP), CX
	MOVQ         q+8(FP), SI
	MOVQ         qd+16(FP), DI
	MOVQ         y+24(FP), R8
	MOVQ         gr+32(FP), R9
	MOVQ         st+40(FP), R10
	MOVQ         c+48(FP), R11
	VBROADCASTSD ·wssNegInf(SB), Z0
	VBROADCASTSD ·wssPosInf(SB), Z1
	VPTERNLOGQ   $0xff, Z2, Z2, Z2
	VMOVDQU64    ·wssIota(SB), Z3
	VPBROADCASTQ ·wssInc(SB), Z4
	VPADDQ       Z4, Z4, Z4
	VPBROADCASTQ 0(R11), Z5
	VPBROADCASTQ 32(R11), Z6
	VPXORQ       Z7, Z7, Z7
	VPBROADCASTQ ·wssSign(SB), Z8
	VBROADCASTSD 64(R11), Z9
	VBROADCASTSD 96(R11), Z10
	VBROADCASTSD 128(R11), Z11
	VBROADCASTSD 160(R11), Z12
	XORQ         AX, AX

ws8block:
	VMOVUPD   (R8)(AX*8), Z13
	VCMPPD    $0x1e, Z7, Z13, K1
	VPMOVSXBQ (R10)(AX*1), Z14
	VMOVDQA64 Z6, Z15
	VMOVDQA64 Z5, K1, Z15
	VPCMPQ    $4, Z15, Z14, K2
	VMOVUPD   (R9)(AX*8), Z16
	VPXORQ    Z8, Z16, Z17
	VMOVDQA64 Z16, K1, Z17
	VCMPPD    $0x1d, Z0, Z17, K2, K3
	VMOVDQA64 Z17, K3, Z0
	VADDPD    Z17, Z9, Z18
	VCMPPD    $0x1e, Z7, Z18, K2, K4
	VADDPD    (DI)(AX*8), Z10, Z19
	VCVTPS2PD (SI)(AX*4), Z20
	VMULPD    Z20, Z11, Z20
	VADDPD    Z20, Z19, Z21
	VSUBPD    Z20, Z19, K1, Z21
	VCMPPD    $0x12, Z7, Z21, K5
	VMOVDQA64 Z12, K5, Z21
	VMULPD    Z18, Z18, Z22
	VPXORQ    Z8, Z22, Z22
	VDIVPD    Z21, Z22, Z22
	VCMPPD    $0x12, Z1, Z22, K4, K6
	VMOVDQA64 Z22, K6, Z1
	VMOVDQA64 Z3, K6, Z2
	VPADDQ    Z4, Z3, Z3
	ADDQ      $8, AX
	CMPQ      AX, CX
	JL        ws8block
	MOVQ      v2+56(FP), DX
	VMOVUPD   Z0, (DX)
	MOVQ      vm+64(FP), DX
	VMOVUPD   Z1, (DX)
	MOVQ      idx+72(FP), DX
	VMOVDQU64 Z2, (DX)
	VZEROUPPER
	RET

// func panelDots8(np, d int, p, x, dst *float64)
//
// PanelDots4 (rbf.go) on eight lanes: per panel, Dot4's four sums by
// column index mod 4 (Z0–Z3, each product rounded then added in order),
// the last d mod 4 columns added to Z0, then (Z0 + Z1) + (Z2 + Z3).
TEXT ·panelDots8(SB), NOSPLIT, $0-40
	MOVQ np+0(FP), CX
	MOVQ d+8(FP), BX
	MOVQ p+16(FP), SI
	MOVQ x+24(FP), DI
	MOVQ dst+32(FP), DX
	MOVQ BX, R10
	SHRQ $2, R10
	MOVQ BX, R11
	ANDQ $3, R11

pd8panel:
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	MOVQ   DI, R9
	MOVQ   R10, R8
	TESTQ  R8, R8
	JE     pd8tail

pd8block:
	VBROADCASTSD 0(R9), Z4
	VMULPD       0(SI), Z4, Z4
	VADDPD       Z4, Z0, Z0
	VBROADCASTSD 8(R9), Z5
	VMULPD       64(SI), Z5, Z5
	VADDPD       Z5, Z1, Z1
	VBROADCASTSD 16(R9), Z6
	VMULPD       128(SI), Z6, Z6
	VADDPD       Z6, Z2, Z2
	VBROADCASTSD 24(R9), Z7
	VMULPD       192(SI), Z7, Z7
	VADDPD       Z7, Z3, Z3
	ADDQ         $256, SI
	ADDQ         $32, R9
	DECQ         R8
	JNE          pd8block

pd8tail:
	MOVQ  R11, R8
	TESTQ R8, R8
	JE    pd8sum

pd8one:
	VBROADCASTSD 0(R9), Z4
	VMULPD       0(SI), Z4, Z4
	VADDPD       Z4, Z0, Z0
	ADDQ         $64, SI
	ADDQ         $8, R9
	DECQ         R8
	JNE          pd8one

pd8sum:
	VADDPD  Z1, Z0, Z0
	VADDPD  Z3, Z2, Z2
	VADDPD  Z2, Z0, Z0
	VMOVUPD Z0, 0(DX)
	ADDQ    $64, DX
	DECQ    CX
	JNE     pd8panel
	VZEROUPPER
	RET

// func expShift8(n int, dst *float64, gam, m float64)
//
// ExpShiftRow (expshift.go) on blocks of eight, n a multiple of 8: the
// loop's operations unfused, in its order, the table entry by a gather.
// Z0 holds gam, Z1 m, Z2–Z14 expShiftK.
TEXT ·expShift8(SB), NOSPLIT, $0-32
	MOVQ         n+0(FP), CX
	MOVQ         dst+8(FP), DI
	VBROADCASTSD gam+16(FP), Z0
	VBROADCASTSD m+24(FP), Z1
	VBROADCASTSD ·expShiftK+0(SB), Z2
	VBROADCASTSD ·expShiftK+8(SB), Z3
	VBROADCASTSD ·expShiftK+16(SB), Z4
	VBROADCASTSD ·expShiftK+24(SB), Z5
	VBROADCASTSD ·expShiftK+32(SB), Z6
	VBROADCASTSD ·expShiftK+40(SB), Z7
	VBROADCASTSD ·expShiftK+48(SB), Z8
	VBROADCASTSD ·expShiftK+56(SB), Z9
	VBROADCASTSD ·expShiftK+64(SB), Z10
	VBROADCASTSD ·expShiftK+72(SB), Z11
	VPBROADCASTQ ·expShiftK+80(SB), Z12
	VPBROADCASTQ ·expShiftK+88(SB), Z13
	VPBROADCASTQ ·expShiftK+96(SB), Z14
	LEAQ         ·expShiftTable(SB), R8
	XORQ         AX, AX

es8block:
	VMOVUPD    (DI)(AX*8), Z15
	VSUBPD     Z1, Z15, Z15
	VMULPD     Z15, Z0, Z15
	VMINPD     Z15, Z2, Z15
	VMULPD     Z3, Z15, Z16
	VADDPD     Z4, Z16, Z16
	VSUBPD     Z4, Z16, Z17
	VMULPD     Z5, Z17, Z18
	VSUBPD     Z18, Z15, Z18
	VMULPD     Z6, Z17, Z19
	VSUBPD     Z19, Z18, Z18
	VMULPD     Z11, Z18, Z19
	VSUBPD     Z19, Z10, Z19
	VMULPD     Z19, Z18, Z19
	VSUBPD     Z19, Z9, Z19
	VMULPD     Z19, Z18, Z19
	VSUBPD     Z19, Z8, Z19
	VMULPD     Z19, Z18, Z19
	VSUBPD     Z19, Z7, Z19
	VMULPD     Z19, Z18, Z19
	VSUBPD     Z19, Z7, Z19
	VPANDQ     Z12, Z16, Z20
	VPSRLQ     $8, Z16, Z21
	VPANDQ     Z13, Z21, Z21
	VPSRLQ     $1, Z21, Z22
	VPSUBQ     Z22, Z21, Z23
	VPSUBQ     Z22, Z14, Z22
	VPSLLQ     $52, Z22, Z22
	VPSUBQ     Z23, Z14, Z23
	VPSLLQ     $52, Z23, Z23
	KXNORW     K1, K1, K1
	VGATHERQPD (R8)(Z20*8), K1, Z24
	VMULPD     Z19, Z24, Z24
	VMULPD     Z22, Z24, Z24
	VMULPD     Z23, Z24, Z24
	VMOVUPD    Z24, (DI)(AX*8)
	ADDQ       $8, AX
	CMPQ       AX, CX
	JL         es8block
	VZEROUPPER
	RET

// func panelSeq8(np, d int, p, x, dst *float64)
//
// PanelDotsSeq (rbf.go) on eight lanes: per panel, each lane's products
// added in column order (a product, rounded, then the sum).
TEXT ·panelSeq8(SB), NOSPLIT, $0-40
	MOVQ np+0(FP), CX
	MOVQ d+8(FP), BX
	MOVQ p+16(FP), SI
	MOVQ x+24(FP), DI
	MOVQ dst+32(FP), DX

ps8panel:
	VPXORQ Z0, Z0, Z0
	MOVQ   DI, R9
	MOVQ   BX, R8

ps8col:
	VBROADCASTSD 0(R9), Z1
	VMULPD       0(SI), Z1, Z1
	VADDPD       Z1, Z0, Z0
	ADDQ         $64, SI
	ADDQ         $8, R9
	DECQ         R8
	JNE          ps8col
	VMOVUPD      Z0, 0(DX)
	ADDQ         $64, DX
	DECQ         CX
	JNE          ps8panel
	VZEROUPPER
	RET

// func accumScaled8(n int, s, c, v *float64, a float64)
//
// AccumScaled (expshift.go) on blocks of eight, n a multiple of 8: x = a·v,
// t = s + x, b = t − s, c += (s − (t − b)) + (x − b), s = t, unfused.
TEXT ·accumScaled8(SB), NOSPLIT, $0-40
	MOVQ         n+0(FP), CX
	MOVQ         s+8(FP), DI
	MOVQ         c+16(FP), SI
	MOVQ         v+24(FP), DX
	VBROADCASTSD a+32(FP), Z0
	XORQ         AX, AX

ac8block:
	VMULPD  (DX)(AX*8), Z0, Z1
	VMOVUPD (DI)(AX*8), Z2
	TWOSUM(Z2, Z1, Z3, Z4, Z5)
	VADDPD  (SI)(AX*8), Z5, Z5
	VMOVUPD Z5, (SI)(AX*8)
	VMOVUPD Z3, (DI)(AX*8)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JL      ac8block
	VZEROUPPER
	RET

// func plainDecay8(n int, w, s, c, x *float64, y, lam float64, acc *[8]float64)
//
// PlainDecay (mam.go) on blocks of eight, n a multiple of 8: (s, c)
// scaled by lam with the product's rounding error (VFMSUB) into c, y·x
// added by TwoSum, w = s + c, ww's lanes (Z8) by FMA. Z13 holds lam, Z15 y.
TEXT ·plainDecay8(SB), NOSPLIT, $0-64
	MOVQ         n+0(FP), CX
	MOVQ         w+8(FP), DX
	MOVQ         s+16(FP), SI
	MOVQ         c+24(FP), DI
	MOVQ         x+32(FP), R10
	VBROADCASTSD y+40(FP), Z15
	VBROADCASTSD lam+48(FP), Z13
	MOVQ         acc+56(FP), R11
	VMOVUPD      0(R11), Z8
	XORQ         AX, AX

pd8loop:
	VMOVUPD     (SI)(AX*8), Z1
	VMULPD      Z13, Z1, Z2
	VMOVUPD     (DI)(AX*8), Z3
	VMULPD      Z13, Z3, Z3
	VMOVAPD     Z2, Z4
	VFMSUB231PD Z13, Z1, Z4
	VADDPD      Z4, Z3, Z3
	VMULPD      (R10)(AX*8), Z15, Z0
	TWOSUM(Z2, Z0, Z5, Z6, Z7)
	VADDPD      Z7, Z3, Z3
	VMOVUPD     Z5, (SI)(AX*8)
	VMOVUPD     Z3, (DI)(AX*8)
	VADDPD      Z3, Z5, Z5
	VMOVUPD     Z5, (DX)(AX*8)
	VFMADD231PD Z5, Z5, Z8
	ADDQ        $8, AX
	CMPQ        AX, CX
	JL          pd8loop
	VMOVUPD     Z8, 0(R11)
	VZEROUPPER
	RET

// func balancedDecay8(n int, w, t, tc, o, oc, x *float64, it, io, lam float64, acc *[32]float64)
//
// BalancedDecay (mam.go) on blocks of eight, n a multiple of 8: both
// classes' sums scaled by lam as in plainDecay8, x added to (t, tc), then
// balanced8's derived values (ww, pt, po lanes in Z8, Z10, Z12). Z13 holds
// lam, Z14 it, Z15 io.
TEXT ·balancedDecay8(SB), NOSPLIT, $0-88
	MOVQ         n+0(FP), CX
	MOVQ         w+8(FP), DX
	MOVQ         t+16(FP), SI
	MOVQ         tc+24(FP), DI
	MOVQ         o+32(FP), R8
	MOVQ         oc+40(FP), R9
	MOVQ         x+48(FP), R10
	VBROADCASTSD it+56(FP), Z14
	VBROADCASTSD io+64(FP), Z15
	VBROADCASTSD lam+72(FP), Z13
	MOVQ         acc+80(FP), R11
	VMOVUPD      64(R11), Z8
	VMOVUPD      128(R11), Z10
	VMOVUPD      192(R11), Z12
	XORQ         AX, AX

bd8loop:
	VMOVUPD     (SI)(AX*8), Z1
	VMULPD      Z13, Z1, Z2
	VMOVUPD     (DI)(AX*8), Z3
	VMULPD      Z13, Z3, Z3
	VMOVAPD     Z2, Z4
	VFMSUB231PD Z13, Z1, Z4
	VADDPD      Z4, Z3, Z3
	VMOVUPD     (R10)(AX*8), Z0
	TWOSUM(Z2, Z0, Z5, Z6, Z7)
	VADDPD      Z7, Z3, Z3
	VMOVUPD     Z5, (SI)(AX*8)
	VMOVUPD     Z3, (DI)(AX*8)
	VMOVUPD     (R8)(AX*8), Z1
	VMULPD      Z13, Z1, Z2
	VMOVUPD     (R9)(AX*8), Z4
	VMULPD      Z13, Z4, Z4
	VMOVAPD     Z2, Z6
	VFMSUB231PD Z13, Z1, Z6
	VADDPD      Z6, Z4, Z4
	VMOVUPD     Z2, (R8)(AX*8)
	VMOVUPD     Z4, (R9)(AX*8)
	VADDPD      Z3, Z5, Z5
	VADDPD      Z4, Z2, Z2
	VMULPD      Z14, Z5, Z5
	VMULPD      Z15, Z2, Z2
	VSUBPD      Z2, Z5, Z6
	VMOVUPD     Z6, (DX)(AX*8)
	VFMADD231PD Z6, Z6, Z8
	VFMADD231PD Z5, Z6, Z10
	VFMADD231PD Z2, Z6, Z12
	ADDQ        $8, AX
	CMPQ        AX, CX
	JL          bd8loop
	VMOVUPD     Z8, 64(R11)
	VMOVUPD     Z10, 128(R11)
	VMOVUPD     Z12, 192(R11)
	VZEROUPPER
	RET

// func welford8(n int, mean, meanC, m2, m2C, inv, x *float64, invN, floor float64)
//
// WelfordAdd (expshift.go) on blocks of eight, n a multiple of 8. Z14
// holds invN, Z15 floor, Z13 one.
TEXT ·welford8(SB), NOSPLIT, $0-72
	MOVQ         n+0(FP), CX
	MOVQ         mean+8(FP), SI
	MOVQ         meanC+16(FP), DI
	MOVQ         m2+24(FP), R8
	MOVQ         m2C+32(FP), R9
	MOVQ         inv+40(FP), R10
	MOVQ         x+48(FP), R11
	VBROADCASTSD invN+56(FP), Z14
	VBROADCASTSD floor+64(FP), Z15
	VBROADCASTSD ·one(SB), Z13
	XORQ         AX, AX

wf8loop:
	VMOVUPD (R11)(AX*8), Z0
	VMOVUPD (SI)(AX*8), Z1
	VMOVUPD (DI)(AX*8), Z2
	VADDPD  Z2, Z1, Z3
	VSUBPD  Z3, Z0, Z3
	VMULPD  Z14, Z3, Z4
	TWOSUM(Z1, Z4, Z5, Z6, Z7)
	VADDPD  Z7, Z2, Z2
	VMOVUPD Z5, (SI)(AX*8)
	VMOVUPD Z2, (DI)(AX*8)
	VADDPD  Z2, Z5, Z5
	VSUBPD  Z5, Z0, Z5
	VMULPD  Z5, Z3, Z4
	VMOVUPD (R8)(AX*8), Z1
	VMOVUPD (R9)(AX*8), Z2
	TWOSUM(Z1, Z4, Z5, Z6, Z7)
	VADDPD  Z7, Z2, Z2
	VMOVUPD Z5, (R8)(AX*8)
	VMOVUPD Z2, (R9)(AX*8)
	VADDPD  Z2, Z5, Z5
	VMULPD  Z14, Z5, Z5
	VCMPPD  $0x11, Z15, Z5, K1
	VSQRTPD Z5, Z6
	VDIVPD  Z6, Z13, Z6
	VMOVAPD Z13, K1, Z6
	VMOVUPD Z6, (R10)(AX*8)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JL      wf8loop
	VZEROUPPER
	RET

// func levelSums8(n, p int, w, tot, sum, sumC, coef *float64, m int)
//
// LevelSums (levelsum.go) on blocks of eight (levelsums.h).
TEXT ·levelSums8(SB), NOSPLIT, $0-64
	LEVELSUMS(VPXORQ, Z0, Z1, Z2, Z3, 8)

// PANEL32_COL(off, xb, a0, a1, a2, a3): one column of two panels of 16
// rows (the first at off(SI), the second at off(R11)), 8 float32 entries
// per conversion to float64, times the broadcast xb, added to a0..a3 by FMA.
#define PANEL32_COL(off, xb, a0, a1, a2, a3) \
	VCVTPS2PD   off(SI), Z10     \
	VCVTPS2PD   off+32(SI), Z11  \
	VCVTPS2PD   off(R11), Z12    \
	VCVTPS2PD   off+32(R11), Z13 \
	VFMADD231PD Z10, xb, a0      \
	VFMADD231PD Z11, xb, a1      \
	VFMADD231PD Z12, xb, a2      \
	VFMADD231PD Z13, xb, a3

// func gemv32(pairs, n int, p *float32, x, z *float64)
//
// gemv16 two panels at a time (pairs of them, 32 rows each): the same sums
// per row (the even columns by FMA in order, the odd ones, then E + O) in
// eight accumulators of eight rows.
TEXT ·gemv32(SB), NOSPLIT, $0-40
	MOVQ pairs+0(FP), CX
	MOVQ n+8(FP), BX
	MOVQ p+16(FP), SI
	MOVQ x+24(FP), DI
	MOVQ z+32(FP), DX
	MOVQ BX, R10
	SHRQ $1, R10
	MOVQ BX, R12
	SHLQ $6, R12 // a panel's bytes: 16 rows × n × 4

g32pair:
	LEAQ   (SI)(R12*1), R11
	VPXORQ Z0, Z0, Z0
	VPXORQ Z1, Z1, Z1
	VPXORQ Z2, Z2, Z2
	VPXORQ Z3, Z3, Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z6, Z6, Z6
	VPXORQ Z7, Z7, Z7
	MOVQ   DI, R9
	MOVQ   R10, R8
	TESTQ  R8, R8
	JE     g32odd

g32cols:
	VBROADCASTSD 0(R9), Z8
	VBROADCASTSD 8(R9), Z9
	PANEL32_COL(0, Z8, Z0, Z1, Z2, Z3)
	PANEL32_COL(64, Z9, Z4, Z5, Z6, Z7)
	ADDQ         $128, SI
	ADDQ         $128, R11
	ADDQ         $16, R9
	DECQ         R8
	JNE          g32cols

g32odd:
	TESTQ        $1, BX
	JE           g32sum
	VBROADCASTSD 0(R9), Z8
	PANEL32_COL(0, Z8, Z0, Z1, Z2, Z3)
	ADDQ         $64, R11

g32sum:
	VADDPD  Z4, Z0, Z0
	VADDPD  Z5, Z1, Z1
	VADDPD  Z6, Z2, Z2
	VADDPD  Z7, Z3, Z3
	VMOVUPD Z0, 0(DX)
	VMOVUPD Z1, 64(DX)
	VMOVUPD Z2, 128(DX)
	VMOVUPD Z3, 192(DX)
	ADDQ    $256, DX
	MOVQ    R11, SI // past the second panel
	DECQ    CX
	JNE     g32pair

	VZEROUPPER
	RET
