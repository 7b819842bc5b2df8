// Package vmath holds the vectorised kernels of the online models' per-event
// work on random Fourier features: the random projection z = Ω x
// (Matrix.MulVec), the table-driven sin/cos of the feature map
// (SincosRFF), and the inner product and compensated-sum passes of the MAM
// (Dot, PlainPass, BalancedPass).
//
// Every kernel is bit-identical to a scalar definition written out in this
// package (and, for the projection, to gonum's amd64 Dgemv): the
// vectorisation runs independent sums in the lanes of a register but never
// reorders a sum or fuses a product into an addition. Recorded models and
// predictions therefore do not change with the kernels, and the assembly
// and the portable code agree bit for bit.
//
// On amd64 with AVX2 the kernels are assembly (kernel_amd64.s, four
// doubles per instruction); elsewhere, or with the build tag purego, they
// are plain Go. The Go code converts every product that feeds an addition
// explicitly to float64, which forbids the compiler to fuse the two into
// an FMA (Go spec, "Arithmetic operators"), so it rounds as amd64 does on
// every platform.
package vmath

import "math"

// Matrix is a rows × cols matrix packed for MulVec. The rows are stored in
// panels of 16 rows, then of 4, then one last panel of the rows%4 rows
// left; within a panel of width w, column j holds the panel's w entries
// contiguously (the layout of a column broadcast: one column of a panel
// times x_j is a single vector product). The zero Matrix has no rows.
type Matrix struct {
	rows, cols int
	data       []float64
}

// Pack packs the rows × cols row-major matrix a (len(a) ≥ rows·cols) for
// MulVec. The packed copy has the same size as a; a is not retained.
func Pack(a []float64, rows, cols int) Matrix {
	if rows < 0 || cols < 0 || len(a) < rows*cols {
		panic("vmath: Pack: bad dimensions")
	}
	m := Matrix{rows: rows, cols: cols, data: make([]float64, rows*cols)}
	off := 0
	for r0 := 0; r0 < rows; {
		w := panelWidth(rows - r0)
		for j := range cols {
			for l := range w {
				m.data[off+j*w+l] = a[(r0+l)*cols+j]
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

// MulVec sets z = A x: z_i = Σ_j A_ij·x_j. It panics unless len(x) ==
// Cols() and len(z) == Rows(); it does not allocate.
//
// The sums are those of gonum's amd64 Dgemv (NoTrans, alpha 1, beta 0),
// bit for bit: for each row, the products of the even and of the odd
// columns (the last column excluded when cols is odd) are summed in order
// in two accumulators starting from +0, then
//
//	z_i = (E + O) + A_{i,n−1}·x_{n−1}   (cols odd; the last product is
//	                                       added after the two halves), or
//	z_i = (E + A_{i,n−1}·x_{n−1}) + O   for the last row when rows is odd,
//
// and z_i = E + O when cols is even. Every product is rounded before it is
// added (no FMA).
func (m *Matrix) MulVec(z, x []float64) {
	if len(x) != m.cols || len(z) != m.rows {
		panic("vmath: Matrix.MulVec: wrong slice length")
	}
	mulVecFrom(m, z, x, 0)
}

// mulVecFrom is MulVec on the rows from r0 on, r0 being a panel boundary
// (every panel before it is full, so that it starts at r0·cols in data).
func mulVecFrom(m *Matrix, z, x []float64, r0 int) {
	if r0 >= m.rows {
		return
	}
	if m.cols == 0 {
		clear(z[r0:])
		return
	}
	mulVec(m, z, x, r0)
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
				e[l] += float64(pe[l] * xe)
				o[l] += float64(po[l] * xo)
			}
		}
		zz := z[r0 : r0+w]
		if j == n { // cols even
			for l := range w {
				zz[l] = e[l] + o[l]
			}
		} else {
			xl, pl := x[j], p[j*w:j*w+w]
			for l := range w {
				zz[l] = (e[l] + o[l]) + float64(pl[l]*xl)
			}
			if r0+w == m.rows && m.rows%2 == 1 { // gonum's single last row
				l := w - 1
				zz[l] = (e[l] + float64(pl[l]*xl)) + o[l]
			}
		}
		off += w * n
		r0 += w
	}
}

// Table-driven sin/cos of the random-feature map.
//
// x is reduced to x = q·θ + r with θ = 2π/SincosN, q the nearest integer to
// x/θ and |r| ≤ θ/2 ≈ 0.0123 (Cody–Waite: θ is split into three parts, the
// first two with few enough significant bits that q·θa and q·θb are exact
// for |q| < 2²³). Then, with (s_q, c_q) = (sin, cos)(q·θ) from a table and
// short Taylor polynomials for sin r and cos r − 1 (truncation < 1e-17),
//
//	sin x = s_q + (s_q·(cos r − 1) + c_q·sin r)
//	cos x = c_q + (c_q·(cos r − 1) − s_q·sin r).
//
// The fast path takes |x| < SincosFastLimit = 2¹⁷, where |q| ≤ 2¹⁷/θ + 1/2
// < 5.4·10⁶ < 2²³; larger arguments, ±Inf and NaN go to math.Sincos
// (Payne–Hanek reduction for the largest, NaN for the non-finite).
// Measured against math.Sincos the absolute difference is ≤ 2.3e-16 and
// cos² + sin² = 1 to 4.5e-16, as for math.Sincos itself.
const (
	SincosN = 256 // table entries per turn; a power of 2

	// θ = 2π/SincosN = (π/2)/64 in three parts: the standard library's
	// PI4A, PI4B, PI4C (π/4 split) times 2/64.
	thetaA = 7.85398125648498535156e-1 / 32
	thetaB = 3.77489470793079817668e-8 / 32
	thetaC = 2.69515142907905952645e-15 / 32

	invTheta = SincosN / (2 * math.Pi)

	// roundMagic: adding it rounds a float64 of magnitude < 2⁵¹ to an
	// integer held in the low bits of the mantissa.
	roundMagic = 0x1.8p52

	// SincosFastLimit bounds the arguments of the table path (|q| < 2²³);
	// larger ones, ±Inf and NaN go to math.Sincos.
	SincosFastLimit = 1 << 17
)

// sinTable[j] = sin(j·θ). Entries are computed from arguments in [0, π/4]
// (octant symmetry), where the rounding of j·θ costs < 1e-16.
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

// sincosTable[2j], sincosTable[2j+1] = sin(j·θ), cos(j·θ) = sinTable[j],
// sinTable[(j + N/4) mod N]: the pairs the assembly loads 16 bytes at a
// time.
var sincosTable = func() (t [2 * SincosN]float64) {
	for j := range SincosN {
		t[2*j] = sinTable[j]
		t[2*j+1] = sinTable[(j+SincosN/4)%SincosN]
	}
	return t
}()

// Sincos returns sin x and cos x as SincosRFF computes them: the table
// path for |x| < SincosFastLimit, math.Sincos otherwise.
func Sincos(x float64) (sin, cos float64) {
	if !(math.Abs(x) < SincosFastLimit) {
		return math.Sincos(x)
	}
	t := float64(x*invTheta) + roundMagic
	q := t - roundMagic
	j := math.Float64bits(t) // low bits: q mod SincosN
	r := ((x - float64(q*thetaA)) - float64(q*thetaB)) - float64(q*thetaC)
	u := r * r
	sr := r + float64(float64(r*u)*(-1.0/6+float64(u*(1.0/120))))
	cm := u * (-0.5 + float64(u*(1.0/24-float64(u*(1.0/720)))))
	sq := sinTable[j&(SincosN-1)]
	cq := sinTable[(j+SincosN/4)&(SincosN-1)]
	sin = sq + (float64(sq*cm) + float64(cq*sr))
	cos = cq + (float64(cq*cm) - float64(sq*sr))
	return sin, cos
}

// SincosRFF turns the products z_k held in p[D:2D] (D = len(p)/2) into the
// random-feature pair form: p[k] = a·cos(z_k), p[D+k] = a·sin(z_k). It
// returns Σ p[i]², NaN when some z_k is not finite. It does not allocate.
//
// The sum of squares runs in eight accumulators, the cosines' and the
// sines' of the features k ≡ l (mod 4) in accumulator l and 4 + l:
//
//	((c₀ + c₁) + (c₂ + c₃)) + ((s₀ + s₁) + (s₂ + s₃)).
func SincosRFF(p []float64, a float64) float64 {
	d := len(p) / 2
	var acc [8]float64
	sincosFrom(p[:d:d], p[d:2*d:2*d], a, &acc)
	return sumSquares(&acc)
}

func sumSquares(acc *[8]float64) float64 {
	return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]))
}

