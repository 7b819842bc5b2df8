//go:build amd64 && !purego

package vmath

import (
	"math"

	"golang.org/x/sys/cpu"

	"github.com/streamer/streamer/online/internal/cpuinfo"
)

// level selects the kernels: AVX-512F where the machine (and its operating
// system) has it, AVX2 with FMA otherwise, else the Go code. The tests
// lower it to check every implementation on this machine.
var level = detectLevel()

// wideGemv runs MulVec's projection on AVX-512 (gemv32, eight rows per
// conversion) where 512-bit instructions are full width
// (cpuinfo.Wide512): on Zen 5 the projection for D = 256, d = 32 went from
// about 400 to 265 ns (BenchmarkMulVec256x32). Elsewhere (Zen 4 among
// them, where the AVX-512 forms measured no faster) it is gemv16, AVX2.
// Both give the same bits.
var wideGemv = cpuinfo.Wide512

func detectLevel() int {
	switch {
	case !cpu.X86.HasAVX2 || !cpu.X86.HasFMA:
		return levelGo
	case cpu.X86.HasAVX512F:
		return levelAVX512
	}
	return levelAVX2
}

//go:noescape
func gemv16(panels, n int, p *float32, x, z *float64)

//go:noescape
func gemv32(pairs, n int, p *float32, x, z *float64)

//go:noescape
func gemv4(panels, n int, p *float32, x, z *float64)

//go:noescape
func sincos4(n int, cs, sn, z *float64, s, a float64) int

//go:noescape
func sincos8(n int, cs, sn, z *float64, s, a float64) int

//go:noescape
func dot4(n int, a, b *float64, s *[8]float64)

//go:noescape
func dot8(n int, a, b *float64, s *[8]float64)

//go:noescape
func plain4(n int, w, s, c, x *float64, y float64, acc *[16]float64)

//go:noescape
func plain8(n int, w, s, c, x *float64, y float64, acc *[16]float64)

//go:noescape
func balanced4(n int, w, t, tc, o, oc, x *float64, it, io float64, acc *[32]float64)

//go:noescape
func balanced8(n int, w, t, tc, o, oc, x *float64, it, io float64, acc *[32]float64)

//go:noescape
func double4(n int, dc, ds, sc, ss *float64, k float64)

//go:noescape
func double8(n int, dc, ds, sc, ss *float64, k float64)

// mulVec runs the panels of 16 and of 4 rows in assembly (pairs of the
// 16-row panels on AVX-512 where wideGemv, else AVX2), the last rows%4 in
// Go.
func mulVec(m *Matrix, z, x []float64) {
	if level < levelAVX2 {
		mulVecGo(m, z, x, 0, 0)
		return
	}
	n, r0, off := m.cols, 0, 0
	if g := m.rows / 32; g > 0 && level == levelAVX512 && wideGemv {
		_ = m.data[g*32*n-1]
		_ = z[g*32-1]
		gemv32(g, n, &m.data[0], &x[0], &z[0])
		r0, off = g*32, g*32*n
	}
	if g := (m.rows - r0) / 16; g > 0 {
		_ = m.data[off+g*16*n-1]
		_ = z[r0+g*16-1]
		gemv16(g, n, &m.data[off], &x[0], &z[r0])
		r0, off = r0+g*16, off+g*16*n
	}
	if b := (m.rows - r0) / 4; b > 0 {
		_ = m.data[off+b*4*n-1]
		_ = z[r0+b*4-1]
		gemv4(b, n, &m.data[off], &x[0], &z[r0])
		r0, off = r0+b*4, off+b*4*n
	}
	if r0 < m.rows {
		mulVecGo(m, z, x, r0, off)
	}
}

// sincosBlocks maps the whole blocks of features of cs, sn from the
// arguments s·z (eight under AVX-512, four under AVX2) while every argument
// of a block is on the table path, and returns the number of features
// mapped.
func sincosBlocks(cs, sn, z []float64, s, a float64) int {
	switch level {
	case levelAVX512:
		if n := len(sn) &^ 7; n > 0 {
			_, _ = cs[n-1], z[n-1]
			return sincos8(n, &cs[0], &sn[0], &z[0], s, a)
		}
	case levelAVX2:
		if n := len(sn) &^ 3; n > 0 {
			_, _ = cs[n-1], z[n-1]
			return sincos4(n, &cs[0], &sn[0], &z[0], s, a)
		}
	}
	return 0
}

