package online

import (
	"math"
	"testing"
)

// mergeSpec is the mergeable rbf mam the merge tests split Ripley's
// training set over.
func mergeSpec(balance bool) MAMParams {
	return MAMParams{Balance: balance, Delta: 0.05, Kernel: KernelSpec{Type: "rbf", Gamma: 2, Features: 256, Seed: 7}}
}

// learnInterleaved has three parts learn the rows of x, y interleaved, as
// partitions would.
func learnInterleaved(parts [3]*MAM, x [][]float64, y []float64) {
	for i := range x {
		parts[(i*7)%3].Observe(x[i], y[i], true)
	}
}

// Models trained on disjoint parts of a stream merge into the model trained
// on all of it: counts exactly, sums and scores to rounding.
func TestMAMMergeEqualsOneModel(t *testing.T) {
	x, y := readCSV(t, "testdata/ripley_train.csv")
	for _, balance := range []bool{false, true} {
		spec := mergeSpec(balance)
		one, _ := NewMAM(2, spec)
		var parts [3]*MAM
		for i := range parts {
			parts[i], _ = NewMAM(2, spec)
		}
		for i := range x {
			one.Observe(x[i], y[i], true)
		}
		learnInterleaved(parts, x, y)
		merged, _ := NewMAM(2, spec)
		if err := merged.MergeAll(parts[:]...); err != nil {
			t.Fatal(err)
		}
		if merged.Examples() != one.Examples() {
			t.Fatalf("balance=%v: n = %d, want %d", balance, merged.Examples(), one.Examples())
		}
		mp, mn := merged.ClassCounts()
		op, on := one.ClassCounts()
		if mp != op || mn != on {
			t.Fatalf("balance=%v: class counts %d/%d, want %d/%d", balance, mp, mn, op, on)
		}
		for i := range 50 {
			got := merged.Observe(x[i], 0, false)
			want := one.Observe(x[i], 0, false)
			if d := math.Abs(got.Score - want.Score); d > 1e-12*(1+math.Abs(want.Score)) {
				t.Fatalf("balance=%v: score %v, want %v", balance, got.Score, want.Score)
			}
			if d := math.Abs(got.MistakeBound - want.MistakeBound); d > 1e-12 {
				t.Fatalf("balance=%v: bound %v, want %v", balance, got.MistakeBound, want.MistakeBound)
			}
		}
		// Merge one at a time gives the same model as MergeAll.
		inc, _ := NewMAM(2, spec)
		for _, p := range parts {
			if err := inc.Merge(p); err != nil {
				t.Fatal(err)
			}
		}
		a, _ := inc.MarshalBinary()
		b, _ := merged.MarshalBinary()
		if string(a) != string(b) {
			t.Fatalf("balance=%v: Merge one at a time differs from MergeAll", balance)
		}
		merged.Reset()
		if merged.Examples() != 0 || merged.Observe(x[0], 0, false).Score != 0 {
			t.Fatalf("balance=%v: Reset left state behind", balance)
		}
	}
}

func TestMAMMergeRefusesIncompatible(t *testing.T) {
	base := MAMParams{Delta: 0.05, Kernel: KernelSpec{Type: "rbf", Gamma: 1, Features: 32, Seed: 1}}
	a, _ := NewMAM(2, base)
	other := base
	other.Kernel.Seed = 2
	b, _ := NewMAM(2, other)
	if err := a.Merge(b); err == nil {
		t.Fatal("merged models with different random features")
	}
	// The same parameters for inputs of another dimension: another map.
	c, _ := NewMAM(3, base)
	if err := a.Merge(c); err == nil {
		t.Fatal("merged models of different input dimensions")
	}
	if err := a.MergeAll(c); err == nil {
		t.Fatal("MergeAll merged models of different input dimensions")
	}
	win := base
	win.Window.Events = 10
	w, _ := NewMAM(2, win)
	if w.Mergeable() {
		t.Fatal("windowed model reports mergeable")
	}
	if err := w.Merge(w); err == nil {
		t.Fatal("merged windowed models")
	}
}

