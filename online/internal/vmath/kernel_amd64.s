//go:build amd64 && !purego

#include "textflag.h"

// Every kernel here rounds each product before adding it (VMULPD then
// VADDPD, never an FMA) and keeps the order of every sum of the scalar
// definitions in vmath.go and mam.go: the results are bit-identical to the
// portable Go code.

// The 256-bit constants of sincos4 (sincosK in kernel_amd64.go).
#define SINCOS_N 256
#define K_ABS ·sincosK+0(SB)
#define K_LIMIT ·sincosK+32(SB)
#define K_INVTHETA ·sincosK+64(SB)
#define K_MAGIC ·sincosK+96(SB)
#define K_THETAA ·sincosK+128(SB)
#define K_THETAB ·sincosK+160(SB)
#define K_THETAC ·sincosK+192(SB)
#define K_S3 ·sincosK+224(SB)
#define K_S5 ·sincosK+256(SB)
#define K_C2 ·sincosK+288(SB)
#define K_C4 ·sincosK+320(SB)
#define K_C6 ·sincosK+352(SB)

// SC_CHECK(off, bad): Y0 = x = sn[k+off/8 : +4]; jumps to bad unless
// every |x| < limit (ordered: NaN fails).
#define SC_CHECK(off, bad) \
	VMOVUPD   off(SI)(AX*8), Y0     \
	VANDPD    K_ABS, Y0, Y1         \
	VCMPPD    $0x11, K_LIMIT, Y1, Y1 \
	VMOVMSKPD Y1, BX                \
	CMPQ      BX, $15               \
	JNE       bad

// SC_STAGE1: the reduction of x (Y0): Y0 = r = ((x − q·θa) − q·θb) −
// q·θc, and R10–R13 = 16·(j mod N), the offsets of the lanes' (s_q, c_q)
// in sincosTable, j being the low bits of t = x·(1/θ) + magic (through
// the stack, off the vector pipes).
#define SC_STAGE1 \
	VMULPD  Y9, Y0, Y1         \
	VADDPD  Y8, Y1, Y1         \
	VSUBPD  Y8, Y1, Y2         \
	VMOVUPD Y1, 0(SP)          \
	VMULPD  K_THETAA, Y2, Y3   \
	VSUBPD  Y3, Y0, Y0         \
	VMULPD  K_THETAB, Y2, Y3   \
	VSUBPD  Y3, Y0, Y0         \
	VMULPD  K_THETAC, Y2, Y3   \
	VSUBPD  Y3, Y0, Y0         \
	MOVQ    0(SP), R10         \
	MOVQ    8(SP), R11         \
	MOVQ    16(SP), R12        \
	MOVQ    24(SP), R13        \
	ANDQ    $(SINCOS_N-1), R10 \
	ANDQ    $(SINCOS_N-1), R11 \
	ANDQ    $(SINCOS_N-1), R12 \
	ANDQ    $(SINCOS_N-1), R13 \
	SHLQ    $4, R10            \
	SHLQ    $4, R11            \
	SHLQ    $4, R12            \
	SHLQ    $4, R13

// SC_TABLE: Y5 = s_q, Y6 = c_q of the lanes at offsets R10–R13.
#define SC_TABLE \
	VMOVUPD     (R9)(R10*1), X5         \
	VINSERTF128 $1, (R9)(R12*1), Y5, Y5 \
	VMOVUPD     (R9)(R11*1), X13        \
	VINSERTF128 $1, (R9)(R13*1), Y13, Y13 \
	VUNPCKHPD   Y13, Y5, Y6             \
	VUNPCKLPD   Y13, Y5, Y5

