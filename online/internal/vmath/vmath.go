// Package vmath holds the vectorised kernels of the online models' per-event
// work on random Fourier features: the random projection z = Ω x
// (Matrix.MulVec, over Ω stored in float32), the table-driven sin/cos of
// the feature map (SincosRFF), the double-angle step between bandwidths
// (DoubleAngleRFF), the MAM's score and compensated-sum update fused
// into one pass (Dot, PlainFused, BalancedFused and their decaying forms),
// the score of an exact rbf kernel model over packed rows (Rows.RBFSum,
// with its exp, ExpNeg), and the rows of kernel matrices: squared
// distances and dot products over packed rows (Rows.SqDists,
// Rows.Dots4, PanelDots4), dot products of row slices (DotRows), the exps
// of a row (ExpNegScaled), an svm's whole float32 row (RBFRow32) and an
// exact-kernel model's shifted exps (ExpShiftRow); and the svm solver's
// working-set selection (WSSMax, WSSSecond) and gradient updates
// (AddPair32, AddScaled32).
//
// Every kernel has one definition, written out in Go in this package
// (the build tag purego, or a machine without the instructions, runs it):
// which products are fused into an FMA, and which of eight lanes every sum
// runs in (element i in lane i mod 8, the lanes added at the end as
// ((l₀ + l₄) + (l₂ + l₆)) + ((l₁ + l₅) + (l₃ + l₇))). The assembly follows
// it bit for bit, with AVX-512F (eight lanes in one register) where the
// machine has it and AVX2 with FMA (two registers of four) otherwise, so
// that a model's state and scores do not depend on the machine. The Go
// code converts every product that feeds an addition without fusion
// explicitly to float64, which forbids the compiler to fuse the two (Go
// spec, "Arithmetic operators"), and writes the fused ones as math.FMA.
package vmath

import "math"

// Matrix is a rows × cols matrix of float32 entries packed for MulVec. The
// rows are stored in panels of 16 rows, then of 4, then one last panel of
// the rows%4 rows left; within a panel of width w, column j holds the
// panel's w entries contiguously (the layout of a column broadcast: one
// column of a panel times x_j is a single vector product). The zero Matrix
// has no rows.
type Matrix struct {
	rows, cols int
	data       []float32
}

// Pack packs the rows × cols row-major matrix a (len(a) ≥ rows·cols),
// rounded to float32, for MulVec. The packed copy has half the size of a; a
// is not retained.
func Pack(a []float64, rows, cols int) Matrix {
	if rows < 0 || cols < 0 || len(a) < rows*cols {
		panic("vmath: Pack: bad dimensions")
	}
	m := Matrix{rows: rows, cols: cols, data: make([]float32, rows*cols)}
	off := 0
	for r0 := 0; r0 < rows; {
		w := panelWidth(rows - r0)
		for j := range cols {
			for l := range w {
				m.data[off+j*w+l] = float32(a[(r0+l)*cols+j])
			}
		}
		off += w * cols
		r0 += w
	}
	return m
}

// panelWidth returns the width of the panel that starts with left rows to
// go: 16, 4, or the last rows%4.
func panelWidth(left int) int {
	switch {
	case left >= 16:
		return 16
	case left >= 4:
		return 4
	}
	return left
}

// Rows returns the number of rows.
func (m *Matrix) Rows() int { return m.rows }

// Cols returns the number of columns.
func (m *Matrix) Cols() int { return m.cols }

// MulVec sets z = A x: z_i = Σ_j A_ij·x_j, each A_ij the float32 entry
// converted to float64 (exactly) and the products summed in float64. It
// panics unless len(x) == Cols() and len(z) == Rows(); it does not
// allocate.
//
// The sums: for each row, the products of the even and of the odd columns
// are accumulated in order by FMA in two sums starting from +0,
//
//	E = fma(A_{i,j}, x_j, E) for j = 0, 2, 4, …;  O likewise for j = 1, 3, …;
//	z_i = E + O.
func (m *Matrix) MulVec(z, x []float64) {
	if len(x) != m.cols || len(z) != m.rows {
		panic("vmath: Matrix.MulVec: wrong slice length")
	}
	if m.rows == 0 {
		return
	}
	if m.cols == 0 {
		clear(z)
		return
	}
	mulVec(m, z, x)
}

