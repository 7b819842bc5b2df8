package online

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/streamer/streamer/online/codec"

	"gonum.org/v1/gonum/mat"
)

// blLogisticParams are the logistic parameters of the tests.
var blLogisticParams = LogisticParams{LearningRate: 0.1, L2: 1e-3}

func blLogisticSpec(d int) Spec {
	return Spec{Type: LogisticName, Dim: d, Params: ptr(blLogisticParams)}
}

func blLDAParams(window int, halfLife float64) LDAParams {
	return LDAParams{Window: Window{Events: window}, Decay: Decay{HalfLife: halfLife}}
}

func blLDASpec(d, window int, halfLife float64) Spec {
	return Spec{Type: LDAName, Dim: d, Params: ptr(blLDAParams(window, halfLife))}
}

func blNew(t testing.TB, s Spec) Model {
	t.Helper()
	return mustNew(t, s)
}

// blNewLDA builds an LDA model for inputs of dimension d.
func blNewLDA(t testing.TB, d, window int, halfLife float64) *LDA {
	t.Helper()
	m, err := NewLDA(d, blLDAParams(window, halfLife))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func TestBaselineSpecValidate(t *testing.T) {
	lg, ld := blLogisticSpec(3), blLDASpec(3, 0, 0)
	withLg := func(f func(*Spec, *LogisticParams)) Spec {
		s, p := lg, blLogisticParams
		s.Params = &p
		f(&s, &p)
		return s
	}
	withLD := func(f func(*Spec, *LDAParams)) Spec {
		s, p := ld, blLDAParams(0, 0)
		s.Params = &p
		f(&s, &p)
		return s
	}
	for _, tc := range []struct {
		name  string
		spec  Spec
		field string // "" = valid
	}{
		{"logistic", lg, ""},
		{"logistic defaults", Spec{Type: LogisticName, Dim: 3}, ""},
		{"logistic standardize", withLg(func(s *Spec, _ *LogisticParams) { s.Standardize = true }), ""},
		{"logistic l2 0", withLg(func(_ *Spec, p *LogisticParams) { p.L2 = 0 }), ""},
		{"logistic rate 0", withLg(func(_ *Spec, p *LogisticParams) { p.LearningRate = 0 }), "learning_rate"},
		{"logistic rate inf", withLg(func(_ *Spec, p *LogisticParams) { p.LearningRate = math.Inf(1) }), "learning_rate"},
		{"logistic l2 < 0", withLg(func(_ *Spec, p *LogisticParams) { p.L2 = -1 }), "l2"},
		{"logistic l2 NaN", withLg(func(_ *Spec, p *LogisticParams) { p.L2 = math.NaN() }), "l2"},
		{"logistic dim", withLg(func(s *Spec, _ *LogisticParams) { s.Dim = 0 }), "dim"},
		{"logistic parameters of another type", withLg(func(s *Spec, _ *LogisticParams) { s.Params = &LDAParams{} }), "?"},
		{"lda", ld, ""},
		{"lda defaults", Spec{Type: LDAName, Dim: 3}, ""},
		{"lda window", blLDASpec(3, 50, 0), ""},
		{"lda decay", blLDASpec(3, 0, 20), ""},
		{"lda both", blLDASpec(3, 50, 20), "decay.half_life"},
		{"lda window < 0", blLDASpec(3, -1, 0), "window.events"},
		{"lda window too large", blLDASpec(3, 1<<24, 0), "window.events"},
		{"lda half-life < 0", blLDASpec(3, 0, -1), "decay.half_life"},
		{"lda half-life inf", blLDASpec(3, 0, math.Inf(1)), "decay.half_life"},
		{"lda dim", withLD(func(s *Spec, _ *LDAParams) { s.Dim = ldaMaxDim + 1 }), "dim"},
		{"lda dim 0", withLD(func(s *Spec, _ *LDAParams) { s.Dim = 0 }), "dim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := testTypes.New(tc.spec)
			// The type's constructor, directly.
			var cerr error
			switch p := tc.spec.Params.(type) {
			case *LogisticParams:
				_, cerr = NewLogistic(tc.spec.Dim, *p)
			case *LDAParams:
				_, cerr = NewLDA(tc.spec.Dim, *p)
			}
			if tc.field == "" {
				if err != nil || cerr != nil || m == nil {
					t.Fatalf("New: %v; constructor: %v", err, cerr)
				}
				if _, std := m.(*Standardized); std != tc.spec.Standardize || m.Type() != tc.spec.Type {
					t.Fatalf("New returned %T of type %s", m, m.Type())
				}
				return
			}
			if m != nil {
				t.Fatal("model returned with an error")
			}
			if tc.field == "?" { // not a spec problem: parameters of another Go type
				if err == nil {
					t.Fatal("New accepted the parameters")
				}
				t.Log(err)
				return
			}
			for _, err := range []error{err, cerr} {
				var se *SpecError
				if !errors.As(err, &se) || se.Field != tc.field || !errors.Is(err, ErrSpec) {
					t.Fatalf("error %v, want a SpecError for %s", err, tc.field)
				}
			}
			t.Log(err)
		})
	}
}

