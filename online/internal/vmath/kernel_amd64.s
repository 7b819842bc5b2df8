//go:build amd64 && !purego

#include "textflag.h"
#include "twosum.h"
#include "levelsums.h"

// AVX2 and FMA kernels: four lanes per register. Every kernel computes its
// Go definition (vmath.go, mam.go, double.go) bit for bit: the same
// operations in the same order, FMA exactly where the definition has
// math.FMA, and the sums of eight lanes in two registers (lanes 0–3 and
// 4–7, elements i ≡ l mod 8 in lane l).

// The 256-bit constants of the sin/cos kernels (sincosK in
// kernel_amd64.go).
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

// SC4(bad): the sin/cos of the four arguments x = s·z at z[AX] (z in
// DX, s at 544(SP)), written as a·cos to cs[AX] and a·sin to sn[AX], AX +=
// 4; jumps to bad (AX unchanged, nothing written) unless every |x| <
// limit (ordered: NaN fails). The table of scaled (sin, cos) pairs is at
// 32(SP), t is passed through 0(SP).
#define SC4(bad) \
	VMOVUPD         (DX)(AX*8), Y0       \
	VMULPD          544(SP), Y0, Y0      \
	VANDPD          K_ABS, Y0, Y1        \
	VCMPPD          $0x11, K_LIMIT, Y1, Y1 \
	VMOVMSKPD       Y1, BX               \
	CMPQ            BX, $15              \
	JNE             bad                  \
	VMOVUPD         K_MAGIC, Y1          \
	VFMADD231PD     K_INVTHETA, Y0, Y1   \ // t = x·(1/θ) + magic
	VSUBPD          K_MAGIC, Y1, Y2      \ // q
	VFNMADD231PD    K_THETAA, Y2, Y0     \ // r = x − q·θa
	VFNMADD231PD    K_THETAB, Y2, Y0     \ // r −= q·θb
	VMOVDQU         Y1, 0(SP)            \
	MOVQ            0(SP), R10           \
	MOVQ            8(SP), R11           \
	MOVQ            16(SP), R12          \
	MOVQ            24(SP), R13          \
	ANDQ            $31, R10             \
	ANDQ            $31, R11             \
	ANDQ            $31, R12             \
	ANDQ            $31, R13             \
	SHLQ            $4, R10              \
	SHLQ            $4, R11              \
	SHLQ            $4, R12              \
	SHLQ            $4, R13              \
	VMOVUPD         32(SP)(R10*1), X3    \
	VINSERTF128     $1, 32(SP)(R12*1), Y3, Y3 \
	VMOVUPD         32(SP)(R11*1), X4    \
	VINSERTF128     $1, 32(SP)(R13*1), Y4, Y4 \
	VUNPCKLPD       Y4, Y3, Y5           \ // a·s_q
	VUNPCKHPD       Y4, Y3, Y6           \ // a·c_q
	VMULPD          Y0, Y0, Y7           \ // u = r²
	VMULPD          Y0, Y7, Y8           \ // r³ = u·r
	VMOVUPD         K_S5, Y9             \
	VFMADD231PD     K_S7, Y7, Y9         \
	VFMADD213PD     K_S3, Y7, Y9         \
	VFMADD213PD     Y0, Y8, Y9           \ // sin r = r³·p + r
	VMOVUPD         K_C6, Y10            \
	VFMADD231PD     K_C8, Y7, Y10        \
	VFMADD213PD     K_C4, Y7, Y10        \
	VFMADD213PD     K_C2, Y7, Y10        \
	VMULPD          Y10, Y7, Y10         \ // cos r − 1 = u·p
	VMULPD          Y10, Y5, Y11         \
	VFMADD231PD     Y9, Y6, Y11          \
	VADDPD          Y11, Y5, Y11         \ // a·sin x
	VMULPD          Y10, Y6, Y2          \
	VFNMADD231PD    Y9, Y5, Y2           \
	VADDPD          Y2, Y6, Y2           \ // a·cos x
	VMOVUPD         Y2, (DI)(AX*8)       \
	VMOVUPD         Y11, (SI)(AX*8)      \
	ADDQ            $4, AX

// PANEL16_COL(off, xb, a0, a1, a2, a3): the 16 float32 entries of one
// column of a panel (at off(SI)), converted to float64, times the
// broadcast xb, added to a0..a3 by FMA.
#define PANEL16_COL(off, xb, a0, a1, a2, a3) \
	VCVTPS2PD   off(SI), Y10    \
	VCVTPS2PD   off+16(SI), Y11 \
	VCVTPS2PD   off+32(SI), Y12 \
	VCVTPS2PD   off+48(SI), Y13 \
	VFMADD231PD Y10, xb, a0     \
	VFMADD231PD Y11, xb, a1     \
	VFMADD231PD Y12, xb, a2     \
	VFMADD231PD Y13, xb, a3

// func gemv16(panels, n int, p *float32, x, z *float64)
//
// z[16g : 16g+16] = rows of panel g (16 rows × n columns, column-major
// within the panel) times x, for g < panels: the even columns summed by
// FMA in order in Y0–Y3, the odd ones in Y4–Y7, then E + O.
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
	JE     g16odd

g16pair:
	VBROADCASTSD 0(R9), Y8
	VBROADCASTSD 8(R9), Y9
	PANEL16_COL(0, Y8, Y0, Y1, Y2, Y3)
	PANEL16_COL(64, Y9, Y4, Y5, Y6, Y7)
	ADDQ         $128, SI
	ADDQ         $16, R9
	DECQ         R8
	JNE          g16pair

g16odd:
	TESTQ        $1, BX
	JE           g16sum
	VBROADCASTSD 0(R9), Y8
	PANEL16_COL(0, Y8, Y0, Y1, Y2, Y3)
	ADDQ         $64, SI

g16sum:
	VADDPD  Y4, Y0, Y0
	VADDPD  Y5, Y1, Y1
	VADDPD  Y6, Y2, Y2
	VADDPD  Y7, Y3, Y3
	VMOVUPD Y0, 0(DX)
	VMOVUPD Y1, 32(DX)
	VMOVUPD Y2, 64(DX)
	VMOVUPD Y3, 96(DX)
	ADDQ    $128, DX
	DECQ    CX
	JNE     g16panel

	VZEROUPPER
	RET

// func gemv4(panels, n int, p *float32, x, z *float64)
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
	JE     g4odd

g4pair:
	VBROADCASTSD 0(R9), Y8
	VBROADCASTSD 8(R9), Y9
	VCVTPS2PD    0(SI), Y10
	VCVTPS2PD    16(SI), Y11
	VFMADD231PD  Y10, Y8, Y0
	VFMADD231PD  Y11, Y9, Y1
	ADDQ         $32, SI
	ADDQ         $16, R9
	DECQ         R8
	JNE          g4pair

