package online

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// omamData draws n points in d dimensions whose level 1..m rises with
// the first two coordinates (plus noise).
func omamData(seed uint64, n, d, m int) (x [][]float64, y []float64) {
	r := rand.New(rand.NewPCG(seed, 77))
	for range n {
		v := make([]float64, d)
		for j := range v {
			v[j] = r.NormFloat64()
		}
		z := v[0] + 0.5*v[1] + 0.5*r.NormFloat64()
		l := 1 + int(math.Floor((math.Erf(z/math.Sqrt(2*1.5))+1)/2*float64(m)))
		x = append(x, v)
		y = append(y, float64(min(m, max(1, l))))
	}
	return x, y
}

// trainedOMAM returns an OMAM of dimension dim and parameters p that
// learned the labelled rows (x, y), and its encoding.
func trainedOMAM(t testing.TB, dim int, p OMAMParams, x [][]float64, y []float64) (*OMAM, []byte) {
	t.Helper()
	o := newOMAM(t, dim, p)
	for i := range x {
		o.Observe(x[i], y[i], true)
	}
	b, err := o.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return o, b
}

func newOMAM(t testing.TB, dim int, p OMAMParams) *OMAM {
	t.Helper()
	o, err := NewOMAM(dim, p)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

var (
	omamLinear = KernelSpec{Type: KernelLinear}
	omamRBF    = KernelSpec{Type: KernelRBF, Gamma: 0.3, Features: 64, Seed: 5}
	omamAutoK  = KernelSpec{Type: KernelRBF, Features: 64, Seed: 5}               // gamma auto
	omamAutoL  = KernelSpec{Type: KernelLaplacian, Features: 64, Seed: 7}         // gamma auto
	omamAutoS  = KernelSpec{Type: KernelRBF, Features: 64, Seed: 5, Sparse: true} // gamma auto, generated frequencies
)

// levelSum returns S_ℓ (level 1..m) as a vector.
func (o *OMAM) levelSum(level int) []float64 {
	v := make([]float64, o.p)
	for i := range v {
		sl, si := o.strides()
		j := (level-1)*sl + i*si
		v[i] = o.sum[j] + o.sumC[j]
	}
	return v
}

func omamRelErr(a, b []float64) float64 {
	var diff, norm float64
	for i := range a {
		diff += (a[i] - b[i]) * (a[i] - b[i])
		norm += a[i] * a[i]
	}
	if norm == 0 {
		return math.Sqrt(diff)
	}
	return math.Sqrt(diff / norm)
}

// TestOMAMBruteForce checks both scores of the linear-kernel oMAM against
// the kernel expansions of docs/math.md §5, c_i = Σ_j omamSign(y_i − y_j):
// raw Σ c_i K(x_i, x)/sqrt(cᵀΩc), normalised Σ c_i K(x_i, x)/(n Σ K(x_i, x));
// and w against the incremental update w += Σ_{ℓ>ℓ₀} S_ℓ − Σ_{ℓ<ℓ₀} S_ℓ + c(ℓ₀) φ(x).
func TestOMAMBruteForce(t *testing.T) {
	const d, n, m = 5, 120, 4
	x, y := omamData(1, n, d, m)
	probe, _ := omamData(2, 20, d, m)
	for _, norm := range []bool{false, true} {
		o := newOMAM(t, d, OMAMParams{Kernel: omamLinear, Levels: m, Normalize: norm})
		wInc := make([]float64, d) // incremental form
		for i := range x {
			l0 := int(y[i])
			phi := make([]float64, d)
			o.fm.Map(phi, x[i])
			var c0 float64 // c(ℓ₀) = N_{<ℓ₀} − N_{>ℓ₀} (unchanged by the new example)
			for l := 1; l <= m; l++ {
				switch {
				case l < l0:
					c0 += o.LevelCount(l)
				case l > l0:
					c0 -= o.LevelCount(l)
				}
			}
			for l := 1; l <= m; l++ {
				s := o.levelSum(l)
				for j := range wInc {
					switch {
					case l > l0:
						wInc[j] += s[j]
					case l < l0:
						wInc[j] -= s[j]
					}
				}
			}
			for j := range wInc {
				wInc[j] += c0 * phi[j]
			}
			o.Observe(x[i], y[i], true)
			if e := omamRelErr(o.w, wInc); e > 1e-12 {
				t.Fatalf("event %d: w differs from the incremental form by %.3g", i, e)
			}
			if (i+1)%40 != 0 {
				continue
			}
			k := i + 1
			c := make([]float64, k)
			for a := range k {
				for b := range k {
					c[a] += omamSign(y[a] - y[b])
				}
			}
			var cOc float64
			for a := range k {
				for b := range k {
					cOc += c[a] * c[b] * cosine(x[a], x[b])
				}
			}
			for _, z := range probe {
				var num, den float64
				for a := range k {
					num += c[a] * cosine(x[a], z)
					den += cosine(x[a], z)
				}
				want := num / math.Sqrt(cOc)
				if norm {
					want = num / (float64(k) * den)
				}
				p := o.Observe(z, 0, false)
				if !relClose(p.Score, want, 1e-9) {
					t.Fatalf("normalize=%v, n=%d: score %v, want %v", norm, k, p.Score, want)
				}
				if p.HasBound || p.Delta != 0 || p.N != int64(k) {
					t.Fatalf("prediction %+v: want no bound and N = %d", p, k)
				}
			}
		}
	}
}

func omamSign(v float64) float64 {
	switch {
	case v > 0:
		return 1
	case v < 0:
		return -1
	}
	return 0
}

func TestOMAMEmptyAndNonFinite(t *testing.T) {
	for _, norm := range []bool{false, true} {
		o := newOMAM(t, 3, OMAMParams{Kernel: omamRBF, Levels: 3, Normalize: norm})
		p := o.Observe([]float64{1, 2, 3}, 2, true)
		if p.Score != 0 || p.Label != 0 || p.N != 0 {
			t.Fatalf("empty model: %+v", p)
		}
		p = o.Observe([]float64{1, math.NaN(), 3}, 3, true)
		if p.Score != 0 || p.Label != 0 || o.Examples() != 1 {
			t.Fatalf("NaN input: %+v, examples %d (want not learned)", p, o.Examples())
		}
		if p = o.Observe([]float64{1, 2, 3}, 0, false); p.Score != 0 || math.Signbit(p.Score) {
			t.Fatalf("one level seen: score %v, want +0", p.Score)
		}
	}
}

func TestOMAMLabel(t *testing.T) {
	o := newOMAM(t, 1, OMAMParams{Kernel: omamLinear, Levels: 3})
	for v, want := range map[float64]float64{1: 1, 2: 2, 3: 3} {
		if got, ok := o.Label(v); !ok || got != want {
			t.Errorf("Label(%v) = %v, %v", v, got, ok)
		}
	}
	for _, v := range []float64{0, 4, 1.5, -1, math.NaN(), math.Inf(1)} {
		if _, ok := o.Label(v); ok {
			t.Errorf("Label(%v) accepted", v)
		}
	}
	e := newOMAM(t, 1, OMAMParams{Kernel: omamLinear, Levels: 4, Edges: []float64{15.3, 19.7, 22.7}})
	for v, want := range map[float64]float64{-100: 1, 15.2: 1, 15.3: 2, 19.69: 2, 19.7: 3, 22.7: 4, 50: 4} {
		if got, ok := e.Label(v); !ok || got != want {
			t.Errorf("edges: Label(%v) = %v, %v; want %v", v, got, ok, want)
		}
	}
	if _, ok := e.Label(math.NaN()); ok {
		t.Error("edges: NaN accepted")
	}
	for name, f := range map[string]func(){
		"level 0":   func() { o.Observe([]float64{1}, 0, true) },
		"level 4":   func() { o.Observe([]float64{1}, 4, true) },
		"level 1.5": func() { o.Observe([]float64{1}, 1.5, true) },
		"bad dim":   func() { o.Observe([]float64{1, 2}, 1, true) },
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
	o.Observe([]float64{1}, 0, false) // unlabelled: y ignored
}

func TestOMAMSpecValidate(t *testing.T) {
	const dim = 3
	ok := OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1, Features: 16}, Levels: 5}
	tests := []struct {
		name  string
		edit  func(*OMAMParams)
		field string // "" = valid
	}{
		{"valid", func(*OMAMParams) {}, ""},
		{"valid linear, normalised, edges", func(p *OMAMParams) {
			p.Kernel, p.Normalize, p.Edges = KernelSpec{Type: KernelLinear}, true, []float64{1, 2, 3, 4}
		}, ""},
		{"valid window", func(p *OMAMParams) { p.Window.Events = 100 }, ""},
		{"valid half-life", func(p *OMAMParams) { p.Decay.HalfLife = 50 }, ""},
		{"levels 1", func(p *OMAMParams) { p.Levels = 1 }, "levels"},
		{"levels 0", func(p *OMAMParams) { p.Levels = 0 }, "levels"},
		{"levels huge", func(p *OMAMParams) { p.Levels = omamMaxLevels + 1 }, "levels"},
		{"edges count", func(p *OMAMParams) { p.Edges = []float64{1, 2} }, "edges"},
		{"edges order", func(p *OMAMParams) { p.Edges = []float64{1, 2, 2, 3} }, "edges[2]"},
		{"edges NaN", func(p *OMAMParams) { p.Edges = []float64{1, 2, math.NaN(), 3} }, "edges[2]"},
		{"budget with random features", func(p *OMAMParams) { p.Budget = 10 }, "kernel.features"},
		{"budget negative", func(p *OMAMParams) { p.Budget = -1 }, "budget"},
		{"budget negative exact", func(p *OMAMParams) { p.Budget, p.Kernel.Features = -1, 0 }, "budget"},
		{"degree", func(p *OMAMParams) { p.Kernel.Degree = 2 }, "kernel.degree"},
		{"window negative", func(p *OMAMParams) { p.Window.Events = -1 }, "window.events"},
		{"window huge", func(p *OMAMParams) { p.Window.Events = maxOmega }, "window.events"},
		{"half-life negative", func(p *OMAMParams) { p.Decay.HalfLife = -1 }, "decay.half_life"},
		{"half-life NaN", func(p *OMAMParams) { p.Decay.HalfLife = math.NaN() }, "decay.half_life"},
		{"half-life Inf", func(p *OMAMParams) { p.Decay.HalfLife = math.Inf(1) }, "decay.half_life"},
		{"window and half-life", func(p *OMAMParams) { p.Window.Events, p.Decay.HalfLife = 10, 10 }, "decay.half_life"},
		{"gamma", func(p *OMAMParams) { p.Kernel.Gamma = -1 }, "kernel.gamma"},
		{"valid gamma auto", func(p *OMAMParams) { p.Kernel.Gamma = 0 }, ""},
		{"valid gamma auto with hashed features", func(p *OMAMParams) { p.Kernel.Gamma, p.Kernel.Sparse = 0, true }, ""},
		{"gamma auto exact", func(p *OMAMParams) { p.Kernel, p.Budget = KernelSpec{Type: KernelRBF}, 10 }, "kernel.gamma"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			tc.edit(&p)
			verr := p.Validate(dim)
			m, err := testTypes.New(Spec{Type: OMAMName, Dim: dim, Params: &p})
			if tc.field == "" {
				if verr != nil || err != nil || m == nil {
					t.Fatalf("Validate: %v, New: %v", verr, err)
				}
				return
			}
			for _, err := range []error{verr, err} {
				var se *SpecError
				if !errors.As(err, &se) || se.Field != tc.field || !errors.Is(err, ErrSpec) {
					t.Fatalf("error %v, want a *SpecError for %q", err, tc.field)
				}
			}
			if m != nil {
				t.Error("model returned with an error")
			}
			if p.Budget == 0 {
				if o, err := NewOMAM(dim, p); o != nil || !errors.Is(err, ErrSpec) {
					t.Fatalf("NewOMAM: %v", err)
				}
			}
			t.Log(err)
		})
	}
	// Standardisation is the registry's wrapper, for any valid parameters.
	m, err := testTypes.New(Spec{Type: OMAMName, Dim: dim, Standardize: true, Params: &ok})
	if err != nil {
		t.Fatal(err)
	}
	if s, isStd := m.(*Standardized); !isStd {
		t.Fatalf("New with Standardize: %T", m)
	} else if _, isOMAM := s.Inner().(*OMAM); !isOMAM {
		t.Fatalf("New with Standardize: inner %T", s.Inner())
	}
}

