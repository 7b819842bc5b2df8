package vmath

// LevelSums sets, for i < len(w) = p,
//
//	v_ℓ = sum[ℓ·p + i] + sumC[ℓ·p + i]
//	w[i] = Σ_ℓ coef[ℓ]·v_ℓ,  tot[i] = Σ_ℓ v_ℓ
//
// the sums over ℓ = 0..len(coef)−1 in that order from +0, every product
// rounded before it is added: the ordinal MAM's w and T from its
// compensated per-level sums, stored level-major (S_ℓ[i] at ℓ·p + i).
// tot is at least p long, sum and sumC at least len(coef)·p. Eight
// (AVX-512F) or four (AVX2) elements at a time with the loop's bits
// (TestLevelSumsLevels).
func LevelSums(w, tot, sum, sumC, coef []float64) {
	p, m := len(w), len(coef)
	tot = tot[:p]
	sum, sumC = sum[:m*p], sumC[:m*p]
	for i := levelSumBlocks(w, tot, sum, sumC, coef); i < p; i++ {
		var wi, ti float64
		for l, c := range coef {
			v := sum[l*p+i] + sumC[l*p+i]
			wi += float64(c * v)
			ti += v
		}
		w[i], tot[i] = wi, ti
	}
}
