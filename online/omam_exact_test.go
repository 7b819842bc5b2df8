package online

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"testing"
)

func newExactOMAM(t testing.TB, dim int, p OMAMParams) *ExactOMAM {
	t.Helper()
	o, err := NewExactOMAM(dim, p)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// omamExactKernels are the exact kernels of the tests, with a direct
// evaluation independent of kernels.go.
var omamExactKernels = []struct {
	k    KernelSpec
	eval func(a, b []float64) float64
}{
	{KernelSpec{Type: KernelRBF, Gamma: 0.4}, func(a, b []float64) float64 { return math.Exp(-0.4 * sqDistDirect(a, b)) }},
	{KernelSpec{Type: KernelLaplacian, Gamma: 0.3}, func(a, b []float64) float64 { return math.Exp(-0.3 * math.Sqrt(sqDistDirect(a, b))) }},
	{KernelSpec{Type: KernelLinear}, cosine},
	{KernelSpec{Type: KernelPolynomial, Degree: 2, Coef0: 1}, func(a, b []float64) float64 {
		var s float64
		for i := range a {
			s += a[i] * b[i]
		}
		return (s + 1) * (s + 1)
	}},
}

func sqDistDirect(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += (a[i] - b[i]) * (a[i] - b[i])
	}
	return s
}

// omamDirect returns the raw and normalised exact-kernel oMAM scores of z
// over the examples (xs, ys), straight from docs/math.md §5:
// c_i = Σ_j sign(y_i − y_j), raw Σ c_i K(x_i, z)/sqrt(Σ_ij c_i c_j K(x_i, x_j)),
// normalised Σ c_i K(x_i, z)/(n Σ_i K(x_i, z)).
func omamDirect(K func(a, b []float64) float64, xs [][]float64, ys []float64, z []float64) (raw, norm float64) {
	n := len(xs)
	c := make([]float64, n)
	for a := range n {
		for b := range n {
			c[a] += omamSign(ys[a] - ys[b])
		}
	}
	var ww, num, den float64
	for a := range n {
		for b := range n {
			ww += c[a] * c[b] * K(xs[a], xs[b])
		}
		k := K(xs[a], z)
		num += c[a] * k
		den += k
	}
	return num / math.Sqrt(ww), num / (float64(n) * den)
}

// TestExactOMAMBruteForce checks both scores of the exact mode against the
// direct formulas over the last Budget examples (1e-9), for every exact
// kernel, while the ring fills, wraps and wraps again, and the level-pair
// sums G against Σ K(x_i, x_j) per level pair.
func TestExactOMAMBruteForce(t *testing.T) {
	const d, n, m, B = 3, 160, 4, 37
	x, y := omamData(11, n, d, m)
	probe, _ := omamData(12, 15, d, m)
	for _, kc := range omamExactKernels {
		for _, norm := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/normalize=%v", kc.k.Type, norm), func(t *testing.T) {
				o := newExactOMAM(t, d, OMAMParams{Kernel: kc.k, Levels: m, Budget: B, Normalize: norm})
				for i := range x {
					o.Observe(x[i], y[i], true)
					T := i + 1
					if !(T <= 5 || T%11 == 0 || T == B || T == B+1 || T == 2*B) {
						continue
					}
					lo := max(0, T-B)
					xs, ys := x[lo:T], y[lo:T]
					// G against the direct level-pair sums.
					for a := range m {
						for b := a; b < m; b++ {
							var want float64
							for i := range xs {
								for j := range xs {
									if int(ys[i]) == a+1 && int(ys[j]) == b+1 {
										want += kc.eval(xs[i], xs[j])
									}
								}
							}
							if got := o.g[a*m+b] + o.gC[a*m+b]; !(math.Abs(got-want) <= 1e-9*max(1, math.Abs(want))) {
								t.Fatalf("after %d: G_%d%d = %v, want %v", T, a+1, b+1, got, want)
							}
						}
					}
					for _, z := range probe {
						raw, nw := omamDirect(kc.eval, xs, ys, z)
						want := raw
						if norm {
							want = nw
						}
						if math.IsNaN(want) { // one level: w = 0, no decision
							want = 0
						}
						p := o.Observe(z, 0, false)
						if !relClose(p.Score, want, 1e-9) {
							t.Fatalf("after %d: score %v, want %v", T, p.Score, want)
						}
						if p.HasBound || p.Delta != 0 || p.N != int64(len(xs)) {
							t.Fatalf("after %d: prediction %+v: want no bound and N = %d", T, p, len(xs))
						}
					}
					if o.Examples() != int64(T) || o.Stored() != len(xs) {
						t.Fatalf("after %d: Examples %d, Stored %d", T, o.Examples(), o.Stored())
					}
				}
			})
		}
	}
}