// TestOMAMThresholds checks the threshold fit: refits every 64 labelled
// events, and on the buffer the predicted level frequencies equal the
// observed ones.
func TestOMAMThresholds(t *testing.T) {
	const m = 5
	x, y := omamData(3, 3000, 4, m)
	o := newOMAM(t, 4, OMAMParams{Kernel: omamRBF, Levels: m, Normalize: true})
	for i := range x {
		p := o.Observe(x[i], y[i], true)
		if i < omamRefitEvery && p.Label != 0 {
			t.Fatalf("event %d: label %d before the first fit", i, p.Label)
		}
		if i >= omamRefitEvery && (p.Label < 1 || p.Label > m) {
			t.Fatalf("event %d: label %d", i, p.Label)
		}
		if (i+1)%omamRefitEvery != 0 {
			continue
		}
		th, ok := o.Thresholds(nil)
		if !ok || len(th) != m-1 || !slices.IsSorted(th) {
			t.Fatalf("event %d: thresholds %v, %v", i, th, ok)
		}
		// Predicted vs observed frequencies on the buffer.
		lo := max(0, i+1-omamThresholdBuffer)
		var pred, obs [m]int
		for j := lo; j <= i; j++ {
			s := o.bufScore[(j)%omamThresholdBuffer]
			pred[o.levelIndex(s)]++
			obs[int(y[j])-1]++
		}
		if pred != obs {
			t.Fatalf("event %d: predicted level counts %v, observed %v", i, pred, obs)
		}
	}
}