// The passes' blocks functions run the first 8⌊len/8⌋ elements and return
// how many they ran.

func dotBlocks(a, b []float64, s *[8]float64) int {
	n := len(a) &^ 7
	if level < levelAVX2 || n == 0 {
		return 0
	}
	_ = b[n-1]
	if level == levelAVX512 {
		dot8(n, &a[0], &b[0], s)
	} else {
		dot4(n, &a[0], &b[0], s)
	}
	return n
}

func plainBlocks(w, s, c, x []float64, y float64, acc *[16]float64) int {
	n := len(x) &^ 7
	if level < levelAVX2 || n == 0 {
		return 0
	}
	_, _, _ = w[n-1], s[n-1], c[n-1]
	if level == levelAVX512 {
		plain8(n, &w[0], &s[0], &c[0], &x[0], y, acc)
	} else {
		plain4(n, &w[0], &s[0], &c[0], &x[0], y, acc)
	}
	return n
}

func balancedBlocks(w, t, tc, o, oc, x []float64, it, io float64, acc *[32]float64) int {
	n := len(x) &^ 7
	if level < levelAVX2 || n == 0 {
		return 0
	}
	_, _, _, _, _ = w[n-1], t[n-1], tc[n-1], o[n-1], oc[n-1]
	if level == levelAVX512 {
		balanced8(n, &w[0], &t[0], &tc[0], &o[0], &oc[0], &x[0], it, io, acc)
	} else {
		balanced4(n, &w[0], &t[0], &tc[0], &o[0], &oc[0], &x[0], it, io, acc)
	}
	return n
}

func doubleBlocks(dc, ds, sc, ss []float64, k float64) int {
	n := len(dc) &^ 7
	if level < levelAVX2 || n == 0 {
		return 0
	}
	_, _, _ = ds[n-1], sc[n-1], ss[n-1]
	if level == levelAVX512 {
		double8(n, &dc[0], &ds[0], &sc[0], &ss[0], k)
	} else {
		double4(n, &dc[0], &ds[0], &sc[0], &ss[0], k)
	}
	return n
}

// sincosK holds the constants of the sin/cos kernels (K_… in
// kernel_amd64.s), each repeated in the four lanes of a 256-bit operand
// (the AVX-512 kernel broadcasts the first): the same values as
// sincosScaled uses.
var sincosK = func() (k [15][4]uint64) {
	f := func(v float64) uint64 { return math.Float64bits(v) }
	vals := [...]uint64{
		0x7fffffffffffffff, // 0: |x| mask
		f(SincosFastLimit), // 1
		f(invTheta),        // 2
		f(roundMagic),      // 3
		f(thetaA),          // 4
		f(thetaB),          // 5
		f(sinC3),           // 6
		f(sinC5),           // 7
		f(sinC7),           // 8
		f(cosC2),           // 9
		f(cosC4),           // 10
		f(cosC6),           // 11
		f(cosC8),           // 12
		1 << 63,            // 13: sign bit
		SincosN / 2,        // 14: the half-turn bit of the table index
	}
	for i, v := range vals {
		k[i] = [4]uint64{v, v, v, v}
	}
	return k
}()

// one and oneY are 1.0 (oneY in four lanes): the multiplier of the
// kernels' additions run as FMAs.
var (
	one  = 1.0
	oneY = [4]float64{1, 1, 1, 1}
)

// sincosPairs holds (sin, cos)(j·θ) for j < SincosN, pairs of 16 bytes:
// the AVX2 kernel's table, scaled by a on its stack at every call.
var sincosPairs = func() (t [2 * SincosN]float64) {
	for j := range SincosN {
		t[2*j] = sinTable[j]
		t[2*j+1] = sinTable[(j+SincosN/4)%SincosN]
	}
	return t
}()

// kernel_amd64.s takes SincosN = 32 for its table and index masks.
var _ = [1]struct{}{}[SincosN-32]

//go:noescape
func rbf8(panels, d int, p, x, alpha *float64, ng float64, acc *[8]float64)

// rbfK holds the constants of rbf8 and exp8 (ExpNeg's, in order).
var rbfK = [12]float64{expN / math.Ln2, expMagic, expLn2Hi, expLn2Lo, 1.0 / 5040, 1.0 / 720, 1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, -expLimit, expLimit}

//go:noescape
func rbf4(panels, d int, p, x, alpha *float64, ng float64, acc *[8]float64)

