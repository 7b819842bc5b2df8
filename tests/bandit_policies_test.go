package tests

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/streamer/streamer/internal/banditsim"

	"gonum.org/v1/gonum/mat"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/calibrate"
)

// TestBanditPolicies (BANDIT_FULL=1 for issue 16's sizes: 50 000
// requests, minutes) replays TestBanditSimulation's world in process, without Kafka,
// for policies the service has and reference policies it has not, over
// request seeds 21..25 (the service's test uses 21): what regret each
// reaches against greedy on the per-user linear mam, and so whether any
// exploration on that model can reach issue 16's ucb ≤ 0.8 × greedy. Labels
// reach the models in batches of 250 requests, as the test's producer
// sends them. The policies:
//
//   - greedy, ucb, thompson: the service's (stream/engine/explore.go: the mam's
//     score, plus alpha·sqrt(zᵀA⁻¹z), or plus alpha·ξᵀz with ξ ~ N(0, A⁻¹),
//     z = [x/‖x‖; 1]/√2, A = I + Σ zzᵀ per user);
//   - upper: issue 16's first design, the mam's candidates ordered by the
//     Venn–Abers upper probability of one calibration table per model (as
//     the service fits it: window 2 000, refit every 100, on the later
//     half of the stream so far), ties in the order of the request;
//   - ridge, linucb: greedy and LinUCB on a per-user ridge regression of the
//     ±1 click on z (another estimator than the mam's);
//   - logistic, logistic-ucb: greedy and UCB on each user's Bayesian logistic
//     regression of the click on the raw features with the world's own prior
//     N(0, 9/d I) (Laplace posterior, refitted per label batch): the
//     correctly specified model of this world, the best case for any
//     exploration.
//
// It logs each policy's mean regret per request and its ratio to greedy's,
// and checks what the figures in docs/models.md rest on: the world leaves
// room for better policies (LinUCB ≤ 0.92 × greedy's regret, logistic UCB
// ≤ 0.85 ×: 0.85 and 0.79 measured), and the service's ucb at its default
// alpha, 1, costs nothing against greedy (≤ 1.02 ×: 0.998 measured).
func TestBanditPolicies(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	users, items, requests := 60, 500, 6000
	if envInt("BANDIT_FULL", 0) == 1 {
		users, items, requests = 200, 1000, 50000
	}
	const cands, dim = 20, 8
	w := banditsim.New(users, items, dim, 11)
	greedy := replayPolicies(t, w, requests, cands, 0, []replayed{{"greedy", 0, 0}, {"ucb", 0.1, 0}, {"ucb", 1, 1.02},
		{"ucb", 2, 0}, {"thompson", 0.1, 0}, {"upper", 0, 0}, {"ridge", 0, 0}, {"linucb", 0.3, 0.92},
		{"logistic", 0, 0}, {"logistic-ucb", 0.5, 0.85}})
	if !(greedy > 0.01 && greedy < 0.5) {
		t.Errorf("greedy's regret per request %.4f: the simulated world is degenerate", greedy)
	}
}

// replayed is a policy of replayPolicies, with the largest multiple of
// greedy's regret it may reach (0: not checked).
type replayed struct {
	name         string
	alpha, limit float64
}

// replayPolicies runs each policy (greedy first) over request sequences
// 21..25 of w (simulateBandit), logs its mean regret per request and its
// ratio to greedy's, checks the limits, and returns greedy's regret.
func replayPolicies(t *testing.T, w *banditsim.World, requests, cands, pool int, policies []replayed) (greedy float64) {
	t.Helper()
	for _, p := range policies {
		var sum float64
		var per []float64
		for seed := uint64(21); seed <= 25; seed++ {
			r := simulateBandit(t, w, p.name, p.alpha, requests, cands, pool, seed)
			per = append(per, r)
			sum += r
		}
		mean := sum / float64(len(per))
		if p.name == "greedy" {
			greedy = mean
		}
		ratio := math.NaN()
		if greedy > 0 {
			ratio = mean / greedy
		}
		t.Logf("%-13s alpha %-4g regret/request %.4f (%.3f × greedy's); per seed %.4f", p.name, p.alpha, mean, ratio, per)
		if p.limit > 0 && !(ratio <= p.limit) {
			t.Errorf("%s alpha %g: regret %.3f × greedy's, want ≤ %.2f", p.name, p.alpha, ratio, p.limit)
		}
	}
	return greedy
}