// TestOMAMWindow: after N + k events the windowed model's state equals a
// fresh model's trained on the last N events.
func TestOMAMWindow(t *testing.T) {
	const N, k, m = 50, 137, 4
	x, y := omamData(4, N+k, 3, m)
	for _, ks := range []KernelSpec{omamLinear, omamRBF} {
		for _, norm := range []bool{false, true} {
			win := newOMAM(t, 3, OMAMParams{Kernel: ks, Levels: m, Window: Window{Events: N}, Normalize: norm})
			for i := range x {
				win.Observe(x[i], y[i], true)
			}
			fresh := newOMAM(t, 3, OMAMParams{Kernel: ks, Levels: m, Normalize: norm})
			for i := k; i < N+k; i++ {
				fresh.Observe(x[i], y[i], true)
			}
			for l := 1; l <= m; l++ {
				if win.LevelCount(l) != fresh.LevelCount(l) {
					t.Fatalf("%s: N_%d = %v, fresh %v", ks.Type, l, win.LevelCount(l), fresh.LevelCount(l))
				}
				if e := omamRelErr(fresh.levelSum(l), win.levelSum(l)); e > 1e-9 {
					t.Fatalf("%s: S_%d differs by %.3g relative", ks.Type, l, e)
				}
			}
			if e := omamRelErr(fresh.w, win.w); e > 1e-9 {
				t.Fatalf("%s: w differs by %.3g relative", ks.Type, e)
			}
			p, q := win.Observe(x[0], 0, false), fresh.Observe(x[0], 0, false)
			if !relClose(p.Score, q.Score, 1e-9) || p.N != N || win.Examples() != N+k {
				t.Fatalf("%s: windowed %+v (examples %d), fresh %+v", ks.Type, p, win.Examples(), q)
			}
		}
	}
}

