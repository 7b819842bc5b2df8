package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamer/streamer/internal/banditsim"

	"github.com/segmentio/kafka-go"
)

const banditConfig = `
kafka:
  brokers: [%BROKERS%]
  group: bandit
  commit_interval: 200ms
http:
  listen: "%HTTP%"
log:
  level: warn
labels:
  join_window: {events: 1000000, time: 10m}
rank:
  model: prefs
  explore: {%EXPLORE%, seed: 5}
models:
  - name: prefs
    type: mam
    scope: key
    kernel: {type: linear}
    features: {dim: %DIM%}
`

// banditPools returns each user's fixed list of pool random items (seeded
// by seed), or nil for pool 0 (candidates from the whole catalogue).
func banditPools(w *banditsim.World, pool int, seed uint64) [][]int {
	if pool <= 0 {
		return nil
	}
	rng := rand.New(rand.NewPCG(seed, 5))
	lists := make([][]int, len(w.Users))
	for u := range lists {
		lists[u] = rng.Perm(len(w.Items))[:pool]
	}
	return lists
}

// banditCandidates returns a random order of the whole catalogue of n
// items, or with lists of user u's list, drawn from rng: a request's
// candidates are its first cands.
func banditCandidates(rng *rand.Rand, n int, lists [][]int, u int) []int {
	if lists == nil {
		return rng.Perm(n)
	}
	perm := rng.Perm(len(lists[u]))
	for i, j := range perm {
		perm[i] = lists[u][j]
	}
	return perm
}

// banditRun is what one policy did in the world.
type banditRun struct {
	clicks, regret float64 // clicks, and expected clicks lost against the best candidate
	requests       int
	ips, ci, snips float64 // the service's off-policy estimates of greedy
	dr, drLo, drHi float64 // and doubly robust, with its interval
	opeLabels      float64
	// With every candidate ranked (full): the expected clicks of greedy's
	// first item on this run's models (the highest score), which the
	// run's IPS estimates.
	greedyOnRun float64
}

// runBandit serves requests from the world with one policy: each request
// is a random user and `cands` random items over POST /v1/rank (k = 1);
// the click on the item put first comes back over Kafka as a delayed label
// {"id", "item", "label"} (1 click, -1 none), in batches, so that the
// models learn while the requests go on. With pool > 0 each user has a
// fixed list of pool random items (seeded by seed) and a request's
// candidates are drawn from it instead of the whole catalogue. alpha < 0
// leaves rank.explore.alpha at its default. With full, a request asks for
// every candidate ranked (k = cands; the click is still on the first), so
// that the scores show greedy's choice on the run's own models.
func runBandit(t *testing.T, w *banditsim.World, policy string, eps, alpha float64, requests, cands, pool int, full bool, seed uint64) banditRun {
	t.Helper()
	b := startBroker(t, 3)
	explore := fmt.Sprintf("policy: %s, epsilon: %v", policy, eps)
	if alpha >= 0 {
		explore += fmt.Sprintf(", alpha: %v", alpha)
	}
	cfg := strings.NewReplacer("%EXPLORE%", explore, "%DIM%", fmt.Sprint(len(w.Items[0]))).Replace(banditConfig)
	p := startStreamer(t, b, cfg)
	rng := rand.New(rand.NewPCG(seed, 2)) // the same request sequence for every policy
	clickRng := rand.New(rand.NewPCG(seed, 3))
	client := &http.Client{Timeout: 10 * time.Second}
	var run banditRun
	var labels []kafka.Message
	lists := banditPools(w, pool, seed)
	ids := make([]int, cands)
	var body bytes.Buffer
	for r := range requests {
		u := rng.IntN(len(w.Users))
		body.Reset()
		k := 1
		if full {
			k = cands
		}
		fmt.Fprintf(&body, `{"id":"q%d","key":"u%d","k":%d,"candidates":[`, r, u, k)
		best := 0.0
		perm := banditCandidates(rng, len(w.Items), lists, u) // distinct items
		for c := range ids {
			ids[c] = perm[c]
			if c > 0 {
				body.WriteByte(',')
			}
			fx, _ := json.Marshal(w.Items[ids[c]])
			fmt.Fprintf(&body, `{"item":"i%d","features":%s}`, ids[c], fx)
			best = max(best, w.ClickProb(u, ids[c]))
		}
		body.WriteString("]}")
		resp, err := client.Post("http://"+p.http+"/v1/rank", "application/json", &body)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var got struct {
			Ranked []struct {
				Item  string
				Score float64
			}
		}
		if resp.StatusCode != http.StatusOK || json.Unmarshal(out, &got) != nil || len(got.Ranked) != k {
			t.Fatalf("request %d: %d %s", r, resp.StatusCode, out)
		}
		var item int
		fmt.Sscanf(got.Ranked[0].Item, "i%d", &item)
		if full { // greedy's first: the highest score, ties to the earlier candidate
			score := make(map[string]float64, k)
			for _, it := range got.Ranked {
				score[it.Item] = it.Score
			}
			g := ids[0]
			for _, c := range ids[1:] {
				if score[fmt.Sprintf("i%d", c)] > score[fmt.Sprintf("i%d", g)] {
					g = c
				}
			}
			run.greedyOnRun += w.ClickProb(u, g)
		}
		pc := w.ClickProb(u, item)
		run.regret += best - pc
		label := -1
		if clickRng.Float64() < pc {
			label = 1
			run.clicks++
		}
		labels = append(labels, kafka.Message{Key: fmt.Appendf(nil, "u%d", u),
			Value: fmt.Appendf(nil, `{"id":"q%d","item":"i%d","label":%d}`, r, item, label)})
		if len(labels) == 250 {
			produce(t, b, "events", labels)
			labels = labels[:0]
		}
	}
	produce(t, b, "events", labels)
	run.requests = requests
	waitFor(t, 60*time.Second, "every label joined", func() bool {
		return p.metric(t, "streamer_labels_total", `outcome="joined"`) == float64(requests)
	})
	run.opeLabels = p.metric(t, "streamer_ope_labels_total", "")
	run.ips = p.metric(t, "streamer_ope_value", `estimator="ips",policy="greedy"`)
	run.snips = p.metric(t, "streamer_ope_value", `estimator="snips",policy="greedy"`)
	run.ci = p.metric(t, "streamer_ope_ci95", "")
	run.dr = p.metric(t, "streamer_ope_value", `estimator="dr",policy="greedy"`)
	run.drLo = p.metric(t, "streamer_ope_interval", `bound="lower",estimator="dr"`)
	run.drHi = p.metric(t, "streamer_ope_interval", `bound="upper",estimator="dr"`)
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
	return run
}