// simUser is one user's state in the experiment.
type simUser struct {
	mam    online.Model
	a      *mat.SymDense // I + Σ zzᵀ
	b      *mat.VecDense // Σ y z (ridge)
	xs     [][]float64   // logistic: inputs and ±1 labels
	ys     []float64
	theta  *mat.VecDense // logistic: posterior mode
	hess   mat.Cholesky  // logistic: of the posterior's Hessian
	fitted bool
}

// simulateBandit serves requests of cands random items to random users of w
// with one policy and returns the mean regret per request. With pool > 0
// each user has a fixed list of that many random items (banditPools) and
// a request's candidates are drawn from the user's list instead of the
// whole catalogue.
func simulateBandit(t *testing.T, w *banditsim.World, policy string, alpha float64, requests, cands, pool int, seed uint64) float64 {
	t.Helper()
	dim := len(w.Items[0])
	n := dim + 1
	us := make([]*simUser, len(w.Users))
	for i := range us {
		m, err := online.NewMAM(dim, online.MAMParams{Kernel: online.KernelSpec{Type: online.KernelLinear}, Balance: true, Delta: 0.05})
		if err != nil {
			t.Fatal(err)
		}
		a := mat.NewSymDense(n, nil)
		for j := range n {
			a.SetSym(j, j, 1)
		}
		us[i] = &simUser{mam: m, a: a, b: mat.NewVecDense(n, nil)}
	}
	rng := rand.New(rand.NewPCG(seed, 2)) // the same request sequence as TestBanditSimulation's
	clickRng := rand.New(rand.NewPCG(seed, 3))
	polRng := rand.New(rand.NewPCG(seed, 4))
	win := calibrate.NewWindow(2000)
	var va *calibrate.VennAbers
	type label struct {
		u, item int
		y       float64
	}
	var pending []label
	var regret float64
	z := func(x []float64) *mat.VecDense {
		v := mat.NewVecDense(n, nil)
		var ss float64
		for _, e := range x {
			ss += e * e
		}
		for j, e := range x {
			if ss > 0 {
				v.SetVec(j, e/math.Sqrt(2*ss))
			}
		}
		v.SetVec(dim, 1/math.Sqrt2)
		return v
	}
	lists := banditPools(w, pool, seed)
	ids := make([]int, cands)
	for r := range requests {
		u := rng.IntN(len(w.Users))
		perm := banditCandidates(rng, len(w.Items), lists, u)
		best := 0.0
		for c := range ids {
			ids[c] = perm[c]
			best = max(best, w.ClickProb(u, ids[c]))
		}
		U := us[u]
		var ainv mat.Dense
		var xi *mat.VecDense
		switch policy {
		case "ucb", "thompson", "ridge", "linucb":
			if err := ainv.Inverse(U.a); err != nil {
				t.Fatal(err)
			}
			if policy == "thompson" {
				var ch mat.Cholesky
				ch.Factorize(U.a)
				g := mat.NewVecDense(n, nil)
				for j := range n {
					g.SetVec(j, polRng.NormFloat64())
				}
				// ξ = L⁻ᵀ g ~ N(0, A⁻¹).
				var l mat.TriDense
				ch.LTo(&l)
				xi = mat.NewVecDense(n, nil)
				if err := xi.SolveVec(l.T(), g); err != nil {
					t.Fatal(err)
				}
			}
		case "logistic", "logistic-ucb":
			if !U.fitted {
				U.fitLogistic(t, dim, 9/float64(dim))
			}
		}
		pick, pickScore, pickIndex := -1, 0.0, math.Inf(-1)
		for _, it := range ids {
			x := w.Items[it]
			score := online.Peek(U.mam, x).Score
			index := score
			switch policy {
			case "ucb":
				zv := z(x)
				index += alpha * math.Sqrt(mat.Inner(zv, &ainv, zv))
			case "thompson":
				index += alpha * mat.Dot(xi, z(x))
			case "upper":
				if va != nil {
					_, _, index = va.Probability(score)
				}
			case "ridge", "linucb":
				zv := z(x)
				var th mat.VecDense
				th.MulVec(&ainv, U.b)
				index = mat.Dot(&th, zv)
				if policy == "linucb" {
					index += alpha * math.Sqrt(mat.Inner(zv, &ainv, zv))
				}
			case "logistic", "logistic-ucb":
				xv := mat.NewVecDense(dim, x)
				index = mat.Dot(U.theta, xv)
				if policy == "logistic-ucb" {
					var s mat.VecDense
					if err := U.hess.SolveVecTo(&s, xv); err != nil {
						t.Fatal(err)
					}
					index += alpha * math.Sqrt(mat.Dot(xv, &s))
				}
			}
			if index > pickIndex { // ties: the earlier candidate
				pick, pickScore, pickIndex = it, score, index
			}
		}
		pc := w.ClickProb(u, pick)
		regret += best - pc
		y := -1.0
		if clickRng.Float64() < pc {
			y = 1
		}
		// The service's calibration window: prequential pairs, "no
		// decision" scores left out, each table fitted on the later half
		// of the stream so far.
		if pickScore != 0 {
			win.Add(pickScore, y > 0)
			if win.Added()%100 == 0 {
				va = calibrate.FitVennAbers(win.CopyRecentTo(nil))
			}
		}
		pending = append(pending, label{u, pick, y})
		if len(pending) == 250 || r == requests-1 {
			for _, l := range pending {
				V := us[l.u]
				x := w.Items[l.item]
				V.mam.Observe(x, l.y, true)
				zv := z(x)
				V.a.SymRankOne(V.a, 1, zv)
				V.b.AddScaledVec(V.b, l.y, zv)
				V.xs = append(V.xs, x)
				V.ys = append(V.ys, l.y)
				V.fitted = false
			}
			pending = pending[:0]
		}
	}
	return regret / float64(requests)
}

