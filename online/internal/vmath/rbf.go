package vmath

import (
	"math"
	"math/big"
)

// Rows are n rows of dimension d with a weight each, packed for RBFSum: in
// panels of 8 rows, column j of a panel holding its 8 rows' entries j
// contiguously (row i in lane i mod 8), the last panel padded with rows of
// weight 0. The zero Rows have no rows.
type Rows struct {
	n, d  int
	data  []float64 // panels of 8·d
	alpha []float64 // n weights, padded with 0 to a multiple of 8
}

// PackRows packs the n × d row-major x (len(x) ≥ n·d) with the weights
// alpha (len ≥ n). Neither is retained.
func PackRows(x []float64, n, d int, alpha []float64) Rows {
	if n < 0 || d < 1 || len(x) < n*d || len(alpha) < n {
		panic("vmath: PackRows: bad dimensions")
	}
	p := (n + 7) / 8
	r := Rows{n: n, d: d, data: make([]float64, p*8*d), alpha: make([]float64, p*8)}
	for i := range n {
		base := (i / 8) * 8 * d
		for j := range d {
			r.data[base+j*8+i%8] = x[i*d+j]
		}
	}
	copy(r.alpha, alpha[:n])
	return r
}

// Len returns n.
func (r *Rows) Len() int { return r.n }

// Dim returns d.
func (r *Rows) Dim() int { return r.d }

// AppendRows appends the rows, row-major, to dst.
func (r *Rows) AppendRows(dst []float64) []float64 {
	d := r.d
	for i := range r.n {
		base := (i / 8) * 8 * d
		for j := range d {
			dst = append(dst, r.data[base+j*8+i%8])
		}
	}
	return dst
}

// RBFSum returns Σ_i α_i·e^(−g‖x_i − x‖²) over the rows (g > 0, len(x) =
// Dim()): the score of a kernel model of one rbf kernel. Per row, in its
// lane: the squared distance summed by FMA over j in order, v = −g·d2
// rounded, e^v by ExpNeg, then α_i·e^v added to the lane by FMA; the eight
// lanes added at the end as the package's other sums. The AVX-512F and
// AVX2 kernels give the same bits (TestRBFSumLevels); elsewhere it runs in
// Go. It does not allocate.
func (r *Rows) RBFSum(x []float64, g float64) float64 {
	if len(x) != r.d {
		panic("vmath: RBFSum: wrong input dimension")
	}
	var acc [8]float64
	p := 0
	if r.n > 0 {
		p = rbfPanels(r, x, g, &acc)
	}
	d := r.d
	for ; p < len(r.alpha)/8; p++ {
		panel := r.data[p*8*d : (p+1)*8*d]
		al := r.alpha[p*8 : p*8+8]
		for l := range 8 {
			var d2 float64
			for j, xj := range x {
				t := panel[j*8+l] - xj
				d2 = math.FMA(t, t, d2)
			}
			acc[l] = math.FMA(al[l], ExpNeg(float64(-g*d2)), acc[l])
		}
	}
	return sum8(&acc)
}

// SqDists sets dst[k] = ‖x_i − x‖², i = 8·p0 + k, for the rows of the
// panels from p0 on (the last panel's padding rows included), summed as
// RBFSum sums them (FMA over j in order), and returns their number,
// 8·(⌈Len()/8⌉ − p0). len(x) must be Dim() and len(dst) at least that
// number. The AVX-512F and AVX2 kernels give the same bits
// (TestSqDistsLevels). It does not allocate.
func (r *Rows) SqDists(dst, x []float64, p0 int) int {
	return r.SqDistsRange(dst, x, p0, len(r.alpha)/8)
}

