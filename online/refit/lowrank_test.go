package refit

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/lowrank"
	"github.com/streamer/streamer/online/onlinetest"
)

// TestLowRankConformance runs the conformance suite (online/onlinetest)
// on type "lowrank": its examples (dim×1 rank 1, 1×dim with probability,
// a capped fit), plain and standardised, bad parameters, encoding,
// truncation (ErrFormat), no allocation in Observe when scoring.
func TestLowRankConformance(t *testing.T) {
	typ := LowRankType()
	onlinetest.RunType(t, online.MustRegistry(typ), typ)
}

// matrixStream returns n events of d1×d2 matrices (entries N(0, 1),
// row-major) labelled by sign(<u vᵀ, X> + noise·ε): a rank-1 rule.
func matrixStream(seed uint64, n, d1, d2 int, noise float64) ([][]float64, []float64) {
	rng := rand.New(rand.NewPCG(seed, 11))
	u, v := make([]float64, d1), make([]float64, d2)
	for i := range u {
		u[i] = rng.NormFloat64()
	}
	for i := range v {
		v[i] = rng.NormFloat64()
	}
	X := make([][]float64, n)
	y := make([]float64, n)
	for i := range X {
		X[i] = make([]float64, d1*d2)
		var s float64
		for a := range d1 {
			for c := range d2 {
				x := rng.NormFloat64()
				X[i][a*d2+c] = x
				s += u[a] * x * v[c]
			}
		}
		y[i] = 1
		if s+noise*rng.NormFloat64()*math.Sqrt(float64(d1*d2))/4 < 0 {
			y[i] = -1
		}
	}
	return X, y
}

// lowRankSpecError returns the SpecError fields of err.
func specFields(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
			return
		}
		var se *online.SpecError
		if errors.As(e, &se) {
			out = append(out, se.Field+": "+se.Problem)
		}
	}
	walk(err)
	return out
}

// TestLowRankValidation: bad shapes, ranks and kernels are refused on the
// key at fault, the planned kernels with "not implemented yet".
func TestLowRankValidation(t *testing.T) {
	base := func(edit func(p *LowRankParams)) *LowRankParams {
		p := DefaultLowRankParams()
		p.Rank = 2
		p.Rows, p.Cols = 4, 4
		edit(&p)
		return &p
	}
	for _, tc := range []struct {
		name  string
		dim   int
		p     *LowRankParams
		field string // "" = valid
		text  string
	}{
		{"valid 4×4 rank 2", 16, base(func(*LowRankParams) {}), "", ""},
		{"rows inferred", 16, base(func(p *LowRankParams) { p.Rows = 0; p.Cols = 8 }), "", ""},
		{"shape too small", 16, base(func(p *LowRankParams) { p.Rows, p.Cols = 3, 5 }), "rows", "must hold the 16 features"},
		{"shape too large", 16, base(func(p *LowRankParams) { p.Rows, p.Cols = 5, 5 }), "rows", "rows·cols = dim"},
		{"side does not divide", 16, base(func(p *LowRankParams) { p.Rows, p.Cols = 3, 0 }), "rows", "3×?"},
		{"negative rows", 16, base(func(p *LowRankParams) { p.Rows = -4 }), "rows", "must be ≥ 0"},
		{"huge cols", 16, base(func(p *LowRankParams) { p.Cols = 1 << 40 }), "rows", "must hold"},
		{"rank too large", 16, base(func(p *LowRankParams) { p.Rank = 5 }), "rank", "1..min(rows, cols) = 4"},
		{"rank 2 of a column", 16, base(func(p *LowRankParams) { p.Rows, p.Cols = 0, 0 }), "rank", "1..min(rows, cols) = 1 for the shape 16×1"},
		{"rank 0", 16, base(func(p *LowRankParams) { p.Rank = 0 }), "rank", "got 0"},
		{"polynomial", 16, base(func(p *LowRankParams) { p.Kernel.Type = "polynomial" }), "kernel.type", "not implemented yet"},
		{"rbf", 16, base(func(p *LowRankParams) { p.Kernel.Type = "rbf" }), "kernel.type", "not implemented yet"},
		{"sigmoid", 16, base(func(p *LowRankParams) { p.Kernel.Type = "sigmoid" }), "kernel.type", "not a kernel of lowrank"},
		{"C", 16, base(func(p *LowRankParams) { p.C = math.Inf(1) }), "C", "> 0"},
		{"tol", 16, base(func(p *LowRankParams) { p.Tol = 1 }), "tol", "(0, 1)"},
		{"max_iterations", 16, base(func(p *LowRankParams) { p.MaxIterations = 0 }), "max_iterations", "1..10000"},
		{"probability", 16, base(func(p *LowRankParams) { p.Probability.Levels = 1 }), "probability.levels", "2..100"},
		{"guard", 16, base(func(p *LowRankParams) { p.Refit.Guard = 0.5 }), "refit.guard", "[0, 0.5)"},
	} {
		err := tc.p.Validate(tc.dim)
		if tc.field == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.name, err)
			}
			continue
		}
		found := false
		for _, f := range specFields(err) {
			if strings.HasPrefix(f, tc.field+": ") && strings.Contains(f, tc.text) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: got %v; want an error on %s containing %q", tc.name, specFields(err), tc.field, tc.text)
		}
		if _, err := LowRankType().New(tc.dim, tc.p); err == nil || !errors.Is(err, online.ErrSpec) {
			t.Errorf("%s: New: %v, want a SpecError", tc.name, err)
		}
	}
}

