package online

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestLinearMap(t *testing.T) {
	tiny, huge := 1e-200, 1e200
	tests := []struct {
		name string
		x    []float64
		want []float64 // nil: not ok
		sq   float64
	}{
		{"3-4", []float64{3, 4}, []float64{0.6, 0.8}, 1},
		{"negative", []float64{0, -2, 0}, []float64{0, -1, 0}, 1},
		{"zero", []float64{0, 0, 0}, []float64{0, 0, 0}, 0},
		{"tiny", []float64{3 * tiny, 4 * tiny}, []float64{0.6, 0.8}, 1},
		{"subnormal square", []float64{3e-160, 4e-160}, []float64{0.6, 0.8}, 1},
		{"subnormal", []float64{5e-324, 0}, []float64{1, 0}, 1},
		{"huge", []float64{3 * huge, -4 * huge}, []float64{0.6, -0.8}, 1},
		{"odd length", []float64{1, 1, 1}, []float64{1 / math.Sqrt(3), 1 / math.Sqrt(3), 1 / math.Sqrt(3)}, 1},
		{"NaN", []float64{1, math.NaN()}, nil, 0},
		{"Inf", []float64{math.Inf(-1), 1}, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fm, err := NewFeatureMap(KernelSpec{Type: KernelLinear}, len(tc.x))
			if err != nil {
				t.Fatal(err)
			}
			dst := make([]float64, fm.Dim())
			sq, ok := fm.Map(dst, tc.x)
			if ok != (tc.want != nil) {
				t.Fatalf("ok = %v", ok)
			}
			if !ok {
				return
			}
			if math.Abs(sq-tc.sq) > 1e-15 {
				t.Errorf("‖φ‖² = %v, want %v", sq, tc.sq)
			}
			for i := range dst {
				if math.Abs(dst[i]-tc.want[i]) > 1e-15 {
					t.Errorf("φ = %v, want %v", dst, tc.want)
					break
				}
			}
		})
	}
}

func TestLinearMapRandomUnitNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	fm, _ := NewFeatureMap(KernelSpec{Type: KernelLinear}, 17)
	dst := make([]float64, 17)
	x := make([]float64, 17)
	for range 1000 {
		for i := range x {
			x[i] = r.NormFloat64() * math.Exp(10*r.NormFloat64())
		}
		sq, ok := fm.Map(dst, x)
		if !ok || math.Abs(sq-1) > 1e-14 || math.Abs(dot(dst, dst)-1) > 1e-14 {
			t.Fatalf("x = %v: ‖φ‖² = %v, ok = %v", x, sq, ok)
		}
	}
}

func rbfMap(t testing.TB, gamma float64, features, dim int, seed uint64) *FeatureMap {
	t.Helper()
	fm, err := NewFeatureMap(KernelSpec{Type: KernelRBF, Gamma: gamma, Features: features, Seed: seed}, dim)
	if err != nil {
		t.Fatal(err)
	}
	return fm
}

func TestRBFMapUnitNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, gamma := range []float64{0.01, 1, 100} {
		fm := rbfMap(t, gamma, 300, 5, 7)
		dst := make([]float64, fm.Dim())
		x := make([]float64, 5)
		for range 200 {
			for i := range x {
				x[i] = 10 * r.NormFloat64()
			}
			sq, ok := fm.Map(dst, x)
			if !ok || math.Abs(sq-1) > 1e-12 || math.Abs(math.Sqrt(dot(dst, dst))-1) > 1e-12 {
				t.Fatalf("gamma %v: ‖φ‖² = %v (ok %v)", gamma, sq, ok)
			}
		}
	}
}

func TestRBFMapApproximatesKernel(t *testing.T) {
	const D, dim = 4096, 6
	r := rand.New(rand.NewPCG(5, 6))
	for _, gamma := range []float64{0.1, 1, 5} {
		fm := rbfMap(t, gamma, D, dim, 11)
		p, q := make([]float64, fm.Dim()), make([]float64, fm.Dim())
		x, z := make([]float64, dim), make([]float64, dim)
		var worst float64
		for range 100 {
			var d2 float64
			scale := 1 / math.Sqrt(gamma*dim) // typical γ‖x−x'‖² of order 1
			for i := range x {
				x[i] = r.NormFloat64() * scale
				z[i] = r.NormFloat64() * scale
				d2 += (x[i] - z[i]) * (x[i] - z[i])
			}
			fm.Map(p, x)
			fm.Map(q, z)
			worst = max(worst, math.Abs(dot(p, q)-math.Exp(-gamma*d2)))
		}
		// The pair form's estimate has standard deviation ≤ sqrt(1/(2D)).
		if tol := 4 / math.Sqrt(D); worst > tol {
			t.Errorf("gamma %v: max |<φ(x),φ(x')> − K| = %v > %v", gamma, worst, tol)
		}
		t.Logf("gamma %v: max kernel error %.4f (1/sqrt(D) = %.4f)", gamma, worst, 1/math.Sqrt(D))
	}
}

