package online

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/streamer/streamer/online/internal/vmath"
)

func newExact(t testing.TB, k KernelSpec, dim, budget int, balance bool) *ExactMAM {
	t.Helper()
	m, err := testTypes.New(Spec{Type: MAMName, Dim: dim, Params: &MAMParams{Kernel: k, Balance: balance, Delta: 0.05, Budget: budget}})
	if err != nil {
		t.Fatal(err)
	}
	em, ok := m.(*ExactMAM)
	if !ok {
		t.Fatalf("New with budget %d returned %T", budget, m)
	}
	return em
}

var exactKernels = []struct {
	name string
	k    KernelSpec
}{
	{"linear", KernelSpec{Type: KernelLinear}},
	{"rbf", KernelSpec{Type: KernelRBF, Gamma: 0.3}},
	{"laplacian", KernelSpec{Type: KernelLaplacian, Gamma: 0.5}},
	{"polynomial", KernelSpec{Type: KernelPolynomial, Degree: 3, Coef0: 1}},
}

func TestKernelEval(t *testing.T) {
	x, z := []float64{1, 2, 2}, []float64{3, 0, 4} // ‖x‖ = 3, ‖z‖ = 5, <x,z> = 11, ‖x−z‖² = 4+4+4 = 12
	tests := []struct {
		k    KernelSpec
		want float64
	}{
		{KernelSpec{Type: KernelLinear}, 11.0 / 15},
		{KernelSpec{Type: KernelRBF, Gamma: 0.25}, math.Exp(-3)},
		{KernelSpec{Type: KernelLaplacian, Gamma: 0.5}, math.Exp(-0.5 * math.Sqrt(12))},
		{KernelSpec{Type: KernelPolynomial, Degree: 3, Coef0: 1}, 12 * 12 * 12},
		{KernelSpec{Type: KernelPolynomial, Degree: 1}, 11},
	}
	for _, tc := range tests {
		k, err := NewKernel(tc.k, 3)
		if err != nil {
			t.Fatal(err)
		}
		if got := k.Eval(x, z); !relClose(got, tc.want, 1e-15) {
			t.Errorf("%+v: K = %v, want %v", tc.k, got, tc.want)
		}
		if got := k.Eval(z, x); !relClose(got, tc.want, 1e-15) {
			t.Errorf("%+v: not symmetric", tc.k)
		}
		B, ok := k.Bound()
		if ok != (tc.k.Type != KernelPolynomial) || ok && B != 1 {
			t.Errorf("%+v: Bound() = %v, %v", tc.k, B, ok)
		}
	}
	lin, _ := NewKernel(KernelSpec{Type: KernelLinear}, 2)
	for _, c := range []struct{ x, z []float64 }{
		{[]float64{3e-200, 4e-200}, []float64{6e200, 8e200}},
		{[]float64{5e-324, 0}, []float64{1, 0}},
	} {
		if got := lin.Eval(c.x, c.z); math.Abs(got-1) > 1e-15 {
			t.Errorf("linear %v, %v: %v, want 1", c.x, c.z, got)
		}
	}
	if got := lin.Eval([]float64{0, 0}, []float64{1, 2}); got != 0 {
		t.Errorf("linear with 0: %v", got)
	}
}

func TestExpNeg(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var worst float64
	for i := range 200000 {
		x := r.Float64() * 708
		if i%2 == 0 {
			x = r.Float64() * 5
		}
		a, b := expNeg(x), math.Exp(-x)
		worst = max(worst, math.Abs(a-b)/b)
	}
	if worst > 1e-15 {
		t.Errorf("expNeg: worst relative error %g", worst)
	}
	t.Logf("expNeg: worst relative error %g over [0, 708]", worst)
	for _, x := range []float64{0, 1e-300, 1e-17, 709, 740, 745, 745.2, 746, 800, 1e300, math.Inf(1)} {
		if a, b := expNeg(x), math.Exp(-x); math.Abs(a-b) > 1e-15*b+5e-324 {
			t.Errorf("expNeg(%v) = %v, math.Exp: %v", x, a, b)
		}
	}
	if !math.IsNaN(expNeg(math.NaN())) {
		t.Error("expNeg(NaN)")
	}
}