g4odd:
	TESTQ        $1, BX
	JE           g4sum
	VBROADCASTSD 0(R9), Y8
	VCVTPS2PD    0(SI), Y10
	VFMADD231PD  Y10, Y8, Y0
	ADDQ         $16, SI

g4sum:
	VADDPD  Y1, Y0, Y0
	VMOVUPD Y0, 0(DX)
	ADDQ    $32, DX
	DECQ    CX
	JNE     g4panel

	VZEROUPPER
	RET

// func sincos4(n int, cs, sn, z *float64, s, a float64) int
//
// For k = 0, 4, 8, … < n (n a multiple of 4), while the four arguments
// x = s·z[k:k+4] are all below the fast-path limit in magnitude:
// cs[k+l] = a·cos(x), sn[k+l] = a·sin(x) as sincosScaled computes them.
// Returns the number of features mapped.
TEXT ·sincos4(SB), NOSPLIT, $576-56
	MOVQ         n+0(FP), CX
	MOVQ         cs+8(FP), DI
	MOVQ         sn+16(FP), SI
	VBROADCASTSD s+32(FP), Y15
	VMOVUPD      Y15, 544(SP)
	VBROADCASTSD a+40(FP), Y15
	LEAQ         ·sincosPairs(SB), R9
	XORQ         DX, DX

sctable:
	VMULPD  (R9)(DX*1), Y15, Y0
	VMOVUPD Y0, 32(SP)(DX*1)
	ADDQ    $32, DX
	CMPQ    DX, $512
	JL      sctable

	MOVQ z+24(FP), DX
	XORQ AX, AX

scloop:
	CMPQ AX, CX
	JGE  scdone
	SC4(scdone)
	JMP  scloop

scdone:
	MOVQ AX, ret+48(FP)
	VZEROUPPER
	RET

// func dot4(n int, a, b *float64, s *[8]float64)
//
// s[i mod 8] = fma(a[i], b[i], s[i mod 8]) for i < n (a multiple of 8), in
// order.
TEXT ·dot4(SB), NOSPLIT, $0-32
	MOVQ    n+0(FP), CX
	MOVQ    a+8(FP), SI
	MOVQ    b+16(FP), DI
	MOVQ    s+24(FP), DX
	VMOVUPD 0(DX), Y0
	VMOVUPD 32(DX), Y1
	SHRQ    $3, CX

dotloop:
	VMOVUPD     0(SI), Y2
	VMOVUPD     32(SI), Y3
	VFMADD231PD 0(DI), Y2, Y0
	VFMADD231PD 32(DI), Y3, Y1
	ADDQ        $64, SI
	ADDQ        $64, DI
	DECQ        CX
	JNE         dotloop

	VMOVUPD Y0, 0(DX)
	VMOVUPD Y1, 32(DX)
	VZEROUPPER
	RET

// PLAIN4(off, f, ww): PlainFused on the four elements at off + AX·8; y in
// Y15. w = t + c' runs as the FMA t·1 + c' (see BAL4).
#define PLAIN4(off, f, ww) \
	VMOVUPD      off(R8)(AX*8), Y0    \ // x
	VFMADD231PD  off(DX)(AX*8), Y0, f \ // f += w·x
	VMULPD       Y15, Y0, Y0          \ // v = y·x
	VMOVUPD      off(SI)(AX*8), Y1    \ // s
	VADDPD       Y0, Y1, Y2           \ // t = s + v
	VSUBPD       Y1, Y2, Y3           \ // b = t − s
	VSUBPD       Y3, Y2, Y4           \ // t − b
	VSUBPD       Y4, Y1, Y4           \ // s − (t − b)
	VSUBPD       Y3, Y0, Y3           \ // v − b
	VADDPD       Y3, Y4, Y4           \
	VADDPD       off(DI)(AX*8), Y4, Y4 \ // c' = c + (…)
	VMOVUPD      Y2, off(SI)(AX*8)    \
	VMOVUPD      Y4, off(DI)(AX*8)    \
	VFMADD132PD  ·oneY(SB), Y4, Y2    \ // w = t + c'
	VMOVUPD      Y2, off(DX)(AX*8)    \
	VFMADD231PD  Y2, Y2, ww

// func plain4(n int, w, s, c, x *float64, y float64, acc *[16]float64)
//
// PlainFused on n elements (a multiple of 8): acc[0:8] the score's lanes,
// acc[8:16] ‖w‖²'s (Y8/Y9, Y10/Y11).
TEXT ·plain4(SB), NOSPLIT, $0-56
	MOVQ         n+0(FP), CX
	MOVQ         w+8(FP), DX
	MOVQ         s+16(FP), SI
	MOVQ         c+24(FP), DI
	MOVQ         x+32(FP), R8
	VBROADCASTSD y+40(FP), Y15
	MOVQ         acc+48(FP), R9
	VMOVUPD      0(R9), Y8
	VMOVUPD      32(R9), Y9
	VMOVUPD      64(R9), Y10
	VMOVUPD      96(R9), Y11
	XORQ         AX, AX

plloop:
	PLAIN4(0, Y8, Y10)
	PLAIN4(32, Y9, Y11)
	ADDQ $8, AX
	CMPQ AX, CX
	JL   plloop

	VMOVUPD Y8, 0(R9)
	VMOVUPD Y9, 32(R9)
	VMOVUPD Y10, 64(R9)
	VMOVUPD Y11, 96(R9)
	VZEROUPPER
	RET

// BAL4(off, f, ww, pt, po): BalancedFused on the four elements at
// off + AX·8; it in Y14, io in Y15. O = o + oc and T = s + tc' run as the
// FMAs o·1 + oc and s·1 + tc' (the same rounding), on the multiply pipes
// where those are separate from the adders.
#define BAL4(off, f, ww, pt, po) \
	VMOVUPD      off(R10)(AX*8), Y0    \ // x
	VFMADD231PD  off(DX)(AX*8), Y0, f  \ // f += w·x
	VMOVUPD      off(R8)(AX*8), Y3     \
	VMOVUPD      off(R9)(AX*8), Y5     \
	VFMADD132PD  ·oneY(SB), Y5, Y3     \ // O = o + oc
	VMOVUPD      off(SI)(AX*8), Y1     \ // t
	VADDPD       Y0, Y1, Y4            \ // s = t + x
	VSUBPD       Y1, Y4, Y5            \ // p = s − t
	VSUBPD       Y5, Y4, Y2            \ // s − p
	VSUBPD       Y2, Y1, Y2            \ // t − (s − p)
	VSUBPD       Y5, Y0, Y5            \ // x − p
	VADDPD       Y5, Y2, Y2            \
	VADDPD       off(DI)(AX*8), Y2, Y2 \ // tc' = tc + (…)
	VMOVUPD      Y4, off(SI)(AX*8)     \
	VMOVUPD      Y2, off(DI)(AX*8)     \
	VFMADD132PD  ·oneY(SB), Y2, Y4     \ // T = s + tc'
	VMULPD       Y14, Y4, Y4           \ // a = T·it
	VMULPD       Y15, Y3, Y3           \ // b = O·io
	VSUBPD       Y3, Y4, Y5            \ // w = a − b
	VMOVUPD      Y5, off(DX)(AX*8)     \
	VFMADD231PD  Y5, Y5, ww            \
	VFMADD231PD  Y4, Y5, pt            \
	VFMADD231PD  Y3, Y5, po

