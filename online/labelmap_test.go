package online

import (
	"math"
	"strings"
	"testing"
)

func TestPositiveWhen(t *testing.T) {
	for _, tc := range []struct {
		cond    string
		pos     []float64
		neg     []float64
		wantErr string
	}{
		{cond: ">= 4", pos: []float64{4, 4.5, 5}, neg: []float64{0.5, 1, 3.5}},
		{cond: ">4", pos: []float64{4.5}, neg: []float64{4, 1}},
		{cond: " <= 2.5 ", pos: []float64{0.5, 2.5}, neg: []float64{3}},
		{cond: "< 0", pos: []float64{-1}, neg: []float64{0, 1}},
		{cond: "== 1", pos: []float64{1}, neg: []float64{0, -1, 2}},
		{cond: ">= -1e3", pos: []float64{-1000, 0}, neg: []float64{-1001}},
		{cond: "4", wantErr: `"4" is not a condition: want an operator`},
		{cond: "=> 4", wantErr: "want an operator"},
		{cond: ">= ", wantErr: `"" is not a finite number`},
		{cond: ">= 4 stars", wantErr: `"4 stars" is not a finite number`},
		{cond: "> NaN", wantErr: "not a finite number"},
		{cond: "< +Inf", wantErr: "not a finite number"},
		{cond: "", wantErr: "not a condition"},
	} {
		l, err := PositiveWhen(tc.cond)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want one containing %q", tc.cond, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.cond, err)
			continue
		}
		for _, v := range tc.pos {
			if l.Map(v) != 1 {
				t.Errorf("%q: %v maps to %v, want +1", tc.cond, v, l.Map(v))
			}
		}
		for _, v := range tc.neg {
			if l.Map(v) != -1 {
				t.Errorf("%q: %v maps to %v, want −1", tc.cond, v, l.Map(v))
			}
		}
	}
}

func TestBinnedBy(t *testing.T) {
	l, err := BinnedBy([]float64{1.5, 2.5, 3.5, 4.5})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ v, level float64 }{{-10, 1}, {0.5, 1}, {1.49, 1}, {1.5, 2}, {2, 2}, {3, 3}, {3.5, 4}, {4.5, 5}, {5, 5}, {1e9, 5}} {
		if got := l.Map(tc.v); got != tc.level {
			t.Errorf("%v: level %v, want %v", tc.v, got, tc.level)
		}
	}
	for _, bad := range [][]float64{nil, {}, {1, 1}, {2, 1}, {1, math.NaN()}, {math.Inf(-1), 0}} {
		if _, err := BinnedBy(bad); err == nil {
			t.Errorf("edges %v accepted", bad)
		}
	}
	var none *LabelMap
	if none.Map(3.25) != 3.25 || (&LabelMap{}).Map(-2) != -2 || none.String() != "none" {
		t.Error("a nil or zero map changes labels")
	}
	if n := testing.AllocsPerRun(100, func() { _ = l.Map(3.7) }); n != 0 {
		t.Errorf("Map: %v allocs", n)
	}
}

// TestLabelRange: a map with a range reads the wire labels in it, ends
// included, as the map without it does, and none outside it (nor NaN);
// the range goes with a condition, edges or nothing, and the map it was
// made from keeps reading every label.
func TestLabelRange(t *testing.T) {
	pos, _ := PositiveWhen(">= 4")
	bins, _ := BinnedBy([]float64{2, 4})
	inf := math.Inf(1)
	for _, tc := range []struct {
		name   string
		base   *LabelMap
		lo, hi float64
		str    string
	}{
		{"none", nil, 0.5, 5, "range [0.5, 5]"},
		{"positive", pos, 0.5, 5, "positive >= 4, range [0.5, 5]"},
		{"edges", bins, 0.5, 5, "edges [2 4], range [0.5, 5]"},
		{"min only", nil, 0, inf, "range [0, +Inf]"},
		{"one value", nil, 3, 3, "range [3, 3]"},
	} {
		l, err := tc.base.WithRange(tc.lo, tc.hi)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := l.String(); got != tc.str {
			t.Errorf("%s: String %q, want %q", tc.name, got, tc.str)
		}
		if lo, hi, ok := l.Range(); !ok || lo != tc.lo || hi != tc.hi {
			t.Errorf("%s: Range %v %v %v", tc.name, lo, hi, ok)
		}
		for _, v := range []float64{-1e12, -1, 0, 0.49, 0.5, 1, 3, 4, 4.5, 5, 5.01, 1e12, inf, -inf, math.NaN()} {
			y, ok := l.Read(v)
			in := v >= tc.lo && v <= tc.hi
			if ok != in {
				t.Errorf("%s: Read(%v) ok = %v, want %v", tc.name, v, ok, in)
			}
			if in && y != tc.base.Map(v) {
				t.Errorf("%s: Read(%v) = %v, Map without the range %v", tc.name, v, y, tc.base.Map(v))
			}
			if y2, ok2 := tc.base.Read(v); !ok2 || math.Float64bits(y2) != math.Float64bits(tc.base.Map(v)) {
				t.Errorf("%s: the map without the range: Read(%v) = %v, %v", tc.name, v, y2, ok2)
			}
		}
	}
	if _, _, ok := pos.Range(); ok {
		t.Error("PositiveWhen has a range")
	}
	for _, bad := range [][2]float64{{5, 0.5}, {math.NaN(), 5}, {0, math.NaN()}} {
		if _, err := pos.WithRange(bad[0], bad[1]); err == nil {
			t.Errorf("range %v accepted", bad)
		}
	}
	l, _ := bins.WithRange(0.5, 5)
	if n := testing.AllocsPerRun(100, func() { _, _ = l.Read(3.7) }); n != 0 {
		t.Errorf("Read: %v allocs", n)
	}
}

// TestJudgeValues: a regression model's RMSE judges its value when it
// publishes one, and a model that publishes values is not judged before
// it has one; an ordinal model's RMSE is that of the values given to
// AddValue against the raw labels.
func TestJudgeValues(t *testing.T) {
	j := NewJudge(Traits{Kind: Regression, Value: true}, 100)
	j.Add(Prediction{Score: 1000}, 3, nil) // no value yet: not judged
	for i := 1; i < JudgeCheckEvery; i++ {
		j.Add(Prediction{Score: 100, Value: 3.5, HasValue: true}, 3, nil)
	}
	if got := j.RMSE(); math.Abs(got-0.5) > 1e-12 {
		t.Errorf("regression RMSE %v, want 0.5 (the value's error)", got)
	}
	k := NewJudge(Traits{Kind: Regression}, 100) // krr: the score is the value
	for range JudgeCheckEvery {
		k.Add(Prediction{Score: 2}, 3, nil)
	}
	if got := k.RMSE(); got != 1 {
		t.Errorf("score RMSE %v, want 1", got)
	}
	o := NewJudge(Traits{Kind: Ordinal, Levels: 3}, 100)
	for i := range JudgeCheckEvery {
		if i%2 == 0 {
			o.AddValue(2.5, 2)
		}
		o.Add(Prediction{Score: 0.1, Label: 2}, 2, nil)
	}
	if got := o.RMSE(); got != 0.5 {
		t.Errorf("ordinal RMSE %v, want 0.5", got)
	}
	if got := NewJudge(Traits{Kind: Ordinal}, 10).RMSE(); !math.IsNaN(got) {
		t.Errorf("ordinal RMSE without values %v, want NaN", got)
	}
}
