package rank

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestFeatureMapKernel: <φ(x), φ(x')> approximates K̄ and ‖φ_t‖ = 1.
func TestFeatureMapKernel(t *testing.T) {
	ks := []Kernel{{Gamma: 0.5}, {Gamma: 0.05, V: 2}}
	fm, err := NewFeatureMap(3, FeatureConfig{Kernels: ks, Features: 8192, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := newKernels(ks)
	r := rand.New(rand.NewPCG(1, 2))
	a, b := make([]float64, fm.Dim()), make([]float64, fm.Dim())
	for range 20 {
		x, z := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}, []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
		fm.Map(a, x)
		fm.Map(b, z)
		if got, want := dotp(a, b), k.eval(x, z); math.Abs(got-want) > 0.05 {
			t.Fatalf("<φ,φ'> = %v, K̄ = %v", got, want)
		}
		if n := dotp(a, a); !near(n, 1.5, 1e-12) { // 1/v₁ + 1/v₂
			t.Fatalf("‖φ‖² = %v, want 1.5", n)
		}
	}
}

// TestFeatureMapDefinition: Map is the pair-form map of its definition,
// c·(cos ω_k·x, sin ω_k·x) with math.Sincos, to 1e-15 absolute (the
// vectorised sin/cos is within 2.3e-16 of it), on kernels of 70 and 4
// frequencies (a whole block of the dotPhi and a tail), a linear kernel
// and arguments up to about 3·10⁵ (inputs of norm 100 at γ = 500); dotPhi
// is <w, Map(x)> to 1e-13 relative to Σ|w_k φ_k(x)|.
func TestFeatureMapDefinition(t *testing.T) {
	ks := []Kernel{{Gamma: 0.5}, {Type: Linear, V: 3}, {Gamma: 500, V: 2}}
	r := rand.New(rand.NewPCG(3, 9))
	for _, F := range []int{140, 8} {
		fm, err := NewFeatureMap(5, FeatureConfig{Kernels: ks, Features: F, Seed: 11})
		if err != nil {
			t.Fatal(err)
		}
		phi, w := make([]float64, fm.Dim()), make([]float64, fm.Dim())
		for i := range w {
			w[i] = r.NormFloat64()
		}
		for trial := range 200 {
			x := make([]float64, 5)
			for j := range x {
				x[j] = r.NormFloat64() * []float64{1, 20, 100}[trial%3]
			}
			fm.Map(phi, x)
			o := 0
			for ti, kt := range fm.k.ks {
				sv := math.Sqrt(fm.k.inv[ti])
				if kt.Type == Linear {
					for j, v := range x {
						if phi[o+j] != sv*v {
							t.Fatalf("linear feature %d: %v, want %v", j, phi[o+j], sv*v)
						}
					}
					o += 5
					continue
				}
				h := F / 2
				c := sv * math.Sqrt(1/float64(h))
				for k := range h {
					s, co := math.Sincos(dotp(fm.omega[ti][k*5:(k+1)*5], x))
					if math.Abs(phi[o+k]-c*co) > 1e-15 || math.Abs(phi[o+h+k]-c*s) > 1e-15 {
						t.Fatalf("F %d, kernel %d, frequency %d: (%v, %v), want (%v, %v)", F, ti, k, phi[o+k], phi[o+h+k], c*co, c*s)
					}
				}
				o += 2 * h
			}
			var want, mag float64
			for i, v := range phi {
				want += w[i] * v
				mag += math.Abs(w[i] * v)
			}
			if got := fm.dotPhi(w, x); math.Abs(got-want) > 1e-13*mag {
				t.Fatalf("F %d: dotPhi %v, <w, Map(x)> %v", F, got, want)
			}
		}
	}
}

// TestSumsMatchExactWithFeatureKernel: the D×D solve is LSRRank with the
// kernel K = ΦΦᵀ (the dual m×m solve, run here with a linear kernel on
// the mapped features), and a window kept by subtraction equals fresh sums.
func TestSumsMatchExactWithFeatureKernel(t *testing.T) {
	const m, d, lambda = 120, 3, 1e-3
	r := rand.New(rand.NewPCG(4, 4))
	X, y := randomData(r, m+80, d)
	fm, _ := NewFeatureMap(d, FeatureConfig{Kernels: []Kernel{{Gamma: 0.4}, {Type: Linear, V: 3}}, Features: 40, Seed: 3})
	D := fm.Dim()
	// Window = rows 80..80+m, reached by adding everything and removing
	// the first 80 (interleaved).
	s := NewSums(fm)
	for i := range m + 80 {
		s.Add(X[i*d:(i+1)*d], y[i])
		if i >= 100 && i-100 < 80 {
			j := i - 100
			s.Remove(X[j*d:(j+1)*d], y[j])
		}
	}
	if s.N() != m {
		t.Fatalf("n = %d", s.N())
	}
	fw, err := s.Fit(lambda)
	if err != nil {
		t.Fatal(err)
	}
	fresh := NewSums(fm)
	Phi := make([]float64, m*D)
	for i := range m {
		x := X[(80+i)*d : (81+i)*d]
		fresh.Add(x, y[80+i])
		fm.Map(Phi[i*D:(i+1)*D], x)
	}
	ff, _ := fresh.Fit(lambda)
	exact, err := Fit(context.Background(), Phi, D, y[80:], Config{Kernels: []Kernel{{Type: Linear}}, Lambda: lambda})
	if err != nil {
		t.Fatal(err)
	}
	phi := make([]float64, D)
	var worstW, worstE float64
	for q := range m + 80 {
		x := X[q*d : (q+1)*d]
		fm.Map(phi, x)
		worstW = math.Max(worstW, math.Abs(fw.Predict(x)-ff.Predict(x)))
		worstE = math.Max(worstE, math.Abs(ff.Predict(x)-exact.Predict(phi)))
	}
	t.Logf("windowed vs fresh %.2g, primal vs dual %.2g", worstW, worstE)
	if worstW > 1e-9 || worstE > 1e-8 {
		t.Fatalf("windowed vs fresh %g, primal vs dual %g", worstW, worstE)
	}
}

// TestFeatureModelApproachesExact: with many features the random-feature
// model ranks like the exact one on boston_ordinal.
func TestFeatureModelApproachesExact(t *testing.T) {
	g := readGolden(t)
	X, y, d := readBoston(t)
	sp := g.Splits[0]
	Xtr, Xte := standardize(X, d, sp.Train, sp.Train), standardize(X, d, sp.Train, sp.Test)
	ytr, yte := pick(y, sp.Train), pick(y, sp.Test)
	ks := []Kernel{{Gamma: 0.05}}
	exact, err := Fit(context.Background(), Xtr, d, ytr, Config{Kernels: ks, Lambda: 1e-3})
	if err != nil {
		t.Fatal(err)
	}
	fm, _ := NewFeatureMap(d, FeatureConfig{Kernels: ks, Features: 2048, Seed: 1})
	s := NewSums(fm)
	for i := range ytr {
		s.Add(Xtr[i*d:(i+1)*d], ytr[i])
	}
	rf, err := s.Fit(1e-3)
	if err != nil {
		t.Fatal(err)
	}
	fe, fr := make([]float64, len(yte)), make([]float64, len(yte))
	for k := range yte {
		fe[k], fr[k] = exact.Predict(Xte[k*d:(k+1)*d]), rf.Predict(Xte[k*d:(k+1)*d])
	}
	me, mr := Measure(fe, yte), Measure(fr, yte)
	t.Logf("τ-b exact %.4f, random features (D = 2048) %.4f; corr(f_exact, f_rf) = %.4f", me.KendallTauB, mr.KendallTauB, Pearson(fe, fr))
	if math.Abs(me.KendallTauB-mr.KendallTauB) > 0.03 || Pearson(fe, fr) < 0.98 {
		t.Fatal("random-feature model far from the exact one")
	}
}

func TestFeatureRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 2))
	X, y := randomData(r, 50, 2)
	fm, _ := NewFeatureMap(2, FeatureConfig{Kernels: []Kernel{{Gamma: 1}, {Type: Linear, V: 2}}, Features: 16, Seed: 99})
	s := NewSums(fm)
	for i := range 50 {
		s.Add(X[i*2:i*2+2], y[i])
	}
	m, _ := s.Fit(0.01)
	b, _ := m.MarshalBinary()
	m2, err := UnmarshalFeatureModel(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := m2.MarshalBinary()
	if !bytes.Equal(b, b2) || m2.N() != 50 {
		t.Fatal("re-encoding differs")
	}
	for i := range 50 {
		if x := X[i*2 : i*2+2]; m.Predict(x) != m2.Predict(x) {
			t.Fatal("prediction differs after round trip")
		}
	}
	for _, bad := range [][]byte{b[:len(b)-8], append(append([]byte(nil), b...), 1), b[:3]} {
		if _, err := UnmarshalFeatureModel(bad); !errors.Is(err, ErrFormat) {
			t.Fatalf("corrupt encoding: %v", err)
		}
	}
}