// TestBanditSimulation: per-user linear mam models rank 20 random items
// of the catalogue for random users of a simulated world over POST
// /v1/rank, and learn from the delayed click labels of the item they put
// first (banditExperiment). With 20 fresh random candidates a request,
// greedy is already near the best any policy on this model can do
// (docs/models.md, "Exploration"): ucb at its default alpha must cost
// nothing against greedy (≤ 1.02 × its regret; the replay over five
// request sequences, TestBanditPolicies, gives 0.998 at the CI size and
// 1.001 at the full size), and the IPS estimates of greedy must hold.
// Sizes: 60 users, 500 items, 6 000 requests in CI; BANDIT_FULL=1 runs
// issue 16's 200 users, 1 000 items, 50 000 requests.
func TestBanditSimulation(t *testing.T) {
	banditExperiment(t, 0, 6000, 1.02, true)
}

// TestBanditFixedCandidates is TestBanditSimulation where each user's
// requests rank the same 20 candidates (a fixed list per user, drawn once:
// what a retrieval stage hands a ranking service for that user), in a new
// random order each time. Greedy then keeps putting first what it believes
// best and does not learn about the rest; ucb tries the candidates along
// directions the user has not been shown. Issue 16's target, ucb's
// cumulative regret ≤ 0.8 × greedy's, is checked at both sizes: 12 000
// requests in CI (200 a user; the replay, TestBanditFixedCandidatesReplay,
// gives 0.65 for this request sequence, 0.56 over five), issue 16's 50 000
// with BANDIT_FULL=1 (0.34). The IPS estimates of greedy are not checked
// against greedy's own run here: they estimate greedy on the logging run's
// models, which learned from what that run explored, and in this world
// that is a different (better) policy than greedy on its own data. They
// are checked, as in every world, against that policy's expected click
// rate.
func TestBanditFixedCandidates(t *testing.T) {
	banditExperiment(t, 20, 12000, 0.8, false)
}