// TestExactOMAMLongRun: after 40 000 events through a budget of 50 (800
// wraps) the scores still match the direct formulas over the last 50.
func TestExactOMAMLongRun(t *testing.T) {
	const d, n, m, B = 3, 40000, 5, 50
	x, y := omamData(13, n, d, m)
	probe, _ := omamData(14, 10, d, m)
	kc := omamExactKernels[0]
	o := newExactOMAM(t, d, OMAMParams{Kernel: kc.k, Levels: m, Budget: B})
	for i := range x {
		o.Observe(x[i], y[i], true)
	}
	for _, z := range probe {
		raw, _ := omamDirect(kc.eval, x[n-B:], y[n-B:], z)
		if p := o.Observe(z, 0, false); !relClose(p.Score, raw, 1e-9) {
			t.Fatalf("score %v, want %v", p.Score, raw)
		}
	}
}

// TestExactOMAMPeaked: with a very peaked rbf kernel every K(x_i, z)
// underflows; the normalised score is still the Nadaraya–Watson estimate,
// computed with the shift by the smallest distance, and tends to the
// nearest example's c/n.
func TestExactOMAMPeaked(t *testing.T) {
	const d, n, m, gamma = 4, 60, 3, 1e5
	x, y := omamData(15, n, d, m)
	probe, _ := omamData(16, 10, d, m)
	o := newExactOMAM(t, d, OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: gamma}, Levels: m, Budget: 100, Normalize: true})
	raw := newExactOMAM(t, d, OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: gamma}, Levels: m, Budget: 100})
	for i := range x {
		o.Observe(x[i], y[i], true)
		raw.Observe(x[i], y[i], true)
	}
	for _, z := range probe {
		dist := make([]float64, n)
		mn := math.Inf(1)
		for i := range x {
			dist[i] = sqDistDirect(x[i], z)
			mn = min(mn, dist[i])
		}
		if math.Exp(-gamma*mn) != 0 {
			t.Fatalf("probe not far enough: K = %v", math.Exp(-gamma*mn))
		}
		var num, den float64
		for i := range x {
			var c float64
			for j := range x {
				c += omamSign(y[i] - y[j])
			}
			k := math.Exp(-gamma * (dist[i] - mn))
			num += c * k
			den += k
		}
		want := num / (n * den)
		if p := o.Observe(z, 0, false); !relClose(p.Score, want, 1e-9) || want == 0 {
			t.Fatalf("score %v, want %v", p.Score, want)
		}
		if p := raw.Observe(z, 0, false); p.Score != 0 || math.Signbit(p.Score) {
			t.Fatalf("raw score %v: want +0 where exp(−γ·min dist) underflows", p.Score)
		}
	}
}