// TestLaplacianMapApproximatesKernel checks the Cauchy random features
// against the exact Laplacian kernel at D = 4096: every error within a few
// 1/sqrt(D), and no bias (averaged over 8 independent maps; a wrong spectral
// density or scale shows up as a systematic error of order 0.1).
func TestLaplacianMapApproximatesKernel(t *testing.T) {
	const D, dim, trials, seeds = 4096, 6, 100, 8
	r := rand.New(rand.NewPCG(15, 16))
	for _, gamma := range []float64{0.1, 1, 5} {
		exact, _ := NewKernel(KernelSpec{Type: KernelLaplacian, Gamma: gamma}, dim)
		var worst, sum float64
		for seed := range uint64(seeds) {
			fm, err := NewFeatureMap(KernelSpec{Type: KernelLaplacian, Gamma: gamma, Features: D, Seed: seed}, dim)
			if err != nil {
				t.Fatal(err)
			}
			p, q := make([]float64, fm.Dim()), make([]float64, fm.Dim())
			x, z := make([]float64, dim), make([]float64, dim)
			for range trials {
				scale := 1 / (gamma * math.Sqrt(2*dim)) // typical γ‖x−x'‖ of order 1
				for i := range x {
					x[i] = r.NormFloat64() * scale
					z[i] = r.NormFloat64() * scale
				}
				if sq, ok := fm.Map(p, x); !ok || math.Abs(sq-1) > 1e-12 {
					t.Fatalf("‖φ‖² = %v, %v", sq, ok)
				}
				fm.Map(q, z)
				e := dot(p, q) - exact.Eval(x, z)
				worst = max(worst, math.Abs(e))
				sum += e
			}
		}
		if tol := 5 / math.Sqrt(D); worst > tol {
			t.Errorf("gamma %v: max |<φ(x),φ(x')> − K| = %v > %v", gamma, worst, tol)
		}
		bias := sum / (trials * seeds)
		if math.Abs(bias) > 0.5/math.Sqrt(D) {
			t.Errorf("gamma %v: mean error %v", gamma, bias)
		}
		t.Logf("gamma %v: max kernel error %.4f, mean %.5f (1/sqrt(D) = %.4f)", gamma, worst, bias, 1/math.Sqrt(D))
	}
}

// TestLaplacianMAM: the random-feature MAM accepts the laplacian kernel and
// its encoding round-trips.
func TestLaplacianMAM(t *testing.T) {
	m, err := NewMAM(3, MAMParams{Balance: true, Delta: 0.05,
		Kernel: KernelSpec{Type: KernelLaplacian, Gamma: 0.5, Features: 64, Seed: 2}})
	if err != nil {
		t.Fatal(err)
	}
	x, y := randomData(21, 100, 3, 0.4)
	for i := range x {
		m.Observe(x[i], y[i], true)
	}
	enc, _ := m.MarshalBinary()
	r, err := testTypes.Restore(enc)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.(*MAM); !ok {
		t.Fatalf("restored %T", r)
	}
	if p, q := m.Observe(x[0], 0, false), r.Observe(x[0], 0, false); p != q || !p.HasBound {
		t.Fatalf("%+v vs restored %+v", p, q)
	}
}

