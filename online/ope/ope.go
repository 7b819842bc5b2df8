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

// Term is sample s's term of estimator e: IPS's w r, DR's r̂(x, π(x)) +
// w (r − r̂(x, a)); the estimate is the mean of the terms. The
// self-normalised forms are not means of terms: SNIPS takes IPS's, SNDR
// DR's (the terms of their numerators, which the mean of matches them
// once Σ w ≈ n).
func Term(e Estimator, s *Sample) float64 {
	w := s.weight()
	if e == IPS || e == SNIPS {
		return w * s.Reward
	}
	return s.PredTarget + w*(s.Reward-s.PredLogged)
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

// Sequence is the running mean of values added one by one (the
// per-decision differences of two policies' terms, Term, that a
// challenger's promotion is decided on) with a confidence sequence: an
// interval at every n whose coverage holds for all n at once, so that it
// may be looked at after every value and acted on the first time it
// excludes 0, which a fixed-n interval may not (looked at often enough it
// excludes the truth by chance).
//
// The boundary is the normal mixture (Robbins; Howard, Ramdas, McAuliffe
// and Sekhon 2021, "Time-uniform, nonparametric, nonasymptotic confidence
// sequences", eq. (14)): with the values' sum S_n, their sample variance
// σ̂² and V = n σ̂², the one-sided boundary at error α is
//
//	u(V) = sqrt((V + ρ) · log((V + ρ) / (ρ α²)))
//
// and the interval at level c is S_n/n ± u(V)/n with α = (1 − c)/2 on
// each side. ρ = σ̂² n₀ makes it tightest near n = n₀ (NewSequence); there
// its half-width is about 4.0 σ̂/√n at c = 0.95, where a fixed-n interval's
// is 1.96 σ̂/√n. The variance is estimated, so the coverage is asymptotic.
type Sequence struct {
	n, sum, sum2 float64
	n0           float64
}

// NewSequence returns an empty sequence tightest near n0 values (≥ 1).
func NewSequence(n0 int) *Sequence { return &Sequence{n0: float64(max(n0, 1))} }

// Add adds v.
func (s *Sequence) Add(v float64) {
	s.n++
	s.sum += v
	s.sum2 += v * v
}

// Len is the number of values added.
func (s *Sequence) Len() int { return int(s.n) }

// Reset empties the sequence.
func (s *Sequence) Reset() { s.n, s.sum, s.sum2 = 0, 0, 0 }

// Mean is the mean of the values (NaN when empty).
func (s *Sequence) Mean() float64 {
	if s.n == 0 {
		return math.NaN()
	}
	return s.sum / s.n
}

// Interval is the sequence's interval at level (e.g. 0.95) after the
// values added: it covers their mean's expectation at every n at once
// with probability level (asymptotically). NaNs for fewer than two
// values; the mean itself when they are all equal.
func (s *Sequence) Interval(level float64) (lo, hi float64) {
	if s.n < 2 {
		return math.NaN(), math.NaN()
	}
	mean := s.sum / s.n
	v := max(0, (s.sum2-s.n*mean*mean)/(s.n-1))
	if v == 0 {
		return mean, mean
	}
	alpha := (1 - level) / 2
	V, rho := s.n*v, s.n0*v
	h := math.Sqrt((V+rho)*math.Log((V+rho)/(rho*alpha*alpha))) / s.n
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
