package adaboost

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// rows builds a row-major matrix from rows.
func rows(r ...[]float64) []float64 {
	var out []float64
	for _, x := range r {
		out = append(out, x...)
	}
	return out
}

func fit(t *testing.T, X, y []float64, dim int, cfg Config) *Ensemble {
	t.Helper()
	e, err := Fit(context.Background(), X, y, dim, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-15*math.Max(1, math.Abs(b)) }

// TestHandComputed boosts two members on four rows, y = (+, +, −, −),
// A = (+, +, +, −) (wrong on row 3) and B = (+, −, −, −) (wrong on row 2),
// by hand:
//
//	round 1: w = (¼, ¼, ¼, ¼); err_A = err_B = ¼: A (first on ties),
//	         β₁ = ½ ln 3; w = (1/6, 1/6, ½, 1/6)
//	round 2: err_A = ½, err_B = 1/6: B, β₂ = ½ ln 5; w = (1/10, ½, 3/10, 1/10)
//	round 3: err_A = 3/10, err_B = ½: A, β₃ = ½ ln(7/3); w = (1/14, 5/14, ½, 1/14)
//	round 4: err_A = ½, err_B = 5/14: B, β₄ = ½ ln(9/5)
//
// so that A's β adds up to ½ ln 7 and B's to ½ ln 9 = ln 3, and F on row 2
// is ½ ln 7 − ln 3 < 0 (the one training mistake left).
func TestHandComputed(t *testing.T) {
	X := rows([]float64{1, 1}, []float64{1, -1}, []float64{1, -1}, []float64{-1, -1})
	y := []float64{1, 1, -1, -1}
	e := fit(t, X, y, 2, Config{Members: 2, Rounds: 4})
	want := []Round{
		{Member: 0, Feature: -1, Polarity: 1, Err: 0.25, Beta: 0.5 * math.Log(3)},
		{Member: 1, Feature: -1, Polarity: 1, Err: 1.0 / 6, Beta: 0.5 * math.Log(5)},
		{Member: 0, Feature: -1, Polarity: 1, Err: 0.3, Beta: 0.5 * math.Log(7.0/3)},
		{Member: 1, Feature: -1, Polarity: 1, Err: 5.0 / 14, Beta: 0.5 * math.Log(9.0/5)},
	}
	got := e.Rounds()
	if len(got) != len(want) || e.Stop() != StopRounds {
		t.Fatalf("rounds %+v (%v), want %+v", got, e.Stop(), want)
	}
	for k := range want {
		g, w := got[k], want[k]
		if g.Member != w.Member || g.Feature != w.Feature || g.Polarity != w.Polarity || !near(g.Err, w.Err) || !near(g.Beta, w.Beta) {
			t.Errorf("round %d: %+v, want %+v", k+1, g, w)
		}
	}
	ws := e.Weights([]string{"A", "B"})
	if len(ws) != 2 || ws[0].Name != "A" || ws[1].Name != "B" || ws[0].Rounds != 2 || ws[1].Rounds != 2 ||
		!near(ws[0].Beta, 0.5*math.Log(7)) || !near(ws[1].Beta, math.Log(3)) {
		t.Fatalf("weights %+v, want A ½ ln 7, B ln 3", ws)
	}
	for i, wantF := range []float64{0.5*math.Log(7) + math.Log(3), 0.5*math.Log(7) - math.Log(3), 0.5*math.Log(7) - math.Log(3), -0.5*math.Log(7) - math.Log(3)} {
		if f := e.Score(X[2*i : 2*i+2]); !near(f, wantF) {
			t.Errorf("F(row %d) = %v, want %v", i+1, f, wantF)
		}
	}
	if e.N() != 4 || e.Dim() != 2 || e.Members() != 2 {
		t.Fatalf("n %d dim %d members %d", e.N(), e.Dim(), e.Members())
	}
}

// TestNoDecisionCountsAsMistake: a member's 0 (and any value's sign: 0.3
// is +1, −7 is −1) is a mistake in its error and its reweighting, and
// contributes nothing to F.
func TestNoDecisionCountsAsMistake(t *testing.T) {
	// y = (+, +, −, −); A = (0.3, 0, −7, −1): one no decision (row 2).
	X := rows([]float64{0.3}, []float64{0}, []float64{-7}, []float64{-1})
	y := []float64{1, 1, -1, -1}
	e := fit(t, X, y, 1, Config{Members: 1, Rounds: 5})
	r := e.Rounds()
	// Round 2: the reweighted error of A is ½: stop.
	if len(r) != 1 || e.Stop() != StopChance || !near(r[0].Err, 0.25) || !near(r[0].Beta, 0.5*math.Log(3)) {
		t.Fatalf("rounds %+v (%v), want one of error ¼ then a stop at ½", r, e.Stop())
	}
	if f, l := e.Score([]float64{0}), e.Label([]float64{0}); f != 0 || l != 0 {
		t.Fatalf("no decision scores %v (label %d), want 0", f, l)
	}
	if f := e.Score([]float64{math.NaN()}); f != 0 {
		t.Fatalf("NaN member output scores %v, want 0 (no decision)", f)
	}
	if l := e.Label([]float64{-0.5}); l != -1 {
		t.Fatalf("label %d", l)
	}
}

// TestPerfectMember: a member without mistakes has error 0 under any
// weights; it is picked in round 1 (after an earlier member of error > 0
// is passed over), gets β = BetaMax and ends the fit.
func TestPerfectMember(t *testing.T) {
	X := rows([]float64{1, 1, 5}, []float64{-1, 1, 6}, []float64{-1, -1, 7}, []float64{-1, -1, 8})
	y := []float64{1, 1, -1, -1}
	e := fit(t, X, y, 3, Config{Members: 2, Stumps: true, Rounds: 50})
	r := e.Rounds()
	if len(r) != 1 || e.Stop() != StopPerfect || r[0].Member != 1 || r[0].Err != 0 || r[0].Beta != BetaMax {
		t.Fatalf("rounds %+v (%v), want member 1 alone with β = BetaMax", r, e.Stop())
	}
	if math.Abs(BetaMax-11.51292546492) > 1e-10 {
		t.Fatalf("BetaMax = %v", BetaMax)
	}
	// A perfect stump ends it too: with no members, column 1 is feature 1,
	// and x₁ ≤ 0 → −1 (polarity −1) splits the classes.
	e = fit(t, X, y, 3, Config{Members: 0, Stumps: true, Rounds: 50})
	r = e.Rounds()
	if len(r) != 1 || e.Stop() != StopPerfect || r[0].Feature != 1 || r[0].Threshold != 0 || r[0].Polarity != -1 || r[0].Beta != BetaMax {
		t.Fatalf("rounds %+v (%v), want the stump x₁ ≤ 0 of polarity −1 alone", r, e.Stop())
	}
	for i := range y {
		if f := e.Score(X[3*i : 3*i+3]); f != y[i]*BetaMax {
			t.Fatalf("row %d: F = %v, want %v", i, f, y[i]*BetaMax)
		}
	}
}

// TestChance: a least weighted error of ½ stops the fit: before any round
// (ErrChance) or after (StopChance, the round not added).
func TestChance(t *testing.T) {
	y := []float64{1, -1, 1, -1}
	// A always says +1: error ½ from the start.
	if _, err := Fit(context.Background(), rows([]float64{1}, []float64{1}, []float64{1}, []float64{1}), y, 1, Config{Members: 1, Rounds: 3}); !errors.Is(err, ErrChance) {
		t.Fatalf("err %v, want ErrChance", err)
	}
	// Worse than chance (error ¾): no flipped member, ErrChance as well.
	if _, err := Fit(context.Background(), rows([]float64{-1}, []float64{1}, []float64{-1}, []float64{-1}), y, 1, Config{Members: 1, Rounds: 3}); !errors.Is(err, ErrChance) {
		t.Fatalf("err %v, want ErrChance", err)
	}
	// Stumps of feature values (1, 1, 2, 2) against y = (+, −, +, −):
	// every stump errs on half of the weight.
	if _, err := Fit(context.Background(), rows([]float64{1}, []float64{1}, []float64{2}, []float64{2}), y, 1, Config{Stumps: true, Rounds: 3}); !errors.Is(err, ErrChance) {
		t.Fatalf("err %v, want ErrChance", err)
	}
	// One member, error ¼: after round 1 its error is exactly ½.
	y = []float64{1, 1, -1, -1}
	e := fit(t, rows([]float64{1}, []float64{1}, []float64{1}, []float64{-1}), y, 1, Config{Members: 1, Rounds: 10})
	if r := e.Rounds(); len(r) != 1 || e.Stop() != StopChance {
		t.Fatalf("rounds %+v (%v), want 1 then StopChance", r, e.Stop())
	}
}

// TestTies: equal weighted errors go to the first member in dictionary
// order: members before stumps, lower feature, lower threshold, polarity
// +1 before −1.
func TestTies(t *testing.T) {
	y := []float64{1, 1, -1, -1}
	// Two identical members of error ¼, and a feature whose best stump
	// (x ≤ 0.5) errs on ¼ too: the first member wins.
	X := rows([]float64{1, 1, 0}, []float64{1, 1, 2}, []float64{1, 1, 1}, []float64{-1, -1, 3})
	if r := fit(t, X, y, 3, Config{Members: 2, Stumps: true, Rounds: 1}).Rounds(); r[0].Member != 0 {
		t.Fatalf("picked %+v, want member 0", r[0])
	}
	// Two identical feature columns: the first.
	X = rows([]float64{0, 0}, []float64{1, 1}, []float64{3, 3}, []float64{2, 2})
	if r := fit(t, X, y, 2, Config{Stumps: true, Rounds: 1}).Rounds(); r[0].Feature != 0 || r[0].Threshold != 1.5 || r[0].Polarity != 1 {
		t.Fatalf("picked %+v, want feature 0, x ≤ 1.5", r[0])
	}
	// y = (+, −, +, −) on x = (0, 1, 2, 3): x ≤ 0.5 (+1) and x ≤ 2.5
	// (polarity −1) both err on ¼; the lower threshold wins. Then the
	// polarities of one cut: x = (0, 1, 1, 2) with y = (+, −, −, +): the
	// cut at 0.5 errs on ¼ with polarity +1, at 1.5 on ¼ with polarity −1.
	X = []float64{0, 1, 2, 3}
	if r := fit(t, X, []float64{1, -1, 1, -1}, 1, Config{Stumps: true, Rounds: 1}).Rounds(); r[0].Threshold != 0.5 || r[0].Polarity != 1 {
		t.Fatalf("picked %+v, want x ≤ 0.5", r[0])
	}
	X = []float64{2, 1, 1, 0}
	if r := fit(t, X, []float64{-1, 1, 1, -1}, 1, Config{Stumps: true, Rounds: 1}).Rounds(); r[0].Threshold != 0.5 || r[0].Polarity != -1 {
		t.Fatalf("picked %+v, want x ≤ 0.5 of polarity −1", r[0])
	}
}

// TestStumpsAgainstBruteForce replays every round of fits on random data
// (with many tied feature values and members that abstain) with an O(n²)
// evaluation of the whole dictionary: the picked member's error is its
// brute-force weighted error, no member has a smaller one, β is
// ½ ln((1 − err)/err), and the thresholds lie between distinct values.
func TestStumpsAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 20 {
		n, p, nf := 20+rng.IntN(60), rng.IntN(3), 1+rng.IntN(4)
		dim := p + nf
		X, y := make([]float64, n*dim), make([]float64, n)
		for i := range n {
			z := 0.0
			for f := range nf {
				v := rng.NormFloat64()
				if f%2 == 1 {
					v = float64(rng.IntN(4)) // ties
				}
				X[i*dim+p+f] = v
				z += v
			}
			y[i] = 1
			if z+rng.NormFloat64() < 0 {
				y[i] = -1
			}
			for j := range p {
				X[i*dim+j] = float64(rng.IntN(3) - 1) // −1, 0, +1
				if rng.Float64() < 0.6 {
					X[i*dim+j] = y[i]
				}
			}
		}
		e, err := Fit(context.Background(), X, y, dim, Config{Members: p, Stumps: true, Rounds: 30})
		if err != nil {
			t.Fatal(err)
		}
		// The dictionary, brute force: each candidate's outputs.
		type cand struct {
			r Round
			h []int
		}
		var dict []cand
		for j := range p {
			h := make([]int, n)
			for i := range n {
				h[i] = sign(X[i*dim+j])
			}
			dict = append(dict, cand{Round{Member: j, Feature: -1, Polarity: 1}, h})
		}
		for f := range nf {
			vals := map[float64]bool{}
			for i := range n {
				vals[X[i*dim+p+f]] = true
			}
			top := math.Inf(-1)
			for v := range vals {
				top = math.Max(top, v)
			}
			for v := range vals {
				if v == top {
					continue // x ≤ max: a constant, not in the dictionary
				}
				for _, pol := range []int{1, -1} {
					h := make([]int, n)
					for i := range n {
						h[i] = -pol
						if X[i*dim+p+f] <= v {
							h[i] = pol
						}
					}
					dict = append(dict, cand{Round{Member: -1, Feature: f, Threshold: v, Polarity: pol}, h})
				}
			}
		}
		w := make([]float64, n)
		for i := range w {
			w[i] = 1 / float64(n)
		}
		errOf := func(h []int) float64 {
			var raw, W float64
			for i := range n {
				W += w[i]
				if float64(h[i]) != y[i] {
					raw += w[i]
				}
			}
			return raw / W
		}
		for k, r := range e.Rounds() {
			// The picked member's outputs.
			h := make([]int, n)
			for i := range n {
				if r.Member >= 0 {
					h[i] = sign(X[i*dim+r.Member])
				} else if h[i] = -r.Polarity; X[i*dim+p+r.Feature] <= r.Threshold {
					h[i] = r.Polarity
				}
			}
			if r.Member < 0 {
				// The threshold cuts between two distinct values.
				below, above := math.Inf(-1), math.Inf(1)
				for i := range n {
					if v := X[i*dim+p+r.Feature]; v <= r.Threshold {
						below = math.Max(below, v)
					} else {
						above = math.Min(above, v)
					}
				}
				if math.IsInf(below, 0) || math.IsInf(above, 0) || r.Threshold != (below+above)/2 {
					t.Fatalf("trial %d round %d: threshold %v between %v and %v", trial, k+1, r.Threshold, below, above)
				}
			}
			brute := errOf(h)
			if math.Abs(brute-r.Err) > 1e-12 {
				t.Fatalf("trial %d round %d: %+v, brute-force error %v", trial, k+1, r, brute)
			}
			for _, c := range dict {
				if be := errOf(c.h); be < r.Err-1e-12 {
					t.Fatalf("trial %d round %d: picked %+v, but %+v has error %v", trial, k+1, r, c.r, be)
				}
			}
			b := 0.5 * math.Log((1-r.Err)/r.Err)
			if r.Err == 0 {
				b = BetaMax // a perfect member, the last round
			}
			if math.Abs(b-r.Beta) > 1e-12 {
				t.Fatalf("trial %d round %d: β %v, want %v", trial, k+1, r.Beta, b)
			}
			// Reweight: e^{β} on the mistakes (no decision included), e^{−β}.
			var s float64
			for i := range n {
				if float64(h[i]) != y[i] {
					w[i] *= math.Exp(r.Beta)
				} else {
					w[i] *= math.Exp(-r.Beta)
				}
				s += w[i]
			}
			for i := range w {
				w[i] /= s
			}
		}
		// F is the sum over the rounds.
		for i := range n {
			var f float64
			for _, r := range e.Rounds() {
				if r.Member >= 0 {
					f += r.Beta * float64(sign(X[i*dim+r.Member]))
				} else if X[i*dim+p+r.Feature] <= r.Threshold {
					f += r.Beta * float64(r.Polarity)
				} else {
					f -= r.Beta * float64(r.Polarity)
				}
			}
			if got := e.Score(X[i*dim : (i+1)*dim]); math.Abs(got-f) > 1e-9 {
				t.Fatalf("trial %d row %d: F %v, sum over rounds %v", trial, i, got, f)
			}
		}
	}
}

