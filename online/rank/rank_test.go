package rank

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"

	"github.com/streamer/streamer/online/internal/vmath"
)

// readBoston returns the boston_ordinal features (row-major, d = 13) and
// levels.
func readBoston(t testing.TB) ([]float64, []float64, int) {
	t.Helper()
	f, err := os.Open("testdata/boston_ordinal.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	d := len(recs[0]) - 1
	var X, y []float64
	for _, r := range recs[1:] {
		for j, s := range r {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatal(err)
			}
			if j < d {
				X = append(X, v)
			} else {
				y = append(y, v)
			}
		}
	}
	return X, y, d
}

type golden struct {
	Measures []struct {
		Name                             string
		F, Y                             []float64
		Pearson, KendallTauB, KendallTau float64
		Spearman, RankingError, MSD, M1D float64
	}
	Splits []struct {
		Seed        int
		Train, Test []int
	}
	LSRRank, KRR struct {
		Split  int
		Gamma  float64
		Lambda float64
		Alpha  []float64
		FTest  []float64
	}
}

func (g *golden) UnmarshalJSON(b []byte) error {
	// The Python script writes snake_case keys.
	b = []byte(strings.NewReplacer(`"kendall_tau_b"`, `"KendallTauB"`, `"kendall_tau"`, `"KendallTau"`,
		`"ranking_error"`, `"RankingError"`, `"f_test"`, `"FTest"`).Replace(string(b)))
	type plain golden
	return json.Unmarshal(b, (*plain)(g))
}

func readGolden(t testing.TB) *golden {
	t.Helper()
	b, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	g := new(golden)
	if err := json.Unmarshal(b, g); err != nil {
		t.Fatal(err)
	}
	return g
}

// standardize returns the rows idx of X, standardised with the mean and
// population standard deviation of the rows fit (StandardScaler).
func standardize(X []float64, d int, fit, idx []int) []float64 {
	mu, sd := make([]float64, d), make([]float64, d)
	for _, i := range fit {
		for j := range d {
			mu[j] += X[i*d+j]
		}
	}
	for j := range d {
		mu[j] /= float64(len(fit))
	}
	for _, i := range fit {
		for j := range d {
			v := X[i*d+j] - mu[j]
			sd[j] += v * v
		}
	}
	for j := range d {
		sd[j] = math.Sqrt(sd[j] / float64(len(fit)))
		if sd[j] == 0 {
			sd[j] = 1
		}
	}
	out := make([]float64, 0, len(idx)*d)
	for _, i := range idx {
		for j := range d {
			out = append(out, (X[i*d+j]-mu[j])/sd[j])
		}
	}
	return out
}

func pick(y []float64, idx []int) []float64 {
	out := make([]float64, len(idx))
	for k, i := range idx {
		out[k] = y[i]
	}
	return out
}

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }

func TestMeasuresByHand(t *testing.T) {
	for _, tc := range []struct {
		name                                   string
		f, y                                   []float64
		err, tau, tauB, rho, pearson, msd, m1d float64
	}{
		// One discordant pair (gap 1) of 6; r = y − f = (0, 1, −1, 0).
		{"one_swap", []float64{1, 2, 3, 4}, []float64{1, 3, 2, 4}, 1.0 / 6, 4.0 / 6, 4.0 / 6, 0.8, 0.8, 1, 0.75},
		// A tie in f inside P counts ½: τ = 2/3, τ-b = 2/sqrt(2·3).
		{"tie_in_f", []float64{1, 1, 2}, []float64{1, 2, 3}, 0.5 / 3, 2.0 / 3, 2 / math.Sqrt(6), math.Sqrt(3) / 2, math.Sqrt(3) / 2, 4.0 / 9, 4.0 / 9},
		// Perfect reversal; a y-tie is not in P.
		{"reversed", []float64{3, 2, 1, 0}, []float64{0, 1, 1, 2}, (1 + 1 + 2 + 1 + 1) / 5.0, -1, -5 / math.Sqrt(6*5), -math.Sqrt(0.9), -math.Sqrt(0.9), math.NaN(), math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Measure(tc.f, tc.y)
			check := func(name string, got, want float64) {
				if !math.IsNaN(want) && !near(got, want, 1e-12) {
					t.Errorf("%s = %v, want %v", name, got, want)
				}
			}
			check("ranking error", m.RankingError, tc.err)
			check("tau", m.KendallTau, tc.tau)
			check("tau-b", m.KendallTauB, tc.tauB)
			check("spearman", m.Spearman, tc.rho)
			check("pearson", m.Pearson, tc.pearson)
			check("msd", m.MSD, tc.msd)
			check("m1d", m.M1D, tc.m1d)
		})
	}
	if m := Measure([]float64{1, 1, 1}, []float64{1, 2, 3}); !math.IsNaN(m.KendallTauB) || !math.IsNaN(m.Pearson) || m.KendallTau != 0 {
		t.Errorf("constant f: %+v", m)
	}
}