// expK4 holds the constants of the AVX2 exp (E4_… in kernel_amd64.s),
// each in the four lanes of a 256-bit operand: ExpNeg's, and the integer
// masks of its table index.
var expK4 = func() (k [15][4]uint64) {
	f := func(v float64) uint64 { return math.Float64bits(v) }
	vals := [...]uint64{
		f(expN / math.Ln2), // 0
		f(expMagic),        // 1
		f(expLn2Hi),        // 2
		f(expLn2Lo),        // 3
		f(1.0 / 5040),      // 4
		f(1.0 / 720),       // 5
		f(1.0 / 120),       // 6
		f(1.0 / 24),        // 7
		f(1.0 / 6),         // 8
		f(0.5),             // 9
		f(-expLimit),       // 10
		f(expLimit),        // 11
		3,                  // 12: the index within a register of four table entries
		1 << 32,            // 13: the odd dword of a permute index
		^uint64(expN - 1),  // 14: k without its table bits
	}
	for i, v := range vals {
		k[i] = [4]uint64{v, v, v, v}
	}
	return k
}()

// rbfPanels runs Rows.RBFSum's panels in assembly (AVX-512F: a panel in
// one register, the table by two-register permutes; AVX2: in two halves,
// the table by one-register permutes and blends) and returns how many it
// ran: all of them, or none on a machine without AVX2.
func rbfPanels(r *Rows, x []float64, g float64, acc *[8]float64) int {
	if level < levelAVX2 {
		return 0
	}
	np := len(r.alpha) / 8
	_ = r.data[np*8*r.d-1]
	if level == levelAVX512 {
		rbf8(np, r.d, &r.data[0], &x[0], &r.alpha[0], -g, acc)
	} else {
		rbf4(np, r.d, &r.data[0], &x[0], &r.alpha[0], -g, acc)
	}
	return np
}

//go:noescape
func exp8(n int, dst, src *float64, s float64) int

//go:noescape
func exp4(n int, dst, src *float64, s float64) int

// expBlocks runs ExpNegScaled's whole blocks of eight (AVX-512F) or four
// (AVX2) in assembly, up to the first block with an argument above
// expLimit, and returns how many elements it ran.
func expBlocks(dst, src []float64, s float64) int {
	switch level {
	case levelAVX512:
		if n := len(dst) &^ 7; n > 0 {
			_ = src[n-1]
			return exp8(n, &dst[0], &src[0], s)
		}
	case levelAVX2:
		if n := len(dst) &^ 3; n > 0 {
			_ = src[n-1]
			return exp4(n, &dst[0], &src[0], s)
		}
	}
	return 0
}

//go:noescape
func rbfRow8(n int, dst *float32, dots, sqs, ys *float64, sq, yi, s float64) int

//go:noescape
func rbfRow4(n int, dst *float32, dots, sqs, ys *float64, sq, yi, s float64) int

// rowBlocks runs RBFRow32's whole blocks of eight (AVX-512F) or four
// (AVX2) in assembly, up to the first block with an exp argument above
// expLimit, and returns how many elements it ran.
func rowBlocks(dst []float32, dots, sqs, ys []float64, sq, yi, s float64) int {
	switch level {
	case levelAVX512:
		if n := len(dst) &^ 7; n > 0 {
			_, _, _ = dots[n-1], sqs[n-1], ys[n-1]
			return rbfRow8(n, &dst[0], &dots[0], &sqs[0], &ys[0], sq, yi, s)
		}
	case levelAVX2:
		if n := len(dst) &^ 3; n > 0 {
			_, _, _ = dots[n-1], sqs[n-1], ys[n-1]
			return rbfRow4(n, &dst[0], &dots[0], &sqs[0], &ys[0], sq, yi, s)
		}
	}
	return 0
}

// wssConsts are the working-set kernels' operands for one call, four
// lanes each (the AVX2 kernels read them in place; the AVX-512F ones
// broadcast lane 0, the only one filled for them). The kernels address
// them by byte offset: skipPos 0, skipNeg 32, gmax 64, qdi 96, c2yi 128,
// tau 160.
type wssConsts struct {
	skipPos, skipNeg     [4]int64
	gmax, qdi, c2yi, tau [4]float64
}