// mulVecGo is MulVec on the panels from row r0 on (offset off in data).
func mulVecGo(m *Matrix, z, x []float64, r0, off int) {
	n := m.cols
	var e, o [16]float64
	for r0 < m.rows {
		w := panelWidth(m.rows - r0)
		p := m.data[off : off+w*n]
		e, o = [16]float64{}, [16]float64{}
		j := 0
		for ; j+1 < n; j += 2 {
			xe, xo := x[j], x[j+1]
			pe, po := p[j*w:j*w+w], p[(j+1)*w:(j+1)*w+w]
			for l := range w {
				e[l] = math.FMA(float64(pe[l]), xe, e[l])
				o[l] = math.FMA(float64(po[l]), xo, o[l])
			}
		}
		if j < n {
			xe, pe := x[j], p[j*w:j*w+w]
			for l := range w {
				e[l] = math.FMA(float64(pe[l]), xe, e[l])
			}
		}
		zz := z[r0 : r0+w]
		for l := range w {
			zz[l] = e[l] + o[l]
		}
		off += w * n
		r0 += w
	}
}

// sum8 adds the eight lanes of a sum: ((l₀ + l₄) + (l₂ + l₆)) + ((l₁ + l₅)
// + (l₃ + l₇)), the order of a 512-bit register folded in halves.
func sum8(l *[8]float64) float64 {
	return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
}

// Table-driven sin/cos of the random-feature map.
//
// x is reduced to x = q·θ + r with θ = 2π/SincosN = π/16, q the nearest
// integer to x/θ and |r| ≤ θ/2 + tiny ≈ 0.0982, by two FMAs (Cody–Waite
// with θ = θa + θb, θa = fl(π)/16 and θb the next 53 bits; the products
// q·θa and q·θb are exact inside the FMA, and the part of θ beyond θb is
// below 1e-33). Then, with (s_q, c_q) = (sin, cos)(q·θ) from a table of
// 16 entries and a sign (sin(x + π) = −sin x), and polynomials for sin r
// (to r⁷, minimax) and cos r − 1 (to r⁸, Taylor), both within 3e-17 on
// |r| ≤ 0.0982,
//
//	sin x = s_q + (s_q·(cos r − 1) + c_q·sin r)
//	cos x = c_q + (c_q·(cos r − 1) − s_q·sin r),
//
// the bracket by an FMA. A scale a of the features multiplies the table
// entries (a·s_q, a·c_q) instead of the results.
//
// The fast path takes |x| < SincosFastLimit = 2¹⁷; larger arguments, ±Inf
// and NaN go to math.Sincos (Payne–Hanek reduction for the largest, NaN
// for the non-finite). Measured against math.Sincos the absolute
// difference is ≤ 2.3e-16 (TestSincosAccuracy).
const (
	SincosN = 32 // table steps per turn; the kernels take 16 entries and a sign

	thetaA = math.Pi / 16                // fl(π)/16, exact
	thetaB = 1.2246467991473532e-16 / 16 // (π − fl(π))/16

	invTheta = 16 / math.Pi

	// roundMagic: adding it rounds a float64 of magnitude < 2⁵¹ to an
	// integer held in the low bits of the mantissa.
	roundMagic = 0x1.8p52

	// sin r ≈ r + r³·(s₃ + s₅r² + s₇r⁴): the minimax coefficients for the
	// absolute error on |r| ≤ π/32 (a Remez fit; the error is below 3e-17,
	// against 2.3e-15 for the Taylor polynomial of the same degree); and the
	// Taylor polynomial of cos r − 1 to r⁸ (truncation < 3e-17).
	sinC3, sinC5, sinC7        = -0.16666666666611846, 0.0083333330204947622, -0.00019835958342122458
	cosC2, cosC4, cosC6, cosC8 = -0.5, 1.0 / 24, -1.0 / 720, 1.0 / 40320

	// SincosFastLimit bounds the arguments of the table path; larger ones,
	// ±Inf and NaN go to math.Sincos.
	SincosFastLimit = 1 << 17
)

