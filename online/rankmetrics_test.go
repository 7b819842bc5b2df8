package online

import (
	"math"
	"math/rand/v2"
	"testing"
)

// rankBruteTauB is τ-b from the O(n²) pair counts: concordant C, discordant D,
// pairs tied only in x (tx) and only in y (ty):
// τ_b = (C − D)/sqrt((C + D + tx)(C + D + ty)).
func rankBruteTauB(x, y []float64) float64 {
	var c, d, tx, ty float64
	for i := range x {
		for j := i + 1; j < len(x); j++ {
			dx, dy := x[i]-x[j], y[i]-y[j]
			switch {
			case dx == 0 && dy == 0:
			case dx == 0:
				tx++
			case dy == 0:
				ty++
			case (dx > 0) == (dy > 0):
				c++
			default:
				d++
			}
		}
	}
	den := (c + d + tx) * (c + d + ty)
	if den == 0 {
		return math.NaN()
	}
	return (c - d) / math.Sqrt(den)
}

func TestKendallTauBKnown(t *testing.T) {
	// scipy.stats.kendalltau's documented example: τ-b = −0.47140452079103173.
	x := []float64{12, 2, 1, 12, 2}
	y := []float64{1, 4, 7, 1, 0}
	if got, want := KendallTauB(x, y), -0.47140452079103173; math.Abs(got-want) > 1e-15 {
		t.Errorf("τ-b = %v, want %v", got, want)
	}
	if got := KendallTauB([]float64{1, 2, 3}, []float64{10, 20, 30}); got != 1 {
		t.Errorf("increasing: τ-b = %v, want 1", got)
	}
	if got := KendallTauB([]float64{1, 2, 3}, []float64{3, 2, 1}); got != -1 {
		t.Errorf("decreasing: τ-b = %v, want -1", got)
	}
	for name, xy := range map[string][2][]float64{
		"empty":      {nil, nil},
		"one point":  {{1}, {2}},
		"x constant": {{1, 1, 1}, {1, 2, 3}},
		"y constant": {{1, 2, 3}, {5, 5, 5}},
		"NaN":        {{1, math.NaN(), 3}, {1, 2, 3}},
	} {
		if got := KendallTauB(xy[0], xy[1]); !math.IsNaN(got) {
			t.Errorf("%s: τ-b = %v, want NaN", name, got)
		}
	}
}

// TestKendallTauBBruteForce compares Knight's algorithm with the O(n²)
// count on random data with many ties in both variables.
func TestKendallTauBBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	for trial := range 300 {
		n := 2 + r.IntN(200)
		kx, ky := 1+r.IntN(12), 1+r.IntN(6) // few distinct values: ties
		if trial%5 == 0 {
			kx = 1 << 30 // continuous x
		}
		x, y := make([]float64, n), make([]float64, n)
		for i := range x {
			x[i] = float64(r.IntN(kx))
			y[i] = float64(r.IntN(ky))
			if trial%3 == 0 { // correlated
				y[i] = math.Floor(x[i]/float64(max(1, kx/ky))) + float64(r.IntN(2))
			}
		}
		got, want := KendallTauB(x, y), rankBruteTauB(x, y)
		if math.IsNaN(want) != math.IsNaN(got) || !math.IsNaN(want) && math.Abs(got-want) > 1e-12 {
			t.Fatalf("trial %d (n=%d): τ-b = %v, brute force %v", trial, n, got, want)
		}
	}
}

func TestMeanAbsAndZeroOneError(t *testing.T) {
	pred := []int{1, 2, 3, 5, 4}
	truth := []int{1, 3, 1, 5, 5}
	if got := MeanAbsError(pred, truth); got != 4.0/5 {
		t.Errorf("MAE = %v, want 0.8", got)
	}
	if got := ZeroOneError(pred, truth); got != 3.0/5 {
		t.Errorf("zero-one = %v, want 0.6", got)
	}
	if !math.IsNaN(MeanAbsError(nil, nil)) || !math.IsNaN(ZeroOneError(nil, nil)) {
		t.Error("empty: want NaN")
	}
	for name, f := range map[string]func(){
		"MeanAbsError": func() { MeanAbsError([]int{1}, nil) },
		"ZeroOneError": func() { ZeroOneError([]int{1}, nil) },
		"KendallTauB":  func() { KendallTauB([]float64{1}, nil) },
		"window 0":     func() { NewOrdinalWindow(0) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

// TestOrdinalWindowAgainstNaive checks the window's running figures against
// recomputation over the last w events.
func TestOrdinalWindowAgainstNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	const w = 37
	win := NewOrdinalWindow(w)
	if !math.IsNaN(win.MAE()) || !math.IsNaN(win.ZeroOne()) || !math.IsNaN(win.KendallTau()) || win.Count() != 0 {
		t.Fatal("empty window: want NaN figures and count 0")
	}
	var scores []float64
	var preds, truths []int
	for i := range 200 {
		truth := 1 + r.IntN(5)
		score := float64(truth) + r.NormFloat64()
		if i%4 == 0 {
			score = math.Round(score) // ties in the score
		}
		pred := min(5, max(1, int(math.Round(score))))
		win.Add(score, pred, truth)
		scores, preds, truths = append(scores, score), append(preds, pred), append(truths, truth)
		lo := max(0, len(scores)-w)
		s, p, tr := scores[lo:], preds[lo:], truths[lo:]
		if win.Count() != len(s) {
			t.Fatalf("event %d: count %d, want %d", i, win.Count(), len(s))
		}
		if got, want := win.MAE(), MeanAbsError(p, tr); math.Abs(got-want) > 1e-15 {
			t.Fatalf("event %d: MAE %v, want %v", i, got, want)
		}
		if got, want := win.ZeroOne(), ZeroOneError(p, tr); math.Abs(got-want) > 1e-15 {
			t.Fatalf("event %d: zero-one %v, want %v", i, got, want)
		}
		ft := make([]float64, len(tr))
		for j, v := range tr {
			ft[j] = float64(v)
		}
		got, want := win.KendallTau(), rankBruteTauB(s, ft)
		if math.IsNaN(got) != math.IsNaN(want) || !math.IsNaN(want) && math.Abs(got-want) > 1e-12 {
			t.Fatalf("event %d: τ-b %v, want %v", i, got, want)
		}
	}
	win.Reset()
	if win.Count() != 0 || !math.IsNaN(win.MAE()) {
		t.Fatal("Reset: window not empty")
	}
}

func TestOrdinalWindowDoesNotAllocate(t *testing.T) {
	win := NewOrdinalWindow(256)
	win.KendallTau() // first call sizes the scratch
	i := 0
	if a := testing.AllocsPerRun(1000, func() {
		win.Add(float64(i%7), 1+i%5, 1+i%3)
		i++
		_, _, _ = win.MAE(), win.ZeroOne(), win.Count()
	}); a != 0 {
		t.Errorf("Add/MAE/ZeroOne: %v allocs, want 0", a)
	}
	if a := testing.AllocsPerRun(50, func() { win.KendallTau() }); a != 0 {
		t.Errorf("KendallTau: %v allocs, want 0", a)
	}
}

func BenchmarkKendallTauB1024(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 5))
	win := NewOrdinalWindow(1024)
	for range 1024 {
		l := 1 + r.IntN(5)
		win.Add(float64(l)+r.NormFloat64(), l, l)
	}
	b.ReportAllocs()
	for b.Loop() {
		win.KendallTau()
	}
}