// SC_STAGE2: from r (Y4), s_q (Y5) and c_q (Y6), the block's a·cos and
// a·sin, stored at k = AX, and their squares added to Y14, Y15:
//
//	u = r², sr = r + (r·u)·(−1/6 + u·(1/120)),
//	cm = u·(−0.5 + u·(1/24 − u·(1/720))),
//	sin = s_q + (s_q·cm + c_q·sr), cos = c_q + (c_q·cm − s_q·sr).
#define SC_STAGE2 \
	VMULPD  Y4, Y4, Y10        \
	VMULPD  K_S5, Y10, Y11     \
	VADDPD  K_S3, Y11, Y11     \
	VMULPD  Y10, Y4, Y13       \
	VMULPD  Y11, Y13, Y11      \
	VADDPD  Y11, Y4, Y11       \
	VMULPD  K_C6, Y10, Y12     \
	VMOVUPD K_C4, Y13          \
	VSUBPD  Y12, Y13, Y12      \
	VMULPD  Y12, Y10, Y12      \
	VADDPD  K_C2, Y12, Y12     \
	VMULPD  Y12, Y10, Y12      \
	VMULPD  Y12, Y5, Y10       \
	VMULPD  Y11, Y6, Y13       \
	VADDPD  Y13, Y10, Y10      \
	VADDPD  Y10, Y5, Y10       \
	VMULPD  Y12, Y6, Y13       \
	VMULPD  Y11, Y5, Y4        \
	VSUBPD  Y4, Y13, Y13       \
	VADDPD  Y13, Y6, Y13       \
	VMULPD  Y7, Y10, Y10       \
	VMULPD  Y7, Y13, Y13       \
	VMOVUPD Y13, (DI)(AX*8)    \
	VMOVUPD Y10, (SI)(AX*8)    \
	VMULPD  Y13, Y13, Y4       \
	VADDPD  Y4, Y14, Y14       \
	VMULPD  Y10, Y10, Y4       \
	VADDPD  Y4, Y15, Y15

// PANEL16_COL(base, off, xb, a0, a1, a2, a3) multiplies the 16 entries of
// one column of a panel (at off(base)) by the broadcast xb and adds them
// to the accumulators a0..a3 (the products rounded first: no FMA).
#define PANEL16_COL(base, off, xb, a0, a1, a2, a3) \
	VMULPD off(base), xb, Y10     \
	VMULPD off+32(base), xb, Y11  \
	VMULPD off+64(base), xb, Y12  \
	VMULPD off+96(base), xb, Y13  \
	VADDPD Y10, a0, a0            \
	VADDPD Y11, a1, a1            \
	VADDPD Y12, a2, a2            \
	VADDPD Y13, a3, a3

// func gemv16(panels, n int, p, x, z *float64)
//
// z[16g : 16g+16] = rows of panel g (16 rows × n columns, column-major
// within the panel) times x, for g < panels: the even columns summed in
// order in Y0–Y3, the odd ones in Y4–Y7, then E + O, then the product of
// the last column when n is odd (gonum's Dgemv order).
TEXT ·gemv16(SB), NOSPLIT, $0-40
	MOVQ panels+0(FP), CX
	MOVQ n+8(FP), BX
	MOVQ p+16(FP), SI
	MOVQ x+24(FP), DI
	MOVQ z+32(FP), DX
	MOVQ BX, R10
	SHRQ $1, R10

g16panel:
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	VXORPD Y2, Y2, Y2
	VXORPD Y3, Y3, Y3
	VXORPD Y4, Y4, Y4
	VXORPD Y5, Y5, Y5
	VXORPD Y6, Y6, Y6
	VXORPD Y7, Y7, Y7
	MOVQ   DI, R9
	MOVQ   R10, R8
	TESTQ  R8, R8
	JE     g16sum

g16pair:
	VBROADCASTSD 0(R9), Y8
	VBROADCASTSD 8(R9), Y9
	PANEL16_COL(SI, 0, Y8, Y0, Y1, Y2, Y3)
	PANEL16_COL(SI, 128, Y9, Y4, Y5, Y6, Y7)
	ADDQ         $256, SI
	ADDQ         $16, R9
	DECQ         R8
	JNE          g16pair

g16sum:
	VADDPD Y4, Y0, Y0
	VADDPD Y5, Y1, Y1
	VADDPD Y6, Y2, Y2
	VADDPD Y7, Y3, Y3
	TESTQ  $1, BX
	JE     g16store
	VBROADCASTSD 0(R9), Y8
	PANEL16_COL(SI, 0, Y8, Y0, Y1, Y2, Y3)
	ADDQ         $128, SI