func TestExactSpecValidate(t *testing.T) {
	ok := MAMParams{Kernel: KernelSpec{Type: KernelRBF, Gamma: 1}, Delta: 0.05, Budget: 10}
	tests := []struct {
		name  string
		edit  func(*Spec, *MAMParams)
		field string // "" = valid
	}{
		{"valid rbf", func(*Spec, *MAMParams) {}, ""},
		{"valid laplacian", func(_ *Spec, p *MAMParams) { p.Kernel.Type = KernelLaplacian }, ""},
		{"valid linear", func(_ *Spec, p *MAMParams) { p.Kernel = KernelSpec{Type: KernelLinear} }, ""},
		{"valid polynomial", func(_ *Spec, p *MAMParams) { p.Kernel = KernelSpec{Type: KernelPolynomial, Degree: 2} }, ""},
		{"valid balanced", func(_ *Spec, p *MAMParams) { p.Balance = true }, ""},
		{"valid standardized", func(s *Spec, _ *MAMParams) { s.Standardize = true }, ""},
		{"seed", func(_ *Spec, p *MAMParams) { p.Kernel.Seed = 4 }, "kernel.seed"},
		{"budget negative", func(_ *Spec, p *MAMParams) { p.Budget = -1 }, "budget"},
		{"budget huge", func(_ *Spec, p *MAMParams) { p.Budget = maxBudgetFloats }, "budget"},
		{"window", func(_ *Spec, p *MAMParams) { p.Window.Events = 5 }, "budget"},
		{"half-life", func(_ *Spec, p *MAMParams) { p.Decay.HalfLife = 5 }, "budget"},
		{"delta", func(_ *Spec, p *MAMParams) { p.Delta = 0 }, "delta"},
		{"dim", func(s *Spec, _ *MAMParams) { s.Dim = 0 }, "dim"},
		{"features", func(_ *Spec, p *MAMParams) { p.Kernel.Features = 16 }, "kernel.features"},
		{"kernel missing", func(_ *Spec, p *MAMParams) { p.Kernel.Type = "" }, "kernel.type"},
		{"kernel unknown", func(_ *Spec, p *MAMParams) { p.Kernel.Type = "sigmoid" }, "kernel.type"},
		{"gamma 0", func(_ *Spec, p *MAMParams) { p.Kernel.Gamma = 0 }, "kernel.gamma"},
		{"gamma Inf", func(_ *Spec, p *MAMParams) { p.Kernel.Gamma = math.Inf(1) }, "kernel.gamma"},
		{"linear gamma", func(_ *Spec, p *MAMParams) { p.Kernel = KernelSpec{Type: KernelLinear, Gamma: 1} }, "kernel.gamma"},
		{"rbf degree", func(_ *Spec, p *MAMParams) { p.Kernel.Degree = 2 }, "kernel.degree"},
		{"rbf coef0", func(_ *Spec, p *MAMParams) { p.Kernel.Coef0 = 1 }, "kernel.coef0"},
		{"degree 0", func(_ *Spec, p *MAMParams) { p.Kernel = KernelSpec{Type: KernelPolynomial} }, "kernel.degree"},
		{"degree huge", func(_ *Spec, p *MAMParams) { p.Kernel = KernelSpec{Type: KernelPolynomial, Degree: maxDegree + 1} }, "kernel.degree"},
		{"coef0 negative", func(_ *Spec, p *MAMParams) { p.Kernel = KernelSpec{Type: KernelPolynomial, Degree: 2, Coef0: -1} }, "kernel.coef0"},
		{"coef0 NaN", func(_ *Spec, p *MAMParams) {
			p.Kernel = KernelSpec{Type: KernelPolynomial, Degree: 2, Coef0: math.NaN()}
		}, "kernel.coef0"},
		{"polynomial gamma", func(_ *Spec, p *MAMParams) { p.Kernel = KernelSpec{Type: KernelPolynomial, Degree: 2, Gamma: 1} }, "kernel.gamma"},
		// Without a budget: random-feature mode.
		{"polynomial without budget", func(_ *Spec, p *MAMParams) {
			p.Budget = 0
			p.Kernel = KernelSpec{Type: KernelPolynomial, Degree: 2}
		}, "kernel.type"},
		{"rbf without budget needs features", func(_ *Spec, p *MAMParams) { p.Budget = 0 }, "kernel.features"},
		{"laplacian random features", func(_ *Spec, p *MAMParams) {
			p.Budget = 0
			p.Kernel = KernelSpec{Type: KernelLaplacian, Gamma: 1, Features: 8}
		}, ""},
		{"laplacian features degree", func(_ *Spec, p *MAMParams) {
			p.Budget = 0
			p.Kernel = KernelSpec{Type: KernelLaplacian, Gamma: 1, Features: 8, Degree: 1}
		}, "kernel.degree"},
		{"encoding tag as type", func(s *Spec, _ *MAMParams) { s.Type = legacyTagExactMAM }, "type"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ok
			s := Spec{Type: MAMName, Dim: 3, Params: &p}
			tc.edit(&s, &p)
			m, err := testTypes.New(s)
			// The constructor of the mode, directly.
			var cm Model
			var cerr error
			if p.Budget > 0 {
				if em, err := NewExactMAM(s.Dim, p); err == nil {
					cm = em
				} else {
					cerr = err
				}
			} else {
				if rm, err := NewMAM(s.Dim, p); err == nil {
					cm = rm
				} else {
					cerr = err
				}
			}
			if tc.field == "" {
				if err != nil || m == nil || cerr != nil {
					t.Fatalf("New: %v; constructor: %v", err, cerr)
				}
				inner := m
				if w, ok := m.(*Standardized); ok == s.Standardize && ok {
					inner = w.Inner()
				} else if ok != s.Standardize {
					t.Fatalf("New with standardize %v returned %T", s.Standardize, m)
				}
				if _, exact := inner.(*ExactMAM); exact != (p.Budget > 0) || m.Type() != MAMName {
					t.Fatalf("New returned %T", inner)
				}
				if reflect.TypeOf(cm) != reflect.TypeOf(inner) {
					t.Fatalf("constructor %T, New %T", cm, inner)
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
				if !errors.As(cerr, &se) || se.Field != tc.field || cm != nil {
					t.Fatalf("constructor: error %v, want a *SpecError for %q", cerr, tc.field)
				}
			}
			t.Log(err)
		})
	}
	if _, err := NewExactMAM(2, MAMParams{Kernel: KernelSpec{Type: KernelLinear}, Delta: 0.05}); err == nil {
		t.Error("NewExactMAM without budget")
	}
	if _, err := NewMAM(2, MAMParams{Kernel: KernelSpec{Type: KernelLinear}, Delta: 0.05, Budget: 5}); err == nil {
		t.Error("NewMAM with budget")
	}
}

