package rank

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSumsRoundTrip: sums encoded with events pending (not yet folded into
// ΦᵀΦ) decode into sums over an identically configured map that continue
// bit for bit: the same encoding after more adds and removes, and the
// same fitted weights.
func TestSumsRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 6))
	X, y := randomData(r, 400, 3)
	cfg := FeatureConfig{Kernels: []Kernel{{Gamma: 0.5}, {Type: Linear, V: 2}}, Features: 24, Seed: 11}
	fm, _ := NewFeatureMap(3, cfg)
	s := NewSums(fm)
	for i := range 150 {
		s.Add(X[i*3:(i+1)*3], y[i])
		if i >= 60 && i%2 == 0 { // removes events 0..44
			j := (i - 60) / 2
			s.Remove(X[j*3:(j+1)*3], y[j])
		}
	}
	if s.nAdd == 0 || s.nRem == 0 {
		t.Fatalf("no pending events (%d adds, %d removes): the test does not exercise them", s.nAdd, s.nRem)
	}
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	fm2, _ := NewFeatureMap(3, cfg)
	s2 := NewSums(fm2)
	if err := s2.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	if b2, _ := s2.MarshalBinary(); !bytes.Equal(b, b2) {
		t.Fatal("re-encoding differs")
	}
	for i := 150; i < 400; i++ {
		for _, u := range []*Sums{s, s2} {
			u.Add(X[i*3:(i+1)*3], y[i])
			j := 45 + i - 150 // the window ends as events 295..399
			u.Remove(X[j*3:(j+1)*3], y[j])
		}
	}
	e1, _ := s.MarshalBinary()
	e2, _ := s2.MarshalBinary()
	if !bytes.Equal(e1, e2) {
		t.Fatal("restored sums diverge")
	}
	// Copy keeps everything too.
	c := NewSums(fm)
	c.Copy(s)
	if ec, _ := c.MarshalBinary(); !bytes.Equal(ec, e1) {
		t.Fatal("copy differs")
	}
	m1, err := s.Fit(1e-3)
	if err != nil {
		t.Fatal(err)
	}
	m2, _ := s2.Fit(1e-3)
	if !slices.Equal(m1.Weights(), m2.Weights()) || m1.Offset() != m2.Offset() {
		t.Fatal("fits differ")
	}
	// Corrupt or foreign encodings.
	before, _ := s2.MarshalBinary()
	for i := 0; i < len(b); i += 1 + i/40 {
		if err := s2.UnmarshalBinary(b[:i]); !errors.Is(err, ErrFormat) {
			t.Fatalf("truncated to %d bytes: %v", i, err)
		}
	}
	if err := s2.UnmarshalBinary(append(slices.Clone(b), 0)); !errors.Is(err, ErrFormat) {
		t.Fatalf("trailing byte: %v", err)
	}
	for _, other := range []FeatureConfig{
		{Kernels: cfg.Kernels, Features: 24, Seed: 12},
		{Kernels: cfg.Kernels, Features: 26, Seed: 11},
		{Kernels: []Kernel{{Gamma: 0.5}, {Type: Linear, V: 3}}, Features: 24, Seed: 11},
	} {
		fo, _ := NewFeatureMap(3, other)
		if err := NewSums(fo).UnmarshalBinary(b); !errors.Is(err, ErrFormat) {
			t.Fatalf("sums of another map (%+v) accepted: %v", other, err)
		}
	}
	if after, _ := s2.MarshalBinary(); !bytes.Equal(after, before) {
		t.Fatal("a failed decode changed the sums")
	}
}

// TestSumsCloseDetects: SumsClose accepts equal sums and names a changed
// statistic.
func TestSumsCloseDetects(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 9))
	X, y := randomData(r, 100, 2)
	fm, _ := NewFeatureMap(2, FeatureConfig{Kernels: []Kernel{{Gamma: 1}}, Features: 16, Seed: 1})
	a, b := NewSums(fm), NewSums(fm)
	for i := range 100 {
		a.Add(X[i*2:(i+1)*2], y[i])
		b.Add(X[i*2:(i+1)*2], y[i])
	}
	if err := SumsClose(a, b, 0); err != nil {
		t.Fatal(err)
	}
	b.gram[3*b.dim+5] *= 1 + 1e-6
	if err := SumsClose(a, b, 1e-9); err == nil {
		t.Fatal("a changed ΦᵀΦ entry passed")
	}
	b.Remove(X[:2], y[0])
	if err := SumsClose(a, b, 1); err == nil {
		t.Fatal("different counts passed")
	}
}