func TestMeasuresAgainstScipy(t *testing.T) {
	for _, c := range readGolden(t).Measures {
		m := Measure(c.F, c.Y)
		for _, v := range []struct {
			name      string
			got, want float64
		}{
			{"pearson", m.Pearson, c.Pearson}, {"kendall tau-b", m.KendallTauB, c.KendallTauB},
			{"kendall tau (somersd)", m.KendallTau, c.KendallTau}, {"spearman", m.Spearman, c.Spearman},
			{"ranking error", m.RankingError, c.RankingError}, {"msd", m.MSD, c.MSD}, {"m1d", m.M1D, c.M1D},
		} {
			if !near(v.got, v.want, 1e-12) {
				t.Errorf("%s: %s = %.15g, scipy/brute force %.15g", c.Name, v.name, v.got, v.want)
			}
		}
	}
}

// TestMeasuresBruteForce checks the O(n log n) pair counts against O(n²)
// on random data with many ties.
func TestMeasuresBruteForce(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 50 {
		n := 2 + r.IntN(60)
		f, y := make([]float64, n), make([]float64, n)
		for i := range f {
			f[i], y[i] = float64(r.IntN(5)), float64(r.IntN(4))+r.Float64()*float64(r.IntN(2))
		}
		var P, conc, disc, werr float64
		for i := range n {
			for j := range n {
				if y[i] > y[j] {
					P++
					switch {
					case f[i] > f[j]:
						conc++
					case f[i] < f[j]:
						disc++
						werr += y[i] - y[j]
					default:
						werr += (y[i] - y[j]) / 2
					}
				}
			}
		}
		m := Measure(f, y)
		if P > 0 && (!near(m.KendallTau, (conc-disc)/P, 1e-12) || !near(m.RankingError, werr/P, 1e-12)) {
			t.Fatalf("n=%d: tau %v want %v, err %v want %v", n, m.KendallTau, (conc-disc)/P, m.RankingError, werr/P)
		}
	}
}

func randomData(r *rand.Rand, m, d int) ([]float64, []float64) {
	X, y := make([]float64, m*d), make([]float64, m)
	for i := range m {
		var s float64
		for j := range d {
			X[i*d+j] = r.NormFloat64()
			s += math.Sin(float64(j+1) * X[i*d+j])
		}
		y[i] = s + 0.3*r.NormFloat64()
	}
	return X, y
}

