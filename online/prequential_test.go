package online

import (
	"math"
	"testing"
)

func TestPrequential(t *testing.T) {
	p := NewPrequential(3)
	if !math.IsNaN(p.Accuracy()) || p.Count() != 0 || p.Window() != 3 {
		t.Fatalf("empty: accuracy %v, count %d", p.Accuracy(), p.Count())
	}
	steps := []struct {
		add   bool
		count int
		acc   float64
	}{
		{true, 1, 1},
		{false, 2, 0.5},
		{true, 3, 2.0 / 3},
		{false, 3, 1.0 / 3}, // evicts the first true
		{false, 3, 1.0 / 3}, // evicts false
		{false, 3, 0},       // evicts true
		{true, 3, 1.0 / 3},
	}
	for i, s := range steps {
		p.Add(s.add)
		if p.Count() != s.count || math.Abs(p.Accuracy()-s.acc) > 1e-15 {
			t.Fatalf("step %d: count %d accuracy %v, want %d %v", i, p.Count(), p.Accuracy(), s.count, s.acc)
		}
	}
	p.Reset()
	if p.Count() != 0 || !math.IsNaN(p.Accuracy()) {
		t.Fatal("Reset")
	}
}

func TestPrequentialAgainstNaive(t *testing.T) {
	for _, w := range []int{1, 2, 7, 100} {
		p := NewPrequential(w)
		var hist []bool
		for i := range 1000 {
			c := (i*7919)%11 < 6
			p.Add(c)
			hist = append(hist, c)
			last := hist[max(0, len(hist)-w):]
			n := 0
			for _, v := range last {
				if v {
					n++
				}
			}
			if p.Count() != len(last) || p.Correct() != n || p.Accuracy() != float64(n)/float64(len(last)) {
				t.Fatalf("w=%d i=%d: %d/%d, want %d/%d", w, i, p.Correct(), p.Count(), n, len(last))
			}
		}
	}
	if a := testing.AllocsPerRun(100, func() { NewPrequential(1).Add(true) }); a > 2 {
		t.Errorf("%v allocs", a)
	}
	p := NewPrequential(10)
	if a := testing.AllocsPerRun(100, func() { p.Add(true); _ = p.Accuracy() }); a != 0 {
		t.Errorf("Add: %v allocs", a)
	}
}

func TestNewPrequentialPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("no panic for window 0")
		}
	}()
	NewPrequential(0)
}