// window is the brute-force model: the raw labelled examples in the budget,
// oldest first.
type window struct {
	x [][]float64
	y []float64
}

func (w *window) add(x []float64, y float64, budget int) {
	w.x = append(w.x, append([]float64(nil), x...))
	w.y = append(w.y, y)
	if len(w.x) > budget {
		w.x, w.y = w.x[1:], w.y[1:]
	}
}

// bruteScore is f(x) of docs/math.md §3 computed from the kernel matrix of the
// window (plain or balanced), or NaN without a normaliser.
func bruteScore(k Kernel, w *window, balance bool, x []float64) float64 {
	var sp, sn, pp, nn, pn float64
	var np, nm float64
	for i := range w.x {
		ki := k.Eval(w.x[i], x)
		if w.y[i] > 0 {
			sp += ki
			np++
		} else {
			sn += ki
			nm++
		}
		for j := range w.x {
			kij := k.Eval(w.x[i], w.x[j])
			switch {
			case w.y[i] > 0 && w.y[j] > 0:
				pp += kij
			case w.y[i] < 0 && w.y[j] < 0:
				nn += kij
			case w.y[i] > 0:
				pn += kij
			}
		}
	}
	yy := pp + nn - 2*pn
	if !balance || np == 0 || nm == 0 {
		if balance {
			b := np - nm
			return (sp - sn + b) / math.Sqrt(2*(yy+b*b))
		}
		return (sp - sn) / math.Sqrt(yy)
	}
	mpp, mnn, mpn := pp/(np*np), nn/(nm*nm), pn/(np*nm)
	b := (mnn - mpp) / 2
	ww := mpp + mnn - 2*mpn
	return (sp/np - sn/nm + b) / math.Sqrt(2*(ww+b*b))
}

// checkSums compares the model's incremental sums and its A_i with direct
// sums over the window's kernel matrix, to 1e-9 of the sum of the terms'
// magnitudes (for rbf and laplacian, whose terms are positive, that is 1e-9
// relative).
func checkSums(t *testing.T, m *ExactMAM, w *window) {
	t.Helper()
	k := m.Kernel()
	n := len(w.x)
	if m.Stored() != n {
		t.Fatalf("stored %d, want %d", m.Stored(), n)
	}
	var yy, pp, nn, pn, tr, mag float64
	for i := range n {
		// Slot of the i-th oldest example.
		slot := i
		if n == m.p.Budget {
			slot = (m.head + i) % n
		}
		if m.ys[slot] != w.y[i] {
			t.Fatalf("slot %d: label %v, want %v", slot, m.ys[slot], w.y[i])
		}
		var ap, an, amag float64
		for j := range n {
			kij := k.Eval(w.x[i], w.x[j])
			mag += math.Abs(kij)
			yy += w.y[i] * w.y[j] * kij
			switch {
			case w.y[i] > 0 && w.y[j] > 0:
				pp += kij
			case w.y[i] < 0 && w.y[j] < 0:
				nn += kij
			case w.y[i] > 0:
				pn += kij
			}
			if i == j {
				tr += kij
			}
			if j > i {
				amag += math.Abs(kij)
				if w.y[j] > 0 {
					ap += kij
				} else {
					an += kij
				}
			}
		}
		const tol = 1e-9
		if got := m.aPos[slot] + m.aPosC[slot]; math.Abs(got-ap) > tol*amag+1e-300 {
			t.Fatalf("A+ of the %d-th oldest: %v, want %v", i, got, ap)
		}
		if got := m.aNeg[slot] + m.aNegC[slot]; math.Abs(got-an) > tol*amag+1e-300 {
			t.Fatalf("A- of the %d-th oldest: %v, want %v", i, got, an)
		}
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"yᵀΩy", m.yy + m.yyC, yy}, {"Σ++", m.pp + m.ppC, pp}, {"Σ--", m.nn + m.nnC, nn},
		{"Σ+-", m.pn + m.pnC, pn}, {"tr Ω", m.tr + m.trC, tr},
	} {
		if math.Abs(c.got-c.want) > 1e-9*mag {
			t.Fatalf("%s = %.17g, brute force %.17g (scale %g)", c.name, c.got, c.want, mag)
		}
	}
}