func TestExactOMAMEmptyAndNonFinite(t *testing.T) {
	for _, norm := range []bool{false, true} {
		o := newExactOMAM(t, 3, OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1}, Levels: 3, Budget: 10, Normalize: norm})
		if p := o.Observe([]float64{1, 2, 3}, 2, true); p.Score != 0 || p.Label != 0 || p.N != 0 {
			t.Fatalf("empty model: %+v", p)
		}
		p := o.Observe([]float64{1, math.NaN(), 3}, 3, true)
		if p.Score != 0 || p.Label != 0 || o.Examples() != 1 || o.Stored() != 1 {
			t.Fatalf("NaN input: %+v, examples %d (want not learned)", p, o.Examples())
		}
		if p = o.Observe([]float64{1, 2, 3}, 0, false); p.Score != 0 || math.Signbit(p.Score) || p.N != 1 {
			t.Fatalf("one level seen: %+v, want score +0", p)
		}
		for name, f := range map[string]func(){
			"level 0":   func() { o.Observe([]float64{1, 2, 3}, 0, true) },
			"level 4":   func() { o.Observe([]float64{1, 2, 3}, 4, true) },
			"level 1.5": func() { o.Observe([]float64{1, 2, 3}, 1.5, true) },
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
	}
	e := newExactOMAM(t, 1, OMAMParams{Kernel: KernelSpec{Type: KernelLinear}, Levels: 4, Budget: 5, Edges: []float64{15.3, 19.7, 22.7}})
	for v, want := range map[float64]float64{-100: 1, 15.3: 2, 19.69: 2, 22.7: 4} {
		if got, ok := e.Label(v); !ok || got != want {
			t.Errorf("edges: Label(%v) = %v, %v; want %v", v, got, ok, want)
		}
	}
}

// TestExactOMAMThresholds: the shared threshold code, driven by the exact
// mode: no level before the first fit, then levels whose frequencies on the
// buffer match the observed ones.
func TestExactOMAMThresholds(t *testing.T) {
	const m = 5
	x, y := omamData(17, 1500, 4, m)
	o := newExactOMAM(t, 4, OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5}, Levels: m, Budget: 200, Normalize: true})
	for i := range x {
		p := o.Observe(x[i], y[i], true)
		if (i < omamRefitEvery) != (p.Label == 0) || p.Label > m {
			t.Fatalf("event %d: label %d", i, p.Label)
		}
		if (i+1)%omamRefitEvery != 0 {
			continue
		}
		th, ok := o.Thresholds(nil)
		if !ok || len(th) != m-1 || !slices.IsSorted(th) {
			t.Fatalf("event %d: thresholds %v, %v", i, th, ok)
		}
		var pred, obs [m]int
		for j := max(0, i+1-omamThresholdBuffer); j <= i; j++ {
			pred[o.levelIndex(o.bufScore[j%omamThresholdBuffer])]++
			obs[int(y[j])-1]++
		}
		if pred != obs {
			t.Fatalf("event %d: predicted level counts %v, observed %v", i, pred, obs)
		}
	}
}

