package rank

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	goldenfile "github.com/streamer/streamer/online/internal/golden"
)

var update = flag.Bool("update", false, "rewrite testdata/format_v1_*.bin with the current encoders")

// goldenFile compares b with the golden file testdata/name (or, with
// -update, writes it) and returns the file's bytes.
func goldenFile(t *testing.T, name string, b []byte) []byte {
	t.Helper()
	return goldenfile.Compare(t, name, b, *update)
}

// pattern returns n distinct, exactly representable values (no NaN).
func pattern(n int, base float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = base + float64(i)*0.375 - float64(i%3)/7
	}
	return v
}

// fixedModel is an exact model with hand-set state (the solver is not
// part of the format).
func fixedModel(t *testing.T) *Model {
	k, err := newKernels([]Kernel{{Gamma: 0.5, V: 1}, {Type: Linear, V: 4}})
	if err != nil {
		t.Fatal(err)
	}
	m := &Model{method: KRR, k: k, lambda: 0.03, d: 3, x: pattern(4*3, -1.5), alpha: pattern(4, 0.25), b: -0.125}
	m.pack() // as Fit and the decoder do
	return m
}

func fixedFeatureMap(t *testing.T) *FeatureMap {
	fm, err := NewFeatureMap(3, FeatureConfig{Kernels: []Kernel{{Gamma: 0.5}, {Type: Linear, V: 2}}, Features: 6, Seed: 42})
	if err != nil {
		t.Fatal(err)
	}
	return fm
}

// fixedSums are sums with hand-set statistics: compensations, the
// triangle of ΦᵀΦ and pending adds and removes.
func fixedSums(t *testing.T) *Sums {
	s := NewSums(fixedFeatureMap(t))
	D := s.dim
	copy(s.s1, pattern(D, 1))
	copy(s.c1, pattern(D, 1e-17))
	copy(s.sy, pattern(D, -2))
	copy(s.cy, pattern(D, -3e-17))
	for i := range D {
		copy(s.gram[i*D+i:(i+1)*D], pattern(D-i, float64(i)))
	}
	s.nAdd, s.nRem = 3, 2
	copy(s.add, pattern(3*D, 0.5))
	copy(s.rem, pattern(2*D, -0.5))
	s.sumY, s.cY, s.n = 7.25, 1e-16, 12
	return s
}

// truncations checks that every proper prefix of b and b plus a byte fail
// to decode with ErrFormat (and never panic).
func truncations(t *testing.T, b []byte, decode func([]byte) error) {
	t.Helper()
	for i := range len(b) {
		if err := decode(b[:i]); !errors.Is(err, ErrFormat) {
			t.Fatalf("truncated to %d of %d bytes: %v", i, len(b), err)
		}
	}
	if err := decode(append(slices.Clone(b), 0)); !errors.Is(err, ErrFormat) {
		t.Fatalf("trailing byte: %v", err)
	}
}

// TestFormatModel pins the exact model's encoding ("RKEX" version 1).
func TestFormatModel(t *testing.T) {
	m := fixedModel(t)
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := goldenFile(t, "format_v1_exact.bin", b)
	got, err := UnmarshalModel(want)
	if err != nil {
		t.Fatal(err)
	}
	if got.method != m.method || got.lambda != m.lambda || got.d != m.d || got.b != m.b ||
		!slices.Equal(got.x, m.x) || !slices.Equal(got.alpha, m.alpha) || !slices.Equal(got.k.ks, m.k.ks) {
		t.Fatalf("decoded %+v, want %+v", got, m)
	}
	x := []float64{0.1, -0.2, 0.3}
	if got.Predict(x) != m.Predict(x) {
		t.Fatal("decoded model predicts differently")
	}
	truncations(t, want, func(b []byte) error { _, err := UnmarshalModel(b); return err })
	for _, bad := range []struct {
		at int
		v  byte
	}{{4, 2}, {6, 7}, {0, 'X'}} { // version, method, magic
		c := slices.Clone(want)
		c[bad.at] = bad.v
		if _, err := UnmarshalModel(c); !errors.Is(err, ErrFormat) {
			t.Errorf("byte %d = %d: %v", bad.at, bad.v, err)
		}
	}
}