// TestExactBruteForce streams random events (10% unlabelled) through
// budgets smaller than the stream, so that examples leave and the ring
// wraps (re-accumulation) several times, and after every event checks the
// incremental sums, the score, M̂ (as (1/n) Σ y_i f(x_i)), R̂ and the bound
// against direct computation over the window.
func TestExactBruteForce(t *testing.T) {
	const d, events = 4, 260
	x, y := randomData(31, events, d, 0.35)
	r := rand.New(rand.NewPCG(32, 33))
	for _, kc := range exactKernels {
		for _, bal := range []bool{false, true} {
			for _, budget := range []int{1, 2, 37} {
				name := kc.name
				if bal {
					name += "-balanced"
				}
				t.Run(name+"-"+string(rune('0'+budget%10)), func(t *testing.T) {
					m := newExact(t, kc.k, d, budget, bal)
					k := m.Kernel()
					var w window
					for i := range events {
						labelled := r.Float64() > 0.1
						want := bruteScore(k, &w, bal, x[i])
						p := m.Observe(x[i], y[i], labelled)
						switch {
						case len(w.x) == 0:
							if p.Score != 0 || p.Label != 0 {
								t.Fatalf("empty model: %+v", p)
							}
						case !relClose(p.Score, want, 1e-9) && math.Abs(p.Score-want) > 1e-12:
							t.Fatalf("event %d: f = %.17g, brute force %.17g", i, p.Score, want)
						}
						if p.N != int64(len(w.x)) {
							t.Fatalf("N = %d, want %d", p.N, len(w.x))
						}
						if labelled {
							w.add(x[i], y[i], budget)
						}
						checkSums(t, m, &w)
						if len(w.x) == 0 {
							if m.AverageMargin() != 0 || m.Rademacher() != 0 || m.Bound(0) != 1 {
								t.Fatal("empty model with a margin or bound")
							}
							continue
						}
						// M̂ = (1/n) Σ y_i f(x_i) and R̂ from the kernel matrix.
						n := float64(len(w.x))
						var avg, tr float64
						for j := range w.x {
							avg += w.y[j] * bruteScore(k, &w, bal, w.x[j]) / n
							tr += k.Eval(w.x[j], w.x[j])
						}
						rad := 2 / n * math.Sqrt(tr)
						if bal {
							rad = 2 / n * math.Sqrt((tr+n)/2)
						}
						if math.IsNaN(avg) { // yᵀΩy = 0
							avg = 0
						}
						if !relClose(m.AverageMargin(), avg, 1e-9) && math.Abs(m.AverageMargin()-avg) > 1e-12 {
							t.Fatalf("event %d: M̂ = %v, brute force %v", i, m.AverageMargin(), avg)
						}
						if !relClose(m.Rademacher(), rad, 1e-9) {
							t.Fatalf("event %d: R̂ = %v, brute force %v", i, m.Rademacher(), rad)
						}
						if kc.k.Type == KernelPolynomial {
							if m.Bound(0.1) != 1 || p.HasBound || p.MistakeBound != 1 {
								t.Fatalf("polynomial kernel with a bound: %+v, %v", p, m.Bound(0.1))
							}
						} else {
							wantB := MistakeBound(1, avg, rad, n, 0.05, 0.2)
							if got := m.Bound(0.2); math.Abs(got-wantB) > 1e-9 {
								t.Fatalf("bound(0.2) = %v, want %v", got, wantB)
							}
							if !p.HasBound {
								t.Fatal("no bound")
							}
						}
					}
					if m.Examples() < int64(m.Stored()) || m.Stored() != min(budget, m.Stored()) {
						t.Fatalf("examples %d, stored %d", m.Examples(), m.Stored())
					}
				})
			}
		}
	}
}

// TestExactReaccumulation runs many ring wraps with removals and checks
// that the kept sums still match brute force (and that the kept sums equal
// the re-accumulated ones right after a wrap).
func TestExactReaccumulation(t *testing.T) {
	const d, budget, events = 3, 16, 5000
	x, y := randomData(41, events, d, 0.5)
	m := newExact(t, KernelSpec{Type: KernelLinear}, d, budget, true)
	var w window
	for i := range events {
		m.Observe(x[i], y[i], true)
		w.add(x[i], y[i], budget)
	}
	checkSums(t, m, &w)
	if m.Examples() != events || m.Stored() != budget {
		t.Fatalf("examples %d, stored %d", m.Examples(), m.Stored())
	}
}