// func balanced4(n int, w, t, tc, o, oc, x *float64, it, io float64, acc *[32]float64)
//
// BalancedFused on n elements (a multiple of 8): acc[0:8], [8:16], [16:24],
// [24:32] the lanes of f, ww, pt, po (Y6/Y7, Y8/Y9, Y10/Y11, Y12/Y13).
TEXT ·balanced4(SB), NOSPLIT, $0-80
	MOVQ         n+0(FP), CX
	MOVQ         w+8(FP), DX
	MOVQ         t+16(FP), SI
	MOVQ         tc+24(FP), DI
	MOVQ         o+32(FP), R8
	MOVQ         oc+40(FP), R9
	MOVQ         x+48(FP), R10
	VBROADCASTSD it+56(FP), Y14
	VBROADCASTSD io+64(FP), Y15
	MOVQ         acc+72(FP), R11
	VMOVUPD      0(R11), Y6
	VMOVUPD      32(R11), Y7
	VMOVUPD      64(R11), Y8
	VMOVUPD      96(R11), Y9
	VMOVUPD      128(R11), Y10
	VMOVUPD      160(R11), Y11
	VMOVUPD      192(R11), Y12
	VMOVUPD      224(R11), Y13
	XORQ         AX, AX

blloop:
	BAL4(0, Y6, Y8, Y10, Y12)
	BAL4(32, Y7, Y9, Y11, Y13)
	ADDQ $8, AX
	CMPQ AX, CX
	JL   blloop

	VMOVUPD Y6, 0(R11)
	VMOVUPD Y7, 32(R11)
	VMOVUPD Y8, 64(R11)
	VMOVUPD Y9, 96(R11)
	VMOVUPD Y10, 128(R11)
	VMOVUPD Y11, 160(R11)
	VMOVUPD Y12, 192(R11)
	VMOVUPD Y13, 224(R11)
	VZEROUPPER
	RET

// DBL4(off): DoubleAngleRFF on the four features at off + AX·8; k in
// Y15.
#define DBL4(off) \
	VMOVUPD     off(SI)(AX*8), Y0 \
	VMOVUPD     off(R8)(AX*8), Y1 \
	VSUBPD      Y1, Y0, Y2        \
	VADDPD      Y1, Y0, Y3        \
	VMULPD      Y3, Y2, Y2        \
	VMULPD      Y15, Y2, Y2       \
	VMULPD      Y1, Y0, Y4        \
	VADDPD      Y4, Y4, Y4        \
	VMULPD      Y15, Y4, Y4       \
	VMOVUPD     Y2, off(DI)(AX*8) \
	VMOVUPD     Y4, off(DX)(AX*8)

// func double4(n int, dc, ds, sc, ss *float64, k float64)
//
// DoubleAngleRFF on n features (a multiple of 8): C = sc[i], S = ss[i],
// dc[i] = ((C − S)·(C + S))·k, ds[i] = ((C·S)·2)·k.
TEXT ·double4(SB), NOSPLIT, $0-48
	MOVQ         n+0(FP), CX
	MOVQ         dc+8(FP), DI
	MOVQ         ds+16(FP), DX
	MOVQ         sc+24(FP), SI
	MOVQ         ss+32(FP), R8
	VBROADCASTSD k+40(FP), Y15
	XORQ         AX, AX

dbloop:
	DBL4(0)
	DBL4(32)
	ADDQ $8, AX
	CMPQ AX, CX
	JL   dbloop

	VZEROUPPER
	RET

// func dotRows4(n int, rows *[]float64, x *float64, d int, dst *float64) int
//
// DotRows (rbf.go) for n ≥ 1 rows (slice headers of 24 bytes at rows), up
// to the first row shorter than d; returns the number of rows done. Per
// row: the four sums s_l of the products
// x_k·r_k, k ≡ l mod 4, multiplied then added in order in Y0; the tail
// k ≥ 4⌊d/4⌋ added to s₀ in order (in X0, s₂ and s₃ set aside in X2,
// since a VEX scalar operation clears the upper half of its register);
// then dst = (s₀ + s₁) + (s₂ + s₃).
TEXT ·dotRows4(SB), NOSPLIT, $0-48
	MOVQ n+0(FP), CX
	MOVQ rows+8(FP), SI
	MOVQ x+16(FP), DI
	MOVQ d+24(FP), BX
	MOVQ dst+32(FP), DX
	MOVQ BX, R10
	SHRQ $2, R10
	MOVQ BX, R11
	ANDQ $3, R11
	XORQ R12, R12

drrow:
	CMPQ   8(SI), BX
	JL     drdone
	MOVQ   0(SI), R8
	VXORPD Y0, Y0, Y0
	XORQ   AX, AX
	MOVQ   R10, R9
	TESTQ  R9, R9
	JE     drtail

drblock:
	VMOVUPD (DI)(AX*8), Y1
	VMULPD  (R8)(AX*8), Y1, Y1
	VADDPD  Y1, Y0, Y0
	ADDQ    $4, AX
	DECQ    R9
	JNE     drblock

drtail:
	VEXTRACTF128 $1, Y0, X2
	MOVQ         R11, R9
	TESTQ        R9, R9
	JE           drsum

drone:
	VMOVSD (DI)(AX*8), X1
	VMULSD (R8)(AX*8), X1, X1
	VADDSD X1, X0, X0
	INCQ   AX
	DECQ   R9
	JNE    drone

drsum:
	VUNPCKHPD X0, X0, X3
	VADDSD    X3, X0, X0
	VUNPCKHPD X2, X2, X4
	VADDSD    X4, X2, X2
	VADDSD    X2, X0, X0
	VMOVSD    X0, 0(DX)
	ADDQ      $24, SI
	ADDQ      $8, DX
	INCQ      R12
	CMPQ      R12, CX
	JL        drrow

drdone:
	MOVQ R12, ret+40(FP)
	VZEROUPPER
	RET

// func sqd4(panels, d int, p, x, dst *float64)
//
// sqd8 (kernel512_amd64.s) with a panel's eight lanes in two registers.
TEXT ·sqd4(SB), NOSPLIT, $0-40
	MOVQ panels+0(FP), CX
	MOVQ d+8(FP), BX
	MOVQ p+16(FP), SI
	MOVQ x+24(FP), DI
	MOVQ dst+32(FP), R8

s4panel:
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	MOVQ   DI, R9
	MOVQ   BX, DX