// The kernels' fixed operands: the first block's lane indices, the
// AVX2 step, the sign bit and the lanes' starting extremes.
var (
	wssIota   = [8]int64{0, 1, 2, 3, 4, 5, 6, 7}
	wssInc    = [4]int64{4, 4, 4, 4}
	wssSign   = [4]float64{math.Copysign(0, -1), math.Copysign(0, -1), math.Copysign(0, -1), math.Copysign(0, -1)}
	wssNegInf = math.Inf(-1)
	wssPosInf = math.Inf(1)
)

// wssMinLen is the shortest active set the kernels take: below it the
// loops are faster than a call (about 60 ns with the lanes' merge).
const wssMinLen = 32

// newWSSConsts fills the lanes the kernels of a level with lanes per
// register read: lane 0 for AVX-512F (8), all four for AVX2.
func newWSSConsts(lanes int, skipPos, skipNeg int8, gmax, qdi, c2yi, tau float64) wssConsts {
	var c wssConsts
	fill := 4
	if lanes == 8 {
		fill = 1
	}
	for l := range fill {
		c.skipPos[l], c.skipNeg[l] = int64(skipPos), int64(skipNeg)
		c.gmax[l], c.qdi[l], c.c2yi[l], c.tau[l] = gmax, qdi, c2yi, tau
	}
	return c
}

// wssLanes returns the kernels' lanes per register at this level (0:
// none).
func wssLanes() int {
	switch level {
	case levelAVX512:
		return 8
	case levelAVX2:
		return 4
	}
	return 0
}

//go:noescape
func wssMax8(n int, y, gr *float64, st *int8, c *wssConsts, v *[8]float64, idx *[8]int64)

//go:noescape
func wssMax4(n int, y, gr *float64, st *int8, c *wssConsts, v *[8]float64, idx *[8]int64)

//go:noescape
func wssSecond8(n int, q *float32, qd, y, gr *float64, st *int8, c *wssConsts, v2, vm *[8]float64, idx *[8]int64)

//go:noescape
func wssSecond4(n int, q *float32, qd, y, gr *float64, st *int8, c *wssConsts, v2, vm *[8]float64, idx *[8]int64)

// wssMaxBlocks runs WSSMax's whole blocks in assembly, merging them into
// (m, i), and returns how many indices it ran.
func wssMaxBlocks(y, g []float64, st []int8, skipPos, skipNeg int8, m *float64, i *int) int {
	lanes := wssLanes()
	n := len(y)
	if lanes == 0 || n < wssMinLen {
		return 0
	}
	n &^= lanes - 1
	_, _ = g[n-1], st[n-1]
	c := newWSSConsts(lanes, skipPos, skipNeg, 0, 0, 0, 0)
	var v [8]float64
	var idx [8]int64
	if lanes == 8 {
		wssMax8(n, &y[0], &g[0], &st[0], &c, &v, &idx)
	} else {
		wssMax4(n, &y[0], &g[0], &st[0], &c, &v, &idx)
	}
	mergeLanes(&v, &idx, lanes, false, m, i)
	return n
}

// wssSecondBlocks runs WSSSecond's whole blocks in assembly, merging them
// into (max2) and (od, j), and returns how many indices it ran.
func wssSecondBlocks(q []float32, qd, y, g []float64, st []int8, skipPos, skipNeg int8, gmax, qdi, c2yi, tau float64, max2, od *float64, j *int) int {
	lanes := wssLanes()
	n := len(y)
	if lanes == 0 || n < wssMinLen {
		return 0
	}
	n &^= lanes - 1
	_, _, _, _ = q[n-1], qd[n-1], g[n-1], st[n-1]
	c := newWSSConsts(lanes, skipPos, skipNeg, gmax, qdi, c2yi, tau)
	var v2, vm [8]float64
	var idx [8]int64
	if lanes == 8 {
		wssSecond8(n, &q[0], &qd[0], &y[0], &g[0], &st[0], &c, &v2, &vm, &idx)
	} else {
		wssSecond4(n, &q[0], &qd[0], &y[0], &g[0], &st[0], &c, &v2, &vm, &idx)
	}
	mergeMax(&v2, lanes, max2)
	mergeLanes(&vm, &idx, lanes, true, od, j)
	return n
}

//go:noescape
func addPair4(n int, dst *float64, a, b *float32, s, t float64)

//go:noescape
func addScaled4(n int, dst *float64, a *float32, s float64)

