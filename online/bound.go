package online

import "math"

// MistakeBound is the certainty bound of docs/math.md §4 (Theorem 2, eq. 13–14,
// signs corrected): with probability ≥ 1 − delta over the sample of n
// examples, the probability that a random example is misclassified with a
// margin of at least rho, P(Y f(X) ≤ −rho), is at most
//
//	(B − M̂ + R̂ + 3B·sqrt(2 ln(2/δ)/n)) / (B + ρ)
//
// clipped to [0, 1], where B = sup ‖φ‖, M̂ = avgMargin is the empirical
// average margin (1/n) Σ y_i f(x_i) and R̂ = rademacher bounds the empirical
// Rademacher complexity, (2/n)·sqrt(tr Ω).
//
// The bound is vacuous, and MistakeBound returns 1, when n ≤ 0, when
// rho ≤ −B, when B ≤ 0, when delta is outside (0, 1), or when any argument
// or the result is not finite: publish 1 rather than a fake tighter figure.
func MistakeBound(B, avgMargin, rademacher, n, delta, rho float64) float64 {
	if !(delta > 0 && delta < 1) {
		return 1
	}
	return boundAt(boundNumerator(B, avgMargin, rademacher, n, math.Log(2/delta)), B, rho)
}

// boundNumerator is the numerator of MistakeBound with lnTerm = ln(2/δ)
// precomputed; NaN when the bound is vacuous whatever rho is. Models cache
// it after each update so that a score costs one division.
func boundNumerator(B, avgMargin, rademacher, n, lnTerm float64) float64 {
	if !(n > 0 && n <= math.MaxFloat64 && B > 0) {
		return math.NaN()
	}
	// A NaN or infinite B, avgMargin, rademacher or lnTerm makes v NaN or
	// infinite.
	v := B - avgMargin + rademacher + 3*B*math.Sqrt(2*lnTerm/n)
	if math.IsInf(v, 0) {
		return math.NaN()
	}
	return v
}

// boundAt divides a numerator from boundNumerator by B + rho and clips the
// result to [0, 1]; 1 when it is vacuous.
func boundAt(num, B, rho float64) float64 {
	if !(rho > -B && rho <= math.MaxFloat64) {
		return 1
	}
	v := num / (B + rho)
	switch {
	case v < 0:
		return 0
	case v <= 1:
		return v
	default: // > 1, +Inf or NaN
		return 1
	}
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