s4col:
	VBROADCASTSD (R9), Y4
	VMOVUPD      (SI), Y2
	VMOVUPD      32(SI), Y3
	VSUBPD       Y4, Y2, Y2
	VSUBPD       Y4, Y3, Y3
	VFMADD231PD  Y2, Y2, Y0
	VFMADD231PD  Y3, Y3, Y1
	ADDQ         $64, SI
	ADDQ         $8, R9
	DECQ         DX
	JNE          s4col
	VMOVUPD      Y0, (R8)
	VMOVUPD      Y1, 32(R8)
	ADDQ         $64, R8
	DECQ         CX
	JNE          s4panel
	VZEROUPPER
	RET

// The 256-bit constants of the AVX2 exp (expK4 in kernel_amd64.go).
#define E4_C0 ·expK4+0(SB)
#define E4_MAGIC ·expK4+32(SB)
#define E4_LN2HI ·expK4+64(SB)
#define E4_LN2LO ·expK4+96(SB)
#define E4_P7 ·expK4+128(SB)
#define E4_P6 ·expK4+160(SB)
#define E4_P5 ·expK4+192(SB)
#define E4_P4 ·expK4+224(SB)
#define E4_P3 ·expK4+256(SB)
#define E4_P2 ·expK4+288(SB)
#define E4_MIN ·expK4+320(SB)
#define E4_MAX ·expK4+352(SB)
#define E4_LOW2 ·expK4+384(SB)
#define E4_ODD ·expK4+416(SB)
#define E4_HIGH ·expK4+448(SB)

// EXPNEG4 sets Y11 = ExpNeg(Y2) in four lanes, lanes with Y2 < −707 or
// NaN zeroed: the operations of rbf8's (kernel512_amd64.s), the table
// entry j = k mod 16 taken from the four registers of four entries each
// (expHi, expLo) by one-register permutes (dword indices 2(j mod 4) and
// 2(j mod 4) + 1) and blends on bits 2 and 3 of j, and 2^(k>>4) added to
// the exponent as (k with its low four bits cleared) << 48, which is the
// same modulo 2^64. Clobbers Y2–Y10, Y12–Y14.
#define EXPNEG4 \
	VCMPPD       $0x1d, E4_MIN, Y2, Y12 \
	VMOVUPD      E4_MAGIC, Y3 \
	VFMADD231PD  E4_C0, Y2, Y3 \
	VSUBPD       E4_MAGIC, Y3, Y4 \
	VMOVAPD      Y2, Y5 \
	VFNMADD231PD E4_LN2HI, Y4, Y5 \
	VFNMADD231PD E4_LN2LO, Y4, Y5 \
	VMOVUPD      E4_P6, Y6 \
	VFMADD231PD  E4_P7, Y5, Y6 \
	VFMADD213PD  E4_P5, Y5, Y6 \
	VFMADD213PD  E4_P4, Y5, Y6 \
	VFMADD213PD  E4_P3, Y5, Y6 \
	VFMADD213PD  E4_P2, Y5, Y6 \
	VMULPD       Y5, Y5, Y7 \
	VFMADD213PD  Y5, Y6, Y7 \
	VPSUBQ       E4_MAGIC, Y3, Y8 \
	VPAND        E4_LOW2, Y8, Y9 \
	VPADDQ       Y9, Y9, Y9 \
	VPSLLQ       $32, Y9, Y10 \
	VPADDQ       Y10, Y9, Y9 \
	VPADDQ       E4_ODD, Y9, Y9 \
	VPSLLQ       $61, Y8, Y13 \
	VPSLLQ       $60, Y8, Y14 \
	VPERMD       ·expHi+0(SB), Y9, Y2 \
	VPERMD       ·expHi+32(SB), Y9, Y3 \
	VBLENDVPD    Y13, Y3, Y2, Y2 \
	VPERMD       ·expHi+64(SB), Y9, Y3 \
	VPERMD       ·expHi+96(SB), Y9, Y4 \
	VBLENDVPD    Y13, Y4, Y3, Y3 \
	VBLENDVPD    Y14, Y3, Y2, Y2 \
	VPERMD       ·expLo+0(SB), Y9, Y3 \
	VPERMD       ·expLo+32(SB), Y9, Y4 \
	VBLENDVPD    Y13, Y4, Y3, Y3 \
	VPERMD       ·expLo+64(SB), Y9, Y4 \
	VPERMD       ·expLo+96(SB), Y9, Y6 \
	VBLENDVPD    Y13, Y6, Y4, Y4 \
	VBLENDVPD    Y14, Y4, Y3, Y3 \
	VFMADD213PD  Y3, Y2, Y7 \
	VADDPD       Y7, Y2, Y7 \
	VPAND        E4_HIGH, Y8, Y8 \
	VPSLLQ       $48, Y8, Y8 \
	VPADDQ       Y8, Y7, Y7 \
	VANDPD       Y12, Y7, Y11

// func exp4(n int, dst, src *float64, s float64) int
//
// exp8 (kernel512_amd64.s) on blocks of four, n a multiple of 4.
TEXT ·exp4(SB), NOSPLIT, $0-40
	MOVQ         n+0(FP), CX
	MOVQ         dst+8(FP), DI
	MOVQ         src+16(FP), SI
	VBROADCASTSD s+24(FP), Y15
	XORQ         AX, AX

e4block:
	VMULPD    (SI)(AX*8), Y15, Y2
	VCMPPD    $0x1e, E4_MAX, Y2, Y12
	VMOVMSKPD Y12, DX
	TESTQ     DX, DX
	JNE       e4done
	EXPNEG4
	VMOVUPD   Y11, (DI)(AX*8)
	ADDQ      $4, AX
	CMPQ      AX, CX
	JL        e4block

e4done:
	MOVQ AX, ret+32(FP)
	VZEROUPPER
	RET

// R4HALF(col, off, acc): rbf4's half of a panel at byte offset off in a
// column (lanes 0–3 at 0, 4–7 at 32): the squared distances by FMA over
// the d columns (loop label col), v = d2·ng, EXPNEG4, then acc += α·e by
// FMA with the half's four weights at off(R8).
#define R4HALF(col, off, acc) \
	VXORPD       Y2, Y2, Y2 \
	MOVQ         DI, R9 \
	LEAQ         off(SI), R11 \
	MOVQ         BX, DX \
col: \
	VBROADCASTSD (R9), Y4 \
	VMOVUPD      (R11), Y3 \
	VSUBPD       Y4, Y3, Y3 \
	VFMADD231PD  Y3, Y3, Y2 \
	ADDQ         $64, R11 \
	ADDQ         $8, R9 \
	DECQ         DX \
	JNE          col \
	VMULPD       Y15, Y2, Y2 \
	EXPNEG4 \
	VFMADD231PD  off(R8), Y11, acc