// addPairBlocks runs AddPair32's whole blocks of four in assembly (AVX2
// and AVX-512F machines) and returns how many elements it ran.
func addPairBlocks(dst []float64, a, b []float32, s, t float64) int {
	n := len(dst) &^ 3
	if level < levelAVX2 || n == 0 {
		return 0
	}
	_, _ = a[n-1], b[n-1]
	addPair4(n, &dst[0], &a[0], &b[0], s, t)
	return n
}

// addScaledBlocks is addPairBlocks for AddScaled32.
func addScaledBlocks(dst []float64, a []float32, s float64) int {
	n := len(dst) &^ 3
	if level < levelAVX2 || n == 0 {
		return 0
	}
	_ = a[n-1]
	addScaled4(n, &dst[0], &a[0], s)
	return n
}

//go:noescape
func panelDots8(np, d int, p, x, dst *float64)

//go:noescape
func panelDots4(np, d int, p, x, dst *float64)

// panelDotsAsm runs PanelDots4 in assembly and reports whether it did.
func panelDotsAsm(dst, panels []float64, d int, x []float64, np int) bool {
	switch level {
	case levelAVX512:
		panelDots8(np, d, &panels[0], &x[0], &dst[0])
	case levelAVX2:
		panelDots4(np, d, &panels[0], &x[0], &dst[0])
	default:
		return false
	}
	return true
}

//go:noescape
func expShift8(n int, dst *float64, gam, m float64)

//go:noescape
func expShift4(n int, dst *float64, gam, m float64)

// expShiftBlocks runs ExpShiftRow's whole blocks of eight (AVX-512F) or
// four (AVX2) in assembly and returns how many elements it ran.
func expShiftBlocks(dst []float64, g, m float64) int {
	switch level {
	case levelAVX512:
		if n := len(dst) &^ 7; n > 0 {
			expShift8(n, &dst[0], g, m)
			return n
		}
	case levelAVX2:
		if n := len(dst) &^ 3; n > 0 {
			expShift4(n, &dst[0], g, m)
			return n
		}
	}
	return 0
}

//go:noescape
func panelSeq8(np, d int, p, x, dst *float64)

//go:noescape
func panelSeq4(np, d int, p, x, dst *float64)

// panelSeqAsm runs PanelDotsSeq in assembly and reports whether it did.
func panelSeqAsm(dst, panels []float64, d int, x []float64, np int) bool {
	switch level {
	case levelAVX512:
		panelSeq8(np, d, &panels[0], &x[0], &dst[0])
	case levelAVX2:
		panelSeq4(np, d, &panels[0], &x[0], &dst[0])
	default:
		return false
	}
	return true
}

//go:noescape
func accumScaled8(n int, s, c, v *float64, a float64)

//go:noescape
func accumScaled4(n int, s, c, v *float64, a float64)

// accumBlocks runs AccumScaled's whole blocks in assembly and returns
// how many elements it ran.
func accumBlocks(s, c, v []float64, a float64) int {
	switch level {
	case levelAVX512:
		if n := len(v) &^ 7; n > 0 {
			accumScaled8(n, &s[0], &c[0], &v[0], a)
			return n
		}
	case levelAVX2:
		if n := len(v) &^ 3; n > 0 {
			accumScaled4(n, &s[0], &c[0], &v[0], a)
			return n
		}
	}
	return 0
}

//go:noescape
func scale4(n int, v *float64, f float64)

// scaleBlocks runs Scale's whole blocks of eight in assembly (AVX2 and
// AVX-512F machines) and returns how many elements it ran.
func scaleBlocks(v []float64, f float64) int {
	n := len(v) &^ 7
	if level < levelAVX2 || n == 0 {
		return 0
	}
	scale4(n, &v[0], f)
	return n
}

//go:noescape
func plainDecay8(n int, w, s, c, x *float64, y, lam float64, acc *[8]float64)

//go:noescape
func plainDecay4(n int, w, s, c, x *float64, y, lam float64, acc *[8]float64)

//go:noescape
func balancedDecay8(n int, w, t, tc, o, oc, x *float64, it, io, lam float64, acc *[32]float64)

//go:noescape
func balancedDecay4(n int, w, t, tc, o, oc, x *float64, k *[8]float64, lam float64, acc *[32]float64)

// plainDecayBlocks runs PlainDecay's whole blocks of eight in assembly and
// returns how many elements it ran.
func plainDecayBlocks(w, s, c, x []float64, y, lam float64, acc *[8]float64) int {
	n := len(x) &^ 7
	if level < levelAVX2 || n == 0 {
		return 0
	}
	_, _, _ = w[n-1], s[n-1], c[n-1]
	if level == levelAVX512 {
		plainDecay8(n, &w[0], &s[0], &c[0], &x[0], y, lam, acc)
	} else {
		plainDecay4(n, &w[0], &s[0], &c[0], &x[0], y, lam, acc)
	}
	return n
}

