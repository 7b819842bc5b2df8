package main

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamer/streamer/tests/internal/ratings"
)

func TestRecordID(t *testing.T) {
	for v, want := range map[string]int{`{"id":"17","key":"3"}`: 17, `{"id":"0"}`: 0} {
		if i, ok := recordID([]byte(v)); !ok || i != want {
			t.Errorf("%s: %d %v", v, i, ok)
		}
	}
	for _, v := range []string{`{"id":"r-1"}`, `{"key":"1","id":"1"}`, `{"id":"1`} {
		if _, ok := recordID([]byte(v)); ok {
			t.Errorf("%s: an id", v)
		}
	}
}

// judgeRanking on a generated stream: an order served best first has NDCG
// 1, the item means are those of the events before each request.
func TestJudgeRanking(t *testing.T) {
	w := ratings.World{Users: 5, Items: 40, Factors: 2, Base: 3, BiasSD: 0.5, InteractionSD: 1, Noise: 0.3, Seed: 3}
	rs := w.Ratings(2000)
	reqs := ratings.Requests(rs, 1000, 50, 10)
	if len(reqs) == 0 {
		t.Fatal("no requests")
	}
	res := &replayResult{served: make([][]string, len(reqs)), servedBy: "m"}
	for q, req := range reqs {
		if q == 0 {
			continue // unanswered
		}
		// Best first: the candidates by the user's rating.
		pos := make([]int, len(req.Items))
		for j := range pos {
			pos[j] = j
		}
		for a := range pos {
			for b := a + 1; b < len(pos); b++ {
				if req.Ratings[pos[b]] > req.Ratings[pos[a]] {
					pos[a], pos[b] = pos[b], pos[a]
				}
			}
		}
		for _, p := range pos {
			res.served[q] = append(res.served[q], strconv.Itoa(req.Items[p]))
		}
	}
	rk := judgeRanking(rs, reqs, res, options{rankCands: 10, ndcgK: 5, step: 0.05})
	row := func(rk *ranking, prefix string) ndcgRow {
		t.Helper()
		for _, o := range rk.Orders {
			if strings.HasPrefix(o.Order, prefix) {
				return o
			}
		}
		t.Fatalf("no order %q in %+v", prefix, rk.Orders)
		return ndcgRow{}
	}
	if rk.Answered != len(reqs)-1 || rk.Orders[0].N != len(reqs)-1 {
		t.Fatalf("answered %d of %d: %+v", rk.Answered, len(reqs), rk)
	}
	if s := float64(rk.Orders[0].Mean); math.Abs(s-1) > 1e-12 {
		t.Errorf("the best order served: NDCG %v, want 1", s)
	}
	byMean := row(rk, "item mean")
	if mean := float64(byMean.Mean); !(mean > 0 && mean < 1) || byMean.N != len(reqs)-1 {
		t.Errorf("item-mean NDCG %v over %d requests", mean, byMean.N)
	}
	if d := float64(row(rk, "served − item mean").Mean); math.Abs(d-(1-float64(byMean.Mean))) > 1e-12 {
		t.Errorf("paired difference %v, want 1 − item mean's %v", d, byMean.Mean)
	}

	// The last request alone: its item-mean order, recomputed here from
	// the events before it.
	last := len(reqs) - 1
	only := &replayResult{served: make([][]string, len(reqs)), servedBy: "m"}
	only.served[last] = res.served[last]
	rk = judgeRanking(rs, reqs, only, options{rankCands: 10, ndcgK: 5, step: 0.05})
	m := ratings.NewItemMeans()
	b := ratings.NewBiases(0.05)
	for _, r := range rs[:reqs[last].Index] {
		m.Learn(r.Item, r.Value)
		b.Learn(r.User, r.Item, r.Value)
	}
	req := reqs[last]
	ndcg := func(pos []int) float64 {
		var gains []float64
		for _, p := range pos {
			gains = append(gains, req.Ratings[p])
		}
		return ratings.NDCG(gains, 5)
	}
	for _, c := range []struct {
		prefix string
		want   float64
	}{
		{"item mean", ndcg(m.Order(req.Items))},
		{"item popularity", ndcg(m.PopularOrder(req.Items))},
		{"biases", ndcg(ratings.OrderBy(req.Items, func(it int) float64 { return b.Predict(req.User, it) }))},
	} {
		if o := row(rk, c.prefix); o.N != 1 || math.Abs(float64(o.Mean)-c.want) > 1e-12 {
			t.Errorf("the last request's %s NDCG %v (of %d requests), want %v", c.prefix, o.Mean, o.N, c.want)
		}
	}
}