// func rbf4(panels, d int, p, x, alpha *float64, ng float64, acc *[8]float64)
//
// rbf8 (kernel512_amd64.s) with a panel's eight lanes in two halves of
// four (R4HALF), lanes 0–3 accumulated in Y0 and 4–7 in Y1. Y15 holds ng.
TEXT ·rbf4(SB), NOSPLIT, $0-56
	MOVQ         panels+0(FP), CX
	MOVQ         d+8(FP), BX
	MOVQ         p+16(FP), SI
	MOVQ         x+24(FP), DI
	MOVQ         alpha+32(FP), R8
	VBROADCASTSD ng+40(FP), Y15
	MOVQ         acc+48(FP), R10
	VMOVUPD      0(R10), Y0
	VMOVUPD      32(R10), Y1
	MOVQ         BX, R12
	SHLQ         $6, R12 // a panel's bytes, 64·d

r4panel:
	R4HALF(r4colA, 0, Y0)
	R4HALF(r4colB, 32, Y1)
	ADDQ R12, SI
	ADDQ $64, R8
	DECQ CX
	JNE  r4panel

	VMOVUPD Y0, 0(R10)
	VMOVUPD Y1, 32(R10)
	VZEROUPPER
	RET

// func rbfRow4(n int, dst *float32, dots, sqs, ys *float64, sq, yi, s float64) int
//
// rbfRow8 (kernel512_amd64.s) on blocks of four, n a multiple of 4. Y0
// holds sq, Y1 yi, Y15 s.
TEXT ·rbfRow4(SB), NOSPLIT, $0-72
	MOVQ         n+0(FP), CX
	MOVQ         dst+8(FP), DI
	MOVQ         dots+16(FP), SI
	MOVQ         sqs+24(FP), R8
	MOVQ         ys+32(FP), R9
	VBROADCASTSD sq+40(FP), Y0
	VBROADCASTSD yi+48(FP), Y1
	VBROADCASTSD s+56(FP), Y15
	XORQ         AX, AX

r4block:
	VADDPD     (R8)(AX*8), Y0, Y2
	VMOVUPD    (SI)(AX*8), Y3
	VADDPD     Y3, Y3, Y3
	VSUBPD     Y3, Y2, Y2
	VXORPD     Y4, Y4, Y4
	VMAXPD     Y2, Y4, Y2
	VMULPD     Y15, Y2, Y2
	VCMPPD     $0x1e, E4_MAX, Y2, Y12
	VMOVMSKPD  Y12, DX
	TESTQ      DX, DX
	JNE        r4done
	EXPNEG4
	VMULPD     (R9)(AX*8), Y1, Y3
	VMULPD     Y3, Y11, Y11
	VCVTPD2PSY Y11, X11
	VMOVUPS    X11, (DI)(AX*4)
	ADDQ       $4, AX
	CMPQ       AX, CX
	JL         r4block

r4done:
	MOVQ AX, ret+64(FP)
	VZEROUPPER
	RET

// func wssMax4(n int, y, gr *float64, st *int8, c *wssConsts, v *[8]float64, idx *[8]int64)
//
// wssMax8 (kernel512_amd64.s) on blocks of four, n a multiple of 4, the
// masks as vectors and the operands read from c (wssConsts' offsets)
// and the package's wssSign and wssInc.
// Y0: the lanes' maxima, Y1 their indices, Y2 the block's indices.
TEXT ·wssMax4(SB), NOSPLIT, $0-56
	MOVQ    n+0(FP), CX
	MOVQ    y+8(FP), SI
	MOVQ    gr+16(FP), DI
	MOVQ    st+24(FP), R8
	MOVQ    c+32(FP), R9
	MOVQ    v+40(FP), R10
	MOVQ    idx+48(FP), R11
	VBROADCASTSD ·wssNegInf(SB), Y0
	VPCMPEQQ Y1, Y1, Y1
	VMOVDQU ·wssIota(SB), Y2
	VXORPD  Y6, Y6, Y6
	XORQ    AX, AX

wm4block:
	VMOVUPD   (SI)(AX*8), Y8
	VCMPPD    $0x1e, Y6, Y8, Y13
	VPMOVSXBQ (R8)(AX*1), Y9
	VMOVDQU   32(R9), Y10
	VBLENDVPD Y13, 0(R9), Y10, Y10
	VPCMPEQQ  Y10, Y9, Y14
	VMOVUPD   (DI)(AX*8), Y11
	VXORPD    ·wssSign(SB), Y11, Y12
	VBLENDVPD Y13, Y12, Y11, Y11
	VCMPPD    $0x1d, Y0, Y11, Y15
	VPANDN    Y15, Y14, Y15
	VBLENDVPD Y15, Y11, Y0, Y0
	VBLENDVPD Y15, Y2, Y1, Y1
	VPADDQ    ·wssInc(SB), Y2, Y2
	ADDQ      $4, AX
	CMPQ      AX, CX
	JL        wm4block
	VMOVUPD   Y0, (R10)
	VMOVDQU   Y1, (R11)
	VZEROUPPER
	RET

// func wssSecond4(n int, q *float32, qd, y, gr *float64, st *int8, c *wssConsts, v2, vm *[8]float64, idx *[8]int64)
//
// wssSecond8 (kernel512_amd64.s) on blocks of four, n a multiple of 4,
// the masks as vectors and the constants read from c. Y0: the lanes'
// maxima, Y1 their minima, Y2 the minima's indices, Y3 the block's
// indices; quad is the blend of a − b and a + b on y > 0.
TEXT ·wssSecond4(SB), NOSPLIT, $0-80
	MOVQ    n+0(FP), CX
	MOVQ    q+8(FP), SI
	MOVQ    qd+16(FP), DI
	MOVQ    y+24(FP), R8
	MOVQ    gr+32(FP), R9
	MOVQ    st+40(FP), R10
	MOVQ    c+48(FP), R11
	VBROADCASTSD ·wssNegInf(SB), Y0
	VBROADCASTSD ·wssPosInf(SB), Y1
	VPCMPEQQ Y2, Y2, Y2
	VMOVDQU ·wssIota(SB), Y3
	XORQ    AX, AX