g16store:
	VMOVUPD Y0, 0(DX)
	VMOVUPD Y1, 32(DX)
	VMOVUPD Y2, 64(DX)
	VMOVUPD Y3, 96(DX)
	ADDQ    $128, DX
	DECQ    CX
	JNE     g16panel

	VZEROUPPER
	RET

// func gemv4(panels, n int, p, x, z *float64)
//
// gemv16 for panels of 4 rows (even columns in Y0, odd ones in Y1).
TEXT ·gemv4(SB), NOSPLIT, $0-40
	MOVQ panels+0(FP), CX
	MOVQ n+8(FP), BX
	MOVQ p+16(FP), SI
	MOVQ x+24(FP), DI
	MOVQ z+32(FP), DX
	MOVQ BX, R10
	SHRQ $1, R10

g4panel:
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	MOVQ   DI, R9
	MOVQ   R10, R8
	TESTQ  R8, R8
	JE     g4sum

g4pair:
	VBROADCASTSD 0(R9), Y8
	VBROADCASTSD 8(R9), Y9
	VMULPD       0(SI), Y8, Y10
	VMULPD       32(SI), Y9, Y11
	VADDPD       Y10, Y0, Y0
	VADDPD       Y11, Y1, Y1
	ADDQ         $64, SI
	ADDQ         $16, R9
	DECQ         R8
	JNE          g4pair

g4sum:
	VADDPD Y1, Y0, Y0
	TESTQ  $1, BX
	JE     g4store
	VBROADCASTSD 0(R9), Y8
	VMULPD       0(SI), Y8, Y10
	VADDPD       Y10, Y0, Y0
	ADDQ         $32, SI

g4store:
	VMOVUPD Y0, 0(DX)
	ADDQ    $32, DX
	DECQ    CX
	JNE     g4panel

	VZEROUPPER
	RET

// func sincos4(n int, cs, sn *float64, a float64, acc *[8]float64) int
//
// For k = 0, 4, 8, … < n (n a multiple of 4), while the four arguments
// sn[k:k+4] are all below the fast-path limit in magnitude (NaN is not):
// cs[k+l] = a·cos(sn[k+l]), sn[k+l] = a·sin(sn[k+l]) by the table path of
// Sincos, and acc[l] += cs[k+l]², acc[4+l] += sn[k+l]². Returns the number
// of features mapped.
//
// The loop is software-pipelined: the reduction of block k+1 (stage 1)
// runs with the polynomial and the output of block k (stage 2), so that
// the long chain of each block overlaps with the next one's. Registers:
// Y0–Y3 stage 1, Y4–Y6 and Y10–Y13 stage 2, Y7 a, Y8 magic, Y9 1/θ, Y14
// and Y15 the sums of squares.
TEXT ·sincos4(SB), NOSPLIT, $32-48
	MOVQ         n+0(FP), CX
	MOVQ         cs+8(FP), DI
	MOVQ         sn+16(FP), SI
	VBROADCASTSD a+24(FP), Y7
	VMOVUPD      K_MAGIC, Y8
	VMOVUPD      K_INVTHETA, Y9
	MOVQ         acc+32(FP), R8
	VMOVUPD      0(R8), Y14
	VMOVUPD      32(R8), Y15
	LEAQ         ·sincosTable(SB), R9
	XORQ         AX, AX

	TESTQ CX, CX
	JE    scdone
	SC_CHECK(0, scdone)
	SC_STAGE1
	VMOVAPD Y0, Y4

scloop:
	// Block AX has been through stage 1.
	LEAQ 4(AX), DX
	CMPQ DX, CX
	JGE  sclast
	SC_CHECK(32, sclast)
	SC_TABLE
	SC_STAGE1
	SC_STAGE2
	VMOVAPD Y0, Y4
	ADDQ    $4, AX
	JMP     scloop

sclast:
	SC_TABLE
	SC_STAGE2
	ADDQ $4, AX

scdone:
	VMOVUPD Y14, 0(R8)
	VMOVUPD Y15, 32(R8)
	MOVQ    AX, ret+40(FP)
	VZEROUPPER
	RET

