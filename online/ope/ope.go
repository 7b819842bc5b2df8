// Package ope estimates the value of a target policy from the log of
// another (off-policy evaluation): the mean reward the target policy would
// have had on the logged contexts, from each logged decision's reward, the
// logging policy's propensity of the action it took, whether the target
// policy would have taken the same action, and a reward model's
// predictions.
//
// Four estimators, for n logged decisions with weight w_i = 1{a_i = π(x_i)}
// / p_i (p_i the logging propensity of the logged action a_i), reward r_i,
// and a reward model's predictions r̂(x_i, a_i) of the logged action and
// r̂(x_i, π(x_i)) of the target's:
//
//	IPS    (1/n) Σ w_i r_i
//	SNIPS  Σ w_i r_i / Σ w_i
//	DR     (1/n) Σ [ r̂(x_i, π(x_i)) + w_i (r_i − r̂(x_i, a_i)) ]
//	SNDR   (1/n) Σ r̂(x_i, π(x_i)) + Σ w_i (r_i − r̂(x_i, a_i)) / Σ w_i
//
// DR (doubly robust: Dudík, Langford and Li, 2011) uses the reward model
// as the direct method and corrects it by the importance-weighted
// residuals: unbiased when the propensities are right whatever the model,
// with a lower variance than IPS when the model predicts the rewards well.
// The self-normalised forms trade a small bias for robustness to large
// weights. Intervals are percentile bootstrap intervals over the samples
// (Interval), the same method for all four.
package ope

import (
	"math"
	"math/rand/v2"
	"slices"
)

// Sample is one logged decision.
type Sample struct {
	Reward float64 // the observed reward of the logged action
	Prop   float64 // the logging policy's probability of the logged action (> 0)
	Match  bool    // the target policy takes the logged action
	// A reward model's predictions for the logged action and for the
	// target policy's (equal when Match).
	PredLogged, PredTarget float64
}

// weight is w = 1{match}/p.
func (s *Sample) weight() float64 {
	if !s.Match || !(s.Prop > 0) {
		return 0
	}
	return 1 / s.Prop
}

// Estimator names an estimator.
type Estimator int

// The estimators.
const (
	IPS Estimator = iota
	SNIPS
	DR
	SNDR
)

// Estimators are all of them, in order.
var Estimators = []Estimator{IPS, SNIPS, DR, SNDR}

var names = [...]string{IPS: "ips", SNIPS: "snips", DR: "dr", SNDR: "sndr"}

// String is the estimator's name: ips, snips, dr, sndr.
func (e Estimator) String() string { return names[e] }

// Sums are the sufficient statistics of the four estimators: a log
// summed sample by sample (Add), estimated at any time (Value).
type Sums struct {
	n, w, wr, wres, pred float64
}

// N is the number of samples added.
func (a *Sums) N() float64 { return a.n }

// Add adds sample s.
func (a *Sums) Add(s *Sample) {
	w := s.weight()
	a.n++
	a.w += w
	a.wr += w * s.Reward
	a.wres += w * (s.Reward - s.PredLogged)
	a.pred += s.PredTarget
}

// Value is estimator e over the samples summed in a (NaN for none; a
// self-normalised form with no weight: SNDR the direct method's, SNIPS
// NaN).
func (a *Sums) Value(e Estimator) float64 {
	if a.n == 0 {
		return math.NaN()
	}
	switch e {
	case IPS:
		return a.wr / a.n
	case SNIPS:
		if a.w == 0 {
			return math.NaN()
		}
		return a.wr / a.w
	case DR:
		return (a.pred + a.wres) / a.n
	default: // SNDR
		v := a.pred / a.n
		if a.w > 0 {
			v += a.wres / a.w
		}
		return v
	}
}

// Estimate is estimator e's value over samples (NaN when there are none).
func Estimate(e Estimator, samples []Sample) float64 {
	var a Sums
	for i := range samples {
		a.Add(&samples[i])
	}
	return a.Value(e)
}

// Interval is the percentile bootstrap interval of estimator e at level
// (e.g. 0.95) over samples: the level's central quantiles of the
// estimator over boots resamples (with replacement) drawn from rng (the
// same rng state gives the same interval). It returns NaNs for fewer than
// two samples.
func Interval(e Estimator, samples []Sample, level float64, boots int, rng *rand.Rand) (lo, hi float64) {
	n := len(samples)
	if n < 2 || boots < 1 {
		return math.NaN(), math.NaN()
	}
	vals := make([]float64, 0, boots)
	for range boots {
		var a Sums
		for range n {
			a.Add(&samples[rng.IntN(n)])
		}
		if v := a.Value(e); !math.IsNaN(v) {
			vals = append(vals, v)
		}
	}
	return central(vals, level)
}

