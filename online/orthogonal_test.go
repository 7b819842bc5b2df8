package online

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/streamer/streamer/online/codec"
)

// orthoCases are the shapes of the construction's tests: D a multiple of
// d, not one, D < d, d = 1, both kernels.
var orthoCases = []struct {
	typ  string
	d, D int
}{
	{KernelRBF, 8, 8},
	{KernelRBF, 8, 20},
	{KernelRBF, 8, 3},
	{KernelRBF, 1, 5},
	{KernelRBF, 30, 100},
	{KernelRBF, 64, 128},
	{KernelRBF, 1000, 4},
	{KernelLaplacian, 8, 20},
	{KernelLaplacian, 13, 64},
	{KernelLaplacian, 1, 3},
	{KernelLaplacian, 5, 2},
}

// TestOrthogonalDirections: within each block the directions are
// orthonormal to 1e-12, and the map's frequencies are those directions
// scaled by s_i·sqrt(2γ) (rbf) or s_i·γ (laplacian).
func TestOrthogonalDirections(t *testing.T) {
	for _, c := range orthoCases {
		t.Run(fmt.Sprintf("%s/d=%d/D=%d", c.typ, c.d, c.D), func(t *testing.T) {
			k := KernelSpec{Type: c.typ, Gamma: 0.7, Features: c.D, Seed: 11, Orthogonal: true}
			q := make([]float64, c.D*c.d)
			scales := orthoDirections(q, k, c.d)
			row := func(v []float64, i int) []float64 { return v[i*c.d : (i+1)*c.d] }
			var worst float64
			for i := range c.D {
				for j := i - i%c.d; j <= i; j++ { // the block's rows up to i
					want := 0.0
					if j == i {
						want = 1
					}
					worst = max(worst, math.Abs(dot(row(q, i), row(q, j))-want))
				}
			}
			if worst > 1e-12 {
				t.Errorf("directions: max |<q_i, q_j> − δ_ij| within a block = %g > 1e-12", worst)
			}
			if c.D > c.d && c.d > 1 { // rows of different blocks are independent, not orthogonal
				if v := math.Abs(dot(row(q, 0), row(q, c.d))); v < 1e-6 {
					t.Errorf("rows 0 and %d (two blocks) are orthogonal: %g", c.d, v)
				}
			}
			m, err := NewFeatureMap(k, c.d)
			if err != nil {
				t.Fatal(err)
			}
			// The map's frequencies are the construction's rounded to
			// float32; the construction is checked.
			raw := rawOmega(k, c.d)
			for i, v := range raw {
				if m.omega[i] != float64(float32(v)) {
					t.Fatalf("ω[%d] = %v, the construction gives %v", i, m.omega[i], v)
				}
			}
			f := k.Gamma
			if c.typ == KernelRBF {
				f = math.Sqrt(2 * k.Gamma)
			}
			for i, s := range scales {
				if !(s > 0) || math.IsInf(s, 0) {
					t.Fatalf("row %d: factor %v", i, s)
				}
				w := row(raw, i)
				n := math.Sqrt(dot(w, w))
				if math.Abs(n/(s*f)-1) > 1e-14 {
					t.Errorf("row %d: ‖ω‖ = %v, want %v", i, n, s*f)
				}
				for j, v := range w {
					if math.Abs(v/n-row(q, i)[j]) > 1e-14 {
						t.Fatalf("row %d: ω/‖ω‖ differs from q at %d: %v vs %v", i, j, v/n, row(q, i)[j])
					}
				}
			}
		})
	}
}

