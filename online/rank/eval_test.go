package rank

import "math"

// The general kernel sum, row by row with math.Exp: the reference the
// packed paths (Predict, the Gram matrix, the feature map) are tested
// against.

// eval returns K̄(a, b), summed over the kernels in order.
func (k *kernels) eval(a, b []float64) float64 {
	var d2, dot float64
	var haveD2, haveDot bool
	var s float64
	for t, kt := range k.ks {
		switch kt.Type {
		case RBF:
			if !haveD2 {
				d2, haveD2 = sqDist(a, b), true
			}
			s += math.Exp(-kt.Gamma*d2) * k.inv[t]
		case Linear:
			if !haveDot {
				dot, haveDot = dotp(a, b), true
			}
			s += dot * k.inv[t]
		}
	}
	return s
}

func sqDist(a, b []float64) float64 {
	b = b[:len(a)]
	var s float64
	for i, v := range a {
		d := v - b[i]
		s += d * d
	}
	return s
}