// SqDistsRange is SqDists for the panels p0 ≤ p < p1 only: it sets
// dst[8(p − p0) + l] and returns 8(p1 − p0).
func (r *Rows) SqDistsRange(dst, x []float64, p0, p1 int) int {
	np := len(r.alpha) / 8
	if len(x) != r.d || p0 < 0 || p0 > p1 || p1 > np || len(dst) < 8*(p1-p0) {
		panic("vmath: SqDists: wrong dimensions")
	}
	if p1 == p0 {
		return 0
	}
	d := r.d
	if !sqDistPanels(r, x, p0, p1, dst) {
		for p := p0; p < p1; p++ {
			panel := r.data[p*8*d : (p+1)*8*d]
			out := dst[(p-p0)*8 : (p-p0)*8+8]
			for l := range 8 {
				var d2 float64
				for j, xj := range x {
					t := panel[j*8+l] - xj
					d2 = math.FMA(t, t, d2)
				}
				out[l] = d2
			}
		}
	}
	return 8 * (p1 - p0)
}

// Dots4 sets dst[8(p − p0) + l] = Dot4(x, row 8p + l) for the panels
// p0 ≤ p < p1 (PanelDots4 on the packed rows; padding rows give 0).
func (r *Rows) Dots4(dst, x []float64, p0, p1 int) {
	d := r.d
	if len(x) != d || p0 < 0 || p0 > p1 || p1 > len(r.alpha)/8 {
		panic("vmath: Dots4: wrong dimensions")
	}
	if p1 > p0 {
		PanelDots4(dst, r.data[p0*8*d:p1*8*d], x)
	}
}

// DotRows sets dst[j] = <x, rows[j]> over the first len(x) entries of
// each row (len(dst) ≥ len(rows); each row at least len(x) long), summed
// as an svm's kernel rows sum them: four sums s_l of the products x_k·r_k,
// k ≡ l mod 4 over k < 4⌊len(x)/4⌋, each product rounded and added in
// order; the products of the last len(x) mod 4 entries added to s₀ in
// order; then (s₀ + s₁) + (s₂ + s₃). The assembly (AVX2, four lanes)
// gives the same bits (TestDotRowsLevels). It does not allocate.
func DotRows(dst, x []float64, rows [][]float64) {
	if len(dst) < len(rows) {
		panic("vmath: DotRows: dst shorter than rows")
	}
	n := len(x)
	if k := dotRowsAsm(dst, x, rows); k >= 0 {
		if k < len(rows) {
			panic("vmath: DotRows: a row shorter than x")
		}
		return
	}
	for j, r := range rows {
		if len(r) < n {
			panic("vmath: DotRows: a row shorter than x")
		}
		dst[j] = Dot4(x, r)
	}
}

// Panels are rows packed eight to a panel as Rows packs them: row i's
// entry k at [8d·⌊i/8⌋ + 8k + i mod 8], the rows of the last panel past
// the last row zero.

// PackPanels packs the n rows of x (each at least d long; their first d
// entries) into panels.
func PackPanels(x [][]float64, d int) []float64 {
	p := make([]float64, (len(x)+7)/8*8*d)
	for i, r := range x {
		base := (i / 8) * 8 * d
		for k, v := range r[:d] {
			p[base+8*k+i%8] = v
		}
	}
	return p
}

// SwapPanelRows exchanges rows i and j of panels of d columns.
func SwapPanelRows(panels []float64, d, i, j int) {
	bi, bj := (i/8)*8*d+i%8, (j/8)*8*d+j%8
	for k := range d {
		panels[bi+8*k], panels[bj+8*k] = panels[bj+8*k], panels[bi+8*k]
	}
}

// PanelDots4 sets dst[8p + l] = Dot4(x, row 8p + l) for every row of the
// panels (d = len(x) columns; len(dst) ≥ len(panels)/d): DotRows' sums of
// packed rows, a whole panel per register (AVX-512F) or two (AVX2), the
// same bits (TestPanelDots4Levels). It does not allocate.
func PanelDots4(dst, panels, x []float64) {
	d := len(x)
	if d == 0 || len(panels)%(8*d) != 0 || len(dst) < len(panels)/d {
		panic("vmath: PanelDots4: wrong dimensions")
	}
	np := len(panels) / (8 * d)
	if np == 0 || panelDotsAsm(dst, panels, d, x, np) {
		return
	}
	d4 := d &^ 3
	for p := range np {
		base := p * 8 * d
		for l := range 8 {
			var s0, s1, s2, s3 float64
			k := 0
			for ; k < d4; k += 4 {
				s0 += float64(x[k] * panels[base+8*k+l])
				s1 += float64(x[k+1] * panels[base+8*(k+1)+l])
				s2 += float64(x[k+2] * panels[base+8*(k+2)+l])
				s3 += float64(x[k+3] * panels[base+8*(k+3)+l])
			}
			for ; k < d; k++ {
				s0 += float64(x[k] * panels[base+8*k+l])
			}
			dst[8*p+l] = (s0 + s1) + (s2 + s3)
		}
	}
}

