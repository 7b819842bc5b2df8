package svm

import (
	"context"
	"math"
	"testing"
)

func TestClippedMarginBound(t *testing.T) {
	cases := []struct {
		name                      string
		avg, W, tr, n, delta, rho float64
		want                      float64
	}{
		// R̂ = 2·2/100·sqrt(100) = 0.4; dev = 3·sqrt(2 ln 40/100) = 0.8148609094;
		// 1/1.5 − (0.8 − 0.4 − 0.8148609094)/1.5 = 0.6666666667 + 0.2765739396.
		{"n=100", 0.8, 2, 100, 100, 0.05, 0.5, 0.9432406063},
		// R̂ = 0.2/10⁴·100 = 0.002; dev = 3·sqrt(2 ln 20/10⁴) = 0.0734324049;
		// (1 − 1 + 0.002 + 0.0734324049)/1.9.
		{"n=1e4", 1, 0.1, 1e4, 1e4, 0.1, 0.9, 0.0397012657},
		// ρ = 0: R̂ = 2/400·20 = 0.1; dev = 3·sqrt(2 ln 40/400) = 0.4074304547; 1 − 0.9 + 0.1 + 0.4074…
		{"rho=0", 0.9, 1, 400, 400, 0.05, 0, 0.6074304547},
		{"vacuous, clipped to 1", -0.5, 1, 100, 100, 0.05, 0.2, 1},
		{"n=0", 0.9, 1, 1, 0, 0.05, 0, 1},
		{"delta=0", 0.9, 1, 1, 10, 0, 0, 1},
		{"rho=-1", 0.9, 1, 1, 10, 0.05, -1, 1},
		{"NaN margin", math.NaN(), 1, 1, 10, 0.05, 0, 1},
		{"avg>1 (not a clipped margin) clips to 0", 3, 0, 0, 1e6, 0.5, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ClippedMarginBound(c.avg, c.W, c.tr, c.n, c.delta, c.rho)
			if math.Abs(got-c.want) > 1e-9 {
				t.Errorf("ClippedMarginBound = %.10f, want %.10f", got, c.want)
			}
		})
	}
}

// TestClippedMarginBoundHolds checks the checkable consequence (docs/math.md §4) on ripley's held-out
// set: the fraction with g(y f(x)) ≤ −ρ never exceeds the bound, for the SVM's own W.
func TestClippedMarginBoundHolds(t *testing.T) {
	X, y := loadCSV(t, "ripley_train.csv")
	Xt, yt := loadCSV(t, "ripley_test.csv")
	m, err := Train(context.Background(), X, y, Params{Kernel: Kernel{Type: RBF, Gamma: 2}, C: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var avg float64
	for i, x := range X {
		avg += Clip(y[i] * m.Decision(x))
	}
	n := float64(len(X))
	avg /= n
	W := math.Sqrt(m.W2())
	for _, rho := range []float64{0, 0.25, 0.5, 0.75, 0.95} {
		bound := ClippedMarginBound(avg, W, n /* tr Ω = n for rbf */, n, 0.05, rho)
		bad := 0
		for i, x := range Xt {
			if Clip(yt[i]*m.Decision(x)) <= -rho {
				bad++
			}
		}
		frac := float64(bad) / float64(len(Xt))
		t.Logf("ρ = %.2f: held-out fraction %.4f ≤ bound %.4f", rho, frac, bound)
		if frac > bound {
			t.Errorf("ρ = %v: held-out fraction %v exceeds the bound %v", rho, frac, bound)
		}
	}
}