// func dot4(n int, a, b *float64, s *[4]float64)
//
// s[l] += a[i]·b[i] for i ≡ l (mod 4), i < n (n a multiple of 4), in
// order.
TEXT ·dot4(SB), NOSPLIT, $0-32
	MOVQ    n+0(FP), CX
	MOVQ    a+8(FP), SI
	MOVQ    b+16(FP), DI
	MOVQ    s+24(FP), DX
	VMOVUPD 0(DX), Y0
	SHRQ    $2, CX

dotloop:
	VMOVUPD 0(SI), Y1
	VMULPD  0(DI), Y1, Y1
	VADDPD  Y1, Y0, Y0
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNE     dotloop

	VMOVUPD Y0, 0(DX)
	VZEROUPPER
	RET

// func plain4(n int, w, s, c, x *float64, y float64, acc *[2]float64)
//
// PlainPass on n elements (a multiple of 4): acc[0] and acc[1] (the even
// and the odd elements' sums of w²) run in the two lanes of X14.
TEXT ·plain4(SB), NOSPLIT, $0-56
	MOVQ         n+0(FP), CX
	MOVQ         w+8(FP), DX
	MOVQ         s+16(FP), SI
	MOVQ         c+24(FP), DI
	MOVQ         x+32(FP), R8
	VBROADCASTSD y+40(FP), Y15
	MOVQ         acc+48(FP), R9
	VMOVUPD      0(R9), X14
	SHRQ         $2, CX

plloop:
	VMULPD  0(R8), Y15, Y0           // v = y·x
	VMOVUPD 0(SI), Y1                // s
	VADDPD  Y0, Y1, Y2               // t = s + v
	VSUBPD  Y1, Y2, Y3               // bp = t − s
	VSUBPD  Y3, Y2, Y4               // t − bp
	VSUBPD  Y4, Y1, Y4               // s − (t − bp)
	VSUBPD  Y3, Y0, Y5               // v − bp
	VADDPD  Y5, Y4, Y4
	VADDPD  0(DI), Y4, Y6            // c' = c + (…)
	VMOVUPD Y2, 0(SI)
	VMOVUPD Y6, 0(DI)
	VADDPD  Y6, Y2, Y7               // w = t + c'
	VMOVUPD Y7, 0(DX)
	VMULPD  Y7, Y7, Y8
	VADDPD  X8, X14, X14             // elements 0, 1
	VEXTRACTF128 $1, Y8, X9
	VADDPD  X9, X14, X14             // elements 2, 3

	ADDQ $32, DX
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, R8
	DECQ CX
	JNE  plloop

	VMOVUPD X14, 0(R9)
	VZEROUPPER
	RET

// func balanced4(n int, w, t, tc, o, oc, x *float64, it, io, sgn float64, acc *[4]float64)
//
// BalancedPass on n elements (a multiple of 4). The four sums ww, ws, tt,
// oo run in the lanes of Y12: the products of four elements are
// transposed so that each element adds one vector [d², d(T−O), a², c²].
TEXT ·balanced4(SB), NOSPLIT, $0-88
	MOVQ         n+0(FP), CX
	MOVQ         w+8(FP), DX
	MOVQ         t+16(FP), SI
	MOVQ         tc+24(FP), DI
	MOVQ         o+32(FP), R8
	MOVQ         oc+40(FP), R9
	MOVQ         x+48(FP), R10
	VBROADCASTSD it+56(FP), Y15
	VBROADCASTSD io+64(FP), Y14
	VBROADCASTSD sgn+72(FP), Y13
	MOVQ         acc+80(FP), R11
	VMOVUPD      0(R11), Y12
	SHRQ         $2, CX