// BenchmarkMAMMergeAll merges six partitions' statistics at D = 512
// balanced, what an instance does when another partition's state arrives
// (target: well under a millisecond, so a refresh every second is free).
func BenchmarkMAMMergeAll(b *testing.B) {
	spec := MAMParams{Balance: true, Delta: 0.05,
		Kernel: KernelSpec{Type: "rbf", Gamma: 2, Features: 512, Seed: 7}}
	parts := make([]*MAM, 6)
	for i := range parts {
		parts[i], _ = NewMAM(2, spec)
		parts[i].Observe([]float64{float64(i), 1}, 1, true)
		parts[i].Observe([]float64{1, float64(i)}, -1, true)
	}
	g, _ := NewMAM(2, spec)
	b.ReportAllocs()
	for b.Loop() {
		if err := g.MergeAll(parts...); err != nil {
			b.Fatal(err)
		}
	}
}

// ObserveTee leaves the tee'd model exactly as Observe would.
func TestMAMObserveTee(t *testing.T) {
	x, y := readCSV(t, "testdata/ripley_train.csv")
	for _, balance := range []bool{false, true} {
		spec := MAMParams{Balance: balance, Delta: 0.05,
			Kernel: KernelSpec{Type: "rbf", Gamma: 2, Features: 64, Seed: 9}}
		g, _ := NewMAM(2, spec)
		tee, _ := NewMAM(2, spec)
		direct, _ := NewMAM(2, spec)
		gp, _ := NewMAM(2, spec) // the same through ObserveTeePrepared
		teep, _ := NewMAM(2, spec)
		prep := make([]float64, gp.PreparedLen())
		for i := range x {
			labelled := i%3 != 0
			if i == 17 {
				x[i] = []float64{math.NaN(), 1} // neither scored nor learned
			}
			p := g.ObserveTee(x[i], y[i], labelled, tee)
			direct.Observe(x[i], y[i], labelled)
			gp.Prepare(prep, x[i])
			if pp := gp.ObserveTeePrepared(prep, x[i], y[i], labelled, teep); pp != p {
				t.Fatalf("balance=%v, event %d: prepared %+v, want %+v", balance, i, pp, p)
			}
		}
		a, _ := tee.MarshalBinary()
		b, _ := direct.MarshalBinary()
		if string(a) != string(b) {
			t.Fatalf("balance=%v: tee'd state differs from Observe's", balance)
		}
		if c, _ := teep.MarshalBinary(); string(c) != string(b) {
			t.Fatalf("balance=%v: prepared tee'd state differs from Observe's", balance)
		}
		if n := g.Examples(); n != direct.Examples() {
			t.Fatalf("balance=%v: %d examples, want %d", balance, n, direct.Examples())
		}
	}
}

// Blanks of one model (sharing its feature map) learn and merge exactly
// as models built apart with its parameters, and merging them allocates
// nothing.
func TestMAMBlanks(t *testing.T) {
	x, y := readCSV(t, "testdata/ripley_train.csv")
	for _, balance := range []bool{false, true} {
		spec := mergeSpec(balance)
		base, _ := NewMAM(2, spec)
		var parts, blanks [3]*MAM
		for i := range parts {
			parts[i], _ = NewMAM(2, spec)
			blanks[i] = base.Blank()
		}
		learnInterleaved(parts, x, y)
		learnInterleaved(blanks, x, y)
		want, _ := NewMAM(2, spec)
		if err := want.MergeAll(parts[:]...); err != nil {
			t.Fatal(err)
		}
		got := base.Blank()
		got.MergeBlanks(blanks[:]...)
		inc := base.Blank()
		for _, b := range blanks {
			inc.AddBlank(b)
		}
		w, _ := want.MarshalBinary()
		for name, m := range map[string]*MAM{"MergeBlanks": got, "AddBlank": inc} {
			if b, _ := m.MarshalBinary(); string(b) != string(w) {
				t.Fatalf("balance=%v: %s of blanks differs from MergeAll of models built apart", balance, name)
			}
		}
		if a := testing.AllocsPerRun(10, func() { got.MergeBlanks(blanks[:]...); inc.AddBlank(blanks[0]) }); a != 0 {
			t.Fatalf("balance=%v: merging blanks allocates %v times", balance, a)
		}
	}
}