ws4block:
	VXORPD    Y5, Y5, Y5
	VMOVUPD   (R8)(AX*8), Y4
	VCMPPD    $0x1e, Y5, Y4, Y6
	VPMOVSXBQ (R10)(AX*1), Y7
	VMOVDQU   32(R11), Y8
	VBLENDVPD Y6, 0(R11), Y8, Y8
	VPCMPEQQ  Y8, Y7, Y9
	VMOVUPD   (R9)(AX*8), Y10
	VXORPD    ·wssSign(SB), Y10, Y11
	VBLENDVPD Y6, Y10, Y11, Y12
	VCMPPD    $0x1d, Y0, Y12, Y13
	VPANDN    Y13, Y9, Y13
	VBLENDVPD Y13, Y12, Y0, Y0
	VADDPD    64(R11), Y12, Y13
	VCMPPD    $0x1e, Y5, Y13, Y14
	VPANDN    Y14, Y9, Y14
	VMOVUPD   96(R11), Y15
	VADDPD    (DI)(AX*8), Y15, Y15
	VCVTPS2PD (SI)(AX*4), Y7
	VMULPD    128(R11), Y7, Y7
	VSUBPD    Y7, Y15, Y8
	VADDPD    Y7, Y15, Y10
	VBLENDVPD Y6, Y8, Y10, Y8
	VCMPPD    $0x12, Y5, Y8, Y10
	VBLENDVPD Y10, 160(R11), Y8, Y8
	VMULPD    Y13, Y13, Y13
	VXORPD    ·wssSign(SB), Y13, Y13
	VDIVPD    Y8, Y13, Y13
	VCMPPD    $0x12, Y1, Y13, Y15
	VPAND     Y14, Y15, Y15
	VBLENDVPD Y15, Y13, Y1, Y1
	VBLENDVPD Y15, Y3, Y2, Y2
	VPADDQ    ·wssInc(SB), Y3, Y3
	ADDQ      $4, AX
	CMPQ      AX, CX
	JL        ws4block
	MOVQ      v2+56(FP), DX
	VMOVUPD   Y0, (DX)
	MOVQ      vm+64(FP), DX
	VMOVUPD   Y1, (DX)
	MOVQ      idx+72(FP), DX
	VMOVDQU   Y2, (DX)
	VZEROUPPER
	RET

// func addPair4(n int, dst *float64, a, b *float32, s, t float64)
//
// AddPair32 (wss.go) four at a time, n a multiple of 4: dst += (a·s + b·t),
// each product and sum rounded (no FMA).
TEXT ·addPair4(SB), NOSPLIT, $0-48
	MOVQ         n+0(FP), CX
	MOVQ         dst+8(FP), DI
	MOVQ         a+16(FP), SI
	MOVQ         b+24(FP), DX
	VBROADCASTSD s+32(FP), Y14
	VBROADCASTSD t+40(FP), Y15
	XORQ         AX, AX

ap4block:
	VCVTPS2PD (SI)(AX*4), Y0
	VCVTPS2PD (DX)(AX*4), Y1
	VMULPD    Y14, Y0, Y0
	VMULPD    Y15, Y1, Y1
	VADDPD    Y1, Y0, Y0
	VADDPD    (DI)(AX*8), Y0, Y0
	VMOVUPD   Y0, (DI)(AX*8)
	ADDQ      $4, AX
	CMPQ      AX, CX
	JL        ap4block
	VZEROUPPER
	RET

// func addScaled4(n int, dst *float64, a *float32, s float64)
//
// AddScaled32 (wss.go) four at a time, n a multiple of 4: dst += s·a,
// the product rounded (no FMA).
TEXT ·addScaled4(SB), NOSPLIT, $0-32
	MOVQ         n+0(FP), CX
	MOVQ         dst+8(FP), DI
	MOVQ         a+16(FP), SI
	VBROADCASTSD s+24(FP), Y14
	XORQ         AX, AX

as4block:
	VCVTPS2PD (SI)(AX*4), Y0
	VMULPD    Y14, Y0, Y0
	VADDPD    (DI)(AX*8), Y0, Y0
	VMOVUPD   Y0, (DI)(AX*8)
	ADDQ      $4, AX
	CMPQ      AX, CX
	JL        as4block
	VZEROUPPER
	RET

// PD4COL(off, acc0, acc1): a panel column at off(SI) times the broadcast
// x entry in Y8, lanes 0–3 added to acc0 and 4–7 to acc1.
#define PD4COL(off, acc0, acc1) \
	VMULPD off(SI), Y8, Y9     \
	VADDPD Y9, acc0, acc0      \
	VMULPD off+32(SI), Y8, Y10 \
	VADDPD Y10, acc1, acc1

// func panelDots4(np, d int, p, x, dst *float64)
//
// panelDots8 (kernel512_amd64.s) with a panel's eight lanes in two halves
// of four: the four sums of lanes 0–3 in Y0–Y3, of lanes 4–7 in Y4–Y7.
TEXT ·panelDots4(SB), NOSPLIT, $0-40
	MOVQ np+0(FP), CX
	MOVQ d+8(FP), BX
	MOVQ p+16(FP), SI
	MOVQ x+24(FP), DI
	MOVQ dst+32(FP), DX
	MOVQ BX, R10
	SHRQ $2, R10
	MOVQ BX, R11
	ANDQ $3, R11

pd4panel:
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
	JE     pd4tail

pd4block:
	VBROADCASTSD 0(R9), Y8
	PD4COL(0, Y0, Y4)
	VBROADCASTSD 8(R9), Y8
	PD4COL(64, Y1, Y5)
	VBROADCASTSD 16(R9), Y8
	PD4COL(128, Y2, Y6)
	VBROADCASTSD 24(R9), Y8
	PD4COL(192, Y3, Y7)
	ADDQ         $256, SI
	ADDQ         $32, R9
	DECQ         R8
	JNE          pd4block

pd4tail:
	MOVQ  R11, R8
	TESTQ R8, R8
	JE    pd4sum

pd4one:
	VBROADCASTSD 0(R9), Y8
	PD4COL(0, Y0, Y4)
	ADDQ         $64, SI
	ADDQ         $8, R9
	DECQ         R8
	JNE          pd4one

pd4sum:
	VADDPD  Y1, Y0, Y0
	VADDPD  Y3, Y2, Y2
	VADDPD  Y2, Y0, Y0
	VADDPD  Y5, Y4, Y4
	VADDPD  Y7, Y6, Y6
	VADDPD  Y6, Y4, Y4
	VMOVUPD Y0, 0(DX)
	VMOVUPD Y4, 32(DX)
	ADDQ    $64, DX
	DECQ    CX
	JNE     pd4panel
	VZEROUPPER
	RET

// func expShift4(n int, dst *float64, gam, m float64)
//
// expShift8 (kernel512_amd64.s) on blocks of four, n a multiple of 4, the
// constants broadcast from expShiftK as they are used. Y0 holds gam, Y1 m.
TEXT ·expShift4(SB), NOSPLIT, $0-32
	MOVQ         n+0(FP), CX
	MOVQ         dst+8(FP), DI
	VBROADCASTSD gam+16(FP), Y0
	VBROADCASTSD m+24(FP), Y1
	LEAQ         ·expShiftTable(SB), R8
	XORQ         AX, AX