func TestExactOMAMSpecValidate(t *testing.T) {
	const dim = 3
	ok := OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1}, Levels: 5, Budget: 100}
	tests := []struct {
		name  string
		edit  func(*OMAMParams)
		field string // "" = valid
	}{
		{"valid", func(*OMAMParams) {}, ""},
		{"valid laplacian, normalised, edges", func(p *OMAMParams) {
			p.Kernel.Type, p.Normalize, p.Edges = KernelLaplacian, true, []float64{1, 2, 3, 4}
		}, ""},
		{"valid linear", func(p *OMAMParams) { p.Kernel = KernelSpec{Type: KernelLinear} }, ""},
		{"valid polynomial", func(p *OMAMParams) { p.Kernel = KernelSpec{Type: KernelPolynomial, Degree: 3, Coef0: 1} }, ""},
		{"levels at the limit", func(p *OMAMParams) { p.Levels = omamExactMaxLevels }, ""},
		{"features", func(p *OMAMParams) { p.Kernel.Features = 64 }, "kernel.features"},
		{"seed", func(p *OMAMParams) { p.Kernel.Seed = 3 }, "kernel.seed"},
		{"gamma", func(p *OMAMParams) { p.Kernel.Gamma = 0 }, "kernel.gamma"},
		{"degree with rbf", func(p *OMAMParams) { p.Kernel.Degree = 2 }, "kernel.degree"},
		{"window", func(p *OMAMParams) { p.Window.Events = 10 }, "budget"},
		{"half-life", func(p *OMAMParams) { p.Decay.HalfLife = 10 }, "budget"},
		{"levels 1", func(p *OMAMParams) { p.Levels = 1 }, "levels"},
		{"levels too many", func(p *OMAMParams) { p.Levels = omamExactMaxLevels + 1 }, "levels"},
		{"edges count", func(p *OMAMParams) { p.Edges = []float64{1, 2} }, "edges"},
		{"budget negative", func(p *OMAMParams) { p.Budget = -1 }, "budget"},
		{"budget huge", func(p *OMAMParams) { p.Budget = maxBudgetFloats }, "budget"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			tc.edit(&p)
			for _, std := range []bool{false, true} {
				m, err := testTypes.New(Spec{Type: OMAMName, Dim: dim, Standardize: std, Params: &p})
				if tc.field == "" {
					if err != nil || m == nil || m.Type() != OMAMName {
						t.Fatalf("New: %v, %v", m, err)
					}
					inner := m
					if w, ok := m.(*Standardized); ok == std && ok {
						inner = w.Inner()
					} else if ok != std {
						t.Fatalf("New with standardize %v: %T", std, m)
					}
					if _, ok := inner.(*ExactOMAM); !ok {
						t.Fatalf("New: %T, want *ExactOMAM", inner)
					}
					continue
				}
				var se *SpecError
				if !errors.As(err, &se) || se.Field != tc.field || !errors.Is(err, ErrSpec) || m != nil {
					t.Fatalf("New: error %v, want a *SpecError for %q", err, tc.field)
				}
			}
			if p.Budget > 0 {
				o, err := NewExactOMAM(dim, p)
				if (err == nil) != (tc.field == "") || (err == nil) != (o != nil) {
					t.Fatalf("NewExactOMAM: %v", err)
				}
			}
		})
	}
	if _, err := NewOMAM(dim, ok); !errors.Is(err, ErrSpec) {
		t.Errorf("NewOMAM with budget: %v", err)
	}
	p := ok
	p.Budget = 0
	if _, err := NewExactOMAM(dim, p); !errors.Is(err, ErrSpec) {
		t.Errorf("NewExactOMAM without budget: %v", err)
	}
	if _, err := testTypes.New(Spec{Type: legacyTagExactOMAM, Dim: dim, Params: &ok}); !errors.Is(err, ErrSpec) {
		t.Errorf("New(type %q): %v, want a spec error", legacyTagExactOMAM, err)
	}
}

