package svm

import "math"

// expTable[j] = 2^(j/64).
var expTable = func() (t [64]float64) {
	for j := range t {
		t[j] = math.Exp2(float64(j) / 64)
	}
	return t
}()

// expNeg returns e^x for x ≤ 0 (x not NaN) with a relative error below 1e-14, flushing results
// below e^−708 to 0. It is the table method: x = (64m + j) ln2/64 + r with |r| ≤ ln2/128, so
// e^x = 2^m · 2^(j/64) · e^r, and e^r is its degree-4 Taylor polynomial (error < 4e-14). It is
// used in the kernel-row loops, where math.Exp costs about a third of the training time.
func expNeg(x float64) float64 {
	if x < -708 {
		return 0
	}
	const (
		inv   = 64 / math.Ln2
		ln2hi = 6.93147180369123816490e-01 / 64
		ln2lo = 1.90821492927058770002e-10 / 64
	)
	k := int64(x*inv - 0.5) // round to nearest (x ≤ 0)
	kf := float64(k)
	r := x - kf*ln2hi - kf*ln2lo
	r2 := r * r
	p := (1 + r) + r2*(0.5+r*(1.0/6)) + r2*r2*(1.0/24+r*(1.0/120))
	j := k & 63
	m := k >> 6 // floor division
	return p * expTable[j] * math.Float64frombits(uint64(m+1023)<<52)
}