// TestOrthogonalNorms: the row norms have the law of the independent
// map's: rbf ‖ω‖²/(2γ) is chi-square with d degrees of freedom (mean d,
// variance 2d); laplacian ‖ω‖/γ = ρ/|u| has the median of the iid map's.
// With D = 8192 the tolerances are ten standard errors or more.
func TestOrthogonalNorms(t *testing.T) {
	const d, D, gamma = 8, 8192, 0.3
	k := KernelSpec{Type: KernelRBF, Gamma: gamma, Features: D, Seed: 5, Orthogonal: true}
	m, err := NewFeatureMap(k, d)
	if err != nil {
		t.Fatal(err)
	}
	var s1, s2 float64
	for i := range D {
		w := m.omega[i*d : (i+1)*d]
		v := dot(w, w) / (2 * gamma)
		s1 += v
		s2 += v * v
	}
	mean := s1 / D
	variance := s2/D - mean*mean
	t.Logf("rbf: ‖ω‖²/(2γ): mean %.3f (want %d), variance %.3f (want %d)", mean, d, variance, 2*d)
	if math.Abs(mean-d) > 0.5 { // standard error 0.044
		t.Errorf("rbf: mean ‖ω‖²/(2γ) = %v, want %d ± 0.5", mean, d)
	}
	if math.Abs(variance-2*d) > 3 { // standard error about 0.33
		t.Errorf("rbf: variance of ‖ω‖²/(2γ) = %v, want %d ± 3", variance, 2*d)
	}

	median := func(orth bool) float64 {
		k := KernelSpec{Type: KernelLaplacian, Gamma: gamma, Features: D, Seed: 6, Orthogonal: orth}
		m, err := NewFeatureMap(k, d)
		if err != nil {
			t.Fatal(err)
		}
		n := make([]float64, D)
		for i := range n {
			w := m.omega[i*d : (i+1)*d]
			n[i] = math.Sqrt(dot(w, w)) / gamma
		}
		slices.Sort(n)
		return n[D/2]
	}
	iid, orth := median(false), median(true)
	t.Logf("laplacian: median ‖ω‖/γ: iid %.3f, orthogonal %.3f", iid, orth)
	if math.Abs(orth/iid-1) > 0.15 { // standard errors about 2% each
		t.Errorf("laplacian: median ‖ω‖/γ: orthogonal %v, iid %v", orth, iid)
	}
}

// omegaDigest is a digest of the frequencies' bits.
func omegaDigest(m *FeatureMap) string {
	h := sha256.New()
	for _, v := range m.omega {
		binary.Write(h, binary.LittleEndian, math.Float64bits(v))
	}
	return fmt.Sprintf("%x", h.Sum(nil)[:12])
}

