package rank

import (
	"math"
	"slices"
	"sort"
)

// Measures are the ranking measures of seed 001 §IV for predictions f of
// targets y on a test set of n points, over all pairs.
type Measures struct {
	// RankingError is seed 001's ranking error, exactly as defined there:
	// (1/|P|) Σ_{(i,j)∈P} (yᵢ − yⱼ)(1[fᵢ < fⱼ] + ½·1[fᵢ = fⱼ]), with P the
	// pairs with yᵢ > yⱼ. It weights every mis-ordered pair by its label
	// gap (so it lies in [0, 1] only when the gaps do).
	RankingError float64
	// Pearson is the correlation coefficient of f and y.
	Pearson float64
	// KendallTau is seed 001's τ: (C − D)/|P|, C and D the concordant and
	// discordant pairs of P, ties in f counting ½ each way. The seed prints
	// it as 2/|P| Σ_P (1[fᵢ < fⱼ] + ½·1[fᵢ = fⱼ]) − 1, which is −τ (a sign
	// misprint: perfect agreement must give +1); this is 1 − 2·that sum/|P|.
	// It is Somers' d of f given y (scipy.stats.somersd(y, f)).
	KendallTau float64
	// KendallTauB is Kendall's τ-b, (C − D)/sqrt((n₀ − n₁)(n₀ − n₂)), n₁
	// and n₂ the pairs tied in f and in y (scipy.stats.kendalltau; the
	// figure the project's data README reports). |τ-b| ≤ |KendallTau|.
	KendallTauB float64
	// Spearman is the Pearson correlation of the ranks of f and y (ties
	// get their average rank).
	Spearman float64
	// MSD is (1/n²) Σ_{i,j} ((yᵢ − yⱼ) − (fᵢ − fⱼ))².
	MSD float64
	// M1D is (1/n²) Σ_{i,j} |(yᵢ − yⱼ) − (fᵢ − fⱼ)|.
	M1D float64
	N   int
}

// Measure computes every measure in O(n log n). Undefined measures (a
// constant f or y, n < 2, NaNs) are NaN. It panics if len(f) != len(y).
func Measure(f, y []float64) Measures {
	if len(f) != len(y) {
		panic("rank: Measure: len(f) != len(y)")
	}
	n := len(f)
	out := Measures{N: n}
	nan := math.NaN()
	out.RankingError, out.Pearson, out.KendallTau, out.KendallTauB, out.Spearman, out.MSD, out.M1D =
		nan, nan, nan, nan, nan, nan, nan
	for i := range f {
		if math.IsNaN(f[i]) || math.IsNaN(y[i]) {
			return out
		}
	}
	if n < 2 {
		return out
	}
	ps := pairCounts(f, y)
	n0 := float64(n) * float64(n-1) / 2
	p := n0 - ps.tiesY
	if p > 0 {
		c := p - ps.disc - ps.tieF
		out.KendallTau = (c - ps.disc) / p
		out.RankingError = ps.werr / p
		if den := (n0 - ps.tiesF) * p; den > 0 {
			out.KendallTauB = (c - ps.disc) / math.Sqrt(den)
		}
	}
	out.Pearson = Pearson(f, y)
	out.Spearman = Pearson(ranks(f), ranks(y))
	r := make([]float64, n)
	var mean, sq float64
	for i := range r {
		r[i] = y[i] - f[i]
		mean += r[i]
	}
	fn := float64(n)
	mean /= fn
	for _, v := range r {
		sq += (v - mean) * (v - mean)
	}
	out.MSD = 2 * sq / fn // (1/n²)Σᵢⱼ(rᵢ − rⱼ)² = 2·(population variance of r)
	slices.Sort(r)
	var s float64
	for k, v := range r {
		s += v * float64(2*k-n+1)
	}
	out.M1D = 2 * s / (fn * fn)
	return out
}

