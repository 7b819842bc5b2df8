package main

import (
	"math"
	"strconv"
	"strings"
	"testing"

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