// TestOMAMHalfLife compares the decayed sums with Σ_i a^age_i φ(x_i),
// a = 2^(−1/h), and n_eff = (Σ a^age)²/Σ a^2age.
func TestOMAMHalfLife(t *testing.T) {
	const n, m, h = 300, 3, 40.0
	x, y := omamData(5, n, 3, m)
	o := newOMAM(t, 3, OMAMParams{Kernel: omamRBF, Levels: m, Decay: Decay{HalfLife: h}})
	for i := range x {
		o.Observe(x[i], y[i], true)
	}
	a := math.Exp2(-1 / h)
	S := make([][]float64, m)
	N := make([]float64, m)
	var sw, sw2 float64
	phi := make([]float64, o.p)
	for l := range S {
		S[l] = make([]float64, o.p)
	}
	for i := range x {
		wgt := math.Pow(a, float64(n-1-i))
		l := int(y[i]) - 1
		o.fm.Map(phi, x[i])
		for j := range phi {
			S[l][j] += wgt * phi[j]
		}
		N[l] += wgt
		sw += wgt
		sw2 += wgt * wgt
	}
	w := make([]float64, o.p)
	for l := range S {
		if !relClose(o.LevelCount(l+1), N[l], 1e-12) {
			t.Fatalf("N_%d = %v, want %v", l+1, o.LevelCount(l+1), N[l])
		}
		if e := omamRelErr(S[l], o.levelSum(l+1)); e > 1e-12 {
			t.Fatalf("S_%d differs by %.3g", l+1, e)
		}
		var c float64
		for k := range N {
			c += N[k] * omamSign(float64(l-k))
		}
		for j := range w {
			w[j] += c * S[l][j]
		}
	}
	if e := omamRelErr(w, o.w); e > 1e-12 {
		t.Fatalf("w differs by %.3g", e)
	}
	if p := o.Observe(x[0], 0, false); p.N != int64(math.Round(sw*sw/sw2)) {
		t.Fatalf("N = %d, want n_eff %v", p.N, sw*sw/sw2)
	}
}