// TestTheorem1BlockSystem solves MLSRRank's lm × lm system (7) directly
// and checks that the m × m reduced SPD solve gives the same f (Done-when 1).
func TestTheorem1BlockSystem(t *testing.T) {
	const m, d, lambda = 40, 3, 0.01
	ks := []Kernel{{Gamma: 0.3, V: 1}, {Gamma: 2, V: 2.5}}
	l := len(ks)
	r := rand.New(rand.NewPCG(3, 4))
	X, y := randomData(r, m, d)
	row := func(i int) []float64 { return X[i*d : (i+1)*d] }
	kt := func(t int, a, b []float64) float64 { return math.Exp(-ks[t].Gamma * sqDist(a, b)) }
	// D = mI − 11ᵀ; A(t,s) = δ_ts mλv_t I + (2/m) D K_s; rhs (2/m) D y.
	Dm := mat.NewDense(m, m, nil)
	for i := range m {
		for j := range m {
			v := -1.0
			if i == j {
				v += m
			}
			Dm.Set(i, j, v)
		}
	}
	A := mat.NewDense(l*m, l*m, nil)
	rhs := mat.NewDense(l*m, 1, nil)
	var DY mat.Dense
	DY.Mul(Dm, mat.NewDense(m, 1, y))
	for s := range l {
		K := mat.NewDense(m, m, nil)
		for i := range m {
			for j := range m {
				K.Set(i, j, kt(s, row(i), row(j)))
			}
		}
		var DK mat.Dense
		DK.Mul(Dm, K)
		for tt := range l {
			for i := range m {
				for j := range m {
					v := 2 / float64(m) * DK.At(i, j)
					if tt == s && i == j {
						v += m * lambda * ks[tt].V
					}
					A.Set(tt*m+i, s*m+j, v)
				}
			}
		}
		for i := range m {
			rhs.Set(s*m+i, 0, 2/float64(m)*DY.At(i, 0))
		}
	}
	var alpha mat.Dense
	if err := alpha.Solve(A, rhs); err != nil {
		t.Fatal(err)
	}
	mod, err := Fit(context.Background(), X, d, y, Config{Method: LSRRank, Kernels: ks, Lambda: lambda})
	if err != nil {
		t.Fatal(err)
	}
	Xt, _ := randomData(r, 25, d)
	var worst float64
	for q := range 25 + m {
		x := row(q % m)
		if q >= m {
			x = Xt[(q-m)*d : (q-m+1)*d]
		}
		var fb float64
		for s := range l {
			for i := range m {
				fb += alpha.At(s*m+i, 0) * kt(s, row(i), x)
			}
		}
		fr := mod.Predict(x) - mod.Offset()
		worst = math.Max(worst, math.Abs(fb-fr))
	}
	t.Logf("max |f_block − f_reduced| = %.3g", worst)
	if worst > 1e-8 {
		t.Fatalf("block and reduced solutions differ by %g", worst)
	}
	// α^t = β / v_t: the block solution is the reduced one, reweighted.
	for i := range m {
		if !near(alpha.At(i, 0), mod.Alpha()[i], 1e-8) || !near(alpha.At(m+i, 0), mod.Alpha()[i]/2.5, 1e-8) {
			t.Fatalf("α[%d]: block %v, %v; reduced %v", i, alpha.At(i, 0), alpha.At(m+i, 0), mod.Alpha()[i])
		}
	}
}

// TestLemma1System checks the centred solve against the seed's own form
// (D K + (m²λ/2) I) α = D y.
func TestLemma1System(t *testing.T) {
	const m, d, lambda = 30, 2, 0.003
	r := rand.New(rand.NewPCG(5, 6))
	X, y := randomData(r, m, d)
	mod, err := Fit(context.Background(), X, d, y, Config{Kernels: []Kernel{{Gamma: 0.7}}, Lambda: lambda})
	if err != nil {
		t.Fatal(err)
	}
	a := mod.Alpha()
	for i := range m {
		var lhs, sa float64
		for j := range m {
			sa += a[j] * math.Exp(-0.7*sqDist(X[i*d:(i+1)*d], X[j*d:(j+1)*d]))
		}
		var ybar, kbar float64
		for k := range m {
			ybar += y[k]
			var s float64
			for j := range m {
				s += a[j] * math.Exp(-0.7*sqDist(X[k*d:(k+1)*d], X[j*d:(j+1)*d]))
			}
			kbar += s
		}
		lhs = m*sa - kbar + m*m*lambda/2*a[i]
		if rhs := m*y[i] - ybar; !near(lhs, rhs, 1e-9) {
			t.Fatalf("row %d: %v ≠ %v", i, lhs, rhs)
		}
	}
}