es4block:
	VMOVUPD      (DI)(AX*8), Y2
	VSUBPD       Y1, Y2, Y2
	VMULPD       Y2, Y0, Y2
	VBROADCASTSD ·expShiftK+0(SB), Y3
	VMINPD       Y2, Y3, Y2
	VBROADCASTSD ·expShiftK+8(SB), Y3
	VMULPD       Y3, Y2, Y3
	VBROADCASTSD ·expShiftK+16(SB), Y4
	VADDPD       Y4, Y3, Y3
	VSUBPD       Y4, Y3, Y4
	VBROADCASTSD ·expShiftK+24(SB), Y5
	VMULPD       Y5, Y4, Y5
	VSUBPD       Y5, Y2, Y5
	VBROADCASTSD ·expShiftK+32(SB), Y6
	VMULPD       Y6, Y4, Y6
	VSUBPD       Y6, Y5, Y5
	VBROADCASTSD ·expShiftK+72(SB), Y6
	VMULPD       Y6, Y5, Y6
	VBROADCASTSD ·expShiftK+64(SB), Y7
	VSUBPD       Y6, Y7, Y6
	VMULPD       Y6, Y5, Y6
	VBROADCASTSD ·expShiftK+56(SB), Y7
	VSUBPD       Y6, Y7, Y6
	VMULPD       Y6, Y5, Y6
	VBROADCASTSD ·expShiftK+48(SB), Y7
	VSUBPD       Y6, Y7, Y6
	VMULPD       Y6, Y5, Y6
	VBROADCASTSD ·expShiftK+40(SB), Y7
	VSUBPD       Y6, Y7, Y6
	VMULPD       Y6, Y5, Y6
	VSUBPD       Y6, Y7, Y6
	VPBROADCASTQ ·expShiftK+80(SB), Y8
	VPAND        Y8, Y3, Y8
	VPSRLQ       $8, Y3, Y9
	VPBROADCASTQ ·expShiftK+88(SB), Y10
	VPAND        Y10, Y9, Y9
	VPSRLQ       $1, Y9, Y10
	VPSUBQ       Y10, Y9, Y11
	VPBROADCASTQ ·expShiftK+96(SB), Y9
	VPSUBQ       Y10, Y9, Y10
	VPSLLQ       $52, Y10, Y10
	VPSUBQ       Y11, Y9, Y11
	VPSLLQ       $52, Y11, Y11
	VPCMPEQQ     Y12, Y12, Y12
	VGATHERQPD   Y12, (R8)(Y8*8), Y13
	VMULPD       Y6, Y13, Y13
	VMULPD       Y10, Y13, Y13
	VMULPD       Y11, Y13, Y13
	VMOVUPD      Y13, (DI)(AX*8)
	ADDQ         $4, AX
	CMPQ         AX, CX
	JL           es4block
	VZEROUPPER
	RET

// func panelSeq4(np, d int, p, x, dst *float64)
//
// panelSeq8 (kernel512_amd64.s) with a panel's lanes in two halves of
// four, Y0 and Y1.
TEXT ·panelSeq4(SB), NOSPLIT, $0-40
	MOVQ np+0(FP), CX
	MOVQ d+8(FP), BX
	MOVQ p+16(FP), SI
	MOVQ x+24(FP), DI
	MOVQ dst+32(FP), DX

ps4panel:
	VXORPD Y0, Y0, Y0
	VXORPD Y1, Y1, Y1
	MOVQ   DI, R9
	MOVQ   BX, R8

ps4col:
	VBROADCASTSD 0(R9), Y8
	VMULPD       0(SI), Y8, Y9
	VADDPD       Y9, Y0, Y0
	VMULPD       32(SI), Y8, Y10
	VADDPD       Y10, Y1, Y1
	ADDQ         $64, SI
	ADDQ         $8, R9
	DECQ         R8
	JNE          ps4col
	VMOVUPD      Y0, 0(DX)
	VMOVUPD      Y1, 32(DX)
	ADDQ         $64, DX
	DECQ         CX
	JNE          ps4panel
	VZEROUPPER
	RET

// func accumScaled4(n int, s, c, v *float64, a float64)
//
// accumScaled8 (kernel512_amd64.s) on blocks of four, n a multiple of 4.
TEXT ·accumScaled4(SB), NOSPLIT, $0-40
	MOVQ         n+0(FP), CX
	MOVQ         s+8(FP), DI
	MOVQ         c+16(FP), SI
	MOVQ         v+24(FP), DX
	VBROADCASTSD a+32(FP), Y0
	XORQ         AX, AX

ac4block:
	VMULPD  (DX)(AX*8), Y0, Y1
	VMOVUPD (DI)(AX*8), Y2
	TWOSUM(Y2, Y1, Y3, Y4, Y5)
	VADDPD  (SI)(AX*8), Y5, Y5
	VMOVUPD Y5, (SI)(AX*8)
	VMOVUPD Y3, (DI)(AX*8)
	ADDQ    $4, AX
	CMPQ    AX, CX
	JL      ac4block
	VZEROUPPER
	RET

// func scale4(n int, v *float64, f float64)
//
// Scale (expshift.go) four at a time, two registers a step, n a multiple
// of 8 (AVX2 and AVX-512F machines).
TEXT ·scale4(SB), NOSPLIT, $0-24
	MOVQ         n+0(FP), CX
	MOVQ         v+8(FP), DI
	VBROADCASTSD f+16(FP), Y0
	XORQ         AX, AX

sc4block:
	VMULPD  (DI)(AX*8), Y0, Y1
	VMULPD  32(DI)(AX*8), Y0, Y2
	VMOVUPD Y1, (DI)(AX*8)
	VMOVUPD Y2, 32(DI)(AX*8)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JL      sc4block
	VZEROUPPER
	RET

// PD4HALF(off, acc): plainDecay8's (kernel512_amd64.s) operations on the
// four elements at off bytes into the block at AX, ww's lanes in acc.
// Y13 holds lam, Y15 y.
#define PD4HALF(off, acc) \
	VMOVUPD     off(SI)(AX*8), Y1 \
	VMULPD      Y13, Y1, Y2 \
	VMOVUPD     off(DI)(AX*8), Y3 \
	VMULPD      Y13, Y3, Y3 \
	VMOVAPD     Y2, Y4 \
	VFMSUB231PD Y13, Y1, Y4 \
	VADDPD      Y4, Y3, Y3 \
	VMULPD      off(R10)(AX*8), Y15, Y0 \
	TWOSUM(Y2, Y0, Y5, Y6, Y7) \
	VADDPD      Y7, Y3, Y3 \
	VMOVUPD     Y5, off(SI)(AX*8) \
	VMOVUPD     Y3, off(DI)(AX*8) \
	VADDPD      Y3, Y5, Y5 \
	VMOVUPD     Y5, off(DX)(AX*8) \
	VFMADD231PD Y5, Y5, acc

// func plainDecay4(n int, w, s, c, x *float64, y, lam float64, acc *[8]float64)
//
// plainDecay8 (kernel512_amd64.s) on blocks of eight as two halves of
// four (PD4HALF), lanes 0–3 in Y8 and 4–7 in Y9; n a multiple of 8.
TEXT ·plainDecay4(SB), NOSPLIT, $0-64
	MOVQ         n+0(FP), CX
	MOVQ         w+8(FP), DX
	MOVQ         s+16(FP), SI
	MOVQ         c+24(FP), DI
	MOVQ         x+32(FP), R10
	VBROADCASTSD y+40(FP), Y15
	VBROADCASTSD lam+48(FP), Y13
	MOVQ         acc+56(FP), R11
	VMOVUPD      0(R11), Y8
	VMOVUPD      32(R11), Y9
	XORQ         AX, AX

