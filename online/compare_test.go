package online

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// compareSpecs has one spec per kind of model StateClose supports; the
// data of the tests has a binary label in the first and a level 1..3 in
// the second column.
var compareSpecs = []Spec{
	{Type: MAMName, Dim: 3, Params: &MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5, Features: 32, Seed: 1}, Balance: true, Delta: 0.05}},
	{Type: MAMName, Dim: 3, Params: &MAMParams{Kernel: KernelSpec{Type: KernelLinear}, Delta: 0.05, Window: Window{Events: 20}}},
	{Type: MAMName, Dim: 3, Params: &MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5}, Delta: 0.05, Budget: 25}},
	{Type: OMAMName, Dim: 3, Params: &OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5, Features: 32, Seed: 2}, Levels: 3, Window: Window{Events: 20}}},
	{Type: OMAMName, Dim: 3, Params: &OMAMParams{Kernel: KernelSpec{Type: KernelLinear}, Levels: 3, Decay: Decay{HalfLife: 30}, Normalize: true}},
	{Type: OMAMName, Dim: 3, Params: &OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5}, Levels: 3, Budget: 25, Normalize: true}},
	{Type: LogisticName, Dim: 3, Params: &LogisticParams{LearningRate: 0.1, L2: 1e-3}},
	{Type: LDAName, Dim: 3, Params: &LDAParams{Window: Window{Events: 30}}},
	{Type: MAMName, Dim: 3, Params: &MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5}, Delta: 0.05, Budget: 25}, Standardize: true},
	{Type: OMAMName, Dim: 3, Params: &OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5, Features: 32, Seed: 2}, Levels: 3}, Standardize: true},
}

// specName names a spec of the tests: its type and the parameters that
// select its mode.
func specName(s Spec) string {
	var budget, window int
	switch p := s.Params.(type) {
	case *MAMParams:
		budget, window = p.Budget, p.Window.Events
	case *OMAMParams:
		budget, window = p.Budget, p.Window.Events
	case *LDAParams:
		window = p.Window.Events
	}
	return fmt.Sprintf("%s/budget=%d/window=%d/std=%v", s.Type, budget, window, s.Standardize)
}

func compareData(seed uint64, n int) (x [][]float64, bin, lev []float64) {
	r := rand.New(rand.NewPCG(seed, 3))
	for range n {
		v := []float64{r.NormFloat64(), r.NormFloat64() + 2, 10 * r.NormFloat64()}
		x = append(x, v)
		b := -1.0
		if v[0]+0.3*r.NormFloat64() > 0 {
			b = 1
		}
		bin = append(bin, b)
		lev = append(lev, float64(1+min(2, max(0, int(v[0]+1.5)))))
	}
	return
}

func compareLabel(spec Spec, bin, lev float64) float64 {
	if spec.Type == OMAMName {
		return lev
	}
	return bin
}

// TestStateCloseAllModels: for every kind of model, a twin fed the same
// events and a restored copy compare equal (rtol 0), and one more event or
// a changed label makes a difference; models of different types never
// compare equal.
func TestStateCloseAllModels(t *testing.T) {
	x, bin, lev := compareData(1, 120)
	var built []Model
	for _, spec := range compareSpecs {
		t.Run(specName(spec), func(t *testing.T) {
			mk := func(flip int) Model {
				m, err := testTypes.New(spec)
				if err != nil {
					t.Fatal(err)
				}
				for i := range x {
					y := compareLabel(spec, bin[i], lev[i])
					if i == flip {
						y = compareLabel(spec, -bin[i], float64(1+int(lev[i])%3))
					}
					m.Observe(x[i], y, true)
				}
				return m
			}
			a, b := mk(-1), mk(-1)
			if err := StateClose(a, b, 0); err != nil {
				t.Fatalf("twins: %v", err)
			}
			enc, _ := a.MarshalBinary()
			r, err := testTypes.Restore(enc)
			if err != nil {
				t.Fatal(err)
			}
			if err := StateClose(a, r, 0); err != nil {
				t.Fatalf("restored: %v", err)
			}
			if err := StateClose(a, mk(len(x)-3), 1e-9); err == nil {
				t.Fatal("a changed label: want a difference")
			}
			b.Observe(x[0], compareLabel(spec, bin[0], lev[0]), true)
			if err := StateClose(a, b, 1e-9); err == nil {
				t.Fatal("one more event: want a difference")
			}
			built = append(built, a)
		})
	}
	for i := 1; i < len(built); i++ {
		if err := StateClose(built[i-1], built[i], 1); err == nil {
			t.Errorf("%T and %T compare equal", built[i-1], built[i])
		}
	}
}

// TestStateCloseRounding: sums accumulated in another order compare equal
// at a small rtol, not at 0 (exact-kernel omam: the same window reached
// through different evictions).
func TestStateCloseRounding(t *testing.T) {
	x, _, lev := compareData(2, 300)
	p := OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5}, Levels: 3, Budget: 40}
	a := mustNew(t, Spec{Type: OMAMName, Dim: 3, Params: &p})
	for i := range x {
		a.Observe(x[i], lev[i], true)
	}
	// The same stored examples, learned in the same order but with the
	// ring reaccumulated at other points: G agrees to rounding only.
	b := newExactOMAM(t, 3, p)
	for i := range x {
		b.Observe(x[i], lev[i], true)
	}
	b.g[1] += 1e-13 * b.g[1]
	if err := StateClose(a, b, 1e-9); err != nil {
		t.Fatalf("rounding-level difference: %v", err)
	}
	if err := StateClose(a, b, 0); err == nil || !strings.Contains(err.Error(), "level-pair") {
		t.Fatalf("rtol 0: %v, want a difference in the level-pair sums", err)
	}
}