// blLogisticRef is a plain re-implementation of the AdaGrad logistic
// regression documented on Logistic.
type blLogisticRef struct {
	w, g  []float64
	b, gb float64
}

func (r *blLogisticRef) score(x []float64) float64 {
	z := r.b
	for i := range x {
		z += r.w[i] * x[i]
	}
	return z
}

func (r *blLogisticRef) learn(x []float64, y, eta, l2 float64) {
	z := r.score(x)
	gz := -y / (1 + math.Exp(y*z)) // dℓ/dz of ln(1 + exp(−y z))
	for i := range x {
		gi := gz*x[i] + l2*r.w[i]
		r.g[i] += gi * gi
		r.w[i] -= eta * gi / (math.Sqrt(r.g[i]) + 1e-8)
	}
	r.gb += gz * gz
	r.b -= eta * gz / (math.Sqrt(r.gb) + 1e-8)
}

func TestLogisticAgainstReference(t *testing.T) {
	const d = 5
	x, y := randomData(11, 600, d, 0.4)
	params := blLogisticParams
	m, err := NewLogistic(d, params)
	if err != nil {
		t.Fatal(err)
	}
	ref := &blLogisticRef{w: make([]float64, d), g: make([]float64, d)}
	for i := range x {
		labelled := i%5 != 4
		want := ref.score(x[i])
		p := m.Observe(x[i], y[i], labelled)
		if !relClose(p.Score, want, 1e-9) && math.Abs(p.Score-want) > 1e-12 {
			t.Fatalf("event %d: score %v, reference %v", i, p.Score, want)
		}
		if sig := 1 / (1 + math.Exp(-p.Score)); !relClose(p.Probability, sig, 1e-12) || !p.HasProbability {
			t.Fatalf("event %d: probability %v, σ(score) = %v", i, p.Probability, sig)
		}
		if p.HasBound || p.Delta != 0 || p.MistakeBound != 0 {
			t.Fatalf("event %d: a logistic prediction with a bound: %+v", i, p)
		}
		if wantL := int(math.Copysign(1, p.Score)); p.Score != 0 && p.Label != wantL {
			t.Fatalf("event %d: label %d for score %v", i, p.Label, p.Score)
		}
		if labelled {
			ref.learn(x[i], y[i], params.LearningRate, params.L2)
		}
	}
	if m.Examples() != 480 {
		t.Fatalf("examples %d", m.Examples())
	}
	pos, neg := m.ClassCounts()
	if pos+neg != 480 || pos == 0 || neg == 0 {
		t.Fatalf("class counts %d/%d", pos, neg)
	}
	// The model has learned something: training accuracy well above chance.
	correct := 0
	for i := range x {
		if float64(m.Observe(x[i], 0, false).Label) == y[i] {
			correct++
		}
	}
	if acc := float64(correct) / float64(len(x)); acc < 0.8 {
		t.Fatalf("training accuracy %.3f", acc)
	}
}

func TestLogisticEdgeCases(t *testing.T) {
	m, _ := NewLogistic(2, blLogisticParams)
	p := m.Observe([]float64{1, 2}, 1, false)
	if p != (Prediction{Probability: 0.5, HasProbability: true}) {
		t.Fatalf("empty model: %+v", p)
	}
	// Extreme logits: probabilities stay in [0, 1] and finite.
	m.w[0] = 1e3
	if p := m.Observe([]float64{1, 0}, 1, false); p.Probability != 1 || p.Label != 1 {
		t.Fatalf("logit 1000: %+v", p)
	}
	if p := m.Observe([]float64{-1, 0}, 1, false); p.Probability < 0 || p.Probability > 1e-300 || p.Label != -1 {
		t.Fatalf("logit −1000: %+v", p)
	}
	m.w[0] = 0
	for _, x := range [][]float64{{math.NaN(), 0}, {math.Inf(1), 0}, {1e200, 1}} {
		before, _ := m.MarshalBinary()
		if p := m.Observe(x, 1, true); p != (Prediction{}) {
			t.Errorf("%v: %+v", x, p)
		}
		if after, _ := m.MarshalBinary(); !bytes.Equal(before, after) {
			t.Errorf("%v was learned", x)
		}
	}
	for _, v := range []float64{-1, 0, 1} {
		if y, ok := m.Label(v); !ok || (y != 1 && y != -1) {
			t.Errorf("Label(%v) = %v, %v", v, y, ok)
		}
	}
	for _, v := range []float64{2, 0.5, math.NaN()} {
		if _, ok := m.Label(v); ok {
			t.Errorf("Label(%v) accepted", v)
		}
	}
	blPanics(t, "short x", func() { m.Observe([]float64{1}, 1, true) })
	blPanics(t, "label 0", func() { m.Observe([]float64{1, 1}, 0, true) })
	l := blNewLDA(t, 2, 0, 0)
	blPanics(t, "lda short x", func() { l.Observe([]float64{1}, 1, true) })
	blPanics(t, "lda label 2", func() { l.Observe([]float64{1, 1}, 2, true) })
	s := blNew(t, Spec{Type: LDAName, Dim: 2, Standardize: true})
	blPanics(t, "std short x", func() { s.Observe([]float64{1}, 1, true) })
}