pd4loop:
	PD4HALF(0, Y8)
	PD4HALF(32, Y9)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JL      pd4loop
	VMOVUPD Y8, 0(R11)
	VMOVUPD Y9, 32(R11)
	VZEROUPPER
	RET

// BD4HALF(off, ww, pt, po): balancedDecay8's operations on four elements
// at off bytes into the block at AX. Y14 holds lam; it and io are read
// from k (R12: four of each).
#define BD4HALF(off, ww, pt, po) \
	VMOVUPD     off(SI)(AX*8), Y1 \
	VMULPD      Y14, Y1, Y2 \
	VMOVUPD     off(DI)(AX*8), Y3 \
	VMULPD      Y14, Y3, Y3 \
	VMOVAPD     Y2, Y4 \
	VFMSUB231PD Y14, Y1, Y4 \
	VADDPD      Y4, Y3, Y3 \
	VMOVUPD     off(R10)(AX*8), Y0 \
	TWOSUM(Y2, Y0, Y5, Y6, Y7) \
	VADDPD      Y7, Y3, Y3 \
	VMOVUPD     Y5, off(SI)(AX*8) \
	VMOVUPD     Y3, off(DI)(AX*8) \
	VMOVUPD     off(R8)(AX*8), Y1 \
	VMULPD      Y14, Y1, Y2 \
	VMOVUPD     off(R9)(AX*8), Y4 \
	VMULPD      Y14, Y4, Y4 \
	VMOVAPD     Y2, Y6 \
	VFMSUB231PD Y14, Y1, Y6 \
	VADDPD      Y6, Y4, Y4 \
	VMOVUPD     Y2, off(R8)(AX*8) \
	VMOVUPD     Y4, off(R9)(AX*8) \
	VADDPD      Y3, Y5, Y5 \
	VADDPD      Y4, Y2, Y2 \
	VMULPD      0(R12), Y5, Y5 \
	VMULPD      32(R12), Y2, Y2 \
	VSUBPD      Y2, Y5, Y6 \
	VMOVUPD     Y6, off(DX)(AX*8) \
	VFMADD231PD Y6, Y6, ww \
	VFMADD231PD Y5, Y6, pt \
	VFMADD231PD Y2, Y6, po

// func balancedDecay4(n int, w, t, tc, o, oc, x *float64, k *[8]float64, lam float64, acc *[32]float64)
//
// balancedDecay8 (kernel512_amd64.s) on blocks of eight as two halves of
// four (BD4HALF): ww, pt, po of lanes 0–3 in Y8, Y10, Y12 and of 4–7 in
// Y9, Y11, Y13; k holds it four times, then io; n a multiple of 8.
TEXT ·balancedDecay4(SB), NOSPLIT, $0-80
	MOVQ         n+0(FP), CX
	MOVQ         w+8(FP), DX
	MOVQ         t+16(FP), SI
	MOVQ         tc+24(FP), DI
	MOVQ         o+32(FP), R8
	MOVQ         oc+40(FP), R9
	MOVQ         x+48(FP), R10
	MOVQ         k+56(FP), R12
	VBROADCASTSD lam+64(FP), Y14
	MOVQ         acc+72(FP), R11
	VMOVUPD      64(R11), Y8
	VMOVUPD      96(R11), Y9
	VMOVUPD      128(R11), Y10
	VMOVUPD      160(R11), Y11
	VMOVUPD      192(R11), Y12
	VMOVUPD      224(R11), Y13
	XORQ         AX, AX

bd4loop:
	BD4HALF(0, Y8, Y10, Y12)
	BD4HALF(32, Y9, Y11, Y13)
	ADDQ    $8, AX
	CMPQ    AX, CX
	JL      bd4loop
	VMOVUPD Y8, 64(R11)
	VMOVUPD Y9, 96(R11)
	VMOVUPD Y10, 128(R11)
	VMOVUPD Y11, 160(R11)
	VMOVUPD Y12, 192(R11)
	VMOVUPD Y13, 224(R11)
	VZEROUPPER
	RET

// func welford4(n int, mean, meanC, m2, m2C, inv, x *float64, invN, floor float64)
//
// welford8 (kernel512_amd64.s) on blocks of four, n a multiple of 4. Y14
// holds invN, Y15 floor, Y13 one.
TEXT ·welford4(SB), NOSPLIT, $0-72
	MOVQ         n+0(FP), CX
	MOVQ         mean+8(FP), SI
	MOVQ         meanC+16(FP), DI
	MOVQ         m2+24(FP), R8
	MOVQ         m2C+32(FP), R9
	MOVQ         inv+40(FP), R10
	MOVQ         x+48(FP), R11
	VBROADCASTSD invN+56(FP), Y14
	VBROADCASTSD floor+64(FP), Y15
	VBROADCASTSD ·one(SB), Y13
	XORQ         AX, AX

wf4loop:
	VMOVUPD   (R11)(AX*8), Y0
	VMOVUPD   (SI)(AX*8), Y1
	VMOVUPD   (DI)(AX*8), Y2
	VADDPD    Y2, Y1, Y3
	VSUBPD    Y3, Y0, Y3
	VMULPD    Y14, Y3, Y4
	TWOSUM(Y1, Y4, Y5, Y6, Y7)
	VADDPD    Y7, Y2, Y2
	VMOVUPD   Y5, (SI)(AX*8)
	VMOVUPD   Y2, (DI)(AX*8)
	VADDPD    Y2, Y5, Y5
	VSUBPD    Y5, Y0, Y5
	VMULPD    Y5, Y3, Y4
	VMOVUPD   (R8)(AX*8), Y1
	VMOVUPD   (R9)(AX*8), Y2
	TWOSUM(Y1, Y4, Y5, Y6, Y7)
	VADDPD    Y7, Y2, Y2
	VMOVUPD   Y5, (R8)(AX*8)
	VMOVUPD   Y2, (R9)(AX*8)
	VADDPD    Y2, Y5, Y5
	VMULPD    Y14, Y5, Y5
	VCMPPD    $0x11, Y15, Y5, Y7
	VSQRTPD   Y5, Y6
	VDIVPD    Y6, Y13, Y6
	VBLENDVPD Y7, Y13, Y6, Y6
	VMOVUPD   Y6, (R10)(AX*8)
	ADDQ      $4, AX
	CMPQ      AX, CX
	JL        wf4loop
	VZEROUPPER
	RET

// func levelSums4(n, p int, w, tot, sum, sumC, coef *float64, m int)
//
// LevelSums (levelsum.go) on blocks of four (levelsums.h).
TEXT ·levelSums4(SB), NOSPLIT, $0-64
	LEVELSUMS(VXORPD, Y0, Y1, Y2, Y3, 4)
