package svm

import (
	"context"
	"testing"
	"time"
)

func TestSelect(t *testing.T) {
	X, y := loadCSV(t, "ripley_train.csv")
	Xt, yt := loadCSV(t, "ripley_test.csv")
	var grid []GridPoint
	for _, g := range []float64{0.5, 2, 8} {
		for _, c := range []float64{10, 0.1, 1} {
			grid = append(grid, GridPoint{C: c, Gamma: g})
		}
	}
	p := Params{Kernel: Kernel{Type: RBF}}
	sel, err := Select(context.Background(), X, y, grid, 5, 20*time.Second, p)
	if err != nil {
		t.Fatal(err)
	}
	if !sel.Complete || len(sel.Scores) != len(grid) {
		t.Fatalf("incomplete: %+v", sel)
	}
	p.C, p.Kernel.Gamma = sel.Best.C, sel.Best.Gamma
	m, err := Train(context.Background(), X, y, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	wrong := 0
	for i, x := range Xt {
		if m.Predict(x) != yt[i] {
			wrong++
		}
	}
	testErr := float64(wrong) / float64(len(yt))
	t.Logf("best %+v, CV error %.3f, ripley test error %.3f (scores %v)", sel.Best, bestErr(sel), testErr, sel.Scores)
	if testErr > 0.12 {
		t.Errorf("test error %.3f with the selected parameters", testErr)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Select(ctx, X, y, grid, 5, 0, p); err == nil {
		t.Error("cancelled Select: no error")
	}
}