// TestGoldenSklearn: LSRRank with one RBF kernel is KernelRidge on the
// centred kernel and targets; KRR is KernelRidge (Done-when 2).
func TestGoldenSklearn(t *testing.T) {
	g := readGolden(t)
	X, y, d := readBoston(t)
	for _, tc := range []struct {
		name   string
		method Method
		ref    struct {
			Split  int
			Gamma  float64
			Lambda float64
			Alpha  []float64
			FTest  []float64
		}
	}{{"lsrrank", LSRRank, g.LSRRank}, {"krr", KRR, g.KRR}} {
		t.Run(tc.name, func(t *testing.T) {
			sp := g.Splits[tc.ref.Split]
			Xtr, Xte := standardize(X, d, sp.Train, sp.Train), standardize(X, d, sp.Train, sp.Test)
			mod, err := Fit(context.Background(), Xtr, d, pick(y, sp.Train), Config{Method: tc.method, Kernels: []Kernel{{Gamma: tc.ref.Gamma}}, Lambda: tc.ref.Lambda})
			if err != nil {
				t.Fatal(err)
			}
			var worstA, worstF float64
			for i, a := range mod.Alpha() {
				worstA = math.Max(worstA, math.Abs(a-tc.ref.Alpha[i]))
			}
			for k := range sp.Test {
				f := mod.Predict(Xte[k*d:(k+1)*d]) - mod.Offset()
				worstF = math.Max(worstF, math.Abs(f-tc.ref.FTest[k]))
			}
			t.Logf("max |Δα| = %.2g, max |Δf(test)| = %.2g (m = %d)", worstA, worstF, mod.N())
			if worstA > 1e-6 || worstF > 1e-6 {
				t.Fatalf("differs from sklearn: α %g, f %g", worstA, worstF)
			}
		})
	}
}

func TestFitErrors(t *testing.T) {
	ctx := context.Background()
	X := []float64{0, 1, 2}
	y := []float64{1, 2, 3}
	for _, tc := range []struct {
		name string
		cfg  Config
		y    []float64
	}{
		{"no kernels", Config{Lambda: 1}, y},
		{"zero lambda", Config{Kernels: []Kernel{{Gamma: 1}}}, y},
		{"negative gamma", Config{Kernels: []Kernel{{Gamma: -1}}, Lambda: 1}, y},
		{"linear gamma", Config{Kernels: []Kernel{{Type: Linear, Gamma: 1}}, Lambda: 1}, y},
		{"negative v", Config{Kernels: []Kernel{{Gamma: 1, V: -2}}, Lambda: 1}, y},
		{"nan target", Config{Kernels: []Kernel{{Gamma: 1}}, Lambda: 1}, []float64{1, math.NaN(), 3}},
	} {
		if _, err := Fit(ctx, X, 1, tc.y, tc.cfg); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: err %v, want ErrConfig", tc.name, err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Fit(cctx, X, 1, y, Config{Kernels: []Kernel{{Gamma: 1}}, Lambda: 1}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
}

// TestWeightsNormalised: v = (2, 4) is v = (1, 2).
func TestWeightsNormalised(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	X, y := randomData(r, 50, 2)
	a, _ := Fit(context.Background(), X, 2, y, Config{Kernels: []Kernel{{Gamma: 1, V: 2}, {Type: Linear, V: 4}}, Lambda: 0.01})
	b, _ := Fit(context.Background(), X, 2, y, Config{Kernels: []Kernel{{Gamma: 1, V: 1}, {Type: Linear, V: 2}}, Lambda: 0.01})
	for i := range 50 {
		if x := X[i*2 : i*2+2]; a.Predict(x) != b.Predict(x) {
			t.Fatal("weights not normalised")
		}
	}
	if k := a.Kernels(); k[0].V != 1 || k[1].V != 2 {
		t.Fatalf("kernels %+v", k)
	}
}

func TestExactRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	X, y := randomData(r, 60, 4)
	for _, cfg := range []Config{
		{Method: LSRRank, Kernels: []Kernel{{Gamma: 0.5}, {Gamma: 0.05, V: 3}}, Lambda: 1e-3},
		{Method: KRR, Kernels: []Kernel{{Type: Linear}}, Lambda: 0.1},
	} {
		m, err := Fit(context.Background(), X, 4, y, cfg)
		if err != nil {
			t.Fatal(err)
		}
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		m2, err := UnmarshalModel(b)
		if err != nil {
			t.Fatal(err)
		}
		b2, _ := m2.MarshalBinary()
		if !bytes.Equal(b, b2) || m2.Method() != cfg.Method {
			t.Fatal("re-encoding differs")
		}
		for i := range 60 {
			if x := X[i*4 : i*4+4]; m.Predict(x) != m2.Predict(x) {
				t.Fatal("prediction differs after round trip")
			}
		}
		for _, bad := range [][]byte{b[:len(b)-1], append(append([]byte(nil), b...), 0), append([]byte("RKEX\x02\x00"), b[6:]...), nil} {
			if _, err := UnmarshalModel(bad); !errors.Is(err, ErrFormat) {
				t.Fatalf("corrupt encoding: %v", err)
			}
		}
	}
}

