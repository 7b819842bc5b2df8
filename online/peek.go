package online

// Peek returns m's prediction for x without changing m's state: what
// Observe(x, 0, false) returns, for a request that must be scored but
// never learned (a candidate of a ranking request). Every model type's
// unlabelled Observe leaves its state as it was, except a Standardized
// wrapper's, whose running moments take in every input: Peek scores the
// standardised x through the inner model and leaves the moments alone.
// A refitted model with refit.on_score (online/refit) that is not started
// refits first when labels arrived since its last fit: its serving fit
// changes, not what it learned. It does not allocate; like Observe it
// needs exclusive use of m.
func Peek(m Model, x []float64) Prediction {
	if s, ok := m.(*Standardized); ok {
		return s.peek(x)
	}
	return m.Observe(x, 0, false)
}

// peek is Observe(x, 0, false) without the moments' update.
func (s *Standardized) peek(x []float64) Prediction {
	if len(x) != len(s.z) {
		panic("online: Standardized.Peek: len(x) != Dim()")
	}
	z, mean, meanC, inv := s.z, s.mean[:len(x)], s.meanC[:len(x)], s.inv[:len(x)]
	for i, xi := range x {
		z[i] = (xi - (mean[i] + meanC[i])) * inv[i]
	}
	if s.raw != nil {
		z = x
	}
	return Peek(s.inner, z)
}