// TestWeightsAggregate: the β's of rounds that picked one stump add up, a
// polarity −1 round counting as −β on "stump(feature j ≤ t)"; members are
// all listed (β 0 if never picked), stumps by feature and threshold.
func TestWeightsAggregate(t *testing.T) {
	e := &Ensemble{dim: 4, members: 2, n: 10, stop: StopRounds, rounds: []Round{
		{Member: -1, Feature: 1, Threshold: 2.5, Polarity: 1, Err: 0.2, Beta: 0.7},
		{Member: 1, Feature: -1, Polarity: 1, Err: 0.3, Beta: 0.4},
		{Member: -1, Feature: 0, Threshold: -1, Polarity: -1, Err: 0.3, Beta: 0.25},
		{Member: -1, Feature: 1, Threshold: 2.5, Polarity: -1, Err: 0.4, Beta: 0.2},
		{Member: 1, Feature: -1, Polarity: 1, Err: 0.3, Beta: 0.1},
	}}
	e.build()
	ws := e.Weights([]string{"svm", "mam"})
	want := []Weight{
		{Name: "svm", Member: 0, Feature: -1},
		{Name: "mam", Member: 1, Feature: -1, Beta: 0.5, Rounds: 2},
		{Name: "stump(feature 0 ≤ -1)", Member: -1, Feature: 0, Threshold: -1, Beta: -0.25, Rounds: 1},
		{Name: "stump(feature 1 ≤ 2.5)", Member: -1, Feature: 1, Threshold: 2.5, Beta: 0.5, Rounds: 2},
	}
	if len(ws) != len(want) {
		t.Fatalf("weights %+v", ws)
	}
	for i := range want {
		if ws[i].Name != want[i].Name || ws[i].Member != want[i].Member || ws[i].Feature != want[i].Feature ||
			ws[i].Threshold != want[i].Threshold || math.Abs(ws[i].Beta-want[i].Beta) > 1e-15 || ws[i].Rounds != want[i].Rounds {
			t.Errorf("weight %d: %+v, want %+v", i, ws[i], want[i])
		}
	}
	if w := e.Weights(nil); w[0].Name != "member 0" {
		t.Fatalf("unnamed member %q", w[0].Name)
	}
	// Score from the weights: x = (mam −, svm +; f0 = −2 ≤ −1, f1 = 3 > 2.5).
	x := []float64{1, -1, -2, 3}
	if f, want := e.Score(x), -0.5+(-0.25)-0.5; math.Abs(f-want) > 1e-15 {
		t.Fatalf("F = %v, want %v", f, want)
	}
}