func blPanics(t *testing.T, name string, f func()) {
	t.Helper()
	defer func() {
		if recover() == nil {
			t.Errorf("%s: no panic", name)
		}
	}()
	f()
}

// blBatchLDA computes w and b of MATH/seed-003 LDA directly: weighted class
// means, pooled scatter / max(W − 2, 1), ridge ε·diag, Cholesky solve.
func blBatchLDA(t *testing.T, x [][]float64, y, wt []float64) (w []float64, b float64) {
	t.Helper()
	d := len(x[0])
	var wp, wn float64
	mp, mn := make([]float64, d), make([]float64, d)
	for i := range x {
		m := mp
		if y[i] > 0 {
			wp += wt[i]
		} else {
			wn += wt[i]
			m = mn
		}
		for j := range d {
			m[j] += wt[i] * x[i][j]
		}
	}
	for j := range d {
		mp[j] /= wp
		mn[j] /= wn
	}
	cov := mat.NewSymDense(d, nil)
	for i := range x {
		m := mp
		if y[i] < 0 {
			m = mn
		}
		for j := range d {
			for k := j; k < d; k++ {
				cov.SetSym(j, k, cov.At(j, k)+wt[i]*(x[i][j]-m[j])*(x[i][k]-m[k]))
			}
		}
	}
	var tr float64
	for j := range d {
		tr += cov.At(j, j) / max(wp+wn-2, 1)
	}
	for j := range d {
		for k := j; k < d; k++ {
			v := cov.At(j, k) / max(wp+wn-2, 1)
			if j == k {
				v += ldaRidge * max(v, 1e-9*tr/float64(d))
			}
			cov.SetSym(j, k, v)
		}
	}
	var ch mat.Cholesky
	if !ch.Factorize(cov) {
		t.Fatal("batch LDA: not positive definite")
	}
	dm := make([]float64, d)
	for j := range d {
		dm[j] = mp[j] - mn[j]
	}
	var sol mat.VecDense
	_ = ch.SolveVecTo(&sol, mat.NewVecDense(d, dm))
	w = make([]float64, d)
	for j := range d {
		w[j] = sol.AtVec(j)
		b -= w[j] * (mp[j] + mn[j]) / 2
	}
	return w, b + math.Log(wp/wn)
}

func blCheckDirection(t *testing.T, m *LDA, w []float64, b float64, tol float64) {
	t.Helper()
	got := make([]float64, m.Dim())
	gb, ok := m.Direction(got)
	if !ok {
		t.Fatal("no decision")
	}
	var diff, norm float64
	for i := range w {
		diff += (got[i] - w[i]) * (got[i] - w[i])
		norm += w[i] * w[i]
	}
	if math.Sqrt(diff) > tol*math.Sqrt(norm) || math.Abs(gb-b) > tol*(1+math.Abs(b)) {
		t.Fatalf("w %v b %v, batch %v %v", got, gb, w, b)
	}
}

