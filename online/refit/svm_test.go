package refit

import (
	"math"
	"testing"

	"github.com/streamer/streamer/online/svm"
)

// TestSVMOnRipley streams Ripley's training set into a windowed SVM that
// refits once the window is full, then judges the test set: LIBSVM-level
// error, a valid bound at every published ρ, probabilities, round trip.
func TestSVMOnRipley(t *testing.T) {
	Xtr, ytr := readRows(t, "testdata/ripley_train.csv")
	Xte, yte := readRows(t, "testdata/ripley_test.csv")
	tr := &SVM{Params: svm.Params{Kernel: svm.Kernel{Type: svm.RBF, Gamma: 0.5}, C: 1}, Delta: 0.05, ProbLevels: 10}
	m, err := New(Config{Type: SVMName, Dim: 2, Window: 250, EveryEvents: 250}, tr)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	m.OnRefit(func(r Report) { rep = r })
	for i := range Xtr {
		m.Observe(Xtr[i], ytr[i], true)
	}
	if !rep.Accepted || rep.Window != 250 || rep.Stats.SupportVectors != 128 || math.Abs(rep.Stats.Objective+109.269448) > 1e-3 {
		t.Fatalf("refit report %+v: want LIBSVM's obj −109.269448 and 128 SVs", rep)
	}
	type out struct{ y, f, bound, prob float64 }
	var outs []out
	wrong := 0
	for i := range Xte {
		p := m.Observe(Xte[i], 0, false)
		if p.Version != 1 || !p.HasBound || !p.HasProbability || p.MistakeBound < 0 || p.MistakeBound > 1 {
			t.Fatalf("prediction %+v", p)
		}
		if float64(p.Label) != yte[i] {
			wrong++
		}
		outs = append(outs, out{yte[i], p.Score, p.MistakeBound, p.Probability})
	}
	errRate := float64(wrong) / float64(len(Xte))
	t.Logf("ripley test error %.1f%%", 100*errRate)
	if errRate > 0.11 {
		t.Fatalf("test error %.3f > 0.11", errRate)
	}
	var brier float64
	for _, o := range outs {
		rho := math.Min(math.Abs(o.f), 1)
		viol := 0
		for _, q := range outs {
			if q.y*q.f <= -rho {
				viol++
			}
		}
		if frac := float64(viol) / float64(len(outs)); frac > o.bound {
			t.Fatalf("bound violated at ρ=%v: %v > %v", rho, frac, o.bound)
		}
		t01 := 0.0
		if o.y > 0 {
			t01 = 1
		}
		brier += (o.prob - t01) * (o.prob - t01)
	}
	brier /= float64(len(outs))
	t.Logf("ripley Brier score %.4f", brier)
	if brier > 0.10 {
		t.Fatalf("Brier %.4f", brier)
	}

	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := New(Config{Type: SVMName, Dim: 2, Window: 250, EveryEvents: 250}, &SVM{Delta: 0.05})
	if err := m2.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		if p1, p2 := m.Observe(Xte[i], 0, false), m2.Observe(Xte[i], 0, false); p1 != p2 {
			t.Fatalf("restored SVM differs: %+v vs %+v", p1, p2)
		}
	}

}
