package svm

import (
	"bufio"
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// loadCSV reads a shared-data CSV (header, numeric features, label last).
func loadCSV(t testing.TB, name string) (X [][]float64, y []float64) {
	t.Helper()
	return loadCSVPath(t, filepath.Join("testdata", name))
}

func loadCSVPath(t testing.TB, path string) (X [][]float64, y []float64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(bufio.NewReader(f)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs[1:] {
		row := make([]float64, len(r)-1)
		for j := range row {
			if row[j], err = strconv.ParseFloat(r[j], 64); err != nil {
				t.Fatal(err)
			}
		}
		lab, err := strconv.ParseFloat(r[len(r)-1], 64)
		if err != nil {
			t.Fatal(err)
		}
		X = append(X, row)
		y = append(y, lab)
	}
	return X, y
}

// zscore standardises X in place with the mean and standard deviation (n−1) of the rows in fit.
func zscore(X [][]float64, fit []int) { zscoreDDOF(X, fit, 1) }

// zscorePop is zscore with the population standard deviation (n), as sklearn's StandardScaler.
func zscorePop(X [][]float64, fit []int) { zscoreDDOF(X, fit, 0) }

func zscoreDDOF(X [][]float64, fit []int, ddof int) {
	d := len(X[0])
	for j := 0; j < d; j++ {
		var m, s float64
		for _, i := range fit {
			m += X[i][j]
		}
		m /= float64(len(fit))
		for _, i := range fit {
			s += (X[i][j] - m) * (X[i][j] - m)
		}
		s = math.Sqrt(s / float64(len(fit)-ddof))
		if s == 0 {
			s = 1
		}
		for i := range X {
			X[i][j] = (X[i][j] - m) / s
		}
	}
}
