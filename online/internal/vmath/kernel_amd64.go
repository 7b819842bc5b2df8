//go:build amd64 && !purego

package vmath

import (
	"math"

	"golang.org/x/sys/cpu"
)

// useAsm selects the AVX2 kernels of kernel_amd64.s (the tests turn it off
// to check the portable ones on this machine too).
var useAsm = cpu.X86.HasAVX2

// Accelerated reports whether the kernels run as assembly (amd64 with
// AVX2, without the purego tag).
func Accelerated() bool { return useAsm }

// PassesMatchGo reports whether Dot, PlainPass and BalancedPass may stand
// in for a caller's plain Go loops of the same definition written without
// float64 conversions: they run as assembly, and the compiler does not
// fuse that Go code's multiply-adds (below GOAMD64=v3), so both round
// every product.
func PassesMatchGo() bool { return useAsm && !goFusesMulAdd }

//go:noescape
func gemv16(panels, n int, p, x, z *float64)

//go:noescape
func gemv4(panels, n int, p, x, z *float64)

//go:noescape
func sincos4(n int, cs, sn *float64, a float64, acc *[8]float64) int

//go:noescape
func dot4(n int, a, b *float64, s *[4]float64)

//go:noescape
func plain4(n int, w, s, c, x *float64, y float64, acc *[2]float64)

//go:noescape
func balanced4(n int, w, t, tc, o, oc, x *float64, it, io, sgn float64, acc *[4]float64)

// mulVec runs the rows from r0 (a panel boundary) on: the panels of 16
// and of 4 rows in assembly, the last rows%4 in Go.
func mulVec(m *Matrix, z, x []float64, r0 int) {
	off := r0 * m.cols
	if !useAsm {
		mulVecGo(m, z, x, r0, off)
		return
	}
	n := m.cols
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

func sincosBlocks(cs, sn []float64, a float64, acc *[8]float64) int {
	n := len(sn) &^ 3
	if !useAsm {
		return sincosBlocksGo(cs, sn, a, acc)
	}
	if n == 0 {
		return 0
	}
	_ = cs[n-1]
	return sincos4(n, &cs[0], &sn[0], a, acc)
}

func dotBlocks(a, b []float64, s *[4]float64) {
	if !useAsm {
		dotBlocksGo(a, b, s)
		return
	}
	_ = b[len(a)-1]
	dot4(len(a), &a[0], &b[0], s)
}

func plainBlocks(w, s, c, x []float64, y float64, acc *[2]float64) {
	if !useAsm {
		plainBlocksGo(w, s, c, x, y, acc)
		return
	}
	n := len(w)
	_, _, _ = s[n-1], c[n-1], x[n-1]
	plain4(n, &w[0], &s[0], &c[0], &x[0], y, acc)
}

func balancedBlocks(w, t, tc, o, oc, x []float64, it, io, sgn float64, acc *[4]float64) {
	if !useAsm {
		balancedBlocksGo(w, t, tc, o, oc, x, it, io, sgn, acc)
		return
	}
	n := len(w)
	_, _, _, _, _ = t[n-1], tc[n-1], o[n-1], oc[n-1], x[n-1]
	balanced4(n, &w[0], &t[0], &tc[0], &o[0], &oc[0], &x[0], it, io, sgn, acc)
}

// kernel_amd64.s takes SincosN = 256 (SINCOS_N) for its table offsets.
var _ = [1]struct{}{}[SincosN-256]

// sincosK holds the constants of sincos4 (K_… in kernel_amd64.s), each
// repeated in the four lanes of a 256-bit operand: the same values as
// Sincos uses.
var sincosK = func() (k [12][4]uint64) {
	f := func(v float64) uint64 { return math.Float64bits(v) }
	vals := [...]uint64{
		0x7fffffffffffffff, // 0: |x| mask
		f(SincosFastLimit), // 1
		f(invTheta),        // 2
		f(roundMagic),      // 3
		f(thetaA),          // 4
		f(thetaB),          // 5
		f(thetaC),          // 6
		f(-1.0 / 6),        // 7
		f(1.0 / 120),       // 8
		f(-0.5),            // 9
		f(1.0 / 24),        // 10
		f(1.0 / 720),       // 11
	}
	for i, v := range vals {
		k[i] = [4]uint64{v, v, v, v}
	}
	return k
}()

//go:noescape
func double4(n int, dc, ds, sc, ss *float64, k float64, acc *[8]float64)

func doubleBlocks(dc, ds, sc, ss []float64, k float64, acc *[8]float64) {
	if !useAsm {
		doubleBlocksGo(dc, ds, sc, ss, k, acc)
		return
	}
	n := len(dc)
	_, _, _ = ds[n-1], sc[n-1], ss[n-1]
	double4(n, &dc[0], &ds[0], &sc[0], &ss[0], k, acc)
}
