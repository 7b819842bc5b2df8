package svm

import (
	"context"
	"os"
	"testing"

	"github.com/streamer/streamer/online/internal/sparse"
)

// letterPath is the benchmark copy of the UCI letter data (tests/svmbench).
const letterPath = "../../tests/svmbench/testdata/letter.csv"

func letterRows(b testing.TB, n int) ([][]float64, []float64) {
	b.Helper()
	if _, err := os.Stat(letterPath); err != nil {
		b.Skipf("%s not present: %v", letterPath, err)
	}
	X, y := loadCSVPath(b, letterPath)
	X, y = X[:n], y[:n]
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	zscore(X, all)
	return X, y
}

// BenchmarkTrain is svmbench's smallest case: 2 000 letter rows, rbf, C = 1, gamma = 1/d.
// Target: under svm-train's time on the same rows (0.065–0.077 s). The
// kernel rows' exps run eight at a time (vmath.ExpNegScaled) since
// 2026-11-27: 53–57 → 41–55 ms (the test binaries before and after,
// alternating), the same model to the bit; the whole row in one pass
// (vmath.RBFRow32), the working-set selection eight indices at a time
// and the cache swaps flushed row by row, the gradient updates four at a
// time and the dot products from packed panels, later that day: 28–41 →
// 12.7–14.7 ms (the test binaries of 79517af and after, alternating).
func BenchmarkTrain(b *testing.B) {
	X, y := letterRows(b, 2000)
	p := Params{Kernel: Kernel{Type: RBF, Gamma: 1.0 / 16}, C: 1}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Train(context.Background(), X, y, p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTrain10k is the largest svmbench case, for profiling. Target:
// under half svm-train's time (1.15–1.76 s here); 522–715 → 187–227 ms
// with RBFRow32, the vector selection, the flushed swaps, the vector
// gradient updates and the packed dot products (2026-11-27).
func BenchmarkTrain10k(b *testing.B) {
	X, y := letterRows(b, 10000)
	p := Params{Kernel: Kernel{Type: RBF, Gamma: 1.0 / 16}, C: 1}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Train(context.Background(), X, y, p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecisionLinear scores one row with a linear model of the
// 2 000 letter rows (1 205 support vectors, d = 16). Target: O(d),
// ≤ 50 ns, 0 allocs: through the primal weights w = Σ c_i·SV_i since
// 2026-11-27: 8.5 ns, where the sum over the support vectors took
// 9.0–9.2 µs.
func BenchmarkDecisionLinear(b *testing.B) {
	benchDecision(b, Params{Kernel: Kernel{Type: Linear}, C: 1})
}

// BenchmarkDecision scores one row with the 2 000-row model (about 1 000 support vectors).
// Target: 0 allocs, ≤ 3 ns per support vector and feature (2.1–2.6 µs here, 2026-11-27,
// through vmath's packed rbf sum; 17.2–17.6 µs by a loop of the scalar exp before).
func BenchmarkDecision(b *testing.B) {
	benchDecision(b, Params{Kernel: Kernel{Type: RBF, Gamma: 1.0 / 16}})
}

// benchDecision scores letter row 7 with the model p fits on the first
// 2 000 rows.
func benchDecision(b *testing.B, p Params) {
	X, y := letterRows(b, 2000)
	m, err := Train(context.Background(), X, y, p, nil)
	if err != nil {
		b.Fatal(err)
	}
	x := X[7]
	b.ReportAllocs()
	var s float64
	for b.Loop() {
		s += m.Decision(x)
	}
	_ = s
	b.ReportMetric(float64(m.NSV()), "SVs")
}

// hashedModel trains rbf on n rows of the synthetic click log (30 hashed
// fields and a cross, 2^18 indices) and keeps the first nsv support
// vectors (a model of exactly nsv, for scoring benchmarks).
func hashedModel(b *testing.B, n, nsv int) (*Model, []sparse.Row) {
	b.Helper()
	X, y := hashedClicks(1, n, 30, 18)
	m, err := TrainSparse(context.Background(), X, 1<<18, y, Params{Kernel: Kernel{Type: RBF, Gamma: 1.0 / 31}, C: 4}, nil)
	if err != nil {
		b.Fatal(err)
	}
	if m.NSV() < nsv {
		b.Fatalf("%d support vectors, want ≥ %d", m.NSV(), nsv)
	}
	m.Coef, m.SVIndex = m.Coef[:nsv], m.SVIndex[:nsv]
	m.setSparse(m.SparseSV[:nsv])
	Xt, _ := hashedClicks(2, 64, 30, 18)
	return m, Xt
}

// BenchmarkDecisionSparse500 scores a hashed event (31 entries) with 500
// support vectors of 31 entries through their inverted index. Target:
// ≤ 10 µs (the merge per support vector, BenchmarkDecisionSparse500Merge,
// costs several times that), 0 allocs. 2.2–2.3 µs since the exps run eight
// at a time (2026-11-27; 6.2 µs before).
func BenchmarkDecisionSparse500(b *testing.B) {
	m, Xt := hashedModel(b, 600, 500)
	benchSparseScore(b, m, Xt, make([]float64, m.NSV()))
}

// benchSparseScore scores the 64 hashed events Xt in turn with m, through
// its index when buf has room for it.
func benchSparseScore(b *testing.B, m *Model, Xt []sparse.Row, buf []float64) {
	b.ReportAllocs()
	var s float64
	i := 0
	for b.Loop() {
		s += m.DecisionSparse(Xt[i&63], buf)
		i++
	}
	_ = s
	b.ReportMetric(float64(m.NSV()), "SVs")
}

// BenchmarkDecisionSparse500Merge is BenchmarkDecisionSparse500 without
// the index (no scratch space: a merge per support vector).
func BenchmarkDecisionSparse500Merge(b *testing.B) {
	m, Xt := hashedModel(b, 600, 500)
	benchSparseScore(b, m, Xt, nil)
}

// BenchmarkTrainSparse2000 trains rbf on 2 000 rows of the hashed click
// log at 2^18 dimensions (the default window of type svm). Target: under
// svm-train's time on the same rows written as a LIBSVM file (1.05 s here:
// svm-train -s 0 -t 2 -g 0.0322581 -c 4 -e 0.001 -m 100 -h 1). The
// kernel rows' exps eight at a time (2026-11-27): 105–118 → 78–83 ms, the
// same model to the bit; with RBFRow32, the vector selection, the
// flushed swaps and the vector gradient updates, 74–89 → 37–49 ms.
func BenchmarkTrainSparse2000(b *testing.B) {
	X, y := hashedClicks(1, 2000, 30, 18)
	p := Params{Kernel: Kernel{Type: RBF, Gamma: 1.0 / 31}, C: 4}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := TrainSparse(context.Background(), X, 1<<18, y, p, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecisionSparseLinear scores a hashed event (31 entries) with a
// linear model of 1 500 rows of the click log (2^18 indices). Target:
// O(entries), ≤ 200 ns, 0 allocs: 40 ns through dense primal weights
// since 2026-11-27 (6.7–7.1 µs through the support vectors' index).
func BenchmarkDecisionSparseLinear(b *testing.B) {
	X, y := hashedClicks(1, 1500, 30, 18)
	m, err := TrainSparse(context.Background(), X, 1<<18, y, Params{Kernel: Kernel{Type: Linear}, C: 1}, nil)
	if err != nil {
		b.Fatal(err)
	}
	Xt, _ := hashedClicks(2, 64, 30, 18)
	benchSparseScore(b, m, Xt, make([]float64, m.NSV()))
}
