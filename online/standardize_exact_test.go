package online

import (
	"bytes"
	"math"
	"testing"

	"github.com/streamer/streamer/online/codec"
)

// TestStandardizedExactRestore: a Standardize wrapper around the exact
// kernel modes (encoding tags "mam_exact", "omam_exact") restores, with
// the inner model's type, identical predictions and the same state.
func TestStandardizedExactRestore(t *testing.T) {
	x, bin, lev := compareData(4, 200)
	for _, spec := range []Spec{
		{Type: MAMName, Dim: 3, Params: &MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5}, Delta: 0.05, Budget: 50, Balance: true}, Standardize: true},
		{Type: OMAMName, Dim: 3, Params: &OMAMParams{Kernel: KernelSpec{Type: KernelLaplacian, Gamma: 0.5}, Levels: 3, Budget: 50, Normalize: true}, Standardize: true},
	} {
		m, err := testTypes.New(spec)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 120 {
			m.Observe(x[i], compareLabel(spec, bin[i], lev[i]), true)
		}
		b, _ := m.MarshalBinary()
		r, err := testTypes.Restore(b)
		if err != nil {
			t.Fatalf("%s: %v", spec.Type, err)
		}
		if _, ok := r.(*Standardized); !ok || r.Type() != spec.Type {
			t.Fatalf("%s: restored %T of type %q", spec.Type, r, r.Type())
		}
		if err := StateClose(m, r, 0); err != nil {
			t.Fatalf("%s: %v", spec.Type, err)
		}
		// UnmarshalBinary into an empty wrapper of the same configuration.
		e, _ := testTypes.New(spec)
		if err := e.UnmarshalBinary(b); err != nil {
			t.Fatalf("%s: Standardized.UnmarshalBinary: %v", spec.Type, err)
		}
		if err := StateClose(m, e, 0); err != nil {
			t.Fatalf("%s: Standardized.UnmarshalBinary: %v", spec.Type, err)
		}
		// Version 1 (tags "mam_exact", "omam_exact"): the wrapper's legacy
		// spec, then the inner model's version-1 encoding, unframed.
		if v1 := stdAsVersion1(t, b, spec, nil); v1 != nil {
			r1, err := testTypes.Restore(v1)
			if err != nil {
				t.Fatalf("%s: version 1: %v", spec.Type, err)
			}
			if err := StateClose(m, r1, 0); err != nil {
				t.Fatalf("%s: version 1: %v", spec.Type, err)
			}
			if enc, _ := r1.MarshalBinary(); !bytes.Equal(enc, b) {
				t.Fatalf("%s: version 1 re-encodes to other bytes", spec.Type)
			}
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
		{Spec{Type: MAMName, Dim: 3, Params: &MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5, Features: 32, Seed: 1}, Delta: 0.05, Balance: true}}, true},
		{Spec{Type: MAMName, Dim: 3, Params: &MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5}, Delta: 0.05, Budget: 60}}, true},
		{Spec{Type: MAMName, Dim: 3, Params: &MAMParams{Kernel: KernelSpec{Type: KernelPolynomial, Degree: 2, Coef0: 1}, Delta: 0.05, Budget: 60}}, false},
		{Spec{Type: OMAMName, Dim: 3, Params: &OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5}, Levels: 3, Budget: 60}}, false},
		{Spec{Type: LogisticName, Dim: 3, Params: &LogisticParams{LearningRate: 0.1}}, false},
	} {
		tc.spec.Standardize = true
		m, err := testTypes.New(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		for i := range x {
			m.Observe(x[i], compareLabel(tc.spec, bin[i], lev[i]), true)
		}
		s := m.(*Standardized)
		// The type's traits say the same.
		if tr := testTypes.Lookup(tc.spec.Type).Traits(tc.spec.Params); tr.Bound != tc.hasBound {
			t.Errorf("%s: traits %+v, want bound %v", specName(tc.spec), tr, tc.hasBound)
		}
		if s.HasBound() != tc.hasBound {
			t.Errorf("%s: HasBound %v, want %v", specName(tc.spec), s.HasBound(), tc.hasBound)
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

// stdAsVersion1 rewrites the version-2 encoding b of a Standardized model
// of spec in format version 1: the wrapper's envelope with the inner
// model's legacy spec (standardize set; edited by edit if not nil), the
// statistics, then the inner model's version-1 encoding (with the exact
// modes' tags), unframed.
func stdAsVersion1(t testing.TB, b []byte, spec Spec, edit func(*legacySpec)) []byte {
	t.Helper()
	st := envelopeEnd(t, b)
	d := spec.Dim
	stats := b[st : st+8+32*d]
	r := codec.NewReader(b[st+8+32*d:], ErrFormat)
	inner := r.Bytes()
	if err := r.End(); err != nil {
		t.Fatal(err)
	}
	spec.Standardize = true
	tag, s := legacySpecOf(t, spec)
	innerV1 := asVersion1(t, inner, tag, s)
	if edit != nil {
		edit(&s)
	}
	out := asVersion1(t, b, standardizedTag, s)
	out = append(out[:len(out)-(len(b)-st)], stats...)
	return append(out, innerV1...)
}