// banditExperiment serves the same request sequence (requests of them in
// CI) greedily, epsilon-greedily (ε = 0.2), by ucb and by thompson (their
// default alpha; BANDIT_ALPHA sets another for both), candidates from the
// catalogue (pool 0) or from each user's list of pool items. The greedy
// click rate is estimated off-policy from the epsilon run's log and from
// the thompson run's (IPS over the logged propensities, thompson's
// estimated from its draws; metric streamer_ope_value). Those two runs ask
// for every candidate ranked, so that the scores show greedy's choice on
// their own models, whose expected click rate is what their IPS estimates:
// each estimate must lie within its 99% interval of it (and is logged
// against its 95% one). With checkIPS each must also lie within the two
// runs' combined 95% interval of greedy's measured click rate in its own
// run. The exploring policies must learn (regret per request well below a
// random pick's), and ucb's cumulative regret must be at most ucbLimit ×
// greedy's.
func banditExperiment(t *testing.T, pool, requests int, ucbLimit float64, checkIPS bool) {
	if testing.Short() {
		t.Skip("-short")
	}
	useFastBinary(t)
	users, items := 60, 500
	if envInt("BANDIT_FULL", 0) == 1 {
		users, items, requests = 200, 1000, 50000
	}
	alpha := -1.0 // the policies' defaults
	if a, err := strconv.ParseFloat(os.Getenv("BANDIT_ALPHA"), 64); err == nil && a >= 0 {
		alpha = a
	}
	const cands, dim, seed = 20, 8, 21
	w := banditsim.New(users, items, dim, 11)
	// A random pick's expected regret, for scale.
	rng := rand.New(rand.NewPCG(12, 1))
	lists := banditPools(w, pool, seed)
	var randomRegret float64
	for range 2000 {
		u := rng.IntN(users)
		best, sum := 0.0, 0.0
		for _, v := range banditCandidates(rng, items, lists, u)[:cands] {
			pc := w.ClickProb(u, v)
			best = max(best, pc)
			sum += pc
		}
		randomRegret += best - sum/cands
	}
	randomRegret /= 2000

	greedy := runBandit(t, w, "greedy", 0, -1, requests, cands, pool, false, seed)
	explore := runBandit(t, w, "epsilon", 0.2, -1, requests, cands, pool, true, seed)
	ucb := runBandit(t, w, "ucb", 0, alpha, requests, cands, pool, false, seed)
	thompson := runBandit(t, w, "thompson", 0, alpha, requests, cands, pool, true, seed)
	n := float64(requests)
	gRate := greedy.clicks / n
	gSE := math.Sqrt(gRate * (1 - gRate) / n)
	t.Logf("greedy: click rate %.4f ± %.4f, regret/request %.4f; epsilon 0.2: click rate %.4f, regret/request %.4f; random pick's regret %.4f",
		gRate, 1.96*gSE, greedy.regret/n, explore.clicks/n, explore.regret/n, randomRegret)
	t.Logf("ucb: click rate %.4f, regret/request %.4f, %.3f × greedy's; thompson: click rate %.4f, regret/request %.4f, %.3f × greedy's (alpha: %v, < 0 the defaults)",
		ucb.clicks/n, ucb.regret/n, ucb.regret/greedy.regret, thompson.clicks/n, thompson.regret/n, thompson.regret/greedy.regret, alpha)
	for _, r := range []struct {
		name string
		run  banditRun
	}{{"epsilon", explore}, {"thompson", thompson}} {
		onRun := r.run.greedyOnRun / n
		t.Logf("off-policy from the %s log (%v labels): greedy IPS %.4f ± %.4f, SNIPS %.4f, DR %.4f [%.4f, %.4f]; greedy's expected click rate on this run's models %.4f",
			r.name, r.run.opeLabels, r.run.ips, r.run.ci, r.run.snips, r.run.dr, r.run.drLo, r.run.drHi, onRun)
		if r.run.opeLabels != n {
			t.Fatalf("%s: off-policy labels %v, want %v", r.name, r.run.opeLabels, n)
		}
		// What IPS estimates: greedy's first items on the logging run's
		// models (its expected click rate is known here), in every world.
		// Logged against the estimate's 95% interval, asserted at 99%
		// (2.576/1.96 of it): four such checks a CI run at 95% would fail
		// one run in six by chance.
		d := math.Abs(r.run.ips - onRun)
		t.Logf("%s log: |IPS − greedy on the run's models| = %.4f, inside the 95%% interval: %v", r.name, d, d <= r.run.ci)
		if d > r.run.ci*2.576/1.96 {
			t.Errorf("IPS estimate of greedy from the %s log %.4f, greedy on the run's models %.4f: off by %.4f, outside the estimate's 99%% interval ± %.4f", r.name, r.run.ips, onRun, d, r.run.ci*2.576/1.96)
		}
		if d, tol := math.Abs(r.run.ips-gRate), math.Hypot(r.run.ci, 1.96*gSE); checkIPS && d > tol {
			t.Errorf("IPS estimate of greedy from the %s log %.4f, greedy's measured rate %.4f: off by %.4f, more than the 95%% tolerance %.4f", r.name, r.run.ips, gRate, d, tol)
		}
	}
	t.Logf("greedy run's own IPS %.4f (propensities 1: its click rate)", greedy.ips)
	if greedy.opeLabels != n {
		t.Fatalf("greedy: off-policy labels %v, want %v", greedy.opeLabels, n)
	}
	if math.Abs(greedy.ips-gRate) > 1e-9 {
		t.Errorf("greedy run: IPS %v but click rate %v (every propensity is 1)", greedy.ips, gRate)
	}
	for _, r := range []struct {
		name  string
		run   banditRun
		limit float64
	}{{"greedy", greedy, 0.5}, {"epsilon", explore, 1}, {"ucb", ucb, 0.5}, {"thompson", thompson, 0.5}} {
		if !(r.run.regret/n < r.limit*randomRegret) {
			t.Errorf("%s: regret per request %.4f, random pick's %.4f: the models did not learn", r.name, r.run.regret/n, randomRegret)
		}
	}
	if !(ucb.regret <= ucbLimit*greedy.regret) {
		t.Errorf("ucb's cumulative regret %.1f is %.3f × greedy's %.1f (want ≤ %v)", ucb.regret, ucb.regret/greedy.regret, greedy.regret, ucbLimit)
	}
}
