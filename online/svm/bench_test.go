package svm

import (
	"context"
	"os"
	"testing"
)

// letterPath is the benchmark copy of the UCI letter data (tests/svmbench).
const letterPath = "../../tests/svmbench/testdata/letter.csv"

func letterRows(b *testing.B, n int) ([][]float64, []float64) {
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

// BenchmarkTrain10k is the largest svmbench case, for profiling.
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

// BenchmarkDecision scores one row with the 2 000-row model (about 1 000 support vectors).
func BenchmarkDecision(b *testing.B) {
	X, y := letterRows(b, 2000)
	m, err := Train(context.Background(), X, y, Params{Kernel: Kernel{Type: RBF, Gamma: 1.0 / 16}}, nil)
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
}