// fitLogistic fits the user's Laplace posterior of a logistic regression
// without intercept, prior N(0, tau2·I): Newton's method to the mode, then
// the Hessian there.
func (u *simUser) fitLogistic(t *testing.T, dim int, tau2 float64) {
	t.Helper()
	if u.theta == nil {
		u.theta = mat.NewVecDense(dim, nil)
	}
	hessian := func() (*mat.SymDense, *mat.VecDense) {
		h := mat.NewSymDense(dim, nil)
		g := mat.NewVecDense(dim, nil)
		for j := range dim {
			h.SetSym(j, j, 1/tau2)
			g.SetVec(j, -u.theta.AtVec(j)/tau2)
		}
		for i, x := range u.xs {
			xv := mat.NewVecDense(dim, x)
			p := 1 / (1 + math.Exp(-mat.Dot(u.theta, xv)))
			g.AddScaledVec(g, (u.ys[i]+1)/2-p, xv)
			h.SymRankOne(h, p*(1-p), xv)
		}
		return h, g
	}
	for range 25 {
		h, g := hessian()
		var ch mat.Cholesky
		if !ch.Factorize(h) {
			t.Fatal("logistic: Hessian not positive definite")
		}
		var step mat.VecDense
		if err := ch.SolveVecTo(&step, g); err != nil {
			t.Fatal(err)
		}
		u.theta.AddVec(u.theta, &step)
		if mat.Norm(&step, 2) < 1e-8 {
			break
		}
	}
	h, _ := hessian()
	if !u.hess.Factorize(h) {
		t.Fatal("logistic: Hessian not positive definite")
	}
	u.fitted = true
}

// TestBanditFixedCandidatesReplay is TestBanditPolicies for
// TestBanditFixedCandidates's world: each user's requests rank the same 20
// candidates (a fixed list per user), the setting in which greedy stops
// seeing what it does not pick. It logs what the service's policies reach
// against greedy at several alphas (docs/models.md, "What exploration
// buys here"), at 60 users and 12 000 requests (BANDIT_FULL=1: 200 users,
// 50 000 requests), and checks the defaults' figures the docs rest on: ucb
// at alpha 1 ≤ 0.65 × greedy's regret and thompson at 0.1 ≤ 0.85 × (0.56
// and 0.74 measured; 0.34 and 0.76 at the full size).
func TestBanditFixedCandidatesReplay(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	users, items, requests := 60, 500, 12000
	if envInt("BANDIT_FULL", 0) == 1 {
		users, items, requests = 200, 1000, 50000
	}
	const cands, dim, pool = 20, 8, 20
	w := banditsim.New(users, items, dim, 11)
	replayPolicies(t, w, requests, cands, pool, []replayed{{"greedy", 0, 0}, {"ucb", 0.1, 0}, {"ucb", 0.3, 0},
		{"ucb", 1, 0.65}, {"ucb", 2, 0}, {"thompson", 0.1, 0.85}, {"thompson", 0.3, 0}, {"thompson", 1, 0}})
}