func TestPredictDoesNotAllocate(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 1))
	X, y := randomData(r, 100, 3)
	m, _ := Fit(context.Background(), X, 3, y, Config{Kernels: []Kernel{{Gamma: 0.5}, {Type: Linear, V: 2}}, Lambda: 1e-3})
	fm, _ := NewFeatureMap(3, FeatureConfig{Kernels: []Kernel{{Gamma: 0.5}}, Features: 64, Seed: 1})
	s := NewSums(fm)
	for i := range 100 {
		s.Add(X[i*3:i*3+3], y[i])
	}
	f, err := s.Fit(1e-3)
	if err != nil {
		t.Fatal(err)
	}
	x := X[:3]
	if a := testing.AllocsPerRun(100, func() { m.Predict(x); f.Predict(x) }); a != 0 {
		t.Fatalf("Predict allocates %v", a)
	}
	i := 0
	if a := testing.AllocsPerRun(1000, func() {
		s.Add(X[i%100*3:i%100*3+3], y[i%100])
		s.Remove(X[i%100*3:i%100*3+3], y[i%100])
		i++
	}); a != 0 {
		t.Fatalf("Add/Remove allocate %v per event", a)
	}
}

// TestPredictPacked: a dense model, fitted or decoded, scores through its
// packed rows — one rbf kernel through vmath's rbf sum, a mixture through
// mixtureRows a block of 32 panels at a time (300 rows: two blocks) — to
// the general sum Σ αᵢ K̄(xᵢ, x) + b (math.Exp, row by row) within 1e-14
// of Σ|αᵢ K̄(xᵢ, x)| + |b|: one rbf with weights v = 1 and 3 (normalised
// away), two rbf widths, rbf with linear, linear alone.
func TestPredictPacked(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	const m, d = 300, 4
	X, y := make([]float64, m*d), make([]float64, m)
	for i := range X {
		X[i] = r.NormFloat64()
	}
	for i := range y {
		y[i] = X[i*d] + 0.1*r.NormFloat64()
	}
	for _, c := range []struct {
		name string
		ks   []Kernel
	}{
		{"rbf v=1", []Kernel{{Type: RBF, Gamma: 0.7}}},
		{"rbf v=3", []Kernel{{Type: RBF, Gamma: 0.7, V: 3}}},
		{"two rbf", []Kernel{{Type: RBF, Gamma: 0.2}, {Type: RBF, Gamma: 2, V: 3}}},
		{"rbf+linear", []Kernel{{Type: RBF, Gamma: 0.7}, {Type: Linear, V: 4}}},
		{"linear", []Kernel{{Type: Linear}}},
	} {
		mod, err := Fit(context.Background(), X, d, y, Config{Method: KRR, Kernels: c.ks, Lambda: 0.01})
		if err != nil {
			t.Fatal(err)
		}
		b, err := mod.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		dec, err := UnmarshalModel(b)
		if err != nil {
			t.Fatal(err)
		}
		if mod.packed == nil || dec.packed == nil {
			t.Fatalf("%s: not packed", c.name)
		}
		for range 50 {
			x := []float64{r.NormFloat64(), r.NormFloat64(), r.NormFloat64(), r.NormFloat64()}
			want, mag := mod.b, math.Abs(mod.b)
			for i, a := range mod.alpha {
				want += a * mod.k.eval(mod.x[i*d:(i+1)*d], x)
				mag += math.Abs(a * mod.k.eval(mod.x[i*d:(i+1)*d], x))
			}
			got := mod.Predict(x)
			if math.Abs(got-want) > 1e-14*mag {
				t.Fatalf("%s: Predict %v, the general sum %v", c.name, got, want)
			}
			if got2 := dec.Predict(x); math.Float64bits(got2) != math.Float64bits(got) {
				t.Fatalf("%s: decoded model %v, fitted %v", c.name, got2, got)
			}
		}
	}
}