// TestReplayGeneratedSet runs the bench end to end on a generated set in
// the ratings.dat layout, through the real binary and the ratings config,
// producing at most 5 000 ratings ahead of those scored: every rating is
// scored by each model, the fm beats the bias baseline on the same events
// (the ratings have user × item interactions), and the broker's log is
// trimmed as the bench reads it.
func TestReplayGeneratedSet(t *testing.T) {
	w := ratings.World{Users: 200, Items: 400, Factors: 4, Base: 3, BiasSD: 0.5, InteractionSD: 1, Noise: 0.3, Seed: 5, Min: 0.5, Max: 5}
	rs := w.Ratings(40000)
	dir := t.TempDir()
	if err := ratings.WriteDat(dir, rs); err != nil {
		t.Fatal(err)
	}
	rep, fm := replayRatings(t, dir, len(rs), 3)
	mf := rep.Baselines[len(rep.Baselines)-1]
	t.Logf("rating RMSE %.4f, biases %.4f, running mean %.4f, %s %.4f; %d records deleted from the broker", fm.RMSE, fm.BiasesRMSE, fm.MeanRMSE, mf.Name, mf.RMSE, rep.BrokerTrimmed)
	if !(fm.RMSE < 0.9*fm.BiasesRMSE) {
		t.Errorf("the fm's RMSE %.4f, not below 0.9 × the biases baseline's %.4f", fm.RMSE, fm.BiasesRMSE)
	}
	if rep.BrokerTrimmed <= 0 {
		t.Errorf("no record deleted from the broker's log")
	}
}

// TestReplayBiasesOnlySet: on ratings made of user and item biases and
// noise alone (no user × item structure for the factors to find), in
// whole stars, the ratings config's fm still beats, on the same events,
// the biases baseline (0.977) and a biased matrix factorisation at its
// best step (0.974): its factors must not learn the noise (factor_l2's
// default; without it the fm scored 0.980). One partition, so that the
// service learns the ratings in the order the baselines do and the
// figures are the same in every run.
func TestReplayBiasesOnlySet(t *testing.T) {
	w, n, err := ratings.ParseWorld("factors=0,seed=3,ratings=60000")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := ratings.WriteDat(dir, w.Ratings(n)); err != nil {
		t.Fatal(err)
	}
	rep, fm := replayRatings(t, dir, n, 1)
	mf := rep.Baselines[len(rep.Baselines)-1]
	t.Logf("rating RMSE %.4f, biases %.4f, running mean %.4f, %s %.4f", fm.RMSE, fm.BiasesRMSE, fm.MeanRMSE, mf.Name, mf.RMSE)
	if !(fm.RMSE < fm.BiasesRMSE) || !(fm.RMSE < mf.RMSE) {
		t.Errorf("the fm's RMSE %.4f, not below the biases baseline's %.4f and the matrix factorisation's %.4f", fm.RMSE, fm.BiasesRMSE, mf.RMSE)
	}
}

// replayRatings runs the bench on the n ratings in dir through the
// ratings config with the given partitions, producing at most 5 000
// ratings ahead of those scored, and checks that every model scored every
// rating; it returns the report and the rating model's result.
func replayRatings(t *testing.T, dir string, n, partitions int) (*report, ratings.Result) {
	t.Helper()
	o := options{data: dir, configPath: "../../configs/recommendation-ratings.yaml", binary: os.Getenv("E2E_STREAMER_BINARY"),
		partitions: partitions, backlog: 5000, lo: math.NaN(), hi: math.NaN(), liked: 4, step: 0.05, quality: true,
		stall: time.Minute, trimEvery: 50 * time.Millisecond}
	rep, err := run(t.Context(), o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Setup.Ratings != n || len(rep.DeadLetter) != 0 {
		t.Fatalf("%d ratings replayed of %d, dead letters %v", rep.Setup.Ratings, n, rep.DeadLetter)
	}
	byName := map[string]ratings.Result{}
	for _, m := range rep.Models {
		byName[m.Model] = m
		if m.Records != n {
			t.Errorf("%s: %d records of %d events", m.Model, m.Records, n)
		}
	}
	fm, ok := byName["rating"]
	if !ok || fm.Predicted < n-1 {
		t.Fatalf("the rating model: %+v", fm)
	}
	return rep, fm
}

// TestLikedAt: the bench's liked threshold defaults to the config's first
// classifier condition ">= x" (the ratings config's 4, another scale's),
// else to the default.
func TestLikedAt(t *testing.T) {
	cfg, err := readServiceConfig("../../configs/recommendation-ratings.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.likedAt(-1); got != 4 {
		t.Errorf("the ratings config: %v, want 4", got)
	}
	for text, want := range map[string]float64{
		"models: [{name: r, type: fm}, {name: l, type: fm, label: {positive: '>= 80'}}]": 80,
		"models: [{name: l, type: fm, label: {positive: '> 3'}}]":                        -1,
		"models: [{name: r, type: fm}]":                                                  -1,
	} {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		c, err := readServiceConfig(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.likedAt(-1); got != want {
			t.Errorf("%s: %v, want %v", text, got, want)
		}
	}
}