// TestRBFMapDeterministic pins the random frequencies: a change in how they
// are drawn would silently change every restored model.
func TestRBFMapDeterministic(t *testing.T) {
	a := rbfMap(t, 2, 8, 3, 42)
	b := rbfMap(t, 2, 8, 3, 42)
	c := rbfMap(t, 2, 8, 3, 43)
	for i := range a.omega {
		if a.omega[i] != b.omega[i] {
			t.Fatal("same seed, different frequencies")
		}
	}
	if a.omega[0] == c.omega[0] {
		t.Error("different seeds, same first frequency")
	}
	// Golden: ω_{1,1..3} for seed 42, gamma 2 (sd 2), as drawn; the map
	// holds them rounded to float32.
	raw := rawOmega(a.spec, 3)
	for i, v := range a.omega {
		if v != float64(float32(raw[i])) {
			t.Fatalf("omega[%d] = %v, the draw %v rounded to float32 is %v", i, v, raw[i], float32(raw[i]))
		}
	}
	want := []uint64{math.Float64bits(raw[0]), math.Float64bits(raw[1]), math.Float64bits(raw[2])}
	golden := []uint64{0x4003dcd83d203e28, 0xc009452c564413f0, 0xc014b0ae8c9d58bf} // 2.4828…, −3.1588…, −5.1725…
	for i := range want {
		if want[i] != golden[i] {
			t.Errorf("drawn omega[%d] = %v (%#x), golden %v (%#x)", i, raw[i], want[i], math.Float64frombits(golden[i]), golden[i])
		}
	}
}

func TestSincosRFF(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	var args []float64
	for _, lim := range []float64{1e-300, 1e-8, 1e-2, 1, math.Pi, 10, 100, 1e3, 1e5, sincosFastLimit, 1e9, 1e300} {
		for range 20000 {
			args = append(args, (2*r.Float64()-1)*lim)
		}
	}
	// Near multiples of π/4 and of the table step 2π/sincosN, where the
	// reduction rounds either way.
	for k := -2000; k <= 2000; k++ {
		for _, e := range []float64{0, 1e-12, -1e-12, 1e-6} {
			args = append(args, float64(k)*math.Pi/4+e, float64(k)*math.Pi/sincosN+e,
				float64(k)*math.Pi/sincosN*1000+e)
		}
	}
	args = append(args, 0, math.Copysign(0, -1), sincosFastLimit, -sincosFastLimit,
		math.Nextafter(sincosFastLimit, 0), math.MaxFloat64, math.SmallestNonzeroFloat64)
	p := make([]float64, 2*len(args))
	copy(p[len(args):], args)
	sq := sincosRFF(p, 1)
	if math.Abs(sq-float64(len(args))) > 1e-12*float64(len(args)) {
		t.Errorf("Σ cos² + sin² = %v, want %d", sq, len(args))
	}
	var worst float64
	for k, x := range args {
		s, c := math.Sincos(x)
		worst = max(worst, math.Abs(p[k]-c), math.Abs(p[len(args)+k]-s))
		if d := math.Abs(p[k]*p[k] + p[len(args)+k]*p[len(args)+k] - 1); d > 1e-15 {
			t.Fatalf("x = %v: cos² + sin² − 1 = %v", x, d)
		}
	}
	if worst > 5e-16 {
		t.Errorf("max |sincosRFF − math.Sincos| = %v > 5e-16", worst)
	}
	t.Logf("max |sincosRFF − math.Sincos| = %v", worst)

	// Non-finite arguments give NaN.
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		if sq := sincosRFF([]float64{0, x}, 1); !math.IsNaN(sq) {
			t.Errorf("sincosRFF(%v): Σ² = %v, want NaN", x, sq)
		}
	}
}