// TestOrthogonalDeterministic: the map is a function of the spec: the same
// spec gives the same frequencies to the bit (pinned: the construction is
// part of the model format), another seed or the independent draw others,
// and a map with D rows is the first D rows of one with more (the draws
// go row by row).
func TestOrthogonalDeterministic(t *testing.T) {
	build := func(k KernelSpec, d int) *FeatureMap {
		t.Helper()
		m, err := NewFeatureMap(k, d)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	golden := map[string]string{
		KernelRBF:       "fc8620e58e1f483af6191f1f",
		KernelLaplacian: "624ca47f1fd8ea5f1779e041",
	}
	for _, typ := range []string{KernelRBF, KernelLaplacian} {
		const d = 6
		k := KernelSpec{Type: typ, Gamma: 0.5, Features: 16, Seed: 3, Orthogonal: true}
		a, b := build(k, d), build(k, d)
		if !slices.Equal(a.omega, b.omega) {
			t.Fatalf("%s: two maps of one spec differ", typ)
		}
		if !slices.Equal(a.omega, rawRounded(k, d)) {
			t.Fatalf("%s: the frequencies are not the construction's rounded to float32", typ)
		}
		if got := omegaDigest(&FeatureMap{omega: rawOmega(k, d)}); got != golden[typ] {
			t.Errorf("%s: frequencies' digest %s, want %s: the construction (part of the model format) changed", typ, got, golden[typ])
		}
		other := k
		other.Seed++
		iid := k
		iid.Orthogonal = false
		for _, o := range []KernelSpec{other, iid} {
			if m := build(o, d); slices.Equal(m.omega, a.omega) || m.omega[0] == a.omega[0] {
				t.Errorf("%s: %+v gives the frequencies of %+v", typ, o, k)
			}
		}
		for _, D := range []int{1, 5, 6, 7, 15} {
			short := k
			short.Features = D
			if m := build(short, d); !slices.Equal(m.omega, a.omega[:D*d]) {
				t.Errorf("%s: the map with D = %d is not the first rows of the one with D = %d", typ, D, k.Features)
			}
		}
	}
}

// TestOrthogonalKernelMean: the orthogonal map is an unbiased estimate of
// the kernel, with a smaller error than the independent one for a wide rbf
// kernel in dimension 16 (docs/math.md §2a: the variance drops several
// times there). Averages over 40 seeds: deterministic, with margins far
// beyond the seeds' spread.
func TestOrthogonalKernelMean(t *testing.T) {
	const d, D, seeds = 16, 64, 40
	r := rand.New(rand.NewPCG(1, 2))
	x, y := make([]float64, d), make([]float64, d)
	for j := range x {
		x[j] = r.NormFloat64()
		y[j] = x[j] + 0.5*r.NormFloat64()
	}
	for _, typ := range []string{KernelRBF, KernelLaplacian} {
		gamma := 0.1 / d
		if typ == KernelLaplacian {
			gamma = 0.1
		}
		kern, err := NewKernel(KernelSpec{Type: typ, Gamma: gamma}, d)
		if err != nil {
			t.Fatal(err)
		}
		want := kern.Eval(x, y)
		var mean, mse [2]float64
		for o, orth := range []bool{false, true} {
			for s := range uint64(seeds) {
				m, err := NewFeatureMap(KernelSpec{Type: typ, Gamma: gamma, Features: D, Seed: s + 1, Orthogonal: orth}, d)
				if err != nil {
					t.Fatal(err)
				}
				a, b := make([]float64, m.Dim()), make([]float64, m.Dim())
				m.Map(a, x)
				m.Map(b, y)
				e := dot(a, b) - want
				mean[o] += e / seeds
				mse[o] += e * e / seeds
			}
		}
		t.Logf("%s: K = %.4f; mean error iid %+.2g, orthogonal %+.2g; mean squared error iid %.3g, orthogonal %.3g",
			typ, want, mean[0], mean[1], mse[0], mse[1])
		// The standard error of the mean error is sqrt(mse/seeds) < 0.02.
		for o := range 2 {
			if math.Abs(mean[o]) > 5*math.Sqrt(mse[o]/seeds) {
				t.Errorf("%s: mean error %v over %d seeds: biased?", typ, mean[o], seeds)
			}
		}
		if typ == KernelRBF && !(mse[1] < 0.5*mse[0]) {
			t.Errorf("rbf: mean squared error orthogonal %v, iid %v: want less than half", mse[1], mse[0])
		}
	}
}

// TestOrthogonalSpec: kernel.orthogonal is for the random features of rbf
// and laplacian only.
func TestOrthogonalSpec(t *testing.T) {
	rbf := KernelSpec{Type: KernelRBF, Gamma: 1, Features: 16, Seed: 1, Orthogonal: true}
	tests := []struct {
		name  string
		p     Params
		field string // "" = valid
	}{
		{"mam rbf", &MAMParams{Kernel: rbf, Delta: 0.05}, ""},
		{"mam laplacian", &MAMParams{Kernel: KernelSpec{Type: KernelLaplacian, Gamma: 1, Features: 16, Seed: 1, Orthogonal: true}, Delta: 0.05}, ""},
		{"mam rbf gamma auto", &MAMParams{Kernel: KernelSpec{Type: KernelRBF, Features: 16, Seed: 1, Orthogonal: true}, Delta: 0.05}, ""},
		{"omam rbf", &OMAMParams{Kernel: rbf, Levels: 3}, ""},
		{"mam linear", &MAMParams{Kernel: KernelSpec{Type: KernelLinear, Orthogonal: true}, Delta: 0.05}, "kernel.orthogonal"},
		{"omam linear", &OMAMParams{Kernel: KernelSpec{Type: KernelLinear, Orthogonal: true}, Levels: 3}, "kernel.orthogonal"},
		{"mam exact rbf", &MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1, Orthogonal: true}, Delta: 0.05, Budget: 10}, "kernel.orthogonal"},
		{"mam exact polynomial", &MAMParams{Kernel: KernelSpec{Type: KernelPolynomial, Degree: 2, Coef0: 1, Orthogonal: true}, Delta: 0.05, Budget: 10}, "kernel.orthogonal"},
		{"omam exact laplacian", &OMAMParams{Kernel: KernelSpec{Type: KernelLaplacian, Gamma: 1, Orthogonal: true}, Levels: 3, Budget: 10}, "kernel.orthogonal"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			typ := MAMName
			if _, ok := tc.p.(*OMAMParams); ok {
				typ = OMAMName
			}
			m, err := testTypes.New(Spec{Type: typ, Dim: 3, Params: tc.p})
			if tc.field == "" {
				if err != nil || m == nil {
					t.Fatalf("New: %v", err)
				}
				return
			}
			var se *SpecError
			if !errors.As(err, &se) || se.Field != tc.field || !errors.Is(err, ErrSpec) || m != nil {
				t.Fatalf("New: error %v, want a *SpecError for %q", err, tc.field)
			}
			t.Log(err)
		})
	}
	// The construction's work D·d·min(D, d) is bounded (validation only:
	// the largest map allowed takes about 2 s to build).
	for _, c := range []struct {
		d, D int
		ok   bool
	}{{512, 8192, true}, {2048, 512, true}, {1024, 4096, false}, {4096, 4096, false}} {
		p := MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1, Features: c.D, Seed: 1, Orthogonal: true}, Delta: 0.05}
		err := p.Validate(c.d)
		var se *SpecError
		if c.ok != (err == nil) || (err != nil && (!errors.As(err, &se) || se.Field != "kernel.orthogonal")) {
			t.Errorf("d = %d, D = %d: %v", c.d, c.D, err)
		}
		p.Kernel.Orthogonal = false
		if err := p.Validate(c.d); err != nil {
			t.Errorf("d = %d, D = %d, independent: %v", c.d, c.D, err)
		}
	}
	if _, err := NewKernel(KernelSpec{Type: KernelRBF, Gamma: 1, Orthogonal: true}, 3); err == nil {
		t.Error("NewKernel accepts orthogonal")
	}

	// Complete keeps the key given and defaults it to false.
	p := DefaultMAMParams()
	p.Kernel.Orthogonal = true
	p.Complete(3, func(k string) bool { return k == "kernel.orthogonal" })
	if !p.Kernel.Orthogonal {
		t.Error("Complete dropped kernel.orthogonal given")
	}
	p.Complete(3, func(string) bool { return false })
	if p.Kernel.Orthogonal {
		t.Error("Complete: kernel.orthogonal not given is not false")
	}
}