// TestLDAAgainstBatch checks the streaming statistics (plain, window and
// decay) against LDA computed in one batch from the same examples, at
// solve points, and that scores between solves use the last solve.
func TestLDAAgainstBatch(t *testing.T) {
	const d = 4
	x, y := randomData(21, 1100, d, 0.35)
	for i := range x { // large means against the spreads: exercises the shift
		x[i][1] += 1e4
		x[i][2] = 1e-3*x[i][2] - 50
	}
	ones := make([]float64, len(x))
	for i := range ones {
		ones[i] = 1
	}
	const solveAt = 64 + 29*ldaRefresh // a solve point after warm-up (n = 992)
	t.Run("plain", func(t *testing.T) {
		m := blNewLDA(t, d, 0, 0)
		for i := range solveAt {
			m.Observe(x[i], y[i], true)
		}
		w, b := blBatchLDA(t, x[:solveAt], y[:solveAt], ones)
		blCheckDirection(t, m, w, b, 1e-9)
		// Between solves the direction stays; scores use it.
		got := make([]float64, d)
		b0, _ := m.Direction(got)
		for i := solveAt; i < solveAt+ldaRefresh-1; i++ {
			m.Observe(x[i], y[i], true)
			g2 := make([]float64, d)
			if b1, _ := m.Direction(g2); b1 != b0 || !reflect.DeepEqual(g2, got) {
				t.Fatalf("solved after %d events", i+1)
			}
		}
		p := m.Observe(x[0], 0, false)
		if f := dot(got, x[0]) + b0; !relClose(p.Score, f, 1e-9) || p.N != solveAt+ldaRefresh-1 {
			t.Fatalf("score %v, want <w, x> + b = %v (N %d)", p.Score, f, p.N)
		}
		if p.Probability != sigmoid(p.Score) || !p.HasProbability || p.HasBound {
			t.Fatalf("prediction %+v", p)
		}
	})
	t.Run("window", func(t *testing.T) {
		const W = 100
		m := blNewLDA(t, d, W, 0)
		for i := range solveAt {
			m.Observe(x[i], y[i], i%7 != 3 || i < W) // unlabelled events do not enter
		}
		var wx [][]float64
		var wy []float64
		for i := solveAt - 1; i >= 0 && len(wx) < W; i-- {
			if i%7 != 3 || i < W {
				wx, wy = append(wx, x[i]), append(wy, y[i])
			}
		}
		if m.n%ldaRefresh != 0 {
			for i := solveAt; m.n%ldaRefresh != 0; i++ {
				m.Observe(x[i], y[i], true)
				wx, wy = append([][]float64{x[i]}, wx[:W-1]...), append([]float64{y[i]}, wy[:W-1]...)
			}
		}
		w, b := blBatchLDA(t, wx, wy, ones[:W])
		blCheckDirection(t, m, w, b, 1e-8)
		if p := m.Observe(x[0], 0, false); p.N != W {
			t.Fatalf("N = %d, want %d", p.N, W)
		}
	})
	t.Run("decay", func(t *testing.T) {
		const h = 50.0
		m := blNewLDA(t, d, 0, h)
		for i := range solveAt {
			m.Observe(x[i], y[i], true)
		}
		wt := make([]float64, solveAt)
		var sw, sw2 float64
		for i := range wt {
			wt[i] = math.Exp2(-float64(solveAt-1-i) / h)
			sw += wt[i]
			sw2 += wt[i] * wt[i]
		}
		w, b := blBatchLDA(t, x[:solveAt], y[:solveAt], wt)
		blCheckDirection(t, m, w, b, 1e-8)
		if p := m.Observe(x[0], 0, false); p.N != int64(math.Round(sw*sw/sw2)) || m.Examples() != solveAt {
			t.Fatalf("N = %d, want n_eff %v (examples %d)", p.N, sw*sw/sw2, m.Examples())
		}
	})
}

// TestLDAWindowForgets: after a switch of the class means, the windowed
// model follows and the plain one lags.
func TestLDAWindowForgets(t *testing.T) {
	const d = 3
	x, y := randomData(31, 3000, d, 0.5)
	win := blNewLDA(t, d, 200, 0)
	dec := blNewLDA(t, d, 0, 100)
	plain := blNewLDA(t, d, 0, 0)
	var errW, errD, errP int
	for i := range x {
		yi := y[i]
		if i >= 1500 {
			yi = -yi // concept drift: labels flip
		}
		for _, c := range []struct {
			m *LDA
			e *int
		}{{win, &errW}, {dec, &errD}, {plain, &errP}} {
			if p := c.m.Observe(x[i], yi, true); i >= 1500 && float64(p.Label) != yi {
				(*c.e)++
			}
		}
	}
	t.Logf("errors on the 1500 events after the drift: window %d, decay %d, plain %d", errW, errD, errP)
	if errW > 400 || errD > 400 || errP < 900 {
		t.Fatalf("window %d, decay %d, plain %d errors", errW, errD, errP)
	}
	// One-class window: no decision at the next solve.
	one := blNewLDA(t, d, 10, 0)
	for i := range 100 {
		one.Observe(x[i], 1-2*float64(i/50), true) // 50 × +1 then 50 × −1
	}
	if p := one.Observe(x[0], 0, false); p.Label != 0 || p.HasProbability {
		t.Fatalf("one-class window: %+v", p)
	}
}