// TestExactLargeGamma: with gamma·distance² far beyond 745 every K
// underflows, but the shifted sums keep the decision: the plain rbf and
// laplacian models predict the label of the nearest stored example.
func TestExactLargeGamma(t *testing.T) {
	const d = 5
	x, y := randomData(51, 400, d, 0.5)
	for _, k := range []KernelSpec{{Type: KernelRBF, Gamma: 1e4}, {Type: KernelLaplacian, Gamma: 1e4}} {
		m := newExact(t, k, d, 200, false)
		for i := range 200 {
			m.Observe(x[i], y[i], true)
		}
		undecided, underflow := 0, 0
		for i := 200; i < 400; i++ {
			best, label := math.Inf(1), 0
			for j := range 200 {
				if dd := sqDist(x[j], x[i]); dd < best {
					best, label = dd, int(y[j])
				}
			}
			p := m.Observe(x[i], 0, false)
			if p.Label == 0 {
				undecided++
			}
			if p.Score == 0 {
				underflow++
			}
			if p.Label != label {
				t.Fatalf("%s: event %d: label %d, nearest neighbour's %d (score %v)", k.Type, i, p.Label, label, p.Score)
			}
			if math.Signbit(p.Score) {
				t.Fatalf("score %v", p.Score)
			}
		}
		t.Logf("%s gamma %g: %d/200 scores underflowed to 0, all decided by the nearest neighbour", k.Type, k.Gamma, underflow)
		if undecided > 0 {
			t.Errorf("%d undecided", undecided)
		}
	}
}

func TestExactEmptyAndInvalid(t *testing.T) {
	for _, kc := range exactKernels {
		m := newExact(t, kc.k, 2, 5, true)
		p := m.Observe([]float64{1, 2}, 0, false)
		if p.Score != 0 || p.Label != 0 || p.N != 0 || p.Delta != 0.05 {
			t.Errorf("%s empty: %+v", kc.name, p)
		}
		if m.Bound(0) != 1 {
			t.Errorf("%s empty: bound %v", kc.name, m.Bound(0))
		}
		m.Observe([]float64{1, 2}, 1, true)
		before, _ := m.MarshalBinary()
		for _, bad := range [][]float64{{math.NaN(), 1}, {1, math.Inf(-1)}} {
			if p := m.Observe(bad, 1, true); p.Score != 0 || p.Label != 0 || p.HasBound || p.N != 1 {
				t.Errorf("%s %v: %+v", kc.name, bad, p)
			}
		}
		if kc.k.Type != KernelLinear { // refused as too large
			if p := m.Observe([]float64{1e100, 1e160}, 1, true); p.Label != 0 || p.HasBound {
				t.Errorf("%s: huge input: %+v", kc.name, p)
			}
		}
		if after, _ := m.MarshalBinary(); !bytes.Equal(before, after) {
			t.Errorf("%s: invalid input changed the state", kc.name)
		}
	}
	// Linear kernel, zero input: K(0, ·) = 0, yᵀΩy = 0: no decision.
	m := newExact(t, KernelSpec{Type: KernelLinear}, 2, 5, false)
	m.Observe([]float64{0, 0}, 1, true)
	if p := m.Observe([]float64{1, 0}, 0, false); p.Label != 0 || p.Score != 0 {
		t.Errorf("zero input: %+v", p)
	}
	for _, f := range []func(){
		func() { m.Observe([]float64{1}, 1, true) },
		func() { m.Observe([]float64{1, 2}, 0.5, true) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			f()
		}()
	}
	if y, ok := m.Label(0); !ok || y != -1 {
		t.Error("Label(0)")
	}
}

func TestExactObserveDoesNotAllocate(t *testing.T) {
	const d = 6
	x, y := randomData(61, 256, d, 0.5)
	for _, kc := range exactKernels {
		for _, bal := range []bool{false, true} {
			m := newExact(t, kc.k, d, 50, bal)
			i := 0
			allocs := testing.AllocsPerRun(500, func() {
				m.Observe(x[i&255], y[i&255], i%7 != 0)
				i++
			})
			if allocs != 0 {
				t.Errorf("%s balance=%v: %v allocs per Observe", kc.name, bal, allocs)
			}
		}
	}
}