func TestOMAMObserveDoesNotAllocate(t *testing.T) {
	for _, p := range []OMAMParams{
		{Kernel: omamRBF, Levels: 5, Normalize: true},
		{Kernel: omamLinear, Levels: 5, Window: Window{Events: 30}},
		{Kernel: omamRBF, Levels: 5, Decay: Decay{HalfLife: 20}},
		{Kernel: omamAutoK, Levels: 5, Normalize: true}, // after the warm-up (the first 2000 events)
		{Kernel: omamAutoL, Levels: 5, Window: Window{Events: 30}},
	} {
		o := newOMAM(t, 8, p)
		x, y := omamData(6, 1024, 8, 5)
		i := 0
		if a := testing.AllocsPerRun(2000, func() { // covers refits and evictions
			o.Observe(x[i&1023], y[i&1023], true)
			o.Observe(x[(i+7)&1023], 0, false)
			i++
		}); a != 0 {
			t.Errorf("%+v: %v allocs per Observe pair, want 0", p, a)
		}
	}
}

// omamSpecs are the parameters of the codec tests (inputs of dimension 3).
var omamSpecs = []OMAMParams{
	{Kernel: omamLinear, Levels: 3},
	{Kernel: omamRBF, Levels: 5, Normalize: true},
	{Kernel: omamRBF, Levels: 4, Edges: []float64{-1, 0, 1}, Window: Window{Events: 40}},
	{Kernel: omamLinear, Levels: 2, Decay: Decay{HalfLife: 25}, Normalize: true},
	{Kernel: omamAutoK, Levels: 5, Normalize: true},
	{Kernel: omamAutoL, Levels: 3, Window: Window{Events: 40}},
	{Kernel: omamAutoK, Levels: 4, Decay: Decay{HalfLife: 30}},
	{Kernel: omamAutoS, Levels: 4, Normalize: true},
}