func TestLDAEdgeCases(t *testing.T) {
	m := blNewLDA(t, 2, 0, 0)
	if p := m.Observe([]float64{1, 2}, 1, true); p != (Prediction{}) {
		t.Fatalf("empty: %+v", p)
	}
	// One class only: no decision.
	if p := m.Observe([]float64{3, 2}, 1, true); p.Label != 0 || p.N != 1 {
		t.Fatalf("one class: %+v", p)
	}
	// Σ = 0 within classes except along one feature: still solvable.
	m.Observe([]float64{-1, 2}, -1, true)
	if p := m.Observe([]float64{4, 2}, 0, false); p.Label != 1 {
		t.Fatalf("after both classes: %+v", p)
	}
	before, _ := m.MarshalBinary()
	for _, x := range [][]float64{{math.NaN(), 0}, {math.Inf(-1), 0}, {1e200, 0}} {
		if p := m.Observe(x, 1, true); p != (Prediction{N: 3}) {
			t.Errorf("%v: %+v", x, p)
		}
	}
	if after, _ := m.MarshalBinary(); !bytes.Equal(before, after) {
		t.Error("non-finite input learned")
	}
}

func TestBaselineObserveDoesNotAllocate(t *testing.T) {
	const d = 8
	x, y := randomData(3, 256, d, 0.5)
	for _, spec := range []Spec{
		blLogisticSpec(d), blLDASpec(d, 0, 0), blLDASpec(d, 40, 0), blLDASpec(d, 0, 30),
		{Type: LogisticName, Dim: d, Params: &LogisticParams{LearningRate: 0.1}, Standardize: true},
		{Type: LDAName, Dim: d, Params: &LDAParams{Window: Window{Events: 40}}, Standardize: true},
	} {
		m := blNew(t, spec)
		i := 0
		// 256 runs cover several LDA solves (warm-up and refreshes).
		allocs := testing.AllocsPerRun(256, func() {
			m.Observe(x[i&255], y[i&255], i%3 != 0)
			i++
		})
		if allocs != 0 {
			t.Errorf("%s %+v: %v allocs per Observe", specName(spec), modelParams(m), allocs)
		}
	}
}

// blCodecSpecs are the specs of the codec tests.
var blCodecSpecs = []struct {
	name string
	spec Spec
}{
	{"logistic", blLogisticSpec(3)},
	{"lda", blLDASpec(3, 0, 0)},
	{"lda window", blLDASpec(3, 40, 0)},
	{"lda decay", blLDASpec(3, 0, 25)},
	{"std logistic", Spec{Type: LogisticName, Dim: 3, Params: &LogisticParams{LearningRate: 0.2}, Standardize: true}},
	{"std lda window", Spec{Type: LDAName, Dim: 3, Params: &LDAParams{Window: Window{Events: 40}}, Standardize: true}},
	{"std mam", Spec{Type: MAMName, Dim: 3, Params: &MAMParams{Kernel: KernelSpec{Type: KernelLinear}, Balance: true, Delta: 0.05}, Standardize: true}},
}

// TestBaselineRoundTrip: a restored model predicts bit-identically, also
// between LDA solves, and stays identical under further learning.
func TestBaselineRoundTrip(t *testing.T) {
	x, y := randomData(41, 400, 3, 0.4)
	for _, tc := range blCodecSpecs {
		t.Run(tc.name, func(t *testing.T) {
			for _, cut := range []int{0, 1, 77, 150} { // 77, 150: between solves
				m := blNew(t, tc.spec)
				for i := range cut {
					m.Observe(x[i], y[i], i%4 != 1)
				}
				enc, err := m.MarshalBinary()
				if err != nil {
					t.Fatal(err)
				}
				r, err := testTypes.Restore(enc)
				if err != nil {
					t.Fatal(err)
				}
				if reflect.TypeOf(r) != reflect.TypeOf(m) || r.Type() != tc.spec.Type || r.Dim() != 3 {
					t.Fatalf("restored %T %s", r, r.Type())
				}
				if enc2, _ := r.MarshalBinary(); !bytes.Equal(enc, enc2) {
					t.Fatal("re-encoding differs")
				}
				if got, want := modelParams(r), reflect.ValueOf(tc.spec.Params).Elem().Interface(); !reflect.DeepEqual(got, want) {
					t.Fatalf("restored parameters %+v, want %+v", got, want)
				}
				for i := cut; i < 400; i++ {
					lab := i%4 != 1
					p, q := m.Observe(x[i], y[i], lab), r.Observe(x[i], y[i], lab)
					if math.Float64bits(p.Score) != math.Float64bits(q.Score) || p != q {
						t.Fatalf("cut %d, event %d: %+v vs restored %+v", cut, i, p, q)
					}
				}
				a, _ := m.MarshalBinary()
				b, _ := r.MarshalBinary()
				if !bytes.Equal(a, b) || m.Examples() != r.Examples() {
					t.Fatal("states differ after further learning")
				}
				if u, ok := r.(interface{ UnmarshalBinary([]byte) error }); ok {
					// UnmarshalBinary replaces the state of a model of the
					// same Go type.
					if err := u.UnmarshalBinary(enc); err != nil {
						t.Fatal(err)
					}
					if c, _ := r.MarshalBinary(); !bytes.Equal(c, enc) {
						t.Fatal("UnmarshalBinary into another model")
					}
				}
			}
		})
	}
}

