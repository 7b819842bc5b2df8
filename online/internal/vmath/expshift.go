package vmath

import "math"

// ExpShiftRow sets dst[i] = e^−(g·(dst[i] − m)) for g·(dst[i] − m) ≥ 0 (0
// for arguments beyond 746; NaN for NaN): the exact-kernel models' rows,
// whose distances are shifted by the smallest so that the nearest example
// has e⁰ = 1 however large g is. Within 2.5 ulp of math.Exp (measured:
// 4.8e-16 relative down to e^−708; subnormal results may differ by one
// rounding): t = (q + j/N)·ln 2 + r with N = 256, q, j integers and
// |r| ≤ ln 2/512 (Cody–Waite with the ln 2 split of math/exp.go, whose
// q·ln2Hi products are exact here), e^−t = 2^−q · 2^(−j/N) · e^−r, with
// 2^(−j/N) from a table and e^−r from its degree-5 Taylor polynomial
// (truncation < 1e-18); 2^−q is applied in two halves so that results
// down to the subnormal range come out right. No operation is fused, so
// the AVX-512F and AVX2 kernels (eight or four at a time, the table read
// by a gather) give the loop's bits (TestExpShiftRowLevels; NaN payloads
// aside). It does not allocate.
func ExpShiftRow(dst []float64, g, m float64) {
	for i := expShiftBlocks(dst, g, m); i < len(dst); i++ {
		dst[i] = expShift(dst[i], g, m)
	}
}

// expShift is ExpShiftRow's element.
func expShift(v, g, m float64) float64 {
	t := g * (v - m)
	if t > expShiftMax {
		t = expShiftMax
	}
	kf := float64(t*(expShiftN/math.Ln2)) + roundMagic
	q := kf - roundMagic
	k := math.Float64bits(kf)
	r := (t - float64(q*expShiftLn2Hi)) - float64(q*expShiftLn2Lo)
	p := 1 - float64(r*(1-float64(r*(0.5-float64(r*(1.0/6-float64(r*(1.0/24-float64(r*(1.0/120))))))))))
	e := (k >> expShiftBits) & 0x7ff // ≤ 1077 for t ≤ 746
	e1 := e >> 1
	s1 := math.Float64frombits((1023 - e1) << 52)
	s2 := math.Float64frombits((1023 - (e - e1)) << 52)
	return expShiftTable[k&(expShiftN-1)] * p * s1 * s2
}

const (
	expShiftMax   = 746
	expShiftBits  = 8
	expShiftN     = 1 << expShiftBits
	expShiftLn2Hi = 6.93147180369123816490e-01 / expShiftN // math/exp.go's Ln2Hi, Ln2Lo
	expShiftLn2Lo = 1.90821492927058770002e-10 / expShiftN
)

// expShiftTable[j] = 2^(−j/N).
var expShiftTable = func() (t [expShiftN]float64) {
	for j := range t {
		t[j] = math.Exp2(-float64(j) / expShiftN)
	}
	return t
}()

// expShiftK are the kernels' constants: the clamp, N/ln 2, the rounding
// magic, ln 2/N in two parts, the polynomial's 1, 1/2, 1/6, 1/24, 1/120,
// then (as integers) the table mask, the exponent mask and the bias.
var expShiftK = [...]uint64{
	math.Float64bits(expShiftMax), math.Float64bits(expShiftN / math.Ln2), math.Float64bits(roundMagic),
	math.Float64bits(expShiftLn2Hi), math.Float64bits(expShiftLn2Lo),
	math.Float64bits(1), math.Float64bits(0.5), math.Float64bits(1.0 / 6), math.Float64bits(1.0 / 24), math.Float64bits(1.0 / 120),
	expShiftN - 1, 0x7ff, 1023,
}

// AccumScaled adds a·v[j] to the compensated sums (s[j], c[j]) for j <
// len(v) (s and c at least as long): x = a·v[j] rounded, then Knuth's
// TwoSum, t = s + x, b = t − s, c += (s − (t − b)) + (x − b), s = t, no
// operation fused: the lda's covariance update, eight (AVX-512F) or four
// (AVX2) at a time with the loop's bits (TestAccumScaledLevels).
func AccumScaled(s, c, v []float64, a float64) {
	n := len(v)
	s, c = s[:n], c[:n]
	for j := accumBlocks(s, c, v, a); j < n; j++ {
		s[j], c[j] = TwoSum(s[j], c[j], float64(a*v[j]))
	}
}

// Scale multiplies every v[i] by f (each product rounded): the forgetting
// of decayed sums, eight at a time in assembly on AVX2 and AVX-512F
// machines (TestAccumScaledLevels checks it too).
func Scale(v []float64, f float64) {
	for i := scaleBlocks(v, f); i < len(v); i++ {
		v[i] *= f
	}
}

// WelfordAdd adds x to running per-feature statistics, as the loop
//
//	d := x_i − (mean_i + meanC_i)
//	(mean_i, meanC_i) += d·invN             (TwoSum, the error into meanC)
//	(m2_i, m2C_i) += d·(x_i − (mean_i + meanC_i))   (the new mean; TwoSum)
//	inv_i = v < floor ? 1 : 1/sqrt(v),  v = (m2_i + m2C_i)·invN
//
// does for i < len(x) (the other slices at least as long), every product
// rounded before it is added: the streaming standardisation's update
// (Welford), eight (AVX-512F) or four (AVX2) features at a time with the
// loop's bits (TestWelfordAddLevels).
func WelfordAdd(mean, meanC, m2, m2C, inv, x []float64, invN, floor float64) {
	n := len(x)
	mean, meanC, m2, m2C, inv = mean[:n], meanC[:n], m2[:n], m2C[:n], inv[:n]
	for i := welfordBlocks(mean, meanC, m2, m2C, inv, x, invN, floor); i < n; i++ {
		xi := x[i]
		d := xi - (mean[i] + meanC[i])
		mi, mc := TwoSum(mean[i], meanC[i], float64(d*invN))
		mean[i], meanC[i] = mi, mc
		qi, qc := TwoSum(m2[i], m2C[i], float64(d*(xi-(mi+mc))))
		m2[i], m2C[i] = qi, qc
		inv[i] = 1
		if v := float64((qi + qc) * invN); !(v < floor) {
			inv[i] = 1 / math.Sqrt(v)
		}
	}
}

// TwoSum adds v to the compensated sum (s, c) by Knuth's TwoSum: t = s +
// v, b = t − s, and the compensation c + ((s − (t − b)) + (v − b)). The
// kernels' compensated sums (and the models' scalar ones) add this way.
func TwoSum(s, c, v float64) (float64, float64) {
	t := s + v
	bp := t - s
	return t, c + ((s - (t - bp)) + (v - bp))
}
