package online

import (
	"bytes"
	"math"
	"testing"
)

// TestStandardizedExactRestore: a Standardize wrapper around the exact
// kernel modes (encoding tags "mam_exact", "omam_exact") restores, with
// the inner model's type, identical predictions and the same state.
func TestStandardizedExactRestore(t *testing.T) {
	x, bin, lev := compareData(4, 200)
	for _, spec := range []Spec{
		{Type: ModelMAM, Dim: 3, Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5}, Delta: 0.05, Budget: 50, Balance: true, Standardize: true},
		{Type: ModelOMAM, Dim: 3, Kernel: KernelSpec{Type: KernelLaplacian, Gamma: 0.5}, Levels: 3, Budget: 50, Normalize: true, Standardize: true},
	} {
		m, err := New(spec)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 120 {
			m.Observe(x[i], compareLabel(spec, bin[i], lev[i]), true)
		}
		b, _ := m.MarshalBinary()
		r, err := Restore(b)
		if err != nil {
			t.Fatalf("%s: %v", spec.Type, err)
		}
		if _, ok := r.(*Standardized); !ok || r.Type() != spec.Type {
			t.Fatalf("%s: restored %T of type %q", spec.Type, r, r.Type())
		}
		if err := StateClose(m, r, 0); err != nil {
			t.Fatalf("%s: %v", spec.Type, err)
		}
		var s Standardized
		if err := s.UnmarshalBinary(b); err != nil {
			t.Fatalf("%s: Standardized.UnmarshalBinary: %v", spec.Type, err)
		}
		for i := 120; i < len(x); i++ {
			y := compareLabel(spec, bin[i], lev[i])
			if p, q := m.Observe(x[i], y, i%3 != 0), r.Observe(x[i], y, i%3 != 0); p != q {
				t.Fatalf("%s, event %d: %+v vs restored %+v", spec.Type, i, p, q)
			}
		}
		b1, _ := m.MarshalBinary()
		b2, _ := r.MarshalBinary()
		if !bytes.Equal(b1, b2) {
			t.Fatalf("%s: states differ after further learning", spec.Type)
		}
	}
}

// TestStandardizedBound: the wrapper publishes the inner model's bound
// (HasBound and Bound) and 1 without one.
func TestStandardizedBound(t *testing.T) {
	x, bin, lev := compareData(5, 100)
	for _, tc := range []struct {
		spec     Spec
		hasBound bool
	}{
		{Spec{Type: ModelMAM, Dim: 3, Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5, Features: 32, Seed: 1}, Delta: 0.05, Balance: true}, true},
		{Spec{Type: ModelMAM, Dim: 3, Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5}, Delta: 0.05, Budget: 60}, true},
		{Spec{Type: ModelMAM, Dim: 3, Kernel: KernelSpec{Type: KernelPolynomial, Degree: 2, Coef0: 1}, Delta: 0.05, Budget: 60}, false},
		{Spec{Type: ModelOMAM, Dim: 3, Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5}, Levels: 3, Budget: 60}, false},
		{Spec{Type: ModelLogistic, Dim: 3, LearningRate: 0.1}, false},
	} {
		tc.spec.Standardize = true
		m, err := New(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		for i := range x {
			m.Observe(x[i], compareLabel(tc.spec, bin[i], lev[i]), true)
		}
		s := m.(*Standardized)
		if s.HasBound() != tc.hasBound {
			t.Errorf("%s budget %d %s: HasBound %v, want %v", tc.spec.Type, tc.spec.Budget, tc.spec.Kernel.Type, s.HasBound(), tc.hasBound)
		}
		inner, isBounder := s.Inner().(Bounder)
		for _, rho := range []float64{0, 0.3, 0.9} {
			want := 1.0
			if isBounder {
				want = inner.Bound(rho)
			}
			if got := s.Bound(rho); got != want || !(got >= 0 && got <= 1) || math.IsNaN(got) {
				t.Errorf("%s: Bound(%v) = %v, want %v", tc.spec.Type, rho, got, want)
			}
		}
		if tc.hasBound {
			p := m.Observe(x[0], 0, false)
			if !p.HasBound || p.MistakeBound != s.Bound(math.Abs(p.Score)) {
				t.Errorf("%s: prediction bound %v, Bound(|f|) = %v", tc.spec.Type, p.MistakeBound, s.Bound(math.Abs(p.Score)))
			}
		}
	}
}