// orthoModels are the configurations of the round-trip test.
func orthoModels() map[string]Spec {
	rbf := KernelSpec{Type: KernelRBF, Gamma: 0.2, Features: 24, Seed: 9, Orthogonal: true}
	lap := KernelSpec{Type: KernelLaplacian, Gamma: 0.3, Features: 20, Seed: 4, Orthogonal: true}
	auto := KernelSpec{Type: KernelRBF, Features: 16, Seed: 2, Orthogonal: true}
	return map[string]Spec{
		"mam rbf":                    {Type: MAMName, Dim: 5, Params: &MAMParams{Kernel: rbf, Balance: true, Delta: 0.05}},
		"mam laplacian plain window": {Type: MAMName, Dim: 5, Params: &MAMParams{Kernel: lap, Delta: 0.05, Window: Window{Events: 40}}},
		"mam gamma auto":             {Type: MAMName, Dim: 5, Params: &MAMParams{Kernel: auto, Balance: true, Delta: 0.05, Bandwidths: 3}},
		"omam rbf":                   {Type: OMAMName, Dim: 5, Params: &OMAMParams{Kernel: rbf, Levels: 3, Normalize: true}},
	}
}

// orthoEvent returns a deterministic event i: input and label (−1/+1, or a
// level 1..3 for omam).
func orthoEvent(i int, dim int, ordinal bool) ([]float64, float64) {
	r := rand.New(rand.NewPCG(uint64(i), 77))
	x := make([]float64, dim)
	var s float64
	for j := range x {
		x[j] = r.NormFloat64()
		s += x[j] * float64(j%2*2-1)
	}
	if ordinal {
		return x, float64(1 + min(2, max(0, int(s+1.5))))
	}
	if s > 0 {
		return x, 1
	}
	return x, -1
}