// Pearson returns the correlation coefficient of a and b (NaN when either
// is constant or n < 2).
func Pearson(a, b []float64) float64 {
	if len(a) != len(b) {
		panic("rank: Pearson: len(a) != len(b)")
	}
	n := float64(len(a))
	if len(a) < 2 {
		return math.NaN()
	}
	var ma, mb float64
	for i := range a {
		ma += a[i]
		mb += b[i]
	}
	ma, mb = ma/n, mb/n
	var sab, saa, sbb float64
	for i := range a {
		da, db := a[i]-ma, b[i]-mb
		sab += da * db
		saa += da * da
		sbb += db * db
	}
	if saa == 0 || sbb == 0 {
		return math.NaN()
	}
	return sab / math.Sqrt(saa*sbb)
}

// ranks returns the 1-based ranks of v, ties given their average rank.
func ranks(v []float64) []float64 {
	idx := make([]int, len(v))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return v[idx[a]] < v[idx[b]] })
	r := make([]float64, len(v))
	for i := 0; i < len(idx); {
		j := i
		for j < len(idx) && v[idx[j]] == v[idx[i]] {
			j++
		}
		avg := float64(i+j+1) / 2 // mean of ranks i+1..j
		for k := i; k < j; k++ {
			r[idx[k]] = avg
		}
		i = j
	}
	return r
}

// pairStats are counts over the n(n−1)/2 unordered pairs.
type pairStats struct {
	disc  float64 // pairs with yᵢ > yⱼ and fᵢ < fⱼ
	tieF  float64 // pairs with yᵢ > yⱼ and fᵢ = fⱼ
	werr  float64 // Σ_P (yᵢ − yⱼ)(1[fᵢ < fⱼ] + ½·1[fᵢ = fⱼ])
	tiesF float64 // pairs with fᵢ = fⱼ
	tiesY float64 // pairs with yᵢ = yⱼ
}

// pairCounts counts in O(n log n): points are visited by decreasing f, one
// group of equal f at a time; a Fenwick tree indexed by the rank of y holds
// the count and the y-sum of the points already visited (larger f), so the
// discordant partners of a point are a prefix query over smaller y. Pairs
// within a group (tied in f) are counted by sorting the group on y.
func pairCounts(f, y []float64) pairStats {
	n := len(f)
	// y shifted by its minimum (gaps unchanged, smaller sums) and ranked.
	ymin := slices.Min(y)
	uy := slices.Clone(y)
	slices.Sort(uy)
	uy = slices.Compact(uy)
	ry := make([]int, n)
	var ps pairStats
	cntY := make([]int, len(uy))
	for i, v := range y {
		ry[i], _ = slices.BinarySearch(uy, v)
		cntY[ry[i]]++
	}
	for _, c := range cntY {
		ps.tiesY += float64(c) * float64(c-1) / 2
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int { // f descending, then y ascending
		switch {
		case f[a] > f[b]:
			return -1
		case f[a] < f[b]:
			return 1
		}
		return ry[a] - ry[b]
	})
	bitC := make([]float64, len(uy)+1)
	bitS := make([]float64, len(uy)+1)
	for g := 0; g < n; {
		h := g
		for h < n && f[idx[h]] == f[idx[g]] {
			h++
		}
		ps.tiesF += float64(h-g) * float64(h-g-1) / 2
		// Within the group (sorted by y): partners with strictly smaller y.
		var c, s float64
		for k := g; k < h; {
			l := k
			for l < h && ry[idx[l]] == ry[idx[k]] {
				l++
			}
			for q := k; q < l; q++ {
				i := idx[q]
				yi := y[i] - ymin
				ps.tieF += c
				ps.werr += 0.5 * (c*yi - s)
				// Partners with larger f and smaller y.
				bc, bs := 0.0, 0.0
				for p := ry[i]; p > 0; p -= p & -p { // ranks < ry[i]: tree indices 1..ry[i]
					bc += bitC[p]
					bs += bitS[p]
				}
				ps.disc += bc
				ps.werr += bc*yi - bs
			}
			for q := k; q < l; q++ {
				c++
				s += y[idx[q]] - ymin
			}
			k = l
		}
		for q := g; q < h; q++ {
			i := idx[q]
			for p := ry[i] + 1; p <= len(uy); p += p & -p {
				bitC[p]++
				bitS[p] += y[i] - ymin
			}
		}
		g = h
	}
	return ps
}