// PanelDotsSeq sets dst[8p + l] = Σ_k x_k·(row 8p + l)_k for every row of
// the panels (d = len(x) columns; len(dst) ≥ len(panels)/d), each product
// rounded and added in column order from 0: the plain loop's sums (a
// random-feature projection's), a panel per register (AVX-512F) or two
// (AVX2), the same bits (TestPanelDotsSeqLevels). It does not allocate.
func PanelDotsSeq(dst, panels, x []float64) {
	d := len(x)
	if d == 0 || len(panels)%(8*d) != 0 || len(dst) < len(panels)/d {
		panic("vmath: PanelDotsSeq: wrong dimensions")
	}
	np := len(panels) / (8 * d)
	if np == 0 || panelSeqAsm(dst, panels, d, x, np) {
		return
	}
	for p := range np {
		base := p * 8 * d
		for l := range 8 {
			var s float64
			for k, xk := range x {
				s += float64(xk * panels[base+8*k+l])
			}
			dst[8*p+l] = s
		}
	}
}

// Dot4 returns <a, b> over the first len(a) entries of b (len(b) ≥
// len(a)), summed as DotRows sums each row: four sums of the products by
// index mod 4, the tail added to the first, then (s₀ + s₁) + (s₂ + s₃).
// The svm's kernels take their dot products from it, so that a row of its
// kernel matrix and a single entry agree to the bit.
func Dot4(a, b []float64) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float64
	k := 0
	for ; k+4 <= len(a); k += 4 {
		s0 += float64(a[k] * b[k])
		s1 += float64(a[k+1] * b[k+1])
		s2 += float64(a[k+2] * b[k+2])
		s3 += float64(a[k+3] * b[k+3])
	}
	for ; k < len(a); k++ {
		s0 += float64(a[k] * b[k])
	}
	return (s0 + s1) + (s2 + s3)
}

// ExpNegScaled sets dst[i] = ExpNeg(s·src[i]), the product rounded, for
// i < len(dst) (len(src) ≥ len(dst); dst may be src): the exps of a row of
// an rbf kernel matrix, s = −γ and src the squared distances. The AVX-512F
// and AVX2 kernels give ExpNeg's bits eight or four at a time
// (TestExpNegScaledLevels); elsewhere, and for arguments above 707, it
// runs in Go. It does not allocate.
func ExpNegScaled(dst, src []float64, s float64) {
	if len(src) < len(dst) {
		panic("vmath: ExpNegScaled: src shorter than dst")
	}
	src = src[:len(dst)]
	for i := 0; i < len(dst); {
		i += expBlocks(dst[i:], src[i:], s)
		if i < len(dst) {
			dst[i] = ExpNeg(float64(s * src[i]))
			i++
		}
	}
}

// RBFRow32 sets dst[j] = float32(yi·ys[j]·ExpNeg(s·t_j)) with
// t_j = max(sq + sqs[j] − 2·dots[j], 0), for j < len(dst) (the other
// slices at least as long): a row of an svm's kernel matrix
// y_i·y_j·exp(−γ‖x_i − x_j‖²) as float32, from the dot products
// dots[j] = <x_i, x_j>, the squared norms sqs[j] = ‖x_j‖² and sq = ‖x_i‖²,
// with s = −γ. The AVX-512F and AVX2 kernels give these bits eight or four
// at a time (TestRBFRow32Levels). It does not allocate.
func RBFRow32(dst []float32, dots, sqs, ys []float64, sq, yi, s float64) {
	n := len(dst)
	if len(dots) < n || len(sqs) < n || len(ys) < n {
		panic("vmath: RBFRow32: an input is shorter than dst")
	}
	dots, sqs, ys = dots[:n], sqs[:n], ys[:n]
	for i := 0; i < n; {
		i += rowBlocks(dst[i:], dots[i:], sqs[i:], ys[i:], sq, yi, s)
		if i < n {
			t := max(sq+sqs[i]-float64(2*dots[i]), 0)
			dst[i] = float32(yi * ys[i] * ExpNeg(s*t))
			i++
		}
	}
}

