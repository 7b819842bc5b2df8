package calibrate

import (
	"math"
	"slices"
)

// Conformal is a split-conformal table: the sorted absolute residuals
// r_i = |y_i − ŷ_i| of n calibration pairs. It is immutable once returned
// by FitConformal, so it may serve lookups on any number of goroutines.
type Conformal struct {
	r []float64 // ascending
}

// FitConformal fits the table on regression pairs (Score the prediction ŷ
// made before the label, Y the actual value y; Window.AddResidual). Pairs
// with a non-finite residual are skipped. pairs is not modified. O(n log n).
func FitConformal(pairs []Pair) *Conformal {
	return &Conformal{r: values(make([]float64, 0, len(pairs)), pairs, residual)}
}

// ConformalAt is FitConformal(pairs) on f, the same table bit for bit, for
// pairs whose first is the first-th pair of a stream, as VennAbersAt: when
// the last ConformalAt was on the same stream and most pairs are the same,
// its sorted residuals are updated with those that left and entered instead
// of sorted again. Every table is a new slice (tables are immutable).
func (f *Fitter) ConformalAt(pairs []Pair, first int64) *Conformal {
	var c *Conformal
	if leave, enter, ok := f.cf.step(pairs, first); ok && f.conf != nil {
		f.out = values(f.out, leave, residual)
		f.in = values(f.in, enter, residual)
		if r, ok := resorted(nil, f.conf.r, f.out, f.in); ok {
			c = &Conformal{r: r}
		}
	}
	if c == nil {
		c = &Conformal{r: values(make([]float64, 0, len(pairs)), pairs, residual)}
	}
	f.cf.record(pairs, first)
	f.conf = c
	return c
}

// residual is a regression pair's absolute residual |y − ŷ| if finite.
func residual(p Pair) (float64, bool) {
	d := math.Abs(p.Y - p.Score)
	return d, d <= math.MaxFloat64 // false for NaN, +Inf
}

// FitConformalResiduals fits the table on residuals y_i − ŷ_i (their
// absolute values are used; non-finite ones are skipped). residuals is not
// modified. O(n log n).
func FitConformalResiduals(residuals []float64) *Conformal {
	r := make([]float64, 0, len(residuals))
	for _, v := range residuals {
		if d := math.Abs(v); d <= math.MaxFloat64 {
			r = append(r, d)
		}
	}
	slices.Sort(r)
	return &Conformal{r: r}
}

// N returns the number of residuals.
func (c *Conformal) N() int { return len(c.r) }

// levelTol absorbs the representation error of a level like 0.9 (not a
// binary fraction) in (n+1)·level: a product within levelTol of an integer
// counts as that integer.
const levelTol = 1e-9

// Quantile returns q, the ⌈(n+1)·level⌉-th smallest residual, so that
// [ŷ − q, ŷ + q] covers a new exchangeable y with probability ≥ level. ok
// is false, and q = +Inf, when that rank exceeds n, i.e. (n+1)·level > n:
// too few residuals for the level (n < level/(1 − level): n < 9 at level
// 0.9, n < 19 at 0.95), or when level is not in (0, 1). O(1), no
// allocation.
func (c *Conformal) Quantile(level float64) (q float64, ok bool) {
	if !(level > 0 && level < 1) {
		return math.Inf(1), false
	}
	k := math.Ceil(float64(len(c.r)+1)*level - levelTol)
	if k > float64(len(c.r)) {
		return math.Inf(1), false
	}
	if k < 1 {
		k = 1
	}
	return c.r[int(k)-1], true
}

// Interval returns the split-conformal interval [pred − q, pred + q] at
// level = 1 − δ (see Quantile). When ok is false the interval is infinite:
// (−Inf, +Inf). O(1), no allocation.
func (c *Conformal) Interval(pred, level float64) (lower, upper float64, ok bool) {
	q, ok := c.Quantile(level)
	if !ok {
		return math.Inf(-1), math.Inf(1), false
	}
	return pred - q, pred + q, true
}
