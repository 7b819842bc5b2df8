package calibrate

import (
	"math"
	"slices"
)

// VennAbers is an inductive Venn–Abers predictor fitted on a set of
// calibration pairs (see the package documentation). It is immutable once
// returned by FitVennAbers, so a table may serve lookups on any number of
// goroutines while the next one is fitted.
type VennAbers struct {
	// For the k distinct finite calibration scores s_1 < … < s_k, p0
	// and p1 at a test score s are step functions of s: p1(s) depends on
	// how many calibration scores are < s, p0(s) on how many are ≤ s.
	// A lookup reads the scores where either steps in one sorted list of
	// thresholds, at, a test score having passed a threshold when it is
	// ≥ it (p1's steps, passed when s > the step's score, are kept as the
	// next float64 above it); and per count of thresholds passed, pl holds
	// (p, p0, p1). A fit on 2 000 pairs has 100 to 200 steps of each,
	// where there are up to 2 000 scores: one search of a list that stays
	// in the cache, even right after a refit, and p's division done once
	// per fit.
	at, pl []float64 // len(pl) = 3 (len(at) + 1)
	k      int       // distinct finite calibration scores
	n      int       // calibration pairs fitted on (ties counted)
	np     int       // positive ones among them
}

// FitVennAbers fits the IVAP table on pairs (Score the classifier's score,
// Y 1 for a positive label, 0 for a negative one; any Y > 0 counts as
// positive). Pairs with a non-finite score are skipped. pairs is not
// modified. It costs O(n log n) time (the sorts; the rest is linear) and
// O(n) memory. A Fitter does the same with less allocation, for repeated
// fits.
func FitVennAbers(pairs []Pair) *VennAbers {
	var f Fitter
	return f.VennAbers(pairs)
}

// A Fitter fits Venn–Abers tables, keeping its working memory from one fit
// to the next: a fit allocates only the table it returns (one block of
// 4 (steps of p0 + steps of p1) + 3 floats), where FitVennAbers allocates
// its working memory too. The zero Fitter is ready; it is not safe for
// concurrent use (a background refit owns one).
type Fitter struct {
	pos, neg, s     []float64
	w, y, cw, cy, g []float64
	f0, f1          []float64 // p0 and p1 per run of test scores (table)
	pts, st         []point

	// For VennAbersAt and ConformalAt: the last fits' inputs, and scratch
	// for the values that left and entered and for the merge.
	va, cf        slide
	out, in, free []float64
	conf          *Conformal // the last ConformalAt table
}

// VennAbers is FitVennAbers(pairs) on f's working memory.
func (f *Fitter) VennAbers(pairs []Pair) *VennAbers {
	f.va.valid = false
	f.pos = values(f.pos, pairs, positiveScore)
	f.neg = values(f.neg, pairs, negativeScore)
	return f.table()
}

// VennAbersAt is VennAbers(pairs), the same table bit for bit, for pairs
// whose first is the first-th pair of a stream (Window.Added() − len(pairs)
// for Window.CopyRecentTo): when the last VennAbersAt was on the same stream
// and most pairs are the same, the scores sorted for it are updated with
// the pairs that left and entered (O(n + K log K) for K of them) instead of
// sorted again (O(n log n)).
func (f *Fitter) VennAbersAt(pairs []Pair, first int64) *VennAbers {
	leave, enter, ok := f.va.step(pairs, first)
	ok = ok && f.shift(&f.pos, leave, enter, positiveScore) && f.shift(&f.neg, leave, enter, negativeScore)
	if !ok {
		f.pos = values(f.pos, pairs, positiveScore)
		f.neg = values(f.neg, pairs, negativeScore)
	}
	f.va.record(pairs, first)
	return f.table()
}

// shift updates *sorted, the sorted values of the pairs before a step,
// with the values of the pairs that left and entered; false if they do not
// match (*sorted is then unchanged).
func (f *Fitter) shift(sorted *[]float64, leave, enter []Pair, value func(Pair) (float64, bool)) bool {
	f.out = values(f.out, leave, value)
	f.in = values(f.in, enter, value)
	dst, ok := resorted(f.free, *sorted, f.out, f.in)
	if !ok {
		f.free = dst
		return false
	}
	f.free, *sorted = *sorted, dst
	return true
}

// positiveScore and negativeScore are a pair's score if finite and the
// pair of that class (a positive: Y > 0), with −0 made +0 (so that equal
// scores are equal bits, which slide's merges rely on).
func positiveScore(p Pair) (float64, bool) {
	s := p.Score
	if !(p.Y > 0) || math.IsNaN(s) || math.IsInf(s, 0) {
		return 0, false
	}
	if s == 0 {
		s = 0
	}
	return s, true
}

func negativeScore(p Pair) (float64, bool) {
	s := p.Score
	if p.Y > 0 || math.IsNaN(s) || math.IsInf(s, 0) {
		return 0, false
	}
	if s == 0 {
		s = 0
	}
	return s, true
}