// TestExactRoundTrip: a restored model (through Restore) predicts
// bit-identically and stays identical after further learning, before and
// after the ring is full.
func TestExactRoundTrip(t *testing.T) {
	const d = 5
	x, y := randomData(71, 300, d, 0.4)
	for _, kc := range exactKernels {
		for _, bal := range []bool{false, true} {
			for _, split := range []int{0, 20, 150} {
				m := newExact(t, kc.k, d, 64, bal)
				for i := range split {
					m.Observe(x[i], y[i], i%5 != 0)
				}
				enc, err := m.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				r, err := testTypes.Restore(enc)
				if err != nil {
					t.Fatalf("%s: %v", kc.name, err)
				}
				if got := r.(*ExactMAM); !reflect.DeepEqual(got.Params(), m.Params()) || got.Dim() != m.Dim() {
					t.Fatalf("parameters %+v (dim %d), want %+v (dim %d)", got.Params(), got.Dim(), m.Params(), m.Dim())
				}
				if enc2, _ := r.MarshalBinary(); !bytes.Equal(enc, enc2) {
					t.Fatal("re-encoding differs")
				}
				if err := exactStateClose(m, r.(*ExactMAM), 0); err != nil {
					t.Fatal(err)
				}
				for i := split; i < 300; i++ {
					p, q := m.Observe(x[i], y[i], i%5 != 0), r.Observe(x[i], y[i], i%5 != 0)
					if math.Float64bits(p.Score) != math.Float64bits(q.Score) || p != q {
						t.Fatalf("%s: event %d: %+v vs restored %+v", kc.name, i, p, q)
					}
				}
				a, _ := m.MarshalBinary()
				b, _ := r.MarshalBinary()
				if !bytes.Equal(a, b) {
					t.Fatalf("%s: states differ after further learning", kc.name)
				}
				// UnmarshalBinary replaces another model's parameters and state.
				other := newExact(t, KernelSpec{Type: KernelLinear}, 2, 3, !bal)
				if err := other.UnmarshalBinary(a); err != nil {
					t.Fatal(err)
				}
				if c, _ := other.MarshalBinary(); !bytes.Equal(a, c) {
					t.Fatal("UnmarshalBinary into another model")
				}
			}
		}
	}
}