// TestFormatFeatureModel pins the random-feature model's encoding ("RKRF"
// version 1).
func TestFormatFeatureModel(t *testing.T) {
	fm := fixedFeatureMap(t)
	m := &FeatureModel{fm: fm, lambda: 1e-3, n: 77, w: pattern(fm.Dim(), -0.75), b: 0.625}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := goldenFile(t, "format_v1_features.bin", b)
	got, err := UnmarshalFeatureModel(want)
	if err != nil {
		t.Fatal(err)
	}
	if got.lambda != m.lambda || got.n != m.n || got.b != m.b || !slices.Equal(got.w, m.w) ||
		got.fm.d != fm.d || got.fm.cfg.Features != fm.cfg.Features || got.fm.cfg.Seed != fm.cfg.Seed ||
		!slices.Equal(got.fm.cfg.Kernels, fm.cfg.Kernels) {
		t.Fatalf("decoded %+v, want %+v", got, m)
	}
	x := []float64{0.1, -0.2, 0.3}
	if got.Predict(x) != m.Predict(x) {
		t.Fatal("decoded model predicts differently")
	}
	truncations(t, want, func(b []byte) error { _, err := UnmarshalFeatureModel(b); return err })
}

// TestFormatSums pins the running sums' encoding ("RKSU" version 1).
func TestFormatSums(t *testing.T) {
	s := fixedSums(t)
	b, err := s.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	want := goldenFile(t, "format_v1_sums.bin", b)
	got := NewSums(fixedFeatureMap(t))
	if err := got.UnmarshalBinary(want); err != nil {
		t.Fatal(err)
	}
	D := s.dim
	if got.n != s.n || got.sumY != s.sumY || got.cY != s.cY || got.nAdd != s.nAdd || got.nRem != s.nRem ||
		!slices.Equal(got.s1, s.s1) || !slices.Equal(got.c1, s.c1) || !slices.Equal(got.sy, s.sy) || !slices.Equal(got.cy, s.cy) ||
		!slices.Equal(got.gram, s.gram) || !slices.Equal(got.add[:3*D], s.add[:3*D]) || !slices.Equal(got.rem[:2*D], s.rem[:2*D]) {
		t.Fatal("decoded sums differ")
	}
	before, _ := got.MarshalBinary()
	truncations(t, want, got.UnmarshalBinary)
	if after, _ := got.MarshalBinary(); !bytes.Equal(after, before) {
		t.Fatal("a failed decode changed the sums")
	}
	// A non-finite statistic is refused.
	c := slices.Clone(want)
	off := len(c) - 8*(5*D) // inside the pending rows
	copy(c[off:], []byte{0, 0, 0, 0, 0, 0, 0xf0, 0x7f})
	if err := got.UnmarshalBinary(c); !errors.Is(err, ErrFormat) {
		t.Fatalf("+Inf accepted: %v", err)
	}
}

// FuzzDecode: no input makes a decoder panic or fail without ErrFormat;
// what decodes re-encodes to bytes that decode to the same encoding (the
// first re-encoding may differ: kernel weights are normalised).
func FuzzDecode(f *testing.F) {
	for _, name := range []string{"format_v1_exact.bin", "format_v1_features.bin", "format_v1_sums.bin"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	fm, err := NewFeatureMap(3, FeatureConfig{Kernels: []Kernel{{Gamma: 0.5}, {Type: Linear, V: 2}}, Features: 6, Seed: 42})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if m, err := UnmarshalModel(b); err == nil {
			b2, _ := m.MarshalBinary()
			m2, err := UnmarshalModel(b2)
			if err != nil {
				t.Fatalf("exact model: re-encoding does not decode: %v", err)
			}
			if b3, _ := m2.MarshalBinary(); !bytes.Equal(b2, b3) {
				t.Fatal("exact model: re-encoding differs")
			}
		} else if !errors.Is(err, ErrFormat) {
			t.Fatalf("exact model: %v", err)
		}
		if m, err := UnmarshalFeatureModel(b); err == nil {
			m.Predict([]float64{0.5, -1, 2}[:min(3, m.fm.d)])
		} else if !errors.Is(err, ErrFormat) {
			t.Fatalf("feature model: %v", err)
		}
		s := NewSums(fm)
		if err := s.UnmarshalBinary(b); err == nil {
			if b2, _ := s.MarshalBinary(); !bytes.Equal(b, b2) {
				t.Fatal("sums: re-encoding differs")
			}
		} else if !errors.Is(err, ErrFormat) {
			t.Fatalf("sums: %v", err)
		}
	})
}