// TestLowRankShapeAndRankDefaults: rows and cols from SetShape (only when
// neither is set), before or after Complete, and the default rank
// following the shape: 2 for 20×20, 1 for dim×1, a given rank kept.
func TestLowRankShapeAndRankDefaults(t *testing.T) {
	none := func(string) bool { return false }
	rankGiven := func(k string) bool { return k == "rank" }
	for _, tc := range []struct {
		name             string
		given            func(string) bool
		shapeFirst       bool
		set              bool
		rows, cols, rank int
	}{
		{"shape then complete", none, true, true, 20, 20, 2},
		{"complete then shape", none, false, true, 20, 20, 2},
		{"no shape: dim×1", none, false, false, 0, 0, 1},
		{"given rank kept", rankGiven, false, true, 20, 20, 3},
	} {
		p := DefaultLowRankParams()
		if tc.name == "given rank kept" {
			p.Rank = 3
		}
		if tc.shapeFirst && tc.set {
			p.SetShape(20, 20)
		}
		p.Complete(400, tc.given)
		if !tc.shapeFirst && tc.set {
			p.SetShape(20, 20)
		}
		if p.Rows != tc.rows || p.Cols != tc.cols || p.Rank != tc.rank {
			t.Errorf("%s: %d×%d rank %d, want %d×%d rank %d", tc.name, p.Rows, p.Cols, p.Rank, tc.rows, tc.cols, tc.rank)
		}
		if err := p.Validate(400); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	p := DefaultLowRankParams()
	p.Rows = 10
	p.SetShape(20, 20)
	if p.Rows != 10 || p.Cols != 0 {
		t.Errorf("SetShape overrode rows given by the model: %d×%d", p.Rows, p.Cols)
	}
	if p.Complete(400, none); p.Rank != 2 || p.Validate(400) != nil { // 10×40
		t.Errorf("10×? of 400: rank %d, %v", p.Rank, p.Validate(400))
	}
}

// TestLowRankRefit streams 12×12 matrices with a rank-1 rule into a lowrank
// model (rank 2, probability H = 3) that refits every 200 events: the
// refit reports the objective, iterations and support vectors;
// LowRankState reports rank, shape and the same objective; predictions
// carry a bound and a probability; the error on the next 200 events is
// below 20%; the model
// restores through the registry and scores identically.
func TestLowRankRefit(t *testing.T) {
	const d1, d2, win = 12, 12, 200
	X, y := matrixStream(1, 3*win, d1, d2, 0.3)
	p := DefaultLowRankParams()
	p.Rows, p.Cols, p.Rank = d1, d2, 2
	p.Window.Events, p.Refit.EveryEvents, p.Refit.Guard, p.Probability.Levels = win, win, 0, 3
	typ := LowRankType()
	reg := online.MustRegistry(typ)
	m, err := reg.New(online.Spec{Type: LowRankName, Dim: d1 * d2, Params: &p})
	if err != nil {
		t.Fatal(err)
	}
	var reps []Report
	rm, _ := online.Unwrap[*Model](m)
	rm.OnRefit(func(r Report) { reps = append(reps, r) })
	if _, ok := LowRankState(m); ok {
		t.Fatal("LowRankState before the first refit")
	}
	for i := range 2 * win {
		m.Observe(X[i], y[i], true)
	}
	if len(reps) != 2 || !reps[1].Accepted || reps[1].Window != win {
		t.Fatalf("reports %+v", reps)
	}
	st := reps[1].Stats
	info, ok := LowRankState(m)
	if !ok || info.Rank != 2 || info.Rows != d1 || info.Cols != d2 || info.Version != 2 || info.ProbLevels != 3 || info.Window != win ||
		info.Objective != st.Objective || info.Iterations != st.Iterations || info.SupportVectors != st.SupportVectors {
		t.Fatalf("LowRankState %+v (ok %v), report stats %+v", info, ok, st)
	}
	if !(st.Objective > 0) || st.Iterations < 1 || st.Iterations > p.MaxIterations || st.SupportVectors < 1 {
		t.Fatalf("stats %+v", st)
	}
	t.Logf("refit: %+v, %v", info, reps[1].Duration)
	wrong := 0
	for i := 2 * win; i < 3*win; i++ {
		pr := m.Observe(X[i], 0, false)
		if !pr.HasBound || !pr.HasProbability || pr.Version != 2 || pr.N != win {
			t.Fatalf("prediction %+v", pr)
		}
		if float64(pr.Label) != y[i] {
			wrong++
		}
	}
	errRate := float64(wrong) / win
	t.Logf("test error %.3f", errRate)
	if errRate > 0.2 {
		t.Errorf("test error %.3f > 0.2", errRate)
	}
	b, err := m.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	r, err := reg.Restore(b)
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := r.MarshalBinary()
	if !bytes.Equal(b, b2) {
		t.Fatal("re-encoding differs")
	}
	for i := 2 * win; i < 3*win; i++ {
		if p1, p2 := m.Observe(X[i], 0, false), r.Observe(X[i], 0, false); p1 != p2 {
			t.Fatalf("restored model: %+v, original %+v", p2, p1)
		}
	}
	if ri, _ := LowRankState(r); ri != info {
		t.Errorf("restored LowRankState %+v, want %+v", ri, info)
	}
}

// TestLowRankFitFormat: a fit's encoding refuses truncations, a bad magic,
// another version and probability models of another shape, with ErrFormat.
func TestLowRankFitFormat(t *testing.T) {
	X, y := matrixStream(2, 80, 3, 4, 0.3)
	d := &Data{D: 12}
	for i := range X {
		d.X = append(d.X, X[i]...)
		d.Y = append(d.Y, y[i])
	}
	tr := &LowRank{Params: lowrank.Params{Rows: 3, Cols: 4, Rank: 2}, Delta: 0.05, ProbLevels: 3}
	f, _, err := tr.Fit(context.Background(), d, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	g, err := tr.Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if b2, _ := g.MarshalBinary(); !bytes.Equal(b, b2) {
		t.Fatal("re-encoding differs")
	}
	for n := range len(b) {
		if _, err := tr.Unmarshal(b[:n]); !errors.Is(err, ErrFormat) {
			t.Fatalf("prefix %d/%d: %v", n, len(b), err)
		}
	}
	bad := bytes.Clone(b)
	bad[0] = 'X'
	if _, err := tr.Unmarshal(bad); !errors.Is(err, ErrFormat) {
		t.Errorf("bad magic: %v", err)
	}
	bad = bytes.Clone(b)
	bad[4] = 9
	if _, err := tr.Unmarshal(bad); !errors.Is(err, ErrFormat) {
		t.Errorf("version 9: %v", err)
	}
	// A probability model of another shape.
	lf := f.(*lowRankFit)
	other, err := lowrank.Train(context.Background(), X, y, lowrank.Params{Rows: 4, Cols: 3, Rank: 2})
	if err != nil {
		t.Fatal(err)
	}
	mixed := *lf
	mixed.prob = &lowrank.ProbModel{H: 2, Models: []*lowrank.Model{other}}
	mb, _ := mixed.MarshalBinary()
	if _, err := tr.Unmarshal(mb); !errors.Is(err, ErrFormat) {
		t.Errorf("probability model of another shape: %v", err)
	}
}
