package seed001

import (
	"cmp"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// synth returns a synthetic rating world: users with 15 to 329 ratings
// each of distinct movies, in half stars from a bias model with noise.
// User and movie ids are sparse so that an index used as an id shows.
func synth(users int, seed uint64) []Rating {
	rng := rand.New(rand.NewPCG(seed, 1))
	const movies = 1200
	bi := make([]float64, movies)
	for i := range bi {
		bi[i] = rng.NormFloat64() * 0.7
	}
	var out []Rating
	for u := range users {
		bu := rng.NormFloat64() * 0.5
		n := 15 + rng.IntN(315)
		for _, i := range rng.Perm(movies)[:n] {
			v := math.Round(2*(3.5+bu+bi[i]+0.8*rng.NormFloat64())) / 2
			out = append(out, Rating{User: 7*u + 3, Movie: 11*i + 5, Value: min(5, max(0.5, v))})
		}
	}
	return out
}

// near reports whether a and b agree to tol, relative to their size when
// larger than 1.
func near(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*max(1, math.Abs(a), math.Abs(b))
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		xs   []float64
		want float64
	}{
		{[]float64{3}, 3},
		{[]float64{5, 1, 4}, 4},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{0.5, 5}, 2.75},
		{[]float64{2, 2, 1, 5, 4, 4}, 3},
	} {
		in := slices.Clone(c.xs)
		if got := Median(in); got != c.want {
			t.Errorf("Median(%v) = %g, want %g", c.xs, got, c.want)
		}
		if !slices.Equal(in, c.xs) {
			t.Errorf("Median modified its input: %v, was %v", in, c.xs)
		}
	}
	if got := Median(nil); !math.IsNaN(got) {
		t.Errorf("Median(nil) = %g, want NaN", got)
	}
}

func TestMeasures(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 8, 57} {
		y, f := make([]float64, n), make([]float64, n)
		for i := range n {
			y[i] = float64(1+rng.IntN(10)) / 2
			f[i] = rng.NormFloat64() * 2
		}
		var sq, ab float64
		for i := range n {
			for j := range n {
				d := (y[i] - y[j]) - (f[i] - f[j])
				sq += d * d
				ab += math.Abs(d)
			}
		}
		sq /= float64(n * n)
		ab /= float64(n * n)
		r := Measure(y, f)
		if !near(r.MSD, sq, 1e-12) || !near(r.M1D, ab, 1e-12) {
			t.Errorf("n=%d: Measure = %+v, brute force MSD %g M1D %g", n, r, sq, ab)
		}
		if r.MSD != MSD(y, f) || r.M1D != M1D(y, f) {
			t.Errorf("n=%d: Measure %+v differs from MSD %g, M1D %g", n, r, MSD(y, f), M1D(y, f))
		}
		g := make([]float64, n)
		for i := range f {
			g[i] = f[i] + 123.25
		}
		if s := Measure(y, g); !near(s.MSD, r.MSD, 1e-12) || !near(s.M1D, r.M1D, 1e-12) {
			t.Errorf("n=%d: f + c gives %+v, f gives %+v", n, s, r)
		}
	}
	if r := Measure(nil, nil); !math.IsNaN(r.MSD) || !math.IsNaN(r.M1D) {
		t.Errorf("Measure of nothing = %+v, want NaN", r)
	}
}

func TestUserMeasure(t *testing.T) {
	u := TestUser{User: 1, Test: []Rating{{1, 10, 4}, {1, 20, 2}, {1, 30, 3.5}}}
	scores := map[int]float64{10: 0.5, 20: -1, 30: 2, 99: 7}
	got, err := u.Measure(scores)
	if err != nil {
		t.Fatal(err)
	}
	if want := Measure([]float64{4, 2, 3.5}, []float64{0.5, -1, 2}); got != want {
		t.Errorf("Measure = %+v, want %+v", got, want)
	}
	delete(scores, 20)
	if _, err := u.Measure(scores); err == nil {
		t.Error("a missing score gave no error")
	}
}