// TestFitErrors: bad inputs are refused with an error naming the problem.
func TestFitErrors(t *testing.T) {
	ctx := context.Background()
	X, y := rows([]float64{1, 0}, []float64{-1, 1}), []float64{1, -1}
	for _, c := range []struct {
		X, y []float64
		dim  int
		cfg  Config
		want string
	}{
		{X, y, 2, Config{Members: 1, Rounds: 0}, "rounds"},
		{X, y, 2, Config{Members: 1, Rounds: MaxRounds + 1}, "rounds"},
		{X, y, 2, Config{Members: 3, Rounds: 1}, "members"},
		{X, y, 2, Config{Members: 2, Stumps: true, Rounds: 1}, "no feature columns"},
		{X, y, 2, Config{Rounds: 1}, "empty dictionary"},
		{nil, nil, 2, Config{Members: 1, Rounds: 1}, "no training rows"},
		{X[:3], y, 2, Config{Members: 1, Rounds: 1}, "values for"},
		{X, []float64{1, 0}, 2, Config{Members: 1, Rounds: 1}, "label"},
		{X, []float64{1, 1}, 2, Config{Members: 1, Rounds: 1}, "both classes"},
		{rows([]float64{1, math.NaN()}, []float64{-1, 1}), y, 2, Config{Members: 1, Stumps: true, Rounds: 1}, "feature 0 of row 0"},
		{rows([]float64{1, 2}, []float64{1, 2}), y, 2, Config{Stumps: true, Rounds: 1}, "every feature is constant"},
	} {
		_, err := Fit(ctx, c.X, c.y, c.dim, c.cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Fit(%v, %v, %d, %+v): %v, want an error about %q", c.X, c.y, c.dim, c.cfg, err, c.want)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := Fit(cctx, X, y, 2, Config{Members: 1, Rounds: 1}); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestScoreAllocs: scoring allocates nothing.
func TestScoreAllocs(t *testing.T) {
	e := benchEnsemble(5, 100)
	x := benchInput(5, 100)
	if a := testing.AllocsPerRun(100, func() { e.Score(x) }); a != 0 {
		t.Fatalf("Score allocates %v times", a)
	}
}

// TestManyRounds: 3000 rounds on heart_scale's first 120 rows (weights of
// well-classified rows shrink towards underflow): every round's error is
// in [0, ½) and its β in (0, BetaMax], the scores are finite, and the
// encoding restores to the same scores.
func TestManyRounds(t *testing.T) {
	X, y, d := readCSV(t, "heart_scale.csv")
	X, y = X[:120*d], y[:120]
	e := fit(t, X, y, d, Config{Stumps: true, Rounds: 3000})
	for k, r := range e.Rounds() {
		if !(r.Err >= 0 && r.Err < 0.5) || !(r.Beta > 0 && r.Beta <= BetaMax) {
			t.Fatalf("round %d: %+v", k+1, r)
		}
	}
	b, err := e.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var g Ensemble
	if err := g.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	wrong := 0
	for i := range y {
		f := e.Score(X[i*d : (i+1)*d])
		if math.IsNaN(f) || math.IsInf(f, 0) || g.Score(X[i*d:(i+1)*d]) != f {
			t.Fatalf("row %d: F %v, restored %v", i, f, g.Score(X[i*d:(i+1)*d]))
		}
		if float64(sign(f)) != y[i] {
			wrong++
		}
	}
	t.Logf("%d rounds (%v), %d distinct stumps, training error %d/%d", len(e.Rounds()), e.Stop(), len(e.stumps), wrong, len(y))
}