func TestExactUnmarshalErrors(t *testing.T) {
	const d, budget = 3, 8
	m := newExact(t, KernelSpec{Type: KernelRBF, Gamma: 1}, d, budget, true)
	x, y := randomData(81, 13, d, 0.5) // ring full and wrapped: head = 5
	for i := range x {
		m.Observe(x[i], y[i], true)
	}
	good, _ := m.MarshalBinary()
	st := envelopeEnd(t, good) // state offset
	// State: total 0, count 8, head 12, n₊ 16, n₋ 20, sums 24..103, slots
	// from 104, each label 0, self 1, A+ 9, A+C 17, A- 25, A-C 33, x 41.
	slot := func(i, off int) int { return st + 104 + i*(1+8*(5+d)) + off }
	edit := func(f func(b []byte) []byte) []byte { return f(bytes.Clone(good)) }
	putF := func(b []byte, off int, v float64) []byte {
		copy(b[off:], f64Bytes([]float64{v}))
		return b
	}
	addF := func(b []byte, off int, dv float64) []byte {
		v := math.Float64frombits(binary.LittleEndian.Uint64(b[off:]))
		return putF(b, off, v+dv)
	}
	put32 := func(b []byte, off int, v uint32) []byte {
		binary.LittleEndian.PutUint32(b[off:], v)
		return b
	}
	newest := (m.head + budget - 1) % budget
	withParams := func(edit func(*MAMParams)) []byte {
		p := m.Params()
		edit(&p)
		return withHeader(t, good, MAMName, &p, d)
	}
	v1 := legacyMAMSpec(m, nil)
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"magic", edit(func(b []byte) []byte { b[0] = 'X'; return b })},
		{"version", edit(func(b []byte) []byte { b[4] = 9; return b })},
		{"tag", edit(func(b []byte) []byte { b[7] = 'x'; return b })},
		{"version 1 random-feature tag", asVersion1(t, good, MAMName, v1)},
		{"version 1 normalize", asVersion1(t, good, legacyTagExactMAM, legacyMAMSpec(m, func(s *legacySpec) { s.Normalize = true }))},
		{"version 1 budget smaller than count", asVersion1(t, good, legacyTagExactMAM, legacyMAMSpec(m, func(s *legacySpec) { s.Budget = 4 }))},
		{"budget 0", withParams(func(p *MAMParams) { p.Budget = 0 })},
		{"parameters features", withParams(func(p *MAMParams) { p.Kernel.Features = 4 })},
		{"parameters window", withParams(func(p *MAMParams) { p.Window.Events = 4 })},
		{"parameters budget smaller than count", withParams(func(p *MAMParams) { p.Budget = 4 })},
		{"parameters dim", withHeader(t, good, MAMName, ptr(m.Params()), 2)},
		{"parameters of another type", withHeader(t, good, MAMName, &OMAMParams{Kernel: m.Params().Kernel, Levels: 2, Budget: budget}, d)},
		{"count > budget", edit(func(b []byte) []byte { return put32(b, st+8, budget+1) })},
		{"head >= budget", edit(func(b []byte) []byte { return put32(b, st+12, budget) })},
		{"partial ring head", edit(func(b []byte) []byte { return put32(put32(b, st+8, 7), st+12, 3) })},
		{"class counts", edit(func(b []byte) []byte { b[st+16]++; b[st+20]--; return b })},
		{"count sum", edit(func(b []byte) []byte { b[st+16]++; return b })},
		{"total < count", edit(func(b []byte) []byte { return put32(b, st, 3) })},
		{"sum NaN", edit(func(b []byte) []byte { return putF(b, st+24, math.NaN()) })},
		{"yy off", edit(func(b []byte) []byte { return addF(b, st+24, 0.5) })},
		{"Σ+- off", edit(func(b []byte) []byte { return addF(b, st+72, 0.01) })},
		{"trace off", edit(func(b []byte) []byte { return addF(b, st+88, 1) })},
		{"label byte", edit(func(b []byte) []byte { b[slot(2, 0)] = 2; return b })},
		{"label flipped", edit(func(b []byte) []byte { b[slot(2, 0)] ^= 1; return b })},
		{"self", edit(func(b []byte) []byte { return putF(b, slot(1, 1), 0.5) })},
		{"A+ negative", edit(func(b []byte) []byte { return putF(b, slot(1, 9), -0.5) })},
		{"A- too large", edit(func(b []byte) []byte { return putF(b, slot(3, 25), 50) })},
		{"A+ comp NaN", edit(func(b []byte) []byte { return putF(b, slot(3, 17), math.NaN()) })},
		{"newest A", edit(func(b []byte) []byte { return putF(b, slot(newest, 9), 1e-3) })},
		{"input Inf", edit(func(b []byte) []byte { return putF(b, slot(4, 41), math.Inf(1)) })},
		{"trailing", append(bytes.Clone(good), 0)},
	}
	for i := range len(good) {
		tests = append(tests, struct {
			name string
			b    []byte
		}{"truncated", good[:i]})
	}
	for _, tc := range tests {
		target := newExact(t, KernelSpec{Type: KernelLinear}, 2, 3, false)
		target.Observe([]float64{1, 2}, 1, true)
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
	// The version-1 form (tag "mam_exact") of the same state restores to
	// the same model.
	if r, err := testTypes.Restore(asVersion1(t, good, legacyTagExactMAM, v1)); err != nil {
		t.Fatalf("version 1: %v", err)
	} else if enc, _ := r.MarshalBinary(); !bytes.Equal(enc, good) {
		t.Fatal("version 1: restored state differs")
	}
	// The random-feature MAM refuses the exact encoding and vice versa.
	if err := new(MAM).UnmarshalBinary(good); !errors.Is(err, ErrFormat) {
		t.Errorf("MAM.UnmarshalBinary(exact): %v", err)
	}
	rf := newMAM(t, KernelSpec{Type: KernelLinear}, 2, false)
	rfEnc, _ := rf.MarshalBinary()
	if err := new(ExactMAM).UnmarshalBinary(rfEnc); !errors.Is(err, ErrFormat) {
		t.Errorf("ExactMAM.UnmarshalBinary(random features): %v", err)
	}
}

func FuzzExactRestore(f *testing.F) {
	x, y := randomData(91, 12, 2, 0.5)
	for _, kc := range exactKernels {
		m := newExact(f, kc.k, 2, 5, true)
		for i := range x {
			m.Observe(x[i], y[i], true)
		}
		b, _ := m.MarshalBinary()
		f.Add(b)
		f.Add(asVersion1(f, b, legacyTagExactMAM, legacyMAMSpec(m, nil))) // the legacy path
		// The same stream into a model of hashed features (sparse rows).
		p := m.Params()
		sm, err := p.NewSparse(2, 8)
		if err != nil {
			f.Fatal(err)
		}
		for i := range x {
			sm.Observe(x[i], y[i], true)
		}
		b, _ = sm.MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := fuzzRestore(t, b, false)
		if m == nil {
			return
		}
		m.Observe(make([]float64, m.Dim()), 1, true)
		if s, ok := m.(SparseModel); ok && SparseSupport(m) == nil {
			s.ObserveSparse([]int32{0, 1, 0}, []float64{0.5, -1, 2}, -1, true)
		}
	})
}

// expNeg is e^−t for t ≥ 0 as the exact kernel rows take it
// (vmath.ExpShiftRow with no shift).
func expNeg(t float64) float64 {
	a := [1]float64{t}
	vmath.ExpShiftRow(a[:], 1, 0)
	return a[0]
}