func TestMeanStd(t *testing.T) {
	m, s := MeanStd([]float64{1, 2, 3, 4})
	if m != 2.5 || !near(s, math.Sqrt(5.0/3), 1e-15) {
		t.Errorf("MeanStd = %g, %g; want 2.5, %g", m, s, math.Sqrt(5.0/3))
	}
	if m, s := MeanStd([]float64{7}); m != 7 || !math.IsNaN(s) {
		t.Errorf("MeanStd of one = %g, %g; want 7, NaN", m, s)
	}
	a := Average([]Result{{1, 2}, {3, 6}})
	if a != (Result{2, 4}) {
		t.Errorf("Average = %+v", a)
	}
}

// lemma returns the predictions at zs of f = Σ α_i k(x_i, ·) with α
// solving the paper's form (D K + (m²λ/2) I) α = D y, D = mI − 11ᵀ, by
// general LU.
func lemma(t *testing.T, k func(a, b []float64) float64, lambda float64, xs [][]float64, ys []float64, zs [][]float64) []float64 {
	t.Helper()
	m := len(xs)
	d := mat.NewDense(m, m, nil)
	km := mat.NewDense(m, m, nil)
	for i := range m {
		for j := range m {
			d.Set(i, j, -1)
			km.Set(i, j, k(xs[i], xs[j]))
		}
		d.Set(i, i, float64(m)-1)
	}
	var a mat.Dense
	a.Mul(d, km)
	for i := range m {
		a.Set(i, i, a.At(i, i)+float64(m*m)*lambda/2)
	}
	var b, alpha mat.VecDense
	b.MulVec(d, mat.NewVecDense(m, slices.Clone(ys)))
	var lu mat.LU
	lu.Factorize(&a)
	if err := lu.SolveVecTo(&alpha, false, &b); err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(zs))
	for s, z := range zs {
		for i := range m {
			out[s] += alpha.AtVec(i) * k(xs[i], z)
		}
	}
	return out
}

// tiny returns m random inputs of dimension dim and ratings.
func tiny(rng *rand.Rand, m, dim int) ([][]float64, []float64) {
	xs := make([][]float64, m)
	ys := make([]float64, m)
	for i := range xs {
		xs[i] = make([]float64, dim)
		for j := range xs[i] {
			xs[i][j] = float64(1+rng.IntN(10)) / 2
		}
		ys[i] = float64(1+rng.IntN(10)) / 2
	}
	return xs, ys
}

func rbf(gamma float64) func(a, b []float64) float64 {
	return func(a, b []float64) float64 { return math.Exp(-gamma * sqDist(a, b)) }
}

func TestFitLemma(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, c := range []struct {
		m             int
		gamma, lambda float64
	}{{5, 0.5, 0.1}, {8, 0.03125, 1e-3}, {12, 0.125, 1}, {9, 8, 1e-5}} {
		xs, ys := tiny(rng, c.m, 4)
		zs, _ := tiny(rng, 6, 4)
		zs = append(zs, xs[0])
		p := Params{Lambda: c.lambda, Kernels: []Kernel{{Gamma: c.gamma, V: 1}}}
		f, err := Fit(p, xs, ys)
		if err != nil {
			t.Fatal(err)
		}
		want := lemma(t, rbf(c.gamma), c.lambda, xs, ys, zs)
		for s, z := range zs {
			if got := f.Predict(z); !near(got, want[s], 1e-9) {
				t.Errorf("%v, m=%d: f(z%d) = %.15g, Theorem 1 form gives %.15g", p, c.m, s, got, want[s])
			}
		}
	}
}

func TestFitMultiple(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	xs, ys := tiny(rng, 10, 3)
	zs, _ := tiny(rng, 5, 3)
	p := Params{Lambda: 0.01, Kernels: []Kernel{RBF(1, 2), RBF(4, 1)}}
	f, err := Fit(p, xs, ys)
	if err != nil {
		t.Fatal(err)
	}
	kbar := func(a, b []float64) float64 { return rbf(p.Kernels[0].Gamma)(a, b)/2 + rbf(p.Kernels[1].Gamma)(a, b) }
	want := lemma(t, kbar, p.Lambda, xs, ys, zs)
	for s, z := range zs {
		if got := f.Predict(z); !near(got, want[s], 1e-9) {
			t.Errorf("f(z%d) = %.15g, LSRRank on K̄ gives %.15g", s, got, want[s])
		}
	}
	if k := RBF(4, 1); k.Gamma != 1.0/32 || k.Sigma() != 4 {
		t.Errorf("RBF(4, 1) = %+v, σ %g", k, k.Sigma())
	}
}