// blCorrupt returns variants of a valid encoding that must be rejected.
func blCorrupt(good []byte) [][]byte {
	var out [][]byte
	for i := range len(good) {
		out = append(out, good[:i])
	}
	out = append(out, append(bytes.Clone(good), 0))
	return out
}

func blExpectRejected(t *testing.T, name string, b []byte, target Model) {
	t.Helper()
	before, _ := target.MarshalBinary()
	err := target.UnmarshalBinary(b)
	if !errors.Is(err, ErrFormat) {
		t.Errorf("%s (%d bytes): error %v, want ErrFormat", name, len(b), err)
	}
	if after, _ := target.MarshalBinary(); !bytes.Equal(before, after) {
		t.Errorf("%s: receiver changed on error", name)
	}
	if _, err := testTypes.Restore(b); !errors.Is(err, ErrFormat) {
		t.Errorf("%s: Restore error %v", name, err)
	}
}

func TestBaselineUnmarshalErrors(t *testing.T) {
	x, y := randomData(43, 120, 3, 0.5)
	train := func(s Spec) []byte {
		m := blNew(t, s)
		for i := range x {
			m.Observe(x[i], y[i], true)
		}
		b, _ := m.MarshalBinary()
		return b
	}
	putF := putF64
	put8 := func(b []byte, off int, v uint8) []byte {
		b = bytes.Clone(b)
		b[off] = v
		return b
	}
	const d = 3
	lg := train(blLogisticSpec(d))
	o := envelopeEnd(t, lg) // n, n₊, n₋, w, b, G, G_b
	lgTag, lgV1 := legacySpecOf(t, blLogisticSpec(d))
	lgCases := map[string][]byte{
		"counts":                     put8(lg, o, lg[o]+1),
		"w NaN":                      putF(lg, o+24, math.NaN()),
		"b inf":                      putF(lg, o+24+8*d, math.Inf(1)),
		"G negative":                 putF(lg, o+32+8*d, -1),
		"dim":                        withHeader(t, lg, LogisticName, &blLogisticParams, d+1),
		"rate":                       withHeader(t, lg, LogisticName, &LogisticParams{L2: blLogisticParams.L2}, d),
		"l2":                         withHeader(t, lg, LogisticName, &LogisticParams{LearningRate: 0.1, L2: -1}, d),
		"parameters of another type": withHeader(t, lg, LogisticName, &LDAParams{Window: Window{Events: 5}}, d),
		"version 1 kernel": asVersion1(t, lg, lgTag, func() legacySpec {
			s := lgV1
			s.Kernel = KernelSpec{Type: KernelRBF, Gamma: 1, Features: 3}
			return s
		}()),
		"version 1 window": asVersion1(t, lg, lgTag, func() legacySpec { s := lgV1; s.Window = 5; return s }()),
		"version 1 rate":   asVersion1(t, lg, lgTag, func() legacySpec { s := lgV1; s.LearningRate = 0; return s }()),
	}
	ld := train(blLDASpec(d, 0, 0))
	o = envelopeEnd(t, ld) // n, since, centred, valid, c, classes…
	p := d * (d + 1) / 2
	classLen := 16 + 16*d + 16*p
	ldCases := map[string][]byte{
		"n":            put8(ld, o, ld[o]+1),
		"since":        put8(ld, o+8, ldaRefresh),
		"centred":      put8(ld, o+16, 0),
		"flag":         put8(ld, o+17, 2),
		"c NaN":        putF(ld, o+18, math.NaN()),
		"class count":  putF(ld, o+18+8*d, 1.5),
		"comp count":   putF(ld, o+18+8*d+8, 1),
		"sum inf":      putF(ld, o+18+8*d+16, math.Inf(1)),
		"Σω² no decay": putF(ld, o+18+8*d+2*classLen, 1),
		"w NaN":        putF(ld, o+18+8*d+2*classLen+8, math.NaN()),
	}
	ldw := train(blLDASpec(d, 40, 0))
	base := envelopeEnd(t, ldw) + 18 + 8*d + 2*classLen + 8 + 8*d + 8 // window count
	ldCases["window count"] = put8(ldw, base, 39)
	ldCases["window label"] = put8(ldw, base+4, 2)
	ldCases["window label sign"] = put8(ldw, base+4, uint8(-ldw[base+4]))
	ldCases["window x NaN"] = putF(ldw, base+5, math.NaN())
	ldCases["window over"] = put8(ldw, base, 41)
	ldCases["window x changed"] = putF(ldw, base+5, 123)
	ldd := train(blLDASpec(d, 0, 10))
	od := envelopeEnd(t, ldd)
	ldCases["decay weight"] = putF(ldd, od+18+8*d, 100)
	ldCases["decay Σω²"] = putF(ldd, od+18+8*d+2*classLen, 100)
	ldCases["parameters window"] = withHeader(t, ld, LDAName, ptr(blLDAParams(40, 0)), d)
	ldCases["parameters no window"] = withHeader(t, ldw, LDAName, ptr(blLDAParams(0, 0)), d)
	ldCases["parameters decay"] = withHeader(t, ld, LDAName, ptr(blLDAParams(0, 10)), d)
	ldCases["parameters of another type"] = withHeader(t, ld, LDAName, &blLogisticParams, d)
	ldTag, ldV1 := legacySpecOf(t, blLDASpec(d, 0, 0))
	ldCases["version 1 l2"] = asVersion1(t, ld, ldTag, func() legacySpec { s := ldV1; s.L2 = 1; return s }())
	ldCases["version 1 delta"] = asVersion1(t, ld, ldTag, func() legacySpec { s := ldV1; s.Delta = 0.05; return s }())
	ldCases["version 1 window"] = asVersion1(t, ld, ldTag, func() legacySpec { s := ldV1; s.Window = 40; return s }())
	// The version-1 forms of the same states restore to the same models.
	for _, tc := range []struct {
		b    []byte
		spec Spec
	}{{lg, blLogisticSpec(d)}, {ld, blLDASpec(d, 0, 0)}, {ldw, blLDASpec(d, 40, 0)}, {ldd, blLDASpec(d, 0, 10)}} {
		tag, s := legacySpecOf(t, tc.spec)
		r, err := testTypes.Restore(asVersion1(t, tc.b, tag, s))
		if err != nil {
			t.Fatalf("%s version 1: %v", specName(tc.spec), err)
		}
		if enc, _ := r.MarshalBinary(); !bytes.Equal(enc, tc.b) {
			t.Fatalf("%s version 1: restored state differs", specName(tc.spec))
		}
	}

	for name, good := range map[string][]byte{"logistic": lg, "lda": ld, "lda window": ldw, "lda decay": ldd} {
		target := blNew(t, blLogisticSpec(2))
		if name != "logistic" {
			target = blNew(t, blLDASpec(2, 5, 0))
		}
		if _, err := testTypes.Restore(good); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, b := range blCorrupt(good) {
			blExpectRejected(t, name+" truncated/trailing", b, target)
		}
		cases := lgCases
		if name != "logistic" {
			cases = ldCases
		}
		if name == "lda" || name == "logistic" {
			for cn, b := range cases {
				blExpectRejected(t, name+" "+cn, b, target)
				err := target.UnmarshalBinary(b)
				t.Logf("%s %s: %v", name, cn, err)
			}
		}
	}
	// Type mismatch: an lda encoding into a Logistic and vice versa.
	for _, tc := range []struct {
		b      []byte
		target Model
	}{{ld, blNew(t, blLogisticSpec(3))}, {lg, blNew(t, blLDASpec(3, 0, 0))}} {
		before, _ := tc.target.MarshalBinary()
		if err := tc.target.UnmarshalBinary(tc.b); !errors.Is(err, ErrFormat) {
			t.Errorf("into %s: %v", tc.target.Type(), err)
		}
		if after, _ := tc.target.MarshalBinary(); !bytes.Equal(before, after) {
			t.Errorf("receiver changed")
		}
	}
}

