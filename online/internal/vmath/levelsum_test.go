package vmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestLevelSumsLevels: every level gives the bits of the definition,
// written out here row by row (the ordinal MAM's loop over an i-major
// row before the sums became level-major): every length to 40, one to
// seven levels, ±0, ±Inf, NaN and overflowing products among the values
// (any NaN for a NaN), a zero sum from negative zeros +0, and the
// elements past p untouched.
func TestLevelSumsLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 23))
	edges := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 1e308, -1e-310}
	val := func(edge bool) float64 {
		if edge && r.IntN(5) == 0 {
			return edges[r.IntN(len(edges))]
		}
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(13)-6))
	}
	for p := range 41 {
		for m := 1; m <= 7; m++ {
			for trial := range 4 {
				edge := trial >= 2
				sum, sumC := make([]float64, m*p), make([]float64, m*p)
				for j := range sum {
					sum[j] = val(edge)
					sumC[j] = sum[j] * 1e-17
					if edge && r.IntN(7) == 0 {
						sumC[j] = val(true)
					}
				}
				coef := make([]float64, m)
				for l := range coef {
					coef[l] = val(edge)
				}
				if trial == 1 { // negative zeros: the sums start from +0
					for j := range sum {
						sum[j], sumC[j] = 0, 0
					}
					for l := range coef {
						coef[l] = -1
					}
				}
				ww, wt := make([]float64, p), make([]float64, p)
				for i := range p {
					var wi, ti float64
					for l := range m {
						v := sum[l*p+i] + sumC[l*p+i]
						wi += float64(coef[l] * v)
						ti += v
					}
					ww[i], wt[i] = wi, ti
				}
				forLevels(t, func(t *testing.T) {
					w, tot := make([]float64, p+1), make([]float64, p+1)
					w[p], tot[p] = 7, 7
					LevelSums(w[:p], tot, sum, sumC, coef)
					if w[p] != 7 || tot[p] != 7 {
						t.Fatalf("p %d, m %d: wrote past p", p, m)
					}
					for i := range p {
						for _, q := range [][2]float64{{w[i], ww[i]}, {tot[i], wt[i]}} {
							if !same(q[0], q[1]) && !(math.IsNaN(q[0]) && math.IsNaN(q[1])) {
								t.Fatalf("p %d, m %d, trial %d, i %d: w %v (want %v), tot %v (want %v)", p, m, trial, i, w[i], ww[i], tot[i], wt[i])
							}
						}
					}
				})
			}
		}
	}
}

// TestLevelSumsShort: sums shorter than len(coef)·len(w) panic.
func TestLevelSumsShort(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("no panic")
		}
	}()
	LevelSums(make([]float64, 8), make([]float64, 8), make([]float64, 15), make([]float64, 16), make([]float64, 2))
}