// TestFitCentring: the centred model learns rating differences, so a
// constant added to the ratings changes no prediction; without H it
// would.
func TestFitCentring(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	xs, ys := tiny(rng, 10, 3)
	zs, _ := tiny(rng, 5, 3)
	shifted := make([]float64, len(ys))
	for i, y := range ys {
		shifted[i] = y + 100
	}
	p := Params{Lambda: 0.1, Kernels: []Kernel{RBF(1, 1)}}
	f, err := Fit(p, xs, ys)
	if err != nil {
		t.Fatal(err)
	}
	g, err := Fit(p, xs, shifted)
	if err != nil {
		t.Fatal(err)
	}
	for s, z := range zs {
		if a, b := f.Predict(z), g.Predict(z); !near(a, b, 1e-9) {
			t.Errorf("f(z%d) = %g, %g after adding 100 to the ratings", s, a, b)
		}
	}
}

func TestFitErrors(t *testing.T) {
	xs, ys := tiny(rand.New(rand.NewPCG(9, 9)), 4, 2)
	for _, p := range []Params{
		{Lambda: 0, Kernels: []Kernel{RBF(1, 1)}},
		{Lambda: 1},
		{Lambda: 1, Kernels: []Kernel{{Gamma: 1, V: 0}}},
		{Lambda: 1, Kernels: []Kernel{{Gamma: -1, V: 1}}},
	} {
		if _, err := Fit(p, xs, ys); err == nil {
			t.Errorf("Fit(%+v) gave no error", p)
		}
	}
	if _, err := Fit(Params{Lambda: 1, Kernels: []Kernel{RBF(1, 1)}}, xs, ys[:3]); err == nil {
		t.Error("Fit with 4 inputs and 3 ratings gave no error")
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	csv := "user,item,rating,time\n2,10,4.0,1\n1,30,2.5,2\n1,10,3.0,3\n1,30,5.0,4\n"
	if err := os.WriteFile(filepath.Join(dir, "ratings.csv"), []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(d.Users(), []int{1, 2}) {
		t.Errorf("Users = %v", d.Users())
	}
	if got, want := d.Ratings(1), []Rating{{1, 10, 3}, {1, 30, 5}}; !slices.Equal(got, want) {
		t.Errorf("Ratings(1) = %v, want %v (sorted by movie, the last of a repeat)", got, want)
	}
	if d.Ratings(3) != nil {
		t.Errorf("Ratings(3) = %v", d.Ratings(3))
	}
	if err := os.WriteFile(filepath.Join(dir, "ratings.csv"), []byte(csv+"1,x,3,5\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(dir); err == nil || !strings.Contains(err.Error(), "line 6") {
		t.Errorf("a bad movie id: %v", err)
	}
}

func TestTrial(t *testing.T) {
	d := FromRatings(synth(400, 1))
	count := func(u int) int { return len(d.Ratings(u)) }
	for _, g := range Groups {
		var members []int
		for _, u := range d.Users() {
			if g.Contains(count(u)) {
				members = append(members, u)
			}
		}
		if len(members) < 15 {
			t.Fatalf("group %v: only %d synthetic users", g, len(members))
		}
		for _, c := range []struct{ maxRefs, maxTests int }{{MaxRefs, MaxTests}, {10, 40}} {
			tr := d.Trial(g, 0, 42, c.maxRefs, c.maxTests)
			if len(tr.Refs) != min(c.maxRefs, len(members)) || !slices.IsSorted(tr.Refs) {
				t.Errorf("%v: %d refs of %d (max %d), sorted %v", g, len(tr.Refs), len(members), c.maxRefs, slices.IsSorted(tr.Refs))
			}
			pool := 0
			for _, u := range d.Users() {
				if n := count(u); TestMin <= n && n <= TestMax && !slices.Contains(tr.Refs, u) {
					pool++
				}
			}
			if len(tr.Tests) != min(c.maxTests, pool) {
				t.Errorf("%v: %d test users, pool %d, max %d", g, len(tr.Tests), pool, c.maxTests)
			}
			for _, u := range tr.Refs {
				if !g.Contains(count(u)) {
					t.Errorf("%v: reference user %d has %d ratings", g, u, count(u))
				}
			}
			if !slices.IsSortedFunc(tr.Tests, func(a, b TestUser) int { return cmp.Compare(a.User, b.User) }) {
				t.Errorf("%v: test users not in ascending order", g)
			}
			for _, tu := range tr.Tests {
				n := count(tu.User)
				if n < TestMin || n > TestMax || slices.Contains(tr.Refs, tu.User) {
					t.Errorf("%v: test user %d has %d ratings, reference %v", g, tu.User, n, slices.Contains(tr.Refs, tu.User))
				}
				if len(tu.Train) != n/2 {
					t.Errorf("%v: user %d: %d train of %d", g, tu.User, len(tu.Train), n)
				}
				all := append(slices.Clone(tu.Train), tu.Test...)
				slices.SortFunc(all, func(a, b Rating) int { return cmp.Compare(a.Movie, b.Movie) })
				if !slices.Equal(all, d.Ratings(tu.User)) {
					t.Errorf("%v: user %d: train and test are not a partition of the ratings", g, tu.User)
				}
			}
		}
	}
	// The checks above kept the reference users of a group overlapping
	// the test range out of its test users.
	if tr := d.Trial(Groups[2], 0, 42, MaxRefs, MaxTests); !slices.ContainsFunc(tr.Refs, func(u int) bool { return count(u) >= TestMin }) {
		t.Fatalf("%v: no reference user could have been a test user", Groups[2])
	}
	a := d.Trial(Groups[1], 3, 42, MaxRefs, MaxTests)
	if b := d.Trial(Groups[1], 3, 42, MaxRefs, MaxTests); !reflect.DeepEqual(a, b) {
		t.Error("the same arguments gave different trials")
	}
	same := func(b *Trial) bool { return reflect.DeepEqual(a.Tests, b.Tests) }
	if same(d.Trial(Groups[1], 4, 42, MaxRefs, MaxTests)) || same(d.Trial(Groups[1], 3, 43, MaxRefs, MaxTests)) {
		t.Error("another repetition or seed gave the same test users and splits")
	}
	if x, y := d.Trial(Groups[0], 0, 42, 10, 40), d.Trial(Groups[0], 1, 42, 10, 40); slices.Equal(x.Refs, y.Refs) {
		t.Error("another repetition drew the same 10 reference users")
	}
}

func TestInput(t *testing.T) {
	d := FromRatings(synth(400, 2))
	tr := d.Trial(Groups[0], 0, 1, 8, 2)
	rated := map[int]bool{}
	for j, u := range tr.Refs {
		vs := []float64{}
		for _, r := range d.Ratings(u) {
			vs = append(vs, r.Value)
			rated[r.Movie] = true
		}
		if tr.Medians[j] != Median(vs) {
			t.Errorf("median of reference %d = %g, want %g", u, tr.Medians[j], Median(vs))
		}
	}
	movies := []int{-1} // rated by no one
	for m := range rated {
		movies = append(movies, m)
	}
	slices.Sort(movies)
	for _, m := range movies {
		x := tr.Input(m)
		for j, u := range tr.Refs {
			want := tr.Medians[j]
			if i, ok := slices.BinarySearchFunc(d.Ratings(u), m, func(r Rating, m int) int { return cmp.Compare(r.Movie, m) }); ok {
				want = d.Ratings(u)[i].Value
			}
			if x[j] != want {
				t.Fatalf("Input(%d)[%d] = %g, want %g", m, j, x[j], want)
			}
		}
	}
	// The sparse distances are exactly the dense ones for half stars.
	for _, a := range movies[:20] {
		for _, b := range movies[len(movies)-20:] {
			if got, want := tr.dist2(a, b), sqDist(tr.Input(a), tr.Input(b)); got != want {
				t.Fatalf("dist2(%d, %d) = %g, dense %g", a, b, got, want)
			}
		}
	}
}

// inputs returns the trial's inputs and ratings for rs.
func inputs(tr *Trial, rs []Rating) ([][]float64, []float64) {
	xs := make([][]float64, len(rs))
	ys := make([]float64, len(rs))
	for i, r := range rs {
		xs[i], ys[i] = tr.Input(r.Movie), r.Value
	}
	return xs, ys
}

func TestEvaluate(t *testing.T) {
	d := FromRatings(synth(400, 3))
	tr := d.Trial(Groups[1], 0, 5, MaxRefs, 6)
	p := Params{Lambda: 0.01, Kernels: []Kernel{RBF(1, 4), RBF(4, 1)}}
	ev, err := tr.Evaluate(p)
	if err != nil {
		t.Fatal(err)
	}
	for i, u := range tr.Tests {
		xs, ys := inputs(tr, u.Train)
		f, err := Fit(p, xs, ys)
		if err != nil {
			t.Fatal(err)
		}
		scores := map[int]float64{}
		for k, r := range u.Test {
			want := f.Predict(tr.Input(r.Movie))
			if got := ev.Predictions[i][k]; got != want {
				t.Errorf("user %d movie %d: Evaluate %.17g, Fit %.17g", u.User, r.Movie, got, want)
			}
			scores[r.Movie] = want
		}
		if r, err := u.Measure(scores); err != nil || r != ev.Users[i] {
			t.Errorf("user %d: Evaluate %+v, Measure %+v (%v)", u.User, ev.Users[i], r, err)
		}
	}
	if ev.Mean != Average(ev.Users) {
		t.Errorf("Mean %+v, Average of Users %+v", ev.Mean, Average(ev.Users))
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	if one, err := tr.Evaluate(p); err != nil || !reflect.DeepEqual(one, ev) {
		t.Errorf("one goroutine gave another evaluation (%v)", err)
	}
}

func TestSelect(t *testing.T) {
	d := FromRatings(synth(400, 4))
	tr := d.Trial(Groups[2], 0, 9, MaxRefs, 8)
	grid := LSRRankGrid()
	for i, p := range MLSRRankGrid() {
		if i%15 == 0 {
			grid = append(grid, p)
		}
	}
	best, results, err := tr.Select(grid)
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(grid) {
		t.Fatalf("%d results for %d settings", len(results), len(grid))
	}
	for i, p := range grid {
		ev, err := tr.Evaluate(p)
		if err != nil {
			t.Fatal(err)
		}
		if results[i] != ev.Mean {
			t.Errorf("%v: Select %+v, Evaluate %+v", p, results[i], ev.Mean)
		}
		if ev.Mean.MSD < results[best].MSD {
			t.Errorf("%v has MSD %g, less than the selected %v's %g", p, ev.Mean.MSD, grid[best], results[best].MSD)
		}
	}
	if _, _, err := tr.Select(nil); err == nil {
		t.Error("an empty grid gave no error")
	}
}

func TestGrids(t *testing.T) {
	ls, ms := LSRRankGrid(), MLSRRankGrid()
	if len(ls) != 49 || len(ms) != 735 {
		t.Fatalf("grids of %d and %d settings, want 49 and 735", len(ls), len(ms))
	}
	seen := map[string]bool{}
	for _, p := range append(ls, ms...) {
		s := p.String()
		if seen[s] {
			t.Errorf("%s twice", s)
		}
		seen[s] = true
		minV := math.Inf(1)
		for _, k := range p.Kernels {
			minV = min(minV, k.V)
		}
		if minV != 1 {
			t.Errorf("%s: least v is %g", s, minV)
		}
		if len(p.Kernels) == 2 && !(p.Kernels[0].Sigma() < p.Kernels[1].Sigma()) {
			t.Errorf("%s: σ1 ≥ σ2", s)
		}
	}
	if got := ls[0].String(); got != "λ=1e-05 σ=0.015625 v=1" {
		t.Errorf("first setting %q", got)
	}
	if got := ms[len(ms)-1].String(); got != "λ=10 σ1=16 v1=4 σ2=64 v2=1" {
		t.Errorf("last setting %q", got)
	}
}