// TestOMAMRoundTrip restores models at several points (before the first
// fit, window filling, window full) and checks identical predictions and
// identical state (same encoding) after further learning.
func TestOMAMRoundTrip(t *testing.T) {
	for _, spec := range omamSpecs {
		x, y := omamData(7, 400, 3, spec.Levels)
		for _, cut := range []int{0, 1, 3, 4, 10, 63, 64, 70, 300} { // gamma auto: before, in and after the warm-up
			o, b := trainedOMAM(t, 3, spec, x[:cut], y[:cut])
			m, err := testTypes.Restore(b)
			if err != nil {
				t.Fatalf("%+v at %d: %v", spec, cut, err)
			}
			r := m.(*OMAM)
			if !reflect.DeepEqual(r.Params(), o.Params()) || r.Dim() != o.Dim() {
				t.Fatalf("parameters %+v (dim %d), want %+v (dim %d)", r.Params(), r.Dim(), o.Params(), o.Dim())
			}
			for i := cut; i < len(x); i++ {
				p, q := o.Observe(x[i], y[i], i%5 != 0), r.Observe(x[i], y[i], i%5 != 0)
				if p != q {
					t.Fatalf("%+v, cut %d, event %d: %+v vs restored %+v", spec, cut, i, p, q)
				}
			}
			b1, _ := o.MarshalBinary()
			b2, _ := r.MarshalBinary()
			if !bytes.Equal(b1, b2) {
				t.Fatalf("%+v, cut %d: states differ after further learning", spec, cut)
			}
			if a, _ := o.AppendBinary([]byte("xy")); !bytes.Equal(a[2:], b1) {
				t.Fatal("AppendBinary differs from MarshalBinary")
			}
		}
	}
}