func TestSpecValidate(t *testing.T) {
	ok := MAMParams{Kernel: KernelSpec{Type: "rbf", Gamma: 1, Features: 16}, Delta: 0.05}
	tests := []struct {
		name  string
		edit  func(*Spec, *MAMParams)
		field string // "" = valid
	}{
		{"valid rbf", func(*Spec, *MAMParams) {}, ""},
		{"valid linear", func(_ *Spec, p *MAMParams) { p.Kernel = KernelSpec{Type: "linear"} }, ""},
		{"linear with seed", func(_ *Spec, p *MAMParams) { p.Kernel = KernelSpec{Type: "linear", Seed: 9} }, "kernel.seed"},
		{"type missing", func(s *Spec, _ *MAMParams) { s.Type = "" }, "type"},
		{"type unknown", func(s *Spec, _ *MAMParams) { s.Type = "svm" }, "type"},
		{"dim 0", func(s *Spec, _ *MAMParams) { s.Dim = 0 }, "dim"},
		{"dim huge", func(s *Spec, _ *MAMParams) { s.Dim = maxDim + 1 }, "dim"},
		{"kernel missing", func(_ *Spec, p *MAMParams) { p.Kernel.Type = "" }, "kernel.type"},
		{"kernel unknown", func(_ *Spec, p *MAMParams) { p.Kernel.Type = "poly" }, "kernel.type"},
		{"gamma 0 (auto)", func(_ *Spec, p *MAMParams) { p.Kernel.Gamma = 0 }, ""},
		{"gamma negative", func(_ *Spec, p *MAMParams) { p.Kernel.Gamma = -1 }, "kernel.gamma"},
		{"gamma NaN", func(_ *Spec, p *MAMParams) { p.Kernel.Gamma = math.NaN() }, "kernel.gamma"},
		{"gamma Inf", func(_ *Spec, p *MAMParams) { p.Kernel.Gamma = math.Inf(1) }, "kernel.gamma"},
		{"gamma 1e20", func(_ *Spec, p *MAMParams) { p.Kernel.Gamma = 1e20 }, ""},
		{"gamma beyond float32 frequencies", func(_ *Spec, p *MAMParams) { p.Kernel.Gamma = 1.01e20 }, "kernel.gamma"},
		{"laplacian gamma 1e20", func(_ *Spec, p *MAMParams) { p.Kernel.Type, p.Kernel.Gamma = KernelLaplacian, 1e20 }, ""},
		{"features 0", func(_ *Spec, p *MAMParams) { p.Kernel.Features = 0 }, "kernel.features"},
		{"features too many", func(s *Spec, p *MAMParams) { s.Dim, p.Kernel.Features = 1<<10, 1<<15 }, "kernel.features"},
		{"linear with gamma", func(_ *Spec, p *MAMParams) { p.Kernel = KernelSpec{Type: "linear", Gamma: 1} }, "kernel.gamma"},
		{"linear with features", func(_ *Spec, p *MAMParams) { p.Kernel = KernelSpec{Type: "linear", Features: 8} }, "kernel.features"},
		{"delta 0", func(_ *Spec, p *MAMParams) { p.Delta = 0 }, "delta"},
		{"delta 1", func(_ *Spec, p *MAMParams) { p.Delta = 1 }, "delta"},
		{"delta NaN", func(_ *Spec, p *MAMParams) { p.Delta = math.NaN() }, "delta"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			s := Spec{Type: MAMName, Dim: 3, Params: &p}
			tc.edit(&s, &p)
			m, err := testTypes.New(s)
			if tc.field == "" {
				if err != nil || m == nil {
					t.Fatalf("New: %v", err)
				}
				if _, err := NewMAM(s.Dim, p); err != nil {
					t.Fatalf("NewMAM: %v", err)
				}
				return
			}
			var se *SpecError
			if !errors.As(err, &se) || se.Field != tc.field || !errors.Is(err, ErrSpec) {
				t.Fatalf("New: error %v, want a *SpecError for %q", err, tc.field)
			}
			if m != nil {
				t.Error("model returned with an error")
			}
			if s.Type == MAMName {
				if rm, err := NewMAM(s.Dim, p); !errors.As(err, &se) || se.Field != tc.field || rm != nil {
					t.Fatalf("NewMAM: error %v, want a *SpecError for %q", err, tc.field)
				}
			}
			t.Log(err)
		})
	}
}