// TestTypes: the registry lists the configurable model types only; the
// legacy encoding tags of the exact kernel modes are not types, but
// Restore still reads version-1 encodings written under them.
func TestTypes(t *testing.T) {
	got := testTypes.Names()
	if want := []string{MAMName, OMAMName, LogisticName, LDAName}; !slices.Equal(got, want) {
		t.Errorf("Names() = %v, want %v", got, want)
	}
	for _, tag := range []string{legacyTagExactMAM, legacyTagExactOMAM, standardizedTag} {
		if slices.Contains(got, tag) || testTypes.Lookup(tag) != nil {
			t.Errorf("the encoding tag %q is listed as a type", tag)
		}
		if _, err := testTypes.Type(tag); !errors.Is(err, ErrSpec) {
			t.Errorf("Type(%q): %v", tag, err)
		}
	}
	for _, name := range got {
		typ := testTypes.Lookup(name)
		if typ == nil || typ.Name() != name || typ.Doc() == "" {
			t.Fatalf("Lookup(%q) = %v", name, typ)
		}
		if p := typ.NewParams(); p == nil || reflect.TypeOf(p).Elem() != typ.ParamsType() {
			t.Errorf("%s: NewParams %T, parameters %v", name, p, typ.ParamsType())
		}
	}
	if _, err := NewRegistry(MAMType(), MAMType()); err == nil {
		t.Error("a type registered twice")
	}
	// Version-1 encodings of the exact modes, under their tags.
	x, bin, lev := compareData(6, 30)
	em := newExact(t, KernelSpec{Type: KernelRBF, Gamma: 0.5}, 3, 10, true)
	eo := newExactOMAM(t, 3, OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5}, Levels: 3, Budget: 10})
	for i := range x {
		em.Observe(x[i], bin[i], true)
		eo.Observe(x[i], lev[i], true)
	}
	for _, tc := range []struct {
		m   Model
		tag string
		s   legacySpec
	}{
		{em, legacyTagExactMAM, legacyMAMSpec(em, nil)},
		{eo, legacyTagExactOMAM, legacySpec{Dim: 3, Kernel: eo.Params().Kernel, Levels: 3, Budget: 10}},
	} {
		good, _ := tc.m.MarshalBinary()
		v1 := asVersion1(t, good, tc.tag, tc.s)
		if typ, err := PeekType(v1); err != nil || typ != tc.tag {
			t.Fatalf("PeekType: %q, %v", typ, err)
		}
		r, err := testTypes.Restore(v1)
		if err != nil {
			t.Fatalf("%s: %v", tc.tag, err)
		}
		if reflect.TypeOf(r) != reflect.TypeOf(tc.m) {
			t.Fatalf("%s: restored %T", tc.tag, r)
		}
		if enc, _ := r.MarshalBinary(); !bytes.Equal(enc, good) {
			t.Fatalf("%s: restored state differs", tc.tag)
		}
		// Under the random-feature tag, the exact state is refused.
		if _, err := testTypes.Restore(asVersion1(t, good, tc.m.Type(), tc.s)); !errors.Is(err, ErrFormat) {
			t.Errorf("%s state under tag %q: %v", tc.tag, tc.m.Type(), err)
		}
	}
}

func TestExactOMAMObserveDoesNotAllocate(t *testing.T) {
	for _, spec := range []OMAMParams{
		{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.2}, Levels: 5, Budget: 100, Normalize: true},
		{Kernel: KernelSpec{Type: KernelLinear}, Levels: 5, Budget: 100},
		{Kernel: KernelSpec{Type: KernelPolynomial, Degree: 2, Coef0: 1}, Levels: 3, Budget: 30},
	} {
		o := newExactOMAM(t, 8, spec)
		x, y := omamData(6, 1024, 8, spec.Levels)
		i := 0
		if a := testing.AllocsPerRun(2000, func() { // covers refits, evictions, wraps
			o.Observe(x[i&1023], y[i&1023], true)
			o.Observe(x[(i+7)&1023], 0, false)
			i++
		}); a != 0 {
			t.Errorf("%+v: %v allocs per Observe pair, want 0", spec, a)
		}
	}
}

// omamExactSpecs are the specs of the codec tests.
var omamExactSpecs = []Spec{
	{Type: OMAMName, Dim: 3, Params: &OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 0.5}, Levels: 5, Budget: 40, Normalize: true}},
	{Type: OMAMName, Dim: 3, Params: &OMAMParams{Kernel: KernelSpec{Type: KernelLaplacian, Gamma: 0.3}, Levels: 3, Budget: 500}},
	{Type: OMAMName, Dim: 3, Params: &OMAMParams{Kernel: KernelSpec{Type: KernelLinear}, Levels: 4, Budget: 64, Edges: []float64{-1, 0, 1}}},
	{Type: OMAMName, Dim: 3, Params: &OMAMParams{Kernel: KernelSpec{Type: KernelPolynomial, Degree: 2, Coef0: 0.5}, Levels: 2, Budget: 25, Normalize: true}},
	{Type: OMAMName, Dim: 3, Params: &OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 2}, Levels: 4, Budget: 30}, Standardize: true},
}