// sinTable[j] = sin(j·θ), j < SincosN, computed from arguments in [0, π/4]
// (octant symmetry), where the rounding of j·θ costs < 1e-16; so
// sinTable[j + N/2] = −sinTable[j] exactly.
var sinTable = func() (t [SincosN]float64) {
	const quarter = SincosN / 4
	theta := 2 * math.Pi / SincosN
	for j := range t {
		m := j % quarter
		var s, c float64
		if m <= quarter/2 {
			s, c = math.Sincos(float64(m) * theta)
		} else {
			c, s = math.Sincos(float64(quarter-m) * theta)
		}
		for range j / quarter { // rotate by π/2
			s, c = c, -s
		}
		t[j] = s
	}
	return t
}()

// sinHalf[k], cosHalf[k] = sin(k·θ), cos(k·θ) for k < SincosN/2: the
// tables the kernels look up (the half turn beyond is their negation).
var sinHalf, cosHalf = func() (s, c [SincosN / 2]float64) {
	for k := range s {
		s[k] = sinTable[k]
		c[k] = sinTable[(k+SincosN/4)%SincosN]
	}
	return s, c
}()

// Sincos returns sin x and cos x as SincosRFF computes them (a = 1): the
// table path for |x| < SincosFastLimit, math.Sincos otherwise.
func Sincos(x float64) (sin, cos float64) { return sincosScaled(x, 1) }

// sincosScaled returns a·sin x and a·cos x as SincosRFF computes them.
func sincosScaled(x, a float64) (sin, cos float64) {
	if !(math.Abs(x) < SincosFastLimit) {
		s, c := math.Sincos(x)
		return float64(a * s), float64(a * c)
	}
	t := math.FMA(x, invTheta, roundMagic)
	q := t - roundMagic
	r := math.FMA(-q, thetaA, x)
	r = math.FMA(-q, thetaB, r)
	j := math.Float64bits(t) // low bits: q mod 2⁵¹
	k := j & (SincosN/2 - 1)
	sq := float64(a * sinHalf[k])
	cq := float64(a * cosHalf[k])
	if j&(SincosN/2) != 0 {
		sq, cq = -sq, -cq
	}
	u := float64(r * r)
	r3 := float64(u * r)
	ps := math.FMA(u, sinC7, sinC5)
	ps = math.FMA(u, ps, sinC3)
	sr := math.FMA(r3, ps, r) // sin r
	pc := math.FMA(u, cosC8, cosC6)
	pc = math.FMA(u, pc, cosC4)
	pc = math.FMA(u, pc, cosC2)
	cm := float64(u * pc) // cos r − 1
	sin = sq + math.FMA(cq, sr, float64(sq*cm))
	cos = cq + math.FMA(-sq, sr, float64(cq*cm))
	return sin, cos
}

// SincosRFF turns the products z_k held in p[D:2D] (D = len(p)/2) into the
// random-feature pair form: p[k] = a·cos(z_k), p[D+k] = a·sin(z_k), as
// sincosScaled computes them. It returns ‖p‖² as the pair form has it,
// D·a² (cos² + sin² = 1; computed as float64(D)·(a·a)), or NaN when some
// z_k is not finite (its features are then NaN). It does not allocate.
func SincosRFF(p []float64, a float64) float64 {
	d := len(p) / 2
	return SincosScaledRFF(p, p[d:2*d], 1, a)
}

// SincosScaledRFF is SincosRFF of the arguments s·z_k (each product
// rounded): p[k] = a·cos(s·z_k), p[D+k] = a·sin(s·z_k) for the D = len(p)/2
// values of z, which may be p[D:2D] itself (s = 1 is SincosRFF). It panics
// unless len(z) == D.
func SincosScaledRFF(p, z []float64, s, a float64) float64 {
	d := len(p) / 2
	if len(z) != d {
		panic("vmath: SincosScaledRFF: len(z) != len(p)/2")
	}
	cs, sn := p[:d:d], p[d:2*d:2*d]
	finite := true
	k := 0
	for k < d {
		k += sincosBlocks(cs[k:], sn[k:], z[k:], s, a)
		// The block at k has a slow argument, or the tail is shorter than
		// a block (or there is no assembly): one block's worth in Go.
		end := min(d, (k+8)&^7)
		for ; k < end; k++ {
			x := float64(s * z[k])
			finite = finite && math.Abs(x) <= math.MaxFloat64
			sn[k], cs[k] = sincosScaled(x, a)
		}
	}
	if !finite {
		return math.NaN()
	}
	return float64(d) * float64(a*a)
}