// Term is sample s's term of estimator e, for the linear estimators IPS
// and DR: IPS's w r, DR's r̂(x, π(x)) + w (r − r̂(x, a)); their estimate
// is the mean of the terms. It panics for the self-normalised forms,
// which are not means of terms.
func Term(e Estimator, s *Sample) float64 {
	w := s.weight()
	switch e {
	case IPS:
		return w * s.Reward
	case DR:
		return s.PredTarget + w*(s.Reward-s.PredLogged)
	}
	panic("ope: Term of " + e.String())
}

// DiffInterval is the percentile bootstrap interval of estimator e's
// value of target policy b minus its value of target policy a, from the
// same logged decisions: a[i] and b[i] are decision i as each target sees
// it (the same reward, propensity and logged prediction). Each resample
// draws the same decisions for both, so that what the two policies share
// cancels. NaNs for fewer than two decisions, or when a and b differ in
// length.
func DiffInterval(e Estimator, a, b []Sample, level float64, boots int, rng *rand.Rand) (lo, hi float64) {
	n := len(a)
	if n < 2 || len(b) != n || boots < 1 {
		return math.NaN(), math.NaN()
	}
	vals := make([]float64, 0, boots)
	for range boots {
		var sa, sb Sums
		for range n {
			i := rng.IntN(n)
			sa.Add(&a[i])
			sb.Add(&b[i])
		}
		if v := sb.Value(e) - sa.Value(e); !math.IsNaN(v) {
			vals = append(vals, v)
		}
	}
	return central(vals, level)
}

// Window is the mean of the newest values added (a ring of a fixed size)
// with its normal confidence interval, kept as values enter and leave in
// constant time: the per-decision differences of two policies' terms
// (Term) that a challenger's promotion is decided on. Its sums are
// recomputed exactly once per pass of the ring, so that rounding does not
// accumulate.
type Window struct {
	vals      []float64
	next      int
	full      bool
	sum, sum2 float64
}

// NewWindow returns an empty window of the newest size values (size ≥ 2).
func NewWindow(size int) *Window {
	return &Window{vals: make([]float64, 0, max(size, 2))}
}

// Add adds v, the oldest leaving once the window is full.
func (w *Window) Add(v float64) {
	if !w.full {
		w.vals = append(w.vals, v)
		w.sum += v
		w.sum2 += v * v
		if len(w.vals) == cap(w.vals) {
			w.full = true
			w.resum()
		}
		return
	}
	old := w.vals[w.next]
	w.vals[w.next] = v
	w.sum += v - old
	w.sum2 += v*v - old*old
	if w.next++; w.next == len(w.vals) {
		w.next = 0
		w.resum()
	}
}

func (w *Window) resum() {
	w.sum, w.sum2 = 0, 0
	for _, v := range w.vals {
		w.sum += v
		w.sum2 += v * v
	}
}

// Len is the number of values in the window.
func (w *Window) Len() int { return len(w.vals) }

// Reset empties the window.
func (w *Window) Reset() {
	w.vals, w.next, w.full, w.sum, w.sum2 = w.vals[:0], 0, false, 0, 0
}

// Mean is the mean of the window's values (NaN when empty).
func (w *Window) Mean() float64 {
	if len(w.vals) == 0 {
		return math.NaN()
	}
	return w.sum / float64(len(w.vals))
}

// Interval is the normal interval at level (e.g. 0.95) of the mean of
// the window's values: mean ± z·s/√n, s the sample standard deviation
// and z the standard normal quantile of (1 + level)/2. NaNs for fewer
// than two values.
func (w *Window) Interval(level float64) (lo, hi float64) {
	n := float64(len(w.vals))
	if n < 2 {
		return math.NaN(), math.NaN()
	}
	mean := w.sum / n
	v := max(0, (w.sum2-n*mean*mean)/(n-1))
	h := math.Sqrt2 * math.Erfinv(level) * math.Sqrt(v/n)
	return mean - h, mean + h
}

// central is the central interval at level of the values vals (sorted in
// place): its lower and upper quantiles. NaNs when there are none.
func central(vals []float64, level float64) (lo, hi float64) {
	if len(vals) == 0 {
		return math.NaN(), math.NaN()
	}
	slices.Sort(vals)
	alpha := (1 - level) / 2
	last := float64(len(vals) - 1)
	return vals[int(math.Floor(alpha*last))], vals[int(math.Ceil((1-alpha)*last))]
}
