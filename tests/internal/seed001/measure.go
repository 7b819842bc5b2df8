package seed001

import (
	"fmt"
	"math"
	"slices"
)

// Result is a model's performance on test ratings: MSD and M1D (see MSD
// and M1D), or their means over test users.
type Result struct{ MSD, M1D float64 }

// Measure returns MSD(y, f) and M1D(y, f).
func Measure(y, f []float64) Result { return Result{MSD(y, f), M1D(y, f)} }

// MSD returns the mean, over all n² ordered pairs (i, j), i = j included,
// of ((y_i − y_j) − (f_i − f_j))² (NaN for n = 0). With e = y − f this is
// 2·mean((e − ē)²), which is how it is computed. It panics if the lengths
// differ.
func MSD(y, f []float64) float64 {
	e := centredErrors(y, f)
	s := 0.0
	for _, v := range e {
		s += v * v
	}
	return 2 * s / float64(len(e))
}

// M1D returns the mean, over all n² ordered pairs (i, j), i = j included,
// of |(y_i − y_j) − (f_i − f_j)| (NaN for n = 0). With e = y − f sorted
// ascending (and centred, which changes nothing but rounding) this is
// 2·Σ_k e_k(2k − n + 1)/n², k from 0, which is how it is computed. It
// panics if the lengths differ.
func M1D(y, f []float64) float64 {
	e := centredErrors(y, f)
	slices.Sort(e)
	n := len(e)
	s := 0.0
	for k, v := range e {
		s += v * float64(2*k-n+1)
	}
	return 2 * s / float64(n*n)
}

// centredErrors returns e − ē with e = y − f.
func centredErrors(y, f []float64) []float64 {
	if len(y) != len(f) {
		panic(fmt.Sprintf("seed001: %d ratings, %d predictions", len(y), len(f)))
	}
	e := make([]float64, len(y))
	mean := 0.0
	for i := range y {
		e[i] = y[i] - f[i]
		mean += e[i]
	}
	mean /= float64(len(e))
	for i := range e {
		e[i] -= mean
	}
	return e
}

// Measure judges predicted scores of the user's Test movies, keyed by
// movie, against the user's Test ratings. It fails if a Test movie has no
// score; scores of other movies are ignored.
func (u *TestUser) Measure(scores map[int]float64) (Result, error) {
	y := make([]float64, len(u.Test))
	f := make([]float64, len(u.Test))
	for i, r := range u.Test {
		s, ok := scores[r.Movie]
		if !ok {
			return Result{}, fmt.Errorf("user %d: no score for movie %d", u.User, r.Movie)
		}
		y[i], f[i] = r.Value, s
	}
	return Measure(y, f), nil
}

// Average returns the mean of rs, field by field (NaN for none): the
// trial's result from its test users' results.
func Average(rs []Result) Result {
	var a Result
	for _, r := range rs {
		a.MSD += r.MSD
		a.M1D += r.M1D
	}
	n := float64(len(rs))
	return Result{a.MSD / n, a.M1D / n}
}

// MeanStd returns the mean of xs and their sample standard deviation (with
// n − 1 in the denominator), as the paper's "mean ± std" over
// repetitions. The mean is NaN for no xs, the deviation NaN for fewer than
// two.
func MeanStd(xs []float64) (mean, std float64) {
	n := float64(len(xs))
	for _, x := range xs {
		mean += x
	}
	mean /= n
	if len(xs) < 2 {
		return mean, math.NaN()
	}
	ss := 0.0
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss / (n - 1))
}