// specLevels returns the levels of an omam spec.
func specLevels(s Spec) int { return s.Params.(*OMAMParams).Levels }

// TestExactOMAMRoundTrip restores models at several points (empty, ring
// filling, before and after the first fit, ring wrapped) through Restore
// and checks identical predictions, the same encoding after further
// learning, and StateClose at rtol 0.
func TestExactOMAMRoundTrip(t *testing.T) {
	for _, spec := range omamExactSpecs {
		x, y := omamData(7, 400, 3, specLevels(spec))
		for _, cut := range []int{0, 10, 70, 300} {
			o, err := testTypes.New(spec)
			if err != nil {
				t.Fatal(err)
			}
			for i := range cut {
				o.Observe(x[i], y[i], true)
			}
			b, err := o.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			r, err := testTypes.Restore(b)
			if err != nil {
				t.Fatalf("%+v at %d: %v", spec, cut, err)
			}
			if reflect.TypeOf(r) != reflect.TypeOf(o) || r.Type() != OMAMName || r.Dim() != spec.Dim {
				t.Fatalf("restored %T (type %q, dim %d), want %T", r, r.Type(), r.Dim(), o)
			}
			ri, _ := Unwrap[*ExactOMAM](r)
			if ri == nil || !reflect.DeepEqual(ri.Params(), *spec.Params.(*OMAMParams)) {
				t.Fatalf("parameters %+v, want %+v", ri.Params(), spec.Params)
			}
			if err := StateClose(o, r, 0); err != nil {
				t.Fatalf("%+v, cut %d: restored state: %v", spec, cut, err)
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
			if e, ok := o.(*ExactOMAM); ok {
				if a, _ := e.AppendBinary([]byte("xy")); !bytes.Equal(a[2:], b1) {
					t.Fatal("AppendBinary differs from MarshalBinary")
				}
			}
		}
	}
}

func TestExactOMAMUnmarshalErrors(t *testing.T) {
	const d, m, B = 2, 3, 5
	o := newExactOMAM(t, d, OMAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1}, Levels: m, Budget: B})
	x, y := omamData(8, 80, d, m)
	for i := range x {
		o.Observe(x[i], y[i], true)
	}
	good, _ := o.MarshalBinary()
	target := newExactOMAM(t, 1, OMAMParams{Kernel: KernelSpec{Type: KernelLinear}, Levels: 2, Budget: 3})
	target.Observe([]float64{1}, 2, true)
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
	hdr := 4 + 2 + 1 + len(OMAMName) // magic, version, type
	st := envelopeEnd(t, good)
	gOff := st + 16
	slots := gOff + 8*m*(m+1)
	slot := 12 + 16*m + 8*d
	buf := slots + B*slot
	corrupt := func(name string, off int, v []byte) {
		t.Helper()
		b := slices.Clone(good)
		copy(b[off:], v)
		check(name, b)
	}
	f64 := func(v float64) []byte { return f64Bytes([]float64{v}) }
	corrupt("type", hdr-len(OMAMName), []byte("OMAM"))
	corrupt("dim", st-4, []byte{d + 1})
	params := func(name string, f func(p *OMAMParams)) {
		t.Helper()
		p := o.Params()
		f(&p)
		check(name, withHeader(t, good, OMAMName, &p, d))
	}
	params("budget 0", func(p *OMAMParams) { p.Budget = 0 })
	params("budget other", func(p *OMAMParams) { p.Budget = B + 1 })
	params("levels in parameters", func(p *OMAMParams) { p.Levels = m + 1 })
	params("kernel in parameters", func(p *OMAMParams) { p.Kernel = KernelSpec{Type: KernelLinear} })
	params("features in parameters", func(p *OMAMParams) { p.Kernel.Features = 4 })
	check("parameters of another type", withHeader(t, good, OMAMName, &MAMParams{Kernel: o.Params().Kernel, Delta: 0.05, Budget: B}, d))
	// Version 1: another type's fields, or the random-feature tag.
	v1 := legacySpec{Dim: d, Kernel: o.Params().Kernel, Levels: m, Budget: B}
	check("version 1 random-feature tag", asVersion1(t, good, OMAMName, v1))
	check("version 1 learning rate", asVersion1(t, good, legacyTagExactOMAM, func() legacySpec { s := v1; s.LearningRate = 0.1; return s }()))
	check("version 1 budget", asVersion1(t, good, legacyTagExactOMAM, func() legacySpec { s := v1; s.Budget = B + 1; return s }()))
	if r, err := testTypes.Restore(asVersion1(t, good, legacyTagExactOMAM, v1)); err != nil {
		t.Fatalf("version 1: %v", err)
	} else if enc, _ := r.MarshalBinary(); !bytes.Equal(enc, good) {
		t.Fatal("version 1: restored state differs")
	}
	corrupt("n below count", st, []byte{2, 0, 0, 0, 0, 0, 0, 0})
	corrupt("count", st+8, []byte{4})
	corrupt("head", st+12, []byte{B})
	corrupt("G NaN", gOff, f64(math.NaN()))
	corrupt("G off", gOff, f64(o.g[0]+1))
	corrupt("G compensation", gOff+8, f64(0.5))
	corrupt("slot level", slots, []byte{m})
	corrupt("slot level moved", slots, []byte{byte((o.lv[0] + 1) % m)})
	corrupt("slot K(x, x)", slots+4, f64(0.5))
	corrupt("slot kernel sum", slots+12, f64(-1))
	corrupt("slot kernel sum large", slots+12, f64(B+1))
	corrupt("slot input", slots+12+16*m, f64(math.Inf(1)))
	corrupt("buffer fill", buf, []byte{3})
	corrupt("buffer score", buf+4, f64(math.NaN()))
	corrupt("buffer level", buf+12, []byte{m})
	fit := len(good) - 8*(m-1) - 1
	corrupt("fitted flag", fit, []byte{2})
	corrupt("fitted off", fit, []byte{0})
	corrupt("thresholds order", fit+1, f64(1e9))
	if _, err := testTypes.Restore(good); err != nil {
		t.Fatal(err)
	}
	var om OMAM
	if err := om.UnmarshalBinary(good); !errors.Is(err, ErrFormat) {
		t.Fatalf("OMAM.UnmarshalBinary(omam_exact): %v", err)
	}
	var em ExactMAM
	if err := em.UnmarshalBinary(good); !errors.Is(err, ErrFormat) {
		t.Fatalf("ExactMAM.UnmarshalBinary(omam_exact): %v", err)
	}
}

func FuzzExactOMAMRestore(f *testing.F) {
	for _, spec := range omamExactSpecs {
		o := mustNew(f, spec)
		x, y := omamData(9, 70, 3, specLevels(spec))
		for i := range x {
			o.Observe(x[i], y[i], true)
		}
		b, _ := o.MarshalBinary()
		f.Add(b)
		if spec.Standardize { // the legacy path
			f.Add(stdAsVersion1(f, b, spec, nil))
		} else {
			tag, s := legacySpecOf(f, spec)
			f.Add(asVersion1(f, b, tag, s))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// A valid spec may ask for a budget of up to 2²⁴ floats (128 MiB,
		// allocated on restore as the spec demands): skip the large ones,
		// which only slow the fuzzer down.
		if encodedBudget(b) > 4096 {
			return
		}
		m := fuzzRestore(t, b, true)
		if m == nil {
			return
		}
		m.Observe(make([]float64, m.Dim()), 1, true)
	})
}
