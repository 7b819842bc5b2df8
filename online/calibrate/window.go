package calibrate

import (
	"fmt"
	"math"
)

// Pair is one prequential observation: what the model said before it saw
// the label, and the label.
//
// For a classifier (Window.Add) Score is the model's score and Y is 1 for
// the positive class, 0 for the negative one. For a regression or ranking
// model (Window.AddResidual) Score is the prediction ŷ and Y the actual
// value y; the conformal residual is |Y − Score|.
type Pair struct {
	Score float64
	Y     float64
}

// Window is a ring of the last Size() pairs. It is not safe for concurrent
// use: the engine's shard lock guards it, and a background fit works on a
// snapshot (CopyTo). A window holds either classifier pairs (Add) or
// regression pairs (AddResidual), not both.
type Window struct {
	buf   []Pair
	next  int   // slot of the next pair
	n     int   // pairs held, ≤ len(buf)
	added int64 // pairs accepted since NewWindow
}

// NewWindow returns an empty window of size pairs. It panics if size < 1
// (a configuration error the caller validates).
func NewWindow(size int) *Window {
	if size < 1 {
		panic(fmt.Sprintf("calibrate: NewWindow(%d): size must be ≥ 1", size))
	}
	return &Window{buf: make([]Pair, size)}
}

// Add records a classifier's score (made before the label was known) and
// the label: positive is the +1 class. A non-finite score (NaN, ±Inf) is
// ignored: it is not stored and not counted by Added. O(1), no allocation.
func (w *Window) Add(score float64, positive bool) {
	if math.IsNaN(score) || math.IsInf(score, 0) {
		return
	}
	var y float64
	if positive {
		y = 1
	}
	w.push(Pair{Score: score, Y: y})
}

// AddResidual records a regression or ranking model's prediction (made
// before the label was known) and the actual value; the conformal
// residual is |actual − pred|. A pair with a non-finite pred or actual is
// ignored (not stored, not counted by Added). O(1), no allocation.
func (w *Window) AddResidual(pred, actual float64) {
	if math.IsNaN(pred) || math.IsInf(pred, 0) || math.IsNaN(actual) || math.IsInf(actual, 0) {
		return
	}
	w.push(Pair{Score: pred, Y: actual})
}

func (w *Window) push(p Pair) {
	w.buf[w.next] = p
	w.next++
	if w.next == len(w.buf) {
		w.next = 0
	}
	if w.n < len(w.buf) {
		w.n++
	}
	w.added++
}

// Len returns the number of pairs held (at most Size).
func (w *Window) Len() int { return w.n }

// Size returns the window's capacity.
func (w *Window) Size() int { return len(w.buf) }

// Added returns the number of pairs accepted since NewWindow (ignored
// non-finite ones excluded), for "refit every K labelled events".
func (w *Window) Added() int64 { return w.added }

// RecentMin is the fewest pairs CopyRecentTo keeps.
const RecentMin = 100

// CopyRecentTo is CopyTo restricted to the pairs added in the later half
// of the stream so far: the newest max(RecentMin, ⌈Added/2⌉) pairs, or all
// those held if fewer. A model that is still learning scores its early
// events less well than its present ones, so a table fitted on them is
// underconfident; the pairs of the later half were scored by a model that
// had learned at least half of what it knows now, and once Added reaches
// twice Size the window is the same as CopyTo's. (A fixed warm-up of 200
// pairs instead left the small data sets without a table and was no more
// valid elsewhere: TestIVAPValidity.) It allocates only when cap(dst) is
// smaller than the pairs kept.
func (w *Window) CopyRecentTo(dst []Pair) []Pair {
	return w.copyLast(dst, int(min(int64(w.n), max(RecentMin, w.added-w.added/2))))
}

// CopyTo appends the window's pairs, oldest first, to dst[:0] and returns
// the result: a snapshot for a fit on another goroutine. It allocates only
// when cap(dst) < Len().
func (w *Window) CopyTo(dst []Pair) []Pair { return w.copyLast(dst, w.n) }

// Load empties the window and adds pairs, oldest first (of a window's
// CopyTo, e.g. restored from a snapshot; beyond Size only the newest are
// kept), then sets Added to added (at least the pairs held), so that
// CopyRecentTo keeps what it kept when they were saved. Pairs with a
// non-finite member are skipped, as AddResidual skips them.
func (w *Window) Load(pairs []Pair, added int64) {
	w.next, w.n, w.added = 0, 0, 0
	if len(pairs) > len(w.buf) {
		pairs = pairs[len(pairs)-len(w.buf):]
	}
	for _, p := range pairs {
		w.AddResidual(p.Score, p.Y) // a classifier's Y is 0 or 1: finite
	}
	w.added = max(added, int64(w.n))
}

// copyLast appends the newest k ≤ Len() pairs, oldest first, to dst[:0].
func (w *Window) copyLast(dst []Pair, k int) []Pair {
	dst = dst[:0]
	start := w.next - k
	if start < 0 {
		start += len(w.buf)
		dst = append(dst, w.buf[start:]...)
		return append(dst, w.buf[:w.next]...)
	}
	return append(dst, w.buf[start:w.next]...)
}