// blSplit returns a stratified 70/30 split of the row indices (30% of each
// class, rounded, to the test set), both shuffled with seed.
func blSplit(y []float64, seed uint64) (train, test []int) {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	var pos, neg []int
	for i := range y {
		if y[i] > 0 {
			pos = append(pos, i)
		} else {
			neg = append(neg, i)
		}
	}
	for _, c := range [][]int{pos, neg} {
		r.Shuffle(len(c), func(i, j int) { c[i], c[j] = c[j], c[i] })
		k := int(math.Round(0.3 * float64(len(c))))
		test = append(test, c[:k]...)
		train = append(train, c[k:]...)
	}
	r.Shuffle(len(train), func(i, j int) { train[i], train[j] = train[j], train[i] })
	return train, test
}

// blTestError streams the training rows once through a model built from
// spec and returns its error on the test rows. The trained model is frozen:
// each test row is scored by a copy restored from the trained encoding,
// because an unlabelled Observe would add the test inputs to the
// standardiser's statistics.
func blTestError(t *testing.T, spec Spec, x [][]float64, y []float64, train, test []int) float64 {
	t.Helper()
	m := blNew(t, spec)
	for _, i := range train {
		m.Observe(x[i], y[i], true)
	}
	enc, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	wrong := 0
	for _, i := range test {
		c, err := testTypes.Restore(enc)
		if err != nil {
			t.Fatal(err)
		}
		if float64(c.Observe(x[i], 0, false).Label) != y[i] {
			wrong++
		}
	}
	return float64(wrong) / float64(len(test))
}