// ExpNeg is e^v for v ≥ −707, and 0 below (and for NaN): the terms of an rbf
// sum below 2⁻¹⁰²⁰ are dropped. Within 1 ulp of math.Exp over [−707, 707]
// (TestExpNegAccuracy), by a table of 16 and a polynomial:
// v = (16k + j)·ln2/16 + r with 0 ≤ j < 16 and |r| ≤ ln2/32 (Cody–Waite
// by two FMAs with ln2/16 in two parts), e^v = 2^k·T_j·e^r, e^r − 1 by
// Taylor to r⁷ (its remainder below r⁸/8! < 2e-18), and T_j = 2^(j/16) =
// hi_j + lo_j (to 2⁻¹⁰⁰) so that T_j·e^r = hi_j + (hi_j·p + lo_j) rounds
// once of note. The AVX-512F and AVX2 kernels compute the same operations.
func ExpNeg(v float64) float64 {
	if !(v >= -expLimit && v <= expLimit) {
		if v > expLimit {
			return math.Exp(v)
		}
		return 0
	}
	t := math.FMA(v, expN/math.Ln2, expMagic) // k = round(v·16/ln2) in its low bits
	kf := t - expMagic
	r := math.FMA(-kf, expLn2Hi, v)
	r = math.FMA(-kf, expLn2Lo, r)
	q := math.FMA(r, 1.0/5040, 1.0/720)
	q = math.FMA(r, q, 1.0/120)
	q = math.FMA(r, q, 1.0/24)
	q = math.FMA(r, q, 1.0/6)
	q = math.FMA(r, q, 0.5)
	p := math.FMA(float64(r*r), q, r) // e^r − 1
	k := int64(math.Float64bits(t) - math.Float64bits(expMagic))
	j := k & (expN - 1)
	hi := expHi[j]
	w := hi + math.FMA(hi, p, expLo[j])
	return math.Float64frombits(math.Float64bits(w) + uint64(k>>4)<<52)
}

const (
	expN = 16 // table entries per doubling
	// expLimit bounds the table path: 2^k·w stays normal and finite.
	expLimit = 707
	expMagic = 0x1.8p52
)

// expLn2Hi + expLn2Lo is ln2/16 to about 2⁻¹¹⁰ (hi the float64 nearest
// it, lo the float64 nearest the rest).
var expLn2Hi, expLn2Lo = func() (hi, lo float64) {
	ln2, _, err := big.ParseFloat("0.69314718055994530941723212145817656807550013436025525412068000949339362196969471560586332699641868754200148102057068573368552023575813055703267075163507596193072757082837143519030703862389167347112335", 10, 400, big.ToNearestEven)
	if err != nil {
		panic(err)
	}
	c := new(big.Float).SetPrec(400).Quo(ln2, big.NewFloat(expN))
	hi, _ = c.Float64()
	lo, _ = new(big.Float).SetPrec(400).Sub(c, big.NewFloat(hi)).Float64()
	return hi, lo
}()

// expHi and expLo hold 2^(j/16) = hi_j + lo_j.
var expHi, expLo = func() (hi, lo [expN]float64) {
	const prec = 256
	root := new(big.Float).SetPrec(prec).SetInt64(2)
	for range 4 { // 2^(1/16)
		root.Sqrt(root)
	}
	v := new(big.Float).SetPrec(prec).SetInt64(1)
	for j := range expN {
		h, _ := v.Float64()
		hi[j] = h
		rest := new(big.Float).SetPrec(prec).Sub(v, new(big.Float).SetPrec(prec).SetFloat64(h))
		lo[j], _ = rest.Float64()
		v.Mul(v, root)
	}
	return hi, lo
}()