// D = 512: dim φ = 512 (256 frequencies), d = 13 (boston-sized events).
func benchSums(b *testing.B) (*Sums, []float64, []float64) {
	r := rand.New(rand.NewPCG(1, 1))
	X, y := randomData(r, 4096, 13)
	fm, _ := NewFeatureMap(13, FeatureConfig{Kernels: []Kernel{{Gamma: 0.05}}, Features: 512, Seed: 1})
	return NewSums(fm), X, y
}

// BenchmarkSumsAdd is the per-event update at D = 512 (target ≥ 20 k/s,
// i.e. ≤ 50 µs/op).
func BenchmarkSumsAdd(b *testing.B) {
	s, X, y := benchSums(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := i & 4095
		s.Add(X[k*13:(k+1)*13], y[k])
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkSumsSlide is one windowed event: Add the new, Remove the oldest.
func BenchmarkSumsSlide(b *testing.B) {
	s, X, y := benchSums(b)
	for k := range 2048 {
		s.Add(X[k*13:(k+1)*13], y[k])
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k, o := (i+2048)&4095, i&4095
		s.Add(X[k*13:(k+1)*13], y[k])
		s.Remove(X[o*13:(o+1)*13], y[o])
		i++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkSumsFit is the refit solve at D = 512 (target ≤ 50 ms).
func BenchmarkSumsFit(b *testing.B) {
	s, X, y := benchSums(b)
	for k := range 4096 {
		s.Add(X[k*13:(k+1)*13], y[k])
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Fit(1e-3); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkExactFit is the exact LSRRank refit at m = 1000 and 2 000
// (krr's and lsrrank's default window), d = 13, one rbf kernel: the Gram
// matrix by vmath's squared distances and exps (since 2026-11-27), then
// the Cholesky solve on all CPUs.
func BenchmarkExactFit(b *testing.B) {
	for _, m := range []int{1000, 2000} {
		b.Run(fmt.Sprint(m), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 1))
			X, y := randomData(r, m, 13)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Fit(context.Background(), X, 13, y, Config{Kernels: []Kernel{{Gamma: 0.05}}, Lambda: 1e-3}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
