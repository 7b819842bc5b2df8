package svm

import "math"

// ClippedMarginBound is Corollary 1 (docs/math.md §4, eq. 15) for a kernel scorer f = <w, φ> + … with
// ‖w‖ ≤ W, using the clip g(z) = min(1, max(−1, z)) (B' = 1, L_g = 1):
//
//	P(g(Y f(X)) ≤ −ρ) ≤ 1/(1+ρ) − (M̂_g − R̂_W − 3·sqrt(2 ln(2/δ)/n)) / (1+ρ),
//	R̂_W = (2W/n)·sqrt(tr Ω),
//
// with avgClippedMargin = M̂_g = (1/n) Σ g(y_i f(x_i)), trOmega = Σ K(x_i, x_i), sample size n,
// confidence 1 − δ, and −1 < ρ < 1. The result is clipped to [0, 1]; inputs for which the bound
// is undefined (n ≤ 0, δ ∉ (0, 1), ρ ≤ −1, W or tr Ω negative, NaN) give 1, the vacuous bound.
// For an SVM, W = sqrt(Model.W2()) (the offset B is a constant coordinate the caller must
// account for in W and tr Ω if it wants it covered).
func ClippedMarginBound(avgClippedMargin, W, trOmega, n, delta, rho float64) float64 {
	if !(n > 0) || !(delta > 0 && delta < 1) || !(rho > -1) || !(W >= 0) || !(trOmega >= 0) ||
		math.IsNaN(avgClippedMargin) || math.IsInf(n, 0) {
		return 1
	}
	rw := 2 * W / n * math.Sqrt(trOmega)
	dev := 3 * math.Sqrt(2*math.Log(2/delta)/n)
	v := 1/(1+rho) - (avgClippedMargin-rw-dev)/(1+rho)
	switch {
	case v < 0:
		return 0
	case v > 1 || math.IsNaN(v):
		return 1
	}
	return v
}

// Clip is g(z) = min(1, max(−1, z)), the transform of ClippedMarginBound.
func Clip(z float64) float64 {
	return min(1, max(-1, z))
}
