package svm

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestExpNeg(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	worst := 0.0
	check := func(x float64) {
		want, got := math.Exp(x), expNeg(x)
		if want < 1e-300 { // below e^−708 expNeg flushes to 0
			if got > 1e-300 {
				t.Fatalf("expNeg(%v) = %v, want ≈ 0", x, got)
			}
			return
		}
		if want == 0 {
			if got > 1e-300 {
				t.Fatalf("expNeg(%v) = %v, want ≈ 0", x, got)
			}
			return
		}
		rel := math.Abs(got-want) / want
		worst = max(worst, rel)
		if rel > 1e-14 {
			t.Fatalf("expNeg(%v) = %v, math.Exp %v (rel %.2e)", x, got, want, rel)
		}
	}
	for _, x := range []float64{0, -1e-300, -0.5, -math.Ln2 / 2, -1, -10, -700, -707.9, -708, -709, -800, math.Inf(-1)} {
		check(x)
	}
	for i := 0; i < 200000; i++ {
		check(-rng.Float64() * 50)
		check(-rng.ExpFloat64() * 100)
	}
	t.Logf("worst relative error %.2e", worst)
}
