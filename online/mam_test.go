package online

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/streamer/streamer/online/codec"
)

// randomData draws n points in d dimensions from two shifted Gaussians with
// labels ±1 in proportion pPos.
func randomData(seed uint64, n, d int, pPos float64) (x [][]float64, y []float64) {
	r := rand.New(rand.NewPCG(seed, 99))
	for range n {
		yi := -1.0
		if r.Float64() < pPos {
			yi = 1
		}
		v := make([]float64, d)
		for j := range v {
			v[j] = r.NormFloat64() + 0.7*yi*float64(j%2)
			if j == 0 {
				v[j] += 0.5 * yi // classes also differ in spread along 0
				v[j] *= 1 + 0.5*yi
			}
		}
		x = append(x, v)
		y = append(y, yi)
	}
	return x, y
}

func newMAM(t testing.TB, k KernelSpec, dim int, balance bool) *MAM {
	t.Helper()
	m, err := NewMAM(dim, MAMParams{Kernel: k, Balance: balance, Delta: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func relClose(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*max(math.Abs(a), math.Abs(b), 1e-300)
}

// cosine is the linear kernel on normalised inputs (0 if either is 0).
func cosine(a, b []float64) float64 {
	na, nb := math.Sqrt(dot(a, a)), math.Sqrt(dot(b, b))
	if na == 0 || nb == 0 {
		return 0
	}
	return dot(a, b) / (na * nb)
}

// TestMAMPlainBruteForce checks the plain MAM with the linear kernel against
// f(x) = Σ y_i K(x_i, x)/sqrt(yᵀΩy), M̂ = sqrt(yᵀΩy)/n, R̂ = (2/n)sqrt(tr Ω)
// computed from the kernel matrix (docs/math.md §3).
func TestMAMPlainBruteForce(t *testing.T) {
	const d, n = 7, 150
	x, y := randomData(1, n, d, 0.4)
	x[10] = make([]float64, d) // a zero input: φ = 0, K = 0
	probe, _ := randomData(2, 30, d, 0.5)
	m := newMAM(t, KernelSpec{Type: KernelLinear}, d, false)
	for i := range x {
		m.Observe(x[i], y[i], true)
		if (i+1)%50 != 0 {
			continue
		}
		k := i + 1
		var yOy, tr float64
		for a := range k {
			tr += cosine(x[a], x[a])
			for b := range k {
				yOy += y[a] * y[b] * cosine(x[a], x[b])
			}
		}
		f := func(z []float64) float64 {
			var s float64
			for a := range k {
				s += y[a] * cosine(x[a], z)
			}
			return s / math.Sqrt(yOy)
		}
		wantM, wantR := math.Sqrt(yOy)/float64(k), 2/float64(k)*math.Sqrt(tr)
		if !relClose(m.AverageMargin(), wantM, 1e-9) || !relClose(m.Rademacher(), wantR, 1e-9) {
			t.Fatalf("n=%d: M̂ = %v, R̂ = %v; want %v, %v", k, m.AverageMargin(), m.Rademacher(), wantM, wantR)
		}
		// M̂ is the average training margin.
		var avg float64
		for a := range k {
			avg += y[a] * f(x[a])
		}
		if avg /= float64(k); !relClose(avg, wantM, 1e-9) {
			t.Fatalf("n=%d: mean y f = %v, M̂ = %v", k, avg, wantM)
		}
		for _, z := range probe {
			want := f(z)
			p := m.Observe(z, 0, false)
			if !relClose(p.Score, want, 1e-9) {
				t.Fatalf("n=%d: f = %v, brute force %v", k, p.Score, want)
			}
			wantB := MistakeBound(1, wantM, wantR, float64(k), 0.05, math.Abs(want))
			if !p.HasBound || math.Abs(p.MistakeBound-wantB) > 1e-9 || p.N != int64(k) || p.Delta != 0.05 {
				t.Fatalf("n=%d: prediction %+v, want bound %v", k, p, wantB)
			}
			if p.MistakeBound != MistakeBound(1, m.AverageMargin(), m.Rademacher(), float64(k), 0.05, math.Abs(p.Score)) {
				t.Fatal("model bound differs from MistakeBound with its own M̂, R̂")
			}
			if wantLabel := int(math.Copysign(1, want)); p.Label != wantLabel {
				t.Fatalf("label %d, want %d", p.Label, wantLabel)
			}
		}
	}
}

// TestMAMBalancedBruteForce checks the balanced MAM against class means
// computed from the kernel matrix: <μ±, φ(x)> = (1/n±) Σ_{i∈±} K(x_i, x),
// ‖w‖² = ‖μ₊‖² + ‖μ₋‖² − 2<μ₊, μ₋>, b = (‖μ₋‖² − ‖μ₊‖²)/2,
// f = (<w, φ> + b)/(√2 sqrt(‖w‖² + b²)), and M̂_w = (1/n) Σ y_i f(x_i).
func TestMAMBalancedBruteForce(t *testing.T) {
	const d, n = 5, 120
	rbf := KernelSpec{Type: KernelRBF, Gamma: 0.3, Features: 64, Seed: 5}
	for _, tc := range []struct {
		name string
		k    KernelSpec
	}{{"linear", KernelSpec{Type: KernelLinear}}, {"rbf", rbf}} {
		t.Run(tc.name, func(t *testing.T) {
			x, y := randomData(3, n, d, 0.25)
			probe, _ := randomData(4, 20, d, 0.5)
			m := newMAM(t, tc.k, d, true)
			fm := m.FeatureMap()
			K := func(a, b []float64) float64 { // kernel of the feature map
				p, q := make([]float64, fm.Dim()), make([]float64, fm.Dim())
				fm.Map(p, a)
				fm.Map(q, b)
				return dot(p, q)
			}
			for i := range x {
				m.Observe(x[i], y[i], true)
				if (i+1)%40 != 0 {
					continue
				}
				k := i + 1
				var np, nn, pp, qq, pq float64
				for a := range k {
					if y[a] > 0 {
						np++
					} else {
						nn++
					}
					for b := range k {
						switch kab := K(x[a], x[b]); {
						case y[a] > 0 && y[b] > 0:
							pp += kab
						case y[a] < 0 && y[b] < 0:
							qq += kab
						case y[a] > 0:
							pq += kab
						}
					}
				}
				pp, qq, pq = pp/(np*np), qq/(nn*nn), pq/(np*nn)
				ww := pp + qq - 2*pq
				b := (qq - pp) / 2
				f := func(z []float64) float64 {
					var wz float64
					for a := range k {
						if y[a] > 0 {
							wz += K(x[a], z) / np
						} else {
							wz -= K(x[a], z) / nn
						}
					}
					return (wz + b) / (math.Sqrt2 * math.Sqrt(ww+b*b))
				}
				var avg, tr float64
				for a := range k {
					avg += y[a] * f(x[a])
					tr += K(x[a], x[a])
				}
				avg /= float64(k)
				wantR := 2 / float64(k) * math.Sqrt((tr+float64(k))/2)
				if !relClose(m.AverageMargin(), avg, 1e-9) || !relClose(m.Rademacher(), wantR, 1e-9) {
					t.Fatalf("n=%d: M̂_w = %v, R̂ = %v; want %v, %v", k, m.AverageMargin(), m.Rademacher(), avg, wantR)
				}
				for _, z := range probe {
					want := f(z)
					p := m.Observe(z, 0, false)
					if !relClose(p.Score, want, 1e-9) {
						t.Fatalf("n=%d: f = %v, brute force %v", k, p.Score, want)
					}
					if p.MistakeBound != MistakeBound(1, m.AverageMargin(), m.Rademacher(), float64(k), 0.05, math.Abs(p.Score)) {
						t.Fatal("model bound differs from MistakeBound")
					}
				}
			}
		})
	}
}

// TestMAMBalancedOneClass checks the fallback while one class is empty:
// the plain sum in the augmented space, w = s, b = n₊ − n₋.
func TestMAMBalancedOneClass(t *testing.T) {
	const d = 3
	m := newMAM(t, KernelSpec{Type: KernelRBF, Gamma: 0.5, Features: 128, Seed: 1}, d, true)
	x, _ := randomData(5, 40, d, 1)
	for i := range 20 {
		m.Observe(x[i], 1, true)
	}
	fm := m.FeatureMap()
	phi := make([]float64, fm.Dim())
	s := make([]float64, fm.Dim())
	for i := range 20 {
		fm.Map(phi, x[i])
		for j := range s {
			s[j] += phi[j]
		}
	}
	b := 20.0
	den := math.Sqrt2 * math.Sqrt(dot(s, s)+b*b)
	var avg float64
	for i := range 20 {
		fm.Map(phi, x[i])
		avg += (dot(s, phi) + b) / den
	}
	if avg /= 20; !relClose(m.AverageMargin(), avg, 1e-12) {
		t.Errorf("M̂ = %v, want %v", m.AverageMargin(), avg)
	}
	for _, z := range x[20:] {
		fm.Map(phi, z)
		want := (dot(s, phi) + b) / den
		p := m.Observe(z, 0, false)
		if !relClose(p.Score, want, 1e-12) || p.Label != 1 {
			t.Fatalf("f = %v (label %d), want %v", p.Score, p.Label, want)
		}
	}
	// The first negative switches to the class-mean direction.
	m.Observe(x[0], -1, true)
	if pos, neg := m.ClassCounts(); pos != 20 || neg != 1 {
		t.Fatalf("counts %d, %d", pos, neg)
	}
	if p := m.Observe(x[0], 0, false); p.Label != -1 {
		t.Errorf("x[0] is now the negative mean: label %d (f = %v)", p.Label, p.Score)
	}
}

func TestMAMEmpty(t *testing.T) {
	for _, bal := range []bool{false, true} {
		m := newMAM(t, KernelSpec{Type: KernelLinear}, 2, bal)
		p := m.Observe([]float64{1, 2}, 0, false)
		want := Prediction{Score: 0, Label: 0, MistakeBound: 1, HasBound: true, Delta: 0.05, N: 0}
		if p != want {
			t.Errorf("balance %v: %+v, want %+v", bal, p, want)
		}
		if m.Examples() != 0 || m.Version() != 1 || m.Type() != "mam" || m.Dim() != 2 {
			t.Error("accessors")
		}
		// An input of zeros is learned (n counts it) but adds nothing.
		m.Observe([]float64{0, 0}, 1, true)
		if p := m.Observe([]float64{1, 2}, 0, false); m.Examples() != 1 || p.N != 1 {
			t.Errorf("after a zero input: %+v", p)
		}
	}
}

func TestMAMNonFiniteInput(t *testing.T) {
	for _, k := range []KernelSpec{{Type: KernelLinear}, {Type: KernelRBF, Gamma: 1, Features: 8}} {
		m := newMAM(t, k, 2, true)
		m.Observe([]float64{1, 2}, 1, true)
		before, _ := m.MarshalBinary()
		for _, x := range [][]float64{{math.NaN(), 1}, {1, math.Inf(1)}} {
			p := m.Observe(x, -1, true)
			if p.Label != 0 || p.HasBound || p.Score != 0 || p.N != 1 {
				t.Errorf("%s %v: %+v", k.Type, x, p)
			}
		}
		after, _ := m.MarshalBinary()
		if !bytes.Equal(before, after) {
			t.Errorf("%s: non-finite input changed the state", k.Type)
		}
	}
}

func TestMAMLabel(t *testing.T) {
	m := newMAM(t, KernelSpec{Type: KernelLinear}, 1, false)
	tests := []struct {
		in   float64
		want float64
		ok   bool
	}{
		{1, 1, true}, {-1, -1, true}, {0, -1, true}, {math.Copysign(0, -1), -1, true},
		{2, 0, false}, {0.5, 0, false}, {-2, 0, false}, {math.NaN(), 0, false}, {math.Inf(1), 0, false},
	}
	for _, tc := range tests {
		if y, ok := m.Label(tc.in); y != tc.want || ok != tc.ok {
			t.Errorf("Label(%v) = %v, %v; want %v, %v", tc.in, y, ok, tc.want, tc.ok)
		}
	}
}

func TestMAMPanics(t *testing.T) {
	m := newMAM(t, KernelSpec{Type: KernelLinear}, 2, false)
	for name, f := range map[string]func(){
		"short x":   func() { m.Observe([]float64{1}, 1, true) },
		"long x":    func() { m.Observe([]float64{1, 2, 3}, 0, false) },
		"label 0":   func() { m.Observe([]float64{1, 2}, 0, true) },
		"label 0.5": func() { m.Observe([]float64{1, 2}, 0.5, true) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}

func TestMAMObserveDoesNotAllocate(t *testing.T) {
	for _, k := range []KernelSpec{{Type: KernelLinear}, {Type: KernelRBF, Gamma: 1, Features: 32}} {
		for _, bal := range []bool{false, true} {
			m := newMAM(t, k, 4, bal)
			x := []float64{1, -2, 3, 0.5}
			y := 1.0
			if a := testing.AllocsPerRun(200, func() {
				m.Observe(x, y, true)
				y = -y
				x[0] += 0.1
			}); a != 0 {
				t.Errorf("%s balance=%v: %v allocs per Observe", k.Type, bal, a)
			}
		}
	}
}

// TestMAMCompensatedSums adds the same φ 10⁶ times: the compensated sums
// stay at 10⁶·φ to rounding, where naive summation drifts.
func TestMAMCompensatedSums(t *testing.T) {
	const N = 1_000_000
	m := newMAM(t, KernelSpec{Type: KernelRBF, Gamma: 1, Features: 2, Seed: 3}, 2, false)
	x := []float64{0.3, 0.7}
	for range N {
		m.Observe(x, 1, true)
	}
	phi := make([]float64, 4)
	m.FeatureMap().Map(phi, x)
	var naive [4]float64
	for range N {
		for j := range naive {
			naive[j] += phi[j]
		}
	}
	for j := range phi {
		want := N * phi[j]
		if !relClose(m.w[j], want, 2e-16) {
			t.Errorf("s[%d] = %v, want %v (naive %v)", j, m.w[j], want, naive[j])
		}
	}
	if tr := m.tr + m.trC; !relClose(tr, N, 1e-15) {
		t.Errorf("tr Ω = %v, want %d", tr, N)
	}
}

var codecSpecs = []struct {
	name string
	k    KernelSpec
	bal  bool
}{
	{"linear-plain", KernelSpec{Type: KernelLinear}, false},
	{"linear-balanced", KernelSpec{Type: KernelLinear}, true},
	{"rbf-plain", KernelSpec{Type: KernelRBF, Gamma: 0.7, Features: 48, Seed: 77}, false},
	{"rbf-balanced", KernelSpec{Type: KernelRBF, Gamma: 0.7, Features: 48, Seed: 77}, true},
}

// TestMAMRoundTrip: a restored model predicts bit-identically and stays
// identical after further learning.
func TestMAMRoundTrip(t *testing.T) {
	const d = 6
	x, y := randomData(6, 300, d, 0.3)
	for _, tc := range codecSpecs {
		t.Run(tc.name, func(t *testing.T) {
			m := newMAM(t, tc.k, d, tc.bal)
			for i := range 150 {
				m.Observe(x[i], y[i], true)
			}
			enc, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			r, err := testTypes.Restore(enc)
			if err != nil {
				t.Fatal(err)
			}
			enc2, _ := r.MarshalBinary()
			if !bytes.Equal(enc, enc2) {
				t.Fatal("re-encoding differs")
			}
			if got := r.(*MAM); !reflect.DeepEqual(got.Params(), m.Params()) || got.Dim() != m.Dim() {
				t.Fatalf("parameters %+v (dim %d), want %+v (dim %d)", got.Params(), got.Dim(), m.Params(), m.Dim())
			}
			for i := 150; i < 300; i++ {
				p, q := m.Observe(x[i], y[i], true), r.Observe(x[i], y[i], true)
				if math.Float64bits(p.Score) != math.Float64bits(q.Score) || p != q {
					t.Fatalf("event %d: %+v vs restored %+v", i, p, q)
				}
			}
			a, _ := m.MarshalBinary()
			b, _ := r.MarshalBinary()
			if !bytes.Equal(a, b) {
				t.Fatal("states differ after further learning")
			}
			// UnmarshalBinary replaces another model's parameters and state.
			other := newMAM(t, KernelSpec{Type: KernelLinear}, 2, !tc.bal)
			if err := other.UnmarshalBinary(a); err != nil {
				t.Fatal(err)
			}
			if c, _ := other.MarshalBinary(); !bytes.Equal(a, c) {
				t.Fatal("UnmarshalBinary into another model")
			}
		})
	}
}

func TestMAMUnmarshalErrors(t *testing.T) {
	m := newMAM(t, KernelSpec{Type: KernelRBF, Gamma: 1, Features: 4, Seed: 1}, 3, true)
	x, y := randomData(7, 20, 3, 0.5)
	for i := range x {
		m.Observe(x[i], y[i], true)
	}
	good, _ := m.MarshalBinary()
	// The envelope: magic 0, version 4, type str 6 ("mam": 7..9), the
	// parameters' frame, dim u32; then the state from st: n st, n₊ st+8,
	// n₋ st+16, tr st+24, trC st+32, p st+40, sums st+44.
	st := envelopeEnd(t, good)
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	params := func(f func(p *MAMParams)) []byte {
		p := m.Params()
		f(&p)
		return withHeader(t, good, MAMName, &p, m.Dim())
	}
	balanceKey := append(codec.AppendStr(nil, "balance"), 'b', 1)
	if !bytes.Contains(good, balanceKey) {
		t.Fatal("balance not found in the parameters")
	}
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"magic", edit(func(b []byte) []byte { b[0] = 'X'; return b })},
		{"version", edit(func(b []byte) []byte { b[4] = 3; return b })},
		{"type", edit(func(b []byte) []byte { b[7] = 'x'; return b })},
		{"kernel", params(func(p *MAMParams) { p.Kernel.Type = "xbf" })},
		{"dim 0", edit(func(b []byte) []byte { clear(b[st-4 : st]); return b })},
		{"gamma", params(func(p *MAMParams) { p.Kernel.Gamma = -1 })},
		{"features", params(func(p *MAMParams) { p.Kernel.Features = 5 })},
		{"balance flag", bytes.Replace(good, balanceKey, append(balanceKey[:len(balanceKey)-1:len(balanceKey)-1], 2), 1)},
		{"balance off", params(func(p *MAMParams) { p.Balance = false })},
		{"delta", params(func(p *MAMParams) { p.Delta = 1.5 })},
		{"budget", params(func(p *MAMParams) { p.Budget = 20; p.Kernel.Features, p.Kernel.Seed = 0, 0 })},
		{"parameters of another type", withHeader(t, good, MAMName, &OMAMParams{Kernel: m.Params().Kernel, Levels: 3}, 3)},
		{"envelope of another type", withHeader(t, good, OMAMName, ptr(m.Params()), 3)},
		{"counts", edit(func(b []byte) []byte { b[st]++; return b })},
		{"negative count", edit(func(b []byte) []byte { b[st+15] = 0xff; return b })},
		{"trace > n", putF64(good, st+24, 25)},
		{"trace NaN", putF64(good, st+32, math.NaN())},
		{"p", edit(func(b []byte) []byte { b[st+40] = 9; return b })},
		{"sum NaN", putF64(good, st+44, math.NaN())},
		{"sum too large", putF64(good, st+44, 1e6)},
		{"trailing", append(bytes.Clone(good), 0)},
		// Version 1: a spec with another type's fields, or the exact mode's tag.
		{"version 1 levels", asVersion1(t, good, MAMName, legacyMAMSpec(m, func(s *legacySpec) { s.Levels = 3 }))},
		{"version 1 exact tag", asVersion1(t, good, legacyTagExactMAM, legacyMAMSpec(m, nil))},
		{"version 1 delta", asVersion1(t, good, MAMName, legacyMAMSpec(m, func(s *legacySpec) { s.Delta = 0 }))},
	}
	for name, b := range nonCanonicalMAM(t, m) {
		tests = append(tests, struct {
			name string
			b    []byte
		}{name, b})
	}
	for i := range len(good) {
		tests = append(tests, struct {
			name string
			b    []byte
		}{"truncated", good[:i]})
	}
	for _, tc := range tests {
		target := newMAM(t, KernelSpec{Type: KernelLinear}, 2, false)
		before, _ := target.MarshalBinary()
		err := target.UnmarshalBinary(tc.b)
		if !errors.Is(err, ErrFormat) {
			t.Errorf("%s (%d bytes): error %v, want ErrFormat", tc.name, len(tc.b), err)
		}
		if after, _ := target.MarshalBinary(); !bytes.Equal(before, after) {
			t.Errorf("%s: receiver changed on error", tc.name)
		}
		if _, err := testTypes.Restore(tc.b); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: Restore error %v", tc.name, err)
		}
		if tc.name != "truncated" {
			t.Logf("%s: %v", tc.name, err)
		}
	}
	if _, err := testTypes.Restore(good); err != nil {
		t.Fatal(err)
	}
	// The version-1 form of the same state restores to the same model.
	v1 := asVersion1(t, good, MAMName, legacyMAMSpec(m, nil))
	r, err := testTypes.Restore(v1)
	if err != nil {
		t.Fatalf("version 1: %v", err)
	}
	if enc, _ := r.MarshalBinary(); !bytes.Equal(enc, good) {
		t.Fatal("version 1: restored state differs")
	}
}

// ptr returns a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// legacyMAMSpec returns the version-1 spec of a random-feature or exact
// MAM's parameters, edited by f (if not nil).
func legacyMAMSpec(m interface {
	Dim() int
	Params() MAMParams
}, f func(*legacySpec)) legacySpec {
	p := m.Params()
	s := legacySpec{Dim: m.Dim(), Kernel: p.Kernel, Balance: p.Balance, Delta: p.Delta, Budget: p.Budget,
		Window: p.Window.Events, HalfLife: p.Decay.HalfLife}
	if f != nil {
		f(&s)
	}
	return s
}

func FuzzRestore(f *testing.F) {
	x, y := randomData(8, 10, 2, 0.5)
	for _, tc := range codecSpecs {
		if tc.k.Type == KernelRBF {
			tc.k.Features = 3
		}
		m := newMAM(f, tc.k, 2, tc.bal)
		for i := range x {
			m.Observe(x[i], y[i], true)
		}
		b, _ := m.MarshalBinary()
		f.Add(b)
		for _, b := range nonCanonicalMAM(f, m) {
			f.Add(b)
		}
		// The version-1 form of the same state (the legacy path).
		f.Add(asVersion1(f, b, MAMName, legacyMAMSpec(m, nil)))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := fuzzRestore(t, b, true)
		if m == nil {
			return
		}
		m.Observe(make([]float64, m.Dim()), 1, true)
	})
}

func TestStateClose(t *testing.T) {
	p := MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5, Features: 64, Seed: 9}, Balance: true, Delta: 0.05}
	a, _ := NewMAM(3, p)
	b, _ := NewMAM(3, p)
	xs := [][]float64{{1, 2, 3}, {-1, 0.5, 2}, {0, 0, 1}, {2, -1, 0}}
	ys := []float64{1, -1, 1, -1}
	for i := range xs {
		a.Observe(xs[i], ys[i], true)
	}
	for i := len(xs) - 1; i >= 0; i-- { // other order: equal up to rounding
		b.Observe(xs[i], ys[i], true)
	}
	if err := StateClose(a, b, 1e-12); err != nil {
		t.Fatalf("same events in another order: %v", err)
	}
	b.Observe(xs[0], ys[0], true)
	if err := StateClose(a, b, 1e-9); err == nil {
		t.Fatal("one more event: want a difference")
	}
	c, _ := NewMAM(3, p)
	for i := range xs {
		y := ys[i]
		if i == 2 {
			y = -y
		}
		c.Observe(xs[i], y, true)
	}
	if err := StateClose(a, c, 1e-9); err == nil {
		t.Fatal("a flipped label: want a difference")
	}
}