// table fits the table from f.pos and f.neg, the positive and the negative
// scores, each sorted.
func (f *Fitter) table() *VennAbers {
	// The positive and the negative scores, each sorted as plain float64
	// (the ordered sort, without a comparison function: 2.5 times faster
	// than sorting the pairs), are merged into the distinct scores
	// s'_1 < … < s'_k with their multiplicities w_i and positive counts
	// y_i. The cumulative sum diagram is P_i = (Σ_{j≤i} w_j, Σ_{j≤i} y_j),
	// P_0 = (0, 0). Counts are integers held exactly in float64.
	pos, neg := f.pos, f.neg
	if n := len(pos) + len(neg); cap(f.w) < n {
		f.w, f.y, f.s = make([]float64, 0, n), make([]float64, 0, n), make([]float64, 0, n)
	}
	w, y, ds := f.w[:0], f.y[:0], f.s[:0] // per distinct score
	v := &VennAbers{n: len(pos) + len(neg), np: len(pos)}
	// The merge takes the smaller head without a branch on which list
	// it is in (a positive or a negative score, as random as the labels:
	// a branch mispredicted every other score), and adds a score equal
	// to the last one (ties) to its counts.
	inf := math.Inf(1) // past a list's end; the scores are finite
	for i, j := 0, 0; i < len(pos) || j < len(neg); {
		a, b := inf, inf
		if i < len(pos) {
			a = pos[i]
		}
		if j < len(neg) {
			b = neg[j]
		}
		s := min(a, b)
		ip, jn := b2i(a == s), b2i(b == s)
		i, j = i+ip, j+jn
		if n := len(ds); n > 0 && ds[n-1] == s {
			w[n-1] += float64(ip + jn)
			y[n-1] += float64(ip)
			continue
		}
		ds = append(ds, s)
		w = append(w, float64(ip+jn))
		y = append(y, float64(ip))
	}
	k := len(ds)
	v.k = k
	f.w, f.y, f.s = w, y, ds
	// f1[j], j = 0..k, is p1(s) for the test scores s with exactly j
	// calibration scores < s, s ∈ (s_j, s_{j+1}]; f0[j] is p0(s) for those
	// with exactly j calibration scores ≤ s, s ∈ [s_j, s_{j+1}).
	f1, f0 := grow(f.f1, k+1), grow(f.f0, k+1)
	f.f1, f.f0 = f1, f0
	cw, cy := grow(f.cw, k+1), grow(f.cy, k+1)
	f.cw, f.cy = cw, cy
	cw[0], cy[0] = 0, 0
	for i := range k {
		cw[i+1], cy[i+1] = cw[i]+w[i], cy[i]+y[i]
	}
	f.upperF1(f1, cw, cy)

	// p0 by symmetry: the isotonic fit of (s, y) is 1 − (the isotonic fit
	// of (−s, 1 − y)) at −s, so p0 on the data is 1 − p1 on the mirrored
	// data (scores reversed, labels flipped), whose j-th run is our
	// (k−j)-th.
	for i := range k {
		r := k - 1 - i
		cw[i+1], cy[i+1] = cw[i]+w[r], cy[i]+(w[r]-y[r])
	}
	g := grow(f.g, k+1)
	f.g = g
	f.upperF1(g, cw, cy)
	for j := range f0 {
		f0[j] = 1 - g[k-j]
	}
	// The thresholds, in order: at run j ≥ 1, p0 steps (f0[j] ≠
	// f0[j−1]) where s reaches s_j, and p1 (f1[j] ≠ f1[j−1]) where s
	// passes s_j, at the next float64 above it, which is ≤ s_{j+1}.
	m := 0
	for j := 1; j <= k; j++ {
		m += b2i(f0[j] != f0[j-1]) + b2i(f1[j] != f1[j-1])
	}
	block := make([]float64, m+3*(m+1))
	v.at, v.pl = block[:0:m], block[m:m]
	lo, up := f0[0], f1[0]
	v.pl = append(v.pl, up/(1-lo+up), lo, up)
	for j := 1; j <= k; j++ {
		if f0[j] != lo {
			lo = f0[j]
			v.at = append(v.at, ds[j-1])
			v.pl = append(v.pl, up/(1-lo+up), lo, up)
		}
		if f1[j] != up {
			up = f1[j]
			v.at = append(v.at, math.Nextafter(ds[j-1], math.Inf(1)))
			v.pl = append(v.pl, up/(1-lo+up), lo, up)
		}
	}
	return v
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// grow returns s resized to n, reusing its memory when it can.
func grow(s []float64, n int) []float64 {
	if cap(s) < n {
		return make([]float64, n)
	}
	return s[:n]
}

// point is a point of a cumulative sum diagram.
type point struct{ x, y float64 }

// cross is (b − a) × (c − b): > 0 when a, b, c make a left (counter-
// clockwise) turn. On diagrams of integer counts below 2^25 it is exact.
func cross(a, b, c point) float64 {
	return (b.x-a.x)*(c.y-b.y) - (b.y-a.y)*(c.x-b.x)
}

// upperF1 writes f1[j], j = 0..k, the upper Venn–Abers probability p1 of a
// test score in the j-th run (exactly j distinct calibration scores below
// it), from the cumulative sum diagram cw, cy (len k+1, cw[0] = cy[0] = 0)
// of the k distinct calibration scores. It is Algorithms 1 and 2 of Vovk,
// Petej and Fedorova (2015):
//
// With the test example (s, 1) inserted after the j-th calibration score,
// the diagram of the augmented set, shifted by (−1, −1), has the points
// L_0, …, L_j, P_j, …, P_k with L_i = P_i − (1, 1) (L_0 = P_{−1} = (−1, −1)),
// and p1 is the slope of its greatest convex minorant (GCM) over the test
// example's segment [L_j, P_j]. Algorithm 1 builds the GCM of the j = 0
// diagram P_{−1}, P_0, …, P_k by a Graham scan (a stack); Algorithm 2 walks
// j = 0..k, reading the slope of the GCM's first segment at the top of the
// reversed stack, then moving to the next diagram, which differs from the
// last in one point (P_j becomes L_{j+1} = L_j + P_{j+1} − P_j), and
// restoring the convexity at the stack's top. Each point is pushed and
// popped at most once per pass: O(k).
func (f *Fitter) upperF1(f1, cw, cy []float64) {
	k := len(cw) - 1
	if cap(f.pts) < k+2 {
		f.pts, f.st = make([]point, k+2), make([]point, 0, k+2)
	}
	p := f.pts[:k+2] // p[i+1] = P_i, i = −1..k
	p[0] = point{-1, -1}
	for i := 0; i <= k; i++ {
		p[i+1] = point{cw[i], cy[i]}
	}
	// Algorithm 1: the GCM of P_{−1}, …, P_k, left to right.
	st := f.st[:0]
	st = append(st, p[0], p[1])
	for i := 2; i < len(p); i++ {
		for len(st) > 1 && cross(st[len(st)-2], st[len(st)-1], p[i]) <= 0 {
			st = st[:len(st)-1]
		}
		st = append(st, p[i])
	}
	// Algorithm 2: reverse, so the top is the leftmost point.
	slices.Reverse(st)
	slope := func() float64 {
		a, b := st[len(st)-1], st[len(st)-2]
		return (b.y - a.y) / (b.x - a.x)
	}
	sl := slope() // the stack's top two's, until they change
	for i := 1; i <= k; i++ {
		f1[i-1] = sl
		// P_{i−1} := P_{i−2} + P_i − P_{i−1} (p is offset by one).
		q := point{p[i-1].x + p[i+1].x - p[i].x, p[i-1].y + p[i+1].y - p[i].y}
		p[i] = q
		top, next := st[len(st)-1], st[len(st)-2]
		if cross(top, next, q) >= 0 { // q on or above the line top→next
			continue
		}
		st = st[:len(st)-1]
		for len(st) > 1 && cross(q, st[len(st)-1], st[len(st)-2]) <= 0 {
			st = st[:len(st)-1]
		}
		st = append(st, q)
		sl = slope()
	}
	f1[k] = sl
}

// Probability returns the IVAP prediction for a test score: lower = p0(s),
// upper = p1(s) (0 ≤ lower ≤ upper ≤ 1) and the merged probability
// p = p1/(1 − p0 + p1) of the positive class. With no calibration pairs it
// returns (0.5, 0, 1); a NaN score also gets (0.5, 0, 1). A score below or
// above all calibration scores is handled like any other (the fit is a step
// function of s). O(log n), no allocation.
func (v *VennAbers) Probability(score float64) (p, lower, upper float64) {
	if score != score {
		return 0.5, 0, 1
	}
	// The thresholds ≤ score: p1's steps at scores < score, p0's at
	// scores ≤ score (path).
	k := 3 * atMost(v.at, score)
	return v.pl[k], v.pl[k+1], v.pl[k+2]
}

// Cells returns the number of steps of the table: the scores between two
// consecutive thresholds share one (p, lower, upper), cell Cell(score).
func (v *VennAbers) Cells() int { return len(v.pl) / 3 }

// Cell returns the cell of score (Probability(score) is CellValues of
// it); -1 for a NaN score.
func (v *VennAbers) Cell(score float64) int {
	if score != score {
		return -1
	}
	return atMost(v.at, score)
}

// CellValues returns cell k's (p, lower, upper), 0 ≤ k < Cells().
func (v *VennAbers) CellValues(k int) (p, lower, upper float64) {
	return v.pl[3*k], v.pl[3*k+1], v.pl[3*k+2]
}

// N returns the number of calibration pairs the table was fitted on
// (pairs with a non-finite score excluded; ties counted).
func (v *VennAbers) N() int { return v.n }

// Positives returns how many of them were positive.
func (v *VennAbers) Positives() int { return v.np }

// atMost is the number of the ascending values a that are ≤ x.
func atMost(a []float64, x float64) int {
	i, j := 0, len(a)
	for i < j {
		h := int(uint(i+j) >> 1)
		if a[h] <= x {
			i = h + 1
		} else {
			j = h
		}
	}
	return i
}

// Distinct returns the number of distinct calibration scores.
func (v *VennAbers) Distinct() int { return v.k }
