package refit

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"strconv"
	"testing"

	"github.com/streamer/streamer/online/rank"
)

// bostonSplit0 returns split 0 of online/rank's golden file, standardised
// on its training rows.
func bostonSplit0(t *testing.T) (Xtr, ytr, Xte, yte []float64, d int) {
	return bostonSplit(t, 0)
}

// bostonSplit returns split k (of the README's 10 stratified 70/30 splits
// in online/rank's golden file), standardised on its training rows.
func bostonSplit(t *testing.T, k int) (Xtr, ytr, Xte, yte []float64, d int) {
	t.Helper()
	f, err := os.Open("../rank/testdata/boston_ordinal.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	d = len(recs[0]) - 1
	var X, y []float64
	for _, r := range recs[1:] {
		for j, s := range r {
			v, _ := strconv.ParseFloat(s, 64)
			if j < d {
				X = append(X, v)
			} else {
				y = append(y, v)
			}
		}
	}
	b, err := os.ReadFile("../rank/testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g struct{ Splits []struct{ Train, Test []int } }
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	tr, te := g.Splits[k].Train, g.Splits[k].Test
	mu, sd := make([]float64, d), make([]float64, d)
	for _, i := range tr {
		for j := range d {
			mu[j] += X[i*d+j] / float64(len(tr))
		}
	}
	for _, i := range tr {
		for j := range d {
			sd[j] += (X[i*d+j] - mu[j]) * (X[i*d+j] - mu[j]) / float64(len(tr))
		}
	}
	rows := func(idx []int) ([]float64, []float64) {
		var xs, ys []float64
		for _, i := range idx {
			for j := range d {
				xs = append(xs, (X[i*d+j]-mu[j])/math.Sqrt(sd[j]))
			}
			ys = append(ys, y[i])
		}
		return xs, ys
	}
	Xtr, ytr = rows(tr)
	Xte, yte = rows(te)
	return
}

// TestRankTrainersOnBoston streams boston_ordinal's training split into a
// window of its size (one refit) and scores the test split: the scores
// are the package's (rank.Fit / rank.Sums.Fit, and rank.Sums.FitKRR for
// RFRank with Method KRR) exactly, so τ is too, and they survive a Model
// round trip.
func TestRankTrainersOnBoston(t *testing.T) {
	Xtr, ytr, Xte, yte, d := bostonSplit0(t)
	ks := []rank.Kernel{{Gamma: 0.03, V: 1}, {Gamma: 0.1, V: 4}} // split 0's CV choice (online/rank quality test)
	for _, tc := range []struct {
		tr         Trainer
		name, test string
	}{
		{&LSRRank{Kernels: ks, Lambda: 1e-3}, MLSRRankName, "mlsrrank"},
		{&LSRRank{Kernels: ks[:1], Lambda: 1e-4}, LSRRankName, "lsrrank"},
		{&KRR{Kernels: ks[:1], Lambda: 0.03}, KRRName, "krr"},
		{&RFRank{Kernels: ks, Lambda: 1e-3, Features: 256, Seed: 1}, MLSRRankName, "mlsrrank features"},
		{&RFRank{Kernels: ks[:1], Lambda: 0.03, Features: 512, Seed: 1, Method: rank.KRR}, KRRName, "krr features"},
	} {
		t.Run(tc.test, func(t *testing.T) {
			var pkg func(x []float64) float64
			switch tr := tc.tr.(type) {
			case *LSRRank:
				m, err := rank.Fit(context.Background(), Xtr, d, ytr, rank.Config{Method: rank.LSRRank, Kernels: tr.Kernels, Lambda: tr.Lambda})
				if err != nil {
					t.Fatal(err)
				}
				pkg = m.Predict
			case *KRR:
				m, _ := rank.Fit(context.Background(), Xtr, d, ytr, rank.Config{Method: rank.KRR, Kernels: tr.Kernels, Lambda: tr.Lambda})
				pkg = m.Predict
			case *RFRank:
				fm, _ := rank.NewFeatureMap(d, rank.FeatureConfig{Kernels: tr.Kernels, Features: tr.Features, Seed: tr.Seed})
				s := rank.NewSums(fm)
				for i := range ytr {
					s.Add(Xtr[i*d:(i+1)*d], ytr[i])
				}
				fit := s.Fit
				if tr.Method == rank.KRR {
					fit = s.FitKRR
				}
				m, err := fit(tr.Lambda)
				if err != nil {
					t.Fatal(err)
				}
				pkg = m.Predict
			}
			m, err := New(Config{Type: tc.name, Dim: d, Window: len(ytr), EveryEvents: len(ytr)}, tc.tr)
			if err != nil {
				t.Fatal(err)
			}
			var rep Report
			m.OnRefit(func(r Report) { rep = r })
			for i := range ytr {
				y, ok := m.Label(ytr[i])
				if !ok {
					t.Fatalf("label %v refused", ytr[i])
				}
				m.Observe(Xtr[i*d:(i+1)*d], y, true)
			}
			if !rep.Accepted || rep.Window != len(ytr) || m.Version() != 1 {
				t.Fatalf("refit report %+v", rep)
			}
			f, fp := make([]float64, len(yte)), make([]float64, len(yte))
			for k := range yte {
				x := Xte[k*d : (k+1)*d]
				p := m.Observe(x, 0, false)
				if p.Label != 0 || p.HasBound || p.Version != 1 || p.N != int64(len(ytr)) {
					t.Fatalf("prediction %+v", p)
				}
				f[k], fp[k] = p.Score, pkg(x)
				if f[k] != fp[k] {
					t.Fatalf("score %v, package %v", f[k], fp[k])
				}
			}
			ms := rank.Measure(f, yte)
			t.Logf("%s: test τ-b %.4f, τ(seed) %.4f, ρ %.4f (m = %d)", tc.test, ms.KendallTauB, ms.KendallTau, ms.Spearman, len(ytr))
			if ms.KendallTauB < 0.75 {
				t.Errorf("τ-b %.4f < 0.75", ms.KendallTauB)
			}
			b, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			m2, _ := New(Config{Type: tc.name, Dim: d, Window: len(ytr), EveryEvents: len(ytr)}, tc.tr)
			if err := m2.UnmarshalBinary(b); err != nil {
				t.Fatal(err)
			}
			for k := range yte {
				if p := m2.Observe(Xte[k*d:(k+1)*d], 0, false); p.Score != f[k] || p.Version != 1 {
					t.Fatalf("after round trip: %+v, want score %v", p, f[k])
				}
			}
			if a := testing.AllocsPerRun(50, func() { m.Observe(Xte[:d], 0, false) }); a != 0 {
				t.Fatalf("scoring allocates %v", a)
			}
		})
	}
	for _, v := range []float64{math.NaN(), math.Inf(1)} {
		if _, ok := (&LSRRank{}).Label(v); ok {
			t.Errorf("label %v accepted", v)
		}
	}
}