// TestGramSingleRBF checks the Gram matrix of one rbf kernel (the
// vectorised path of gramUpper) against the general kernel sum: within
// 1e-15·(1 + γ‖xᵢ − xⱼ‖²) relative of math.Exp's entries (the two
// distances' roundings, up to d ulps, scaled by γd², and the exps' ulps),
// the entries Predict sums bit for
// bit (e^(−γ‖xᵢ − xⱼ‖²) by FMA distances and vmath.ExpNeg), the diagonal
// exactly 1, the lower triangle untouched; and a mixture of two rbf
// kernels the same way, term by term (Σ_t ExpNeg(−γ_t d²)/v_t in the
// kernels' order), and within the same bound of the general sum.
func TestGramSingleRBF(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 9))
	for _, m := range []int{1, 9, 37, 300} {
		const d = 5
		X, _ := randomData(r, m, d)
		for _, ks := range [][]Kernel{{{Type: RBF, Gamma: 0.4}}, {{Type: RBF, Gamma: 0.4}, {Type: RBF, Gamma: 3, V: 2}}} {
			k, err := newKernels(ks)
			if err != nil {
				t.Fatal(err)
			}
			a := make([]float64, m*m)
			for i := range a {
				a[i] = -1
			}
			if err := gramUpper(context.Background(), a, X, d, &k); err != nil {
				t.Fatal(err)
			}
			_, single := k.singleRBF()
			for i := range m {
				for j := range m {
					got := a[i*m+j]
					if j < i {
						if got != -1 {
							t.Fatalf("m %d: lower entry (%d, %d) written", m, i, j)
						}
						continue
					}
					general := k.eval(X[i*d:(i+1)*d], X[j*d:(j+1)*d])
					var d2 float64
					for c := range d {
						v := X[j*d+c] - X[i*d+c]
						d2 = math.FMA(v, v, d2)
					}
					if !single {
						var want float64
						for t, kt := range k.ks {
							want += vmath.ExpNeg(-kt.Gamma*d2) * k.inv[t]
						}
						if math.Float64bits(got) != math.Float64bits(want) || math.Abs(got-general) > 1e-15*(1+3*d2)*general+1e-300 {
							t.Fatalf("m %d, two kernels: (%d, %d) = %v, want %v (math.Exp: %v)", m, i, j, got, want, general)
						}
						continue
					}
					want := vmath.ExpNeg(-0.4 * d2)
					if math.Float64bits(got) != math.Float64bits(want) || math.Abs(got-general) > 1e-15*(1+0.4*d2)*general+1e-300 || (i == j && got != 1) {
						t.Fatalf("m %d: (%d, %d) = %v, want %v (math.Exp: %v)", m, i, j, got, want, general)
					}
				}
			}
		}
	}
}
