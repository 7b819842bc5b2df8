package online

import (
	"math"
	"slices"
)

// Ranking and ordinal quality measures (docs/math.md §5, §7): Kendall's τ-b in
// O(n log n), mean absolute error and zero-one error of predicted levels,
// and OrdinalWindow, their prequential form over a sliding window.

// KendallTauB returns Kendall's τ-b of x and y, with ties in either
// variable handled as in Kendall (1945):
//
//	τ_b = (C − D) / sqrt((n₀ − n₁)(n₀ − n₂)),
//
// C and D the concordant and discordant pairs, n₀ = n(n−1)/2, n₁ and n₂ the
// pairs tied in x and in y. It runs in O(n log n) (Knight 1966: sort by
// (x, y), then count the exchanges of a merge sort on y). The result is NaN
// when it is undefined: fewer than two points, x or y constant, or a NaN
// in x or y. It panics if len(x) != len(y).
func KendallTauB(x, y []float64) float64 {
	if len(x) != len(y) {
		panic("online: KendallTauB: len(x) != len(y)")
	}
	var s kendallScratch
	s.grow(len(x))
	for i := range x {
		s.pairs[i] = rankPair{x[i], y[i]}
	}
	return s.tauB(len(x))
}

// rankPair is one (x, y) observation of KendallTauB.
type rankPair struct{ x, y float64 }

// kendallScratch holds the buffers of one τ-b computation, reused across
// calls so that a steady caller does not allocate.
type kendallScratch struct {
	pairs []rankPair
	ys    []float64
	tmp   []float64
}

// grow makes room for n pairs.
func (s *kendallScratch) grow(n int) {
	if cap(s.pairs) < n {
		s.pairs = make([]rankPair, n)
		s.ys = make([]float64, n)
		s.tmp = make([]float64, n)
	}
	s.pairs, s.ys, s.tmp = s.pairs[:n], s.ys[:n], s.tmp[:n]
}

// cmpRankPair orders pairs by x, then y (no NaNs).
func cmpRankPair(a, b rankPair) int {
	switch {
	case a.x < b.x:
		return -1
	case a.x > b.x:
		return 1
	case a.y < b.y:
		return -1
	case a.y > b.y:
		return 1
	}
	return 0
}

// tauB computes τ-b of s.pairs[:n] (Knight's algorithm), reordering the
// buffers.
func (s *kendallScratch) tauB(n int) float64 {
	if n < 2 {
		return math.NaN()
	}
	p := s.pairs[:n]
	for _, v := range p {
		if math.IsNaN(v.x) || math.IsNaN(v.y) {
			return math.NaN()
		}
	}
	slices.SortFunc(p, cmpRankPair)
	// n₁: pairs tied in x; n₃: pairs tied in both.
	var n1, n3 int64
	runX, runXY := int64(1), int64(1)
	for i := 1; i < n; i++ {
		if p[i].x == p[i-1].x {
			runX++
			if p[i].y == p[i-1].y {
				runXY++
			} else {
				n3 += runXY * (runXY - 1) / 2
				runXY = 1
			}
		} else {
			n1 += runX * (runX - 1) / 2
			n3 += runXY * (runXY - 1) / 2
			runX, runXY = 1, 1
		}
	}
	n1 += runX * (runX - 1) / 2
	n3 += runXY * (runXY - 1) / 2
	ys := s.ys[:n]
	for i, v := range p {
		ys[i] = v.y
	}
	// Discordant pairs: x strictly increasing and y strictly decreasing,
	// the exchanges a stable merge sort on y makes (pairs tied in x are
	// already in y order and never exchanged).
	ys, swaps := mergeCountInversions(ys, s.tmp[:n])
	var n2 int64
	run := int64(1)
	for i := 1; i < n; i++ {
		if ys[i] == ys[i-1] {
			run++
		} else {
			n2 += run * (run - 1) / 2
			run = 1
		}
	}
	n2 += run * (run - 1) / 2
	n0 := int64(n) * int64(n-1) / 2
	den := float64(n0-n1) * float64(n0-n2)
	if den == 0 {
		return math.NaN()
	}
	// C − D = n₀ − n₁ − n₂ + n₃ − 2D.
	return float64(n0-n1-n2+n3-2*swaps) / math.Sqrt(den)
}

