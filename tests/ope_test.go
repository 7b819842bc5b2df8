package tests

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/streamer/streamer/internal/banditsim"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/calibrate"
	"github.com/streamer/streamer/online/ope"
)

// opeRun is one seed's log of the bandit world under epsilon-greedy
// (the service's policy: the best-scored candidate with probability 1 − ε,
// else a uniform one) and the truth of the target policy, greedy on the
// same models at the same moments.
type opeRun struct {
	samples []ope.Sample
	truth   float64 // greedy's expected reward on the logged contexts
}

// logBandit replays requests of TestBanditSimulation's world in process:
// per-user linear mam models (as the service's config), a request is a
// random user and cands random items, the first item is chosen by
// epsilon-greedy, its click (1, else 0) comes back in batches of 250
// requests. The reward model is the service's calibration of the models'
// scores: a Venn–Abers table of the prequential (score, click) pairs of
// the first items, refitted every 100 pairs. Each request logs the click,
// the propensity of the item shown, whether greedy would have shown it,
// and the reward model's predictions for the item shown and greedy's.
func logBandit(t *testing.T, w *banditsim.World, requests, cands int, eps float64, seed uint64) opeRun {
	t.Helper()
	dim := len(w.Items[0])
	models := make([]online.Model, len(w.Users))
	for i := range models {
		m, err := online.NewMAM(dim, online.MAMParams{Kernel: online.KernelSpec{Type: online.KernelLinear}, Balance: true, Delta: 0.05})
		if err != nil {
			t.Fatal(err)
		}
		models[i] = m
	}
	rng := rand.New(rand.NewPCG(seed, 2))
	clickRng := rand.New(rand.NewPCG(seed, 3))
	polRng := rand.New(rand.NewPCG(seed, 4))
	win := calibrate.NewWindow(2000)
	var va *calibrate.VennAbers
	predict := func(score float64) float64 {
		if va == nil {
			return 0.5
		}
		p, _, _ := va.Probability(score)
		return p
	}
	type label struct {
		u, item int
		y       float64
	}
	var pending []label
	var run opeRun
	ids := make([]int, cands)
	scores := make([]float64, cands)
	for range requests {
		u := rng.IntN(len(w.Users))
		perm := banditCandidates(rng, len(w.Items), nil, u)
		g := 0
		for c := range ids {
			ids[c] = perm[c]
			scores[c] = online.Peek(models[u], w.Items[ids[c]]).Score
			if scores[c] > scores[g] {
				g = c
			}
		}
		a := g
		if polRng.Float64() < eps {
			a = polRng.IntN(cands)
		}
		prop := eps / float64(cands)
		if a == g {
			prop += 1 - eps
		}
		pc := w.ClickProb(u, ids[a])
		y := 0.0
		if clickRng.Float64() < pc {
			y = 1
		}
		run.samples = append(run.samples, ope.Sample{Reward: y, Prop: prop, Match: a == g,
			PredLogged: predict(scores[a]), PredTarget: predict(scores[g])})
		run.truth += w.ClickProb(u, ids[g])
		if scores[a] != 0 {
			win.Add(scores[a], y > 0)
			if win.Added()%100 == 0 {
				va = calibrate.FitVennAbers(win.CopyRecentTo(nil))
			}
		}
		pending = append(pending, label{u, ids[a], 2*y - 1})
		if len(pending) == 250 {
			for _, l := range pending {
				models[l.u].Observe(w.Items[l.item], l.y, true)
			}
			pending = pending[:0]
		}
	}
	run.truth /= float64(requests)
	return run
}

// TestOffPolicyEstimators (issue 39's first target): over 20 seeds of the
// bandit world logged by epsilon-greedy (ε 0.2, 20 candidates, 6 000
// requests each), the doubly robust estimate of greedy's value has at
// most 0.7 × the mean squared error of IPS against the truth (greedy's
// expected reward on the logged contexts), and its 95% bootstrap
// intervals cover the truth in at least 18 of the 20 seeds. The other
// estimators' figures are logged.
func TestOffPolicyEstimators(t *testing.T) {
	t.Parallel()
	const seeds, requests, cands, eps = 20, 6000, 20, 0.2
	w := banditsim.New(60, 500, 8, 11)
	mse := map[ope.Estimator]float64{}
	covered := map[ope.Estimator]int{}
	for s := range seeds {
		run := logBandit(t, w, requests, cands, eps, uint64(100+s))
		boot := rand.New(rand.NewPCG(uint64(s), 9))
		for _, e := range ope.Estimators {
			v := ope.Estimate(e, run.samples)
			d := v - run.truth
			mse[e] += d * d / seeds
			lo, hi := ope.Interval(e, run.samples, 0.95, 200, boot)
			if lo <= run.truth && run.truth <= hi {
				covered[e]++
			}
		}
	}
	for _, e := range ope.Estimators {
		t.Logf("%-5s RMSE %.5f (%.3f × IPS's MSE), 95%% interval covers the truth in %d of %d seeds",
			e, math.Sqrt(mse[e]), mse[e]/mse[ope.IPS], covered[e], seeds)
	}
	if mse[ope.DR] > 0.7*mse[ope.IPS] {
		t.Errorf("DR's mean squared error %.3g is %.2f × IPS's %.3g, want ≤ 0.7 ×", mse[ope.DR], mse[ope.DR]/mse[ope.IPS], mse[ope.IPS])
	}
	if covered[ope.DR] < 18 {
		t.Errorf("DR's intervals cover the truth in %d of %d seeds, want ≥ 18", covered[ope.DR], seeds)
	}
}