// balancedDecayBlocks is plainDecayBlocks for BalancedDecay.
func balancedDecayBlocks(w, t, tc, o, oc, x []float64, it, io, lam float64, acc *[32]float64) int {
	n := len(x) &^ 7
	if level < levelAVX2 || n == 0 {
		return 0
	}
	_, _, _, _, _ = w[n-1], t[n-1], tc[n-1], o[n-1], oc[n-1]
	if level == levelAVX512 {
		balancedDecay8(n, &w[0], &t[0], &tc[0], &o[0], &oc[0], &x[0], it, io, lam, acc)
	} else {
		k := [8]float64{it, it, it, it, io, io, io, io}
		balancedDecay4(n, &w[0], &t[0], &tc[0], &o[0], &oc[0], &x[0], &k, lam, acc)
	}
	return n
}

//go:noescape
func welford8(n int, mean, meanC, m2, m2C, inv, x *float64, invN, floor float64)

//go:noescape
func welford4(n int, mean, meanC, m2, m2C, inv, x *float64, invN, floor float64)

// welfordBlocks runs WelfordAdd's whole blocks in assembly and returns
// how many features it ran.
func welfordBlocks(mean, meanC, m2, m2C, inv, x []float64, invN, floor float64) int {
	switch level {
	case levelAVX512:
		if n := len(x) &^ 7; n > 0 {
			welford8(n, &mean[0], &meanC[0], &m2[0], &m2C[0], &inv[0], &x[0], invN, floor)
			return n
		}
	case levelAVX2:
		if n := len(x) &^ 3; n > 0 {
			welford4(n, &mean[0], &meanC[0], &m2[0], &m2C[0], &inv[0], &x[0], invN, floor)
			return n
		}
	}
	return 0
}

//go:noescape
func dotRows4(n int, rows *[]float64, x *float64, d int, dst *float64) int

// dotRowsAsm runs DotRows in assembly (AVX2 or AVX-512F machines: four
// lanes) up to the first row shorter than x and returns the number of
// rows it ran, or −1 when it has no form for the input.
func dotRowsAsm(dst, x []float64, rows [][]float64) int {
	if level < levelAVX2 || len(rows) == 0 || len(x) == 0 {
		return -1
	}
	return dotRows4(len(rows), &rows[0], &x[0], len(x), &dst[0])
}

//go:noescape
func sqd8(panels, d int, p, x, dst *float64)

//go:noescape
func sqd4(panels, d int, p, x, dst *float64)

// sqDistPanels runs Rows.SqDistsRange's panels p0 ≤ p < p1 in assembly (AVX-512F:
// a panel in one register; AVX2: in two) and reports whether it did.
func sqDistPanels(r *Rows, x []float64, p0, p1 int, dst []float64) bool {
	if level < levelAVX2 {
		return false
	}
	_ = r.data[p1*8*r.d-1]
	_ = dst[8*(p1-p0)-1]
	if level == levelAVX512 {
		sqd8(p1-p0, r.d, &r.data[p0*8*r.d], &x[0], &dst[0])
	} else {
		sqd4(p1-p0, r.d, &r.data[p0*8*r.d], &x[0], &dst[0])
	}
	return true
}

//go:noescape
func levelSums8(n, p int, w, tot, sum, sumC, coef *float64, m int)

//go:noescape
func levelSums4(n, p int, w, tot, sum, sumC, coef *float64, m int)

// levelSumBlocks runs LevelSums's whole blocks in assembly and returns how
// many elements it ran (sum and sumC are len(coef)·len(w) long).
func levelSumBlocks(w, tot, sum, sumC, coef []float64) int {
	p, m := len(w), len(coef)
	if m == 0 {
		return 0
	}
	switch level {
	case levelAVX512:
		if n := p &^ 7; n > 0 {
			levelSums8(n, p, &w[0], &tot[0], &sum[0], &sumC[0], &coef[0], m)
			return n
		}
	case levelAVX2:
		if n := p &^ 3; n > 0 {
			levelSums4(n, p, &w[0], &tot[0], &sum[0], &sumC[0], &coef[0], m)
			return n
		}
	}
	return 0
}