// mergeCountInversions sorts a (bottom-up stable merge sort, tmp of the
// same length as scratch) and returns the sorted slice, which is a or tmp,
// and the number of pairs i < j with a[i] > a[j].
func mergeCountInversions(a, tmp []float64) ([]float64, int64) {
	n := len(a)
	var inv int64
	src, dst := a, tmp[:n]
	for width := 1; width < n; width *= 2 {
		for lo := 0; lo < n; lo += 2 * width {
			mid := min(lo+width, n)
			hi := min(lo+2*width, n)
			i, j, k := lo, mid, lo
			for i < mid && j < hi {
				if src[i] <= src[j] {
					dst[k] = src[i]
					i++
				} else {
					dst[k] = src[j]
					j++
					inv += int64(mid - i)
				}
				k++
			}
			k += copy(dst[k:], src[i:mid])
			copy(dst[k:], src[j:hi])
		}
		src, dst = dst, src
	}
	return src, inv
}

// MeanAbsError returns the mean of |pred_i − truth_i|, NaN when empty. It
// panics if the lengths differ.
func MeanAbsError(pred, truth []int) float64 {
	if len(pred) != len(truth) {
		panic("online: MeanAbsError: len(pred) != len(truth)")
	}
	if len(pred) == 0 {
		return math.NaN()
	}
	var s int64
	for i, p := range pred {
		s += absInt64(int64(p) - int64(truth[i]))
	}
	return float64(s) / float64(len(pred))
}

// ZeroOneError returns the fraction of i with pred_i ≠ truth_i, NaN when
// empty. It panics if the lengths differ.
func ZeroOneError(pred, truth []int) float64 {
	if len(pred) != len(truth) {
		panic("online: ZeroOneError: len(pred) != len(truth)")
	}
	if len(pred) == 0 {
		return math.NaN()
	}
	wrong := 0
	for i, p := range pred {
		if p != truth[i] {
			wrong++
		}
	}
	return float64(wrong) / float64(len(pred))
}

func absInt64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// OrdinalWindow is the prequential quality of an ordinal model over the
// last Window() labelled events: each event is scored before it is learned
// and Add records its score, its predicted level and its true level. Add,
// MAE, ZeroOne and Count are O(1) (running integer sums over the window)
// and do not allocate; KendallTau is O(w log w) for w events held and
// allocates its scratch buffers on its first call only. Not safe for
// concurrent use.
type OrdinalWindow struct {
	score       []float64
	pred, truth []int
	next        int   // slot of the next event
	count       int   // events held, ≤ len(score)
	absSum      int64 // Σ |pred − truth| over the window
	wrong       int   // #{pred ≠ truth} over the window
	scratch     kendallScratch
}

// NewOrdinalWindow returns an empty window of n events; it panics if n < 1.
func NewOrdinalWindow(n int) *OrdinalWindow {
	if n < 1 {
		panic("online: NewOrdinalWindow: window must be ≥ 1")
	}
	return &OrdinalWindow{score: make([]float64, n), pred: make([]int, n), truth: make([]int, n)}
}

// Add records one event, evicting the oldest when the window is full.
func (w *OrdinalWindow) Add(score float64, predicted, truth int) {
	if w.count == len(w.score) {
		w.absSum -= absInt64(int64(w.pred[w.next]) - int64(w.truth[w.next]))
		if w.pred[w.next] != w.truth[w.next] {
			w.wrong--
		}
	} else {
		w.count++
	}
	w.score[w.next], w.pred[w.next], w.truth[w.next] = score, predicted, truth
	w.absSum += absInt64(int64(predicted) - int64(truth))
	if predicted != truth {
		w.wrong++
	}
	if w.next++; w.next == len(w.score) {
		w.next = 0
	}
}

// MAE returns the mean absolute error |predicted − truth| over the window,
// NaN when it is empty.
func (w *OrdinalWindow) MAE() float64 {
	if w.count == 0 {
		return math.NaN()
	}
	return float64(w.absSum) / float64(w.count)
}

// ZeroOne returns the fraction of events in the window whose predicted
// level is wrong, NaN when it is empty.
func (w *OrdinalWindow) ZeroOne() float64 {
	if w.count == 0 {
		return math.NaN()
	}
	return float64(w.wrong) / float64(w.count)
}

// KendallTau returns Kendall's τ-b of score against true level over the
// window (see KendallTauB; NaN when undefined, e.g. fewer than two events
// or one level only).
func (w *OrdinalWindow) KendallTau() float64 {
	w.scratch.grow(len(w.score))
	for i := range w.count {
		w.scratch.pairs[i] = rankPair{w.score[i], float64(w.truth[i])}
	}
	return w.scratch.tauB(w.count)
}

// Count returns the number of events in the window, ≤ Window().
func (w *OrdinalWindow) Count() int { return w.count }

// Window returns the window size.
func (w *OrdinalWindow) Window() int { return len(w.score) }

// Reset empties the window.
func (w *OrdinalWindow) Reset() {
	w.next, w.count, w.absSum, w.wrong = 0, 0, 0, 0
}