func TestOMAMUnmarshalErrors(t *testing.T) {
	o := newOMAM(t, 2, OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1, Features: 4, Seed: 3}, Levels: 3, Window: Window{Events: 5}})
	x, y := omamData(8, 80, 2, 3)
	for i := range x {
		o.Observe(x[i], y[i], true)
	}
	good, _ := o.MarshalBinary()
	target := newOMAM(t, 2, OMAMParams{Kernel: omamLinear, Levels: 2})
	before, _ := target.MarshalBinary()
	check := func(name string, b []byte) {
		t.Helper()
		err := target.UnmarshalBinary(b)
		if name != "truncated" {
			t.Logf("%s: %v", name, err)
		}
		if !errors.Is(err, ErrFormat) {
			t.Fatalf("%s: error %v, want ErrFormat", name, err)
		}
		if _, err := testTypes.Restore(b); !errors.Is(err, ErrFormat) {
			t.Fatalf("%s: Restore error %v, want ErrFormat", name, err)
		}
		if now, _ := target.MarshalBinary(); !bytes.Equal(now, before) {
			t.Fatalf("%s: receiver changed", name)
		}
	}
	for n := range len(good) {
		check("truncated", good[:n])
	}
	check("trailing", append(slices.Clone(good), 0))
	// Offsets into the state: the envelope, then n and p.
	hdr := 4 + 2 + 1 + len(OMAMName) // magic, version, type
	st := envelopeEnd(t, good)
	p, m := o.p, o.m
	cnts := st + 8 + 4
	sums := cnts + 16*m + 16
	win := sums + 16*m*p
	corrupt := func(name string, off int, v []byte) {
		b := slices.Clone(good)
		copy(b[off:], v)
		check(name, b)
	}
	f64 := func(v float64) []byte { return f64Bytes([]float64{v}) }
	corrupt("n", st, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	corrupt("p", st+8, []byte{9})
	corrupt("count fraction", cnts, f64(o.cnt[0]+0.5))
	corrupt("count NaN", cnts, f64(math.NaN()))
	corrupt("count compensation", cnts+8, f64(1e-3))
	corrupt("Σw² without decay", sums-16, f64(1))
	corrupt("sum NaN", sums, f64(math.NaN()))
	corrupt("sum too large", sums, f64(1e6))
	corrupt("window fill", win, []byte{4})
	corrupt("window level", win+4, []byte{7})
	corrupt("window level moved", win+4, []byte{byte((o.winL[o.winNext] + 1) % 3)})
	corrupt("window input", win+8, f64(math.Inf(1)))
	buf := win + 4 + 5*(4+8*2)
	corrupt("buffer fill", buf, []byte{3})
	corrupt("buffer score", buf+4, f64(math.NaN()))
	corrupt("buffer level", buf+12, []byte{3})
	fit := len(good) - 8*(m-1) - 1
	corrupt("fitted flag", fit, []byte{2})
	corrupt("fitted off", fit, []byte{0})
	corrupt("thresholds order", fit+1, f64(1e9))
	corrupt("threshold NaN", fit+9, f64(math.NaN()))
	corrupt("type", hdr-4, []byte("oMAM"))
	corrupt("dim", st-4, []byte{3})
	params := func(name string, f func(p *OMAMParams)) {
		p := o.Params()
		f(&p)
		check(name, withHeader(t, good, OMAMName, &p, o.Dim()))
	}
	params("levels in parameters", func(p *OMAMParams) { p.Levels = 9 })
	params("features in parameters", func(p *OMAMParams) { p.Kernel.Features = 5 })
	params("window in parameters", func(p *OMAMParams) { p.Window.Events = 4 })
	params("no window in parameters", func(p *OMAMParams) { p.Window.Events = 0 })
	params("edges in parameters", func(p *OMAMParams) { p.Edges = []float64{1, 0} })
	params("budget in parameters", func(p *OMAMParams) { p.Budget, p.Kernel.Features, p.Kernel.Seed = 5, 0, 0 })
	// Version 1: the spec of another type, or the exact mode's tag.
	v1 := legacySpec{Dim: 2, Kernel: o.Params().Kernel, Levels: 3, Window: 5}
	check("version 1 delta", asVersion1(t, good, OMAMName, func() legacySpec { s := v1; s.Delta = 0.05; return s }()))
	check("version 1 exact tag", asVersion1(t, good, legacyTagExactOMAM, v1))
	check("version 1 levels", asVersion1(t, good, OMAMName, func() legacySpec { s := v1; s.Levels = 4; return s }()))
	if r, err := testTypes.Restore(asVersion1(t, good, OMAMName, v1)); err != nil {
		t.Fatalf("version 1: %v", err)
	} else if enc, _ := r.MarshalBinary(); !bytes.Equal(enc, good) {
		t.Fatal("version 1: restored state differs")
	}
	// Decay: counts bounded by 1/(1 − a).
	d := newOMAM(t, 2, OMAMParams{Kernel: omamLinear, Levels: 2, Decay: Decay{HalfLife: 3}})
	for i := range 10 {
		d.Observe(x[i], float64(1+i%2), true)
	}
	dg, _ := d.MarshalBinary()
	dc := envelopeEnd(t, dg) + 12
	b := slices.Clone(dg)
	copy(b[dc:], f64(100))
	check("decayed count", b)
	b = slices.Clone(dg)
	copy(b[dc+32:], f64(-1))
	check("decay Σw² negative", b)
	if _, err := testTypes.Restore(dg); err != nil {
		t.Fatal(err)
	}
	if _, err := testTypes.Restore(good); err != nil {
		t.Fatal(err)
	}
	var mam MAM
	if err := mam.UnmarshalBinary(good); !errors.Is(err, ErrFormat) {
		t.Fatalf("MAM.UnmarshalBinary(omam): %v", err)
	}
}

func FuzzOMAMRestore(f *testing.F) {
	for _, spec := range omamSpecs {
		o := newOMAM(f, 3, spec)
		x, y := omamData(9, 70, 3, spec.Levels)
		for i := range x {
			o.Observe(x[i], y[i], true)
		}
		b, _ := o.MarshalBinary()
		f.Add(b)
		f.Add(asVersion1(f, b, OMAMName, func() legacySpec { // the legacy path
			_, s := legacySpecOf(f, Spec{Type: OMAMName, Dim: 3, Params: &spec})
			return s
		}()))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := fuzzRestore(t, b, true)
		if m == nil {
			return
		}
		if o, ok := m.(*OMAM); ok {
			o.Observe(make([]float64, m.Dim()), 1, true)
		}
	})
}