// sincosFrom is SincosRFF's loop on features cs, sn whose first one is in
// lane 0 of acc.
func sincosFrom(cs, sn []float64, a float64, acc *[8]float64) {
	d := len(sn)
	cs = cs[:d]
	k := 0
	for k+4 <= d {
		k += sincosBlocks(cs[k:], sn[k:], a, acc)
		if k+4 > d {
			break
		}
		// The block at k has a slow argument (or there is no assembly).
		for l := range 4 {
			sincosOne(cs, sn, k+l, a, acc, l)
		}
		k += 4
	}
	for ; k < d; k++ {
		sincosOne(cs, sn, k, a, acc, k%4)
	}
}

// sincosOne maps feature k into lane l of acc.
func sincosOne(cs, sn []float64, k int, a float64, acc *[8]float64, l int) {
	sin, cos := Sincos(sn[k])
	sin *= a
	cos *= a
	cs[k] = cos
	sn[k] = sin
	acc[l] += float64(cos * cos)
	acc[4+l] += float64(sin * sin)
}

// sincosBlocksGo maps the whole blocks of four features of cs, sn (the
// prefix of length 4·⌊len/4⌋) while every argument of a block is on the
// table path, and returns the number of features mapped (a multiple of 4).
func sincosBlocksGo(cs, sn []float64, a float64, acc *[8]float64) int {
	n := len(sn) &^ 3
	k := 0
	for ; k < n; k += 4 {
		b := sn[k : k+4 : k+4]
		if !(math.Abs(b[0]) < SincosFastLimit && math.Abs(b[1]) < SincosFastLimit &&
			math.Abs(b[2]) < SincosFastLimit && math.Abs(b[3]) < SincosFastLimit) {
			break
		}
		for l := range 4 {
			sincosOne(cs, sn, k+l, a, acc, l)
		}
	}
	return k
}