blloop:
	VMOVUPD 0(R10), Y0               // x
	VMOVUPD 0(SI), Y1                // t
	VADDPD  Y0, Y1, Y2               // s = t + x
	VSUBPD  Y1, Y2, Y3               // bp = s − t
	VSUBPD  Y3, Y2, Y4               // s − bp
	VSUBPD  Y4, Y1, Y4               // t − (s − bp)
	VSUBPD  Y3, Y0, Y5               // x − bp
	VADDPD  Y5, Y4, Y4
	VADDPD  0(DI), Y4, Y4            // tc' = tc + (…)
	VMOVUPD Y2, 0(SI)
	VMOVUPD Y4, 0(DI)
	VADDPD  Y4, Y2, Y2               // T = s + tc'
	VMOVUPD 0(R8), Y0
	VADDPD  0(R9), Y0, Y0            // O = o + oc
	VMULPD  Y15, Y2, Y1              // a = T·it
	VMULPD  Y14, Y0, Y3              // c = O·io
	VSUBPD  Y3, Y1, Y4               // d = a − c
	VMULPD  Y13, Y4, Y5              // w = sgn·d
	VMOVUPD Y5, 0(DX)

	VMULPD Y4, Y4, Y6                // d²
	VSUBPD Y0, Y2, Y7                // T − O
	VMULPD Y7, Y4, Y7                // d·(T − O)
	VMULPD Y1, Y1, Y8                // a²
	VMULPD Y3, Y3, Y9                // c²

	VUNPCKLPD   Y7, Y6, Y10          // [ww0 ws0 ww2 ws2]
	VUNPCKHPD   Y7, Y6, Y11          // [ww1 ws1 ww3 ws3]
	VUNPCKLPD   Y9, Y8, Y6           // [tt0 oo0 tt2 oo2]
	VUNPCKHPD   Y9, Y8, Y7           // [tt1 oo1 tt3 oo3]
	VINSERTF128 $1, X6, Y10, Y8      // element 0
	VINSERTF128 $1, X7, Y11, Y9      // element 1
	VPERM2F128  $0x31, Y6, Y10, Y10  // element 2
	VPERM2F128  $0x31, Y7, Y11, Y11  // element 3
	VADDPD      Y8, Y12, Y12
	VADDPD      Y9, Y12, Y12
	VADDPD      Y10, Y12, Y12
	VADDPD      Y11, Y12, Y12

	ADDQ $32, DX
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, R8
	ADDQ $32, R9
	ADDQ $32, R10
	DECQ CX
	JNE  blloop

	VMOVUPD Y12, 0(R11)
	VZEROUPPER
	RET

// func double4(n int, dc, ds, sc, ss *float64, k float64, acc *[8]float64)
//
// DoubleAngleRFF on n features (a multiple of 4): C = sc[i], S = ss[i],
// dc[i] = ((C − S)·(C + S))·k, ds[i] = ((C·S)·2)·k, acc[0:4] += dc², acc[4:8]
// += ds² lane by lane (products rounded: no FMA).
TEXT ·double4(SB), NOSPLIT, $0-56
	MOVQ         n+0(FP), CX
	MOVQ         dc+8(FP), DI
	MOVQ         ds+16(FP), DX
	MOVQ         sc+24(FP), SI
	MOVQ         ss+32(FP), R8
	VBROADCASTSD k+40(FP), Y15
	MOVQ         acc+48(FP), R9
	VMOVUPD      0(R9), Y13
	VMOVUPD      32(R9), Y14
	SHRQ         $2, CX

dbloop:
	VMOVUPD 0(SI), Y0
	VMOVUPD 0(R8), Y1
	VSUBPD  Y1, Y0, Y2
	VADDPD  Y1, Y0, Y3
	VMULPD  Y3, Y2, Y2
	VMULPD  Y15, Y2, Y2
	VMULPD  Y1, Y0, Y4
	VADDPD  Y4, Y4, Y4
	VMULPD  Y15, Y4, Y4
	VMOVUPD Y2, 0(DI)
	VMOVUPD Y4, 0(DX)
	VMULPD  Y2, Y2, Y2
	VADDPD  Y2, Y13, Y13
	VMULPD  Y4, Y4, Y4
	VADDPD  Y4, Y14, Y14
	ADDQ    $32, SI
	ADDQ    $32, R8
	ADDQ    $32, DI
	ADDQ    $32, DX
	DECQ    CX
	JNE     dbloop

	VMOVUPD Y13, 0(R9)
	VMOVUPD Y14, 32(R9)
	VZEROUPPER
	RET