// TestOrthogonalRoundTrip: an orthogonal model restores from its bytes to
// the same map and the same predictions, bit for bit, before and after
// more learning; its encoding names the flag, so that a state of the
// independent map has another configuration (a config with orthogonal true
// refuses it, as it refuses another seed) and does not restore into it.
func TestOrthogonalRoundTrip(t *testing.T) {
	for name, spec := range orthoModels() {
		t.Run(name, func(t *testing.T) {
			ordinal := spec.Type == OMAMName
			m, err := testTypes.New(spec)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 150 {
				x, y := orthoEvent(i, spec.Dim, ordinal)
				m.Observe(x, y, true)
			}
			b, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			r, err := testTypes.Restore(b)
			if err != nil {
				t.Fatal(err)
			}
			if rb, err := r.MarshalBinary(); err != nil || !bytes.Equal(rb, b) {
				t.Fatalf("re-encoding differs (%v)", err)
			}
			if fm, rfm := orthoMap(m), orthoMap(r); !fm.spec.Orthogonal || !slices.Equal(fm.omega, rfm.omega) {
				t.Fatalf("restored map differs from the original's (orthogonal %v)", fm.spec.Orthogonal)
			}
			// The independent map gives other scores: the flag matters.
			iidSpec := spec
			iidSpec.Params = cloneOrthoParams(spec.Params, false)
			iid, err := testTypes.New(iidSpec)
			if err != nil {
				t.Fatal(err)
			}
			for i := range 150 {
				x, y := orthoEvent(i, spec.Dim, ordinal)
				iid.Observe(x, y, true)
			}
			differ := false
			for i := 150; i < 300; i++ {
				x, y := orthoEvent(i, spec.Dim, ordinal)
				labelled := i%3 != 0
				p, q := m.Observe(x, y, labelled), r.Observe(x, y, labelled)
				if math.Float64bits(p.Score) != math.Float64bits(q.Score) || p.Label != q.Label ||
					math.Float64bits(p.MistakeBound) != math.Float64bits(q.MistakeBound) || p.N != q.N {
					t.Fatalf("event %d: original %+v, restored %+v", i, p, q)
				}
				if pi := iid.Observe(x, y, labelled); pi.Score != p.Score {
					differ = true
				}
			}
			if !differ {
				t.Error("the independent map scores as the orthogonal one")
			}

			// The independent state: another configuration, and the
			// orthogonal parameters are in the encoding.
			ib, err := iid.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			co, err1 := Configuration(b)
			ci, err2 := Configuration(ib)
			if err1 != nil || err2 != nil || co == ci {
				t.Errorf("configurations: orthogonal %q, independent %q (%v, %v)", co, ci, err1, err2)
			}
			if !bytes.Contains(b, []byte("orthogonal")) || bytes.Contains(ib, []byte("orthogonal")) {
				t.Error("the flag is not in the orthogonal encoding only")
			}
			// UnmarshalBinary into a model configured orthogonal takes the
			// encoding's parameters: the independent state stays
			// independent (the stream refuses it by its configuration).
			into, err := testTypes.New(spec)
			if err != nil {
				t.Fatal(err)
			}
			if err := into.UnmarshalBinary(ib); err != nil {
				t.Fatal(err)
			}
			if orthoMap(into).spec.Orthogonal {
				t.Error("an independent state restored as orthogonal")
			}
		})
	}
}

// orthoMap returns the feature map of a MAM or OMAM.
func orthoMap(m Model) *FeatureMap {
	switch v := m.(type) {
	case *MAM:
		return v.fm
	case *OMAM:
		return v.fm
	}
	panic(fmt.Sprintf("no feature map in %T", m))
}

// cloneOrthoParams copies MAM or OMAM parameters with Orthogonal set to orth.
func cloneOrthoParams(p Params, orth bool) Params {
	switch v := p.(type) {
	case *MAMParams:
		c := *v
		c.Kernel.Orthogonal = orth
		return &c
	case *OMAMParams:
		c := *v
		c.Kernel.Orthogonal = orth
		return &c
	}
	panic(fmt.Sprintf("%T", p))
}

// TestOrthogonalEncoding: orthogonal false adds nothing to the parameters'
// encoding (every existing model and fingerprint is unchanged); true adds
// the key at the end of the kernel's frame.
func TestOrthogonalEncoding(t *testing.T) {
	type before struct { // KernelSpec's keys before kernel.orthogonal
		Type     string  `yaml:"type"`
		Gamma    float64 `yaml:"gamma"`
		Features int     `yaml:"features"`
		Seed     uint64  `yaml:"seed"`
		Degree   int     `yaml:"degree"`
		Coef0    float64 `yaml:"coef0"`
	}
	k := KernelSpec{Type: KernelRBF, Gamma: 0.5, Features: 64, Seed: 7}
	old := codec.AppendParams(nil, before{Type: k.Type, Gamma: k.Gamma, Features: k.Features, Seed: k.Seed})
	if got := codec.AppendParams(nil, k); !bytes.Equal(got, old) {
		t.Errorf("orthogonal false changes the encoding:\n got %x\nwant %x", got, old)
	}
	k.Orthogonal = true
	got := codec.AppendParams(nil, k)
	want := append(slices.Clone(old), codec.AppendStr(nil, "orthogonal")...)
	want = append(want, 'b', 1)
	if !bytes.Equal(got, want) {
		t.Errorf("orthogonal true:\n got %x\nwant %x", got, want)
	}
}