// TestBaselineQuality: the protocol of eval/testdata/README.md (10 stratified 70/30
// splits, seeds 0..9, our own split code), each training split streamed
// once in random order through the Standardize wrapper (the reference
// figures standardise on the training split in batch), test error on the
// frozen model. References (batch, scikit-learn): logistic regression
// 3.04 ± 1.13% on breast_cancer and 16.79 ± 4.20% on heart_scale.
//
// Measured (one pass, mean ± sd over the splits): breast_cancer logistic
// 4.09 ± 1.67%, LDA 4.97 ± 1.31%; heart_scale logistic 15.68 ± 2.71%, LDA
// 16.42 ± 2.35%.
func TestBaselineQuality(t *testing.T) {
	for _, tc := range []struct {
		file          string
		rows          int
		maxLog, maxLD float64
	}{
		{"breast_cancer", 569, 0.05, 0.07},
		{"heart_scale", 270, 0.22, 0.22},
	} {
		x, y := readCSV(t, "testdata/"+tc.file+".csv")
		if len(x) != tc.rows {
			t.Fatalf("%s: %d rows", tc.file, len(x))
		}
		d := len(x[0])
		// Learning rate and L2 are the service defaults.
		lg := Spec{Type: LogisticName, Dim: d, Params: &LogisticParams{LearningRate: DefaultLearningRate, L2: DefaultL2}, Standardize: true}
		ld := Spec{Type: LDAName, Dim: d, Standardize: true}
		var eLog, eLD, sLog, sLD float64
		for seed := range uint64(10) {
			train, test := blSplit(y, seed)
			a, b := blTestError(t, lg, x, y, train, test), blTestError(t, ld, x, y, train, test)
			eLog += a / 10
			eLD += b / 10
			sLog += a * a / 10
			sLD += b * b / 10
		}
		t.Logf("%s: logistic %.2f ± %.2f%%, lda %.2f ± %.2f%% test error (10 splits, one pass)", tc.file,
			100*eLog, 100*math.Sqrt(max(0, sLog-eLog*eLog)), 100*eLD, 100*math.Sqrt(max(0, sLD-eLD*eLD)))
		if eLog > tc.maxLog || eLD > tc.maxLD {
			t.Errorf("%s: logistic %.4f (max %v), lda %.4f (max %v)", tc.file, eLog, tc.maxLog, eLD, tc.maxLD)
		}
	}
}

// FuzzRestoreBaselines: Restore either rejects the bytes with ErrFormat or
// returns a model that re-encodes to the same bytes and can learn.
func FuzzRestoreBaselines(f *testing.F) {
	x, y := randomData(47, 80, 3, 0.5)
	for _, tc := range blCodecSpecs {
		m := blNew(f, tc.spec)
		for i := range x {
			m.Observe(x[i], y[i], true)
		}
		b, _ := m.MarshalBinary()
		f.Add(b)
		// The version-1 forms of the state (the legacy path) and, for a
		// wrapper, a version-2 wrapper around a version-1 inner model.
		if tc.spec.Standardize {
			v1 := stdAsVersion1(f, b, tc.spec, nil)
			f.Add(v1)
			st := envelopeEnd(f, b) + 8 + 32*tc.spec.Dim
			inner := b[st+4:]
			spec := tc.spec
			spec.Standardize = true
			tag, s := legacySpecOf(f, spec)
			f.Add(codec.AppendBytes(bytes.Clone(b[:st]), asVersion1(f, inner, tag, s)))
		} else {
			tag, s := legacySpecOf(f, tc.spec)
			f.Add(asVersion1(f, b, tag, s))
		}
		b, _ = blNew(f, tc.spec).MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m := fuzzRestore(t, b, true)
		if m == nil {
			return
		}
		v := make([]float64, m.Dim())
		for i := range v {
			v[i] = float64(i) - 1
		}
		m.Observe(v, 1, true)
		m.Observe(v, -1, true)
	})
}
