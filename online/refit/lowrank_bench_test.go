package refit

import (
	"context"
	"testing"

	"github.com/streamer/streamer/online/lowrank"
	"github.com/streamer/streamer/online/svm"
)

// benchData is n events of d1×d2 matrices with a rank-1 rule
// (matrixStream), as a window.
func benchData(n, d1, d2 int) *Data {
	X, y := matrixStream(42, n, d1, d2, 0.3)
	d := &Data{X: make([]float64, 0, n*d1*d2), Y: y, D: d1 * d2}
	for _, x := range X {
		d.X = append(d.X, x...)
	}
	return d
}

// lowRankScorer fits a 20×20 rank-2 model on 400 events.
func lowRankScorer(b *testing.B) (*lowRankFit, [][]float64) {
	b.Helper()
	const d1, d2 = 20, 20
	d := benchData(400, d1, d2)
	tr := &LowRank{Params: lowrank.Params{Rows: d1, Cols: d2, Rank: 2}, Delta: 0.05}
	f, _, err := tr.Fit(context.Background(), d, nil)
	if err != nil {
		b.Fatal(err)
	}
	X, _ := matrixStream(43, 64, d1, d2, 0.3)
	return f.(*lowRankFit), X
}

// BenchmarkLowRankScore scores one 20×20 event (400 features) with a
// rank-2 fit: the decision value <U Vᵀ, X> + b (U Vᵀ is kept as a 400-entry
// matrix, so it is one dot product), the label and the certainty bound.
// Target: 0 allocs/op and well under 1 µs (measured: ~0.21 µs, 0 allocs,
// on the 2-core AMD EPYC of development).
func BenchmarkLowRankScore(b *testing.B) {
	f, X := lowRankScorer(b)
	b.ReportAllocs()
	var s float64
	i := 0
	for b.Loop() {
		s += f.Predict(X[i&63]).Score
		i++
	}
	_ = s
}

// BenchmarkLowRankObserve is the same event through the model's Observe
// (unlabelled: score only), as the stream engine calls it. Target: 0
// allocs/op, well under 1 µs.
func BenchmarkLowRankObserve(b *testing.B) {
	f, X := lowRankScorer(b)
	m, err := New(Config{Type: LowRankName, Dim: 400, Window: 400, EveryEvents: 400}, &LowRank{})
	if err != nil {
		b.Fatal(err)
	}
	m.cur.Store(&serving{fit: f, version: 1})
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.Observe(X[i&63], 0, false)
		i++
	}
}

// The refit benchmarks train on the same 5 000-event window of 16×16
// matrices (256 features, a rank-1 rule with noise), C = 1: lowrank at
// rank 2 (the type's defaults: tol 1e-4, at most 50 iterations, each a
// U-step and a V-step, SMO on 32 features each) next to svm with the
// linear kernel on the 256 flattened features, so that one run gives
// comparable figures. No target: they document the cost of a refit.
const refitRows, refitSide = 5000, 16

// BenchmarkLowRankRefit5000 is one lowrank refit of the window.
func BenchmarkLowRankRefit5000(b *testing.B) {
	d := benchData(refitRows, refitSide, refitSide)
	tr := &LowRank{Params: lowrank.Params{Rows: refitSide, Cols: refitSide, Rank: 2}, Delta: 0.05}
	b.ReportAllocs()
	var st Stats
	for b.Loop() {
		var err error
		if _, st, err = tr.Fit(context.Background(), d, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.Iterations), "iterations")
	b.ReportMetric(st.Objective, "objective")
}

// BenchmarkSVMLinearRefit5000 is one svm refit of the same window, linear
// kernel on the flattened matrices, same C.
func BenchmarkSVMLinearRefit5000(b *testing.B) {
	d := benchData(refitRows, refitSide, refitSide)
	tr := &SVM{Params: svm.Params{Kernel: svm.Kernel{Type: svm.Linear}, C: 1}, Delta: 0.05}
	b.ReportAllocs()
	var st Stats
	for b.Loop() {
		var err error
		if _, st, err = tr.Fit(context.Background(), d, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(st.SupportVectors), "SVs")
}
