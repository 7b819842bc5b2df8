package ratings

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/streamer/streamer/stream/wire"
)

func TestReadMovieLensFormat(t *testing.T) {
	rs, err := ReadRatings(strings.NewReader("user,item,rating,time\n2,10,3.5,100\n1,11,4.0,100\n1,10,0.5,99"))
	if err != nil {
		t.Fatal(err)
	}
	want := []Rating{{2, 10, 3.5, 100}, {1, 11, 4, 100}, {1, 10, 0.5, 99}}
	if !slices.Equal(rs, want) {
		t.Fatalf("ratings %v, want %v", rs, want)
	}
	SortByTime(rs)
	if want := []Rating{{1, 10, 0.5, 99}, {1, 11, 4, 100}, {2, 10, 3.5, 100}}; !slices.Equal(rs, want) {
		t.Errorf("sorted %v, want %v", rs, want)
	}
	g, err := ReadMovies(strings.NewReader("item,title,genres\n10,\"A title, with a comma\",Action|Crime\n11,Another title," + NoGenres + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g[10], []string{"Action", "Crime"}) || len(g[11]) != 0 {
		t.Errorf("genres %v", g)
	}
	if _, ok := g[11]; !ok {
		t.Error("a movie without genres is missing from the map")
	}
	if _, err := ReadRatings(strings.NewReader("user,item,rating,time\n1,x,3,4\n")); err == nil {
		t.Error("a bad movie id: no error")
	}
}

// The events and requests are what the wire contract says, and the
// service's hashed decoder takes them.
func TestEventsAndRequests(t *testing.T) {
	g := Genres{7: {"Sci-Fi", `Q"uote`}, 8: nil}
	ev := AppendEvent(nil, 3, Rating{User: 42, Item: 7, Value: 3.5}, g)
	wantEv := `{"id":"3","features":{"user":{"id":"42"},"item":{"id":"7","genres":["Sci-Fi","Q\"uote"]}},"label":3.5}`
	if string(ev) != wantEv {
		t.Errorf("event\n%s\nwant\n%s", ev, wantEv)
	}
	if got := string(AppendEvent(nil, 0, Rating{User: 1, Item: 8, Value: 4}, g)); got != `{"id":"0","features":{"user":{"id":"1"},"item":{"id":"8"}},"label":4}` {
		t.Errorf("event without genres: %s", got)
	}
	if k := string(AppendKey(nil, Rating{User: 42})); k != "42" {
		t.Errorf("key %q", k)
	}
	req := AppendRequest(nil, "r9", 42, []int{8, 7}, g)
	var v struct {
		ID         string
		Key        string
		K          int
		Features   map[string]map[string]any
		Candidates []struct {
			Item     string
			Features map[string]map[string]any
		}
	}
	if err := json.Unmarshal(req, &v); err != nil {
		t.Fatalf("%s: %v", req, err)
	}
	if v.ID != "r9" || v.Key != "42" || v.K != 2 || v.Features["user"]["id"] != "42" || len(v.Candidates) != 2 ||
		v.Candidates[0].Item != "8" || v.Candidates[1].Features["item"]["id"] != "7" || len(v.Candidates[1].Features["item"]["genres"].([]any)) != 2 {
		t.Errorf("request %s", req)
	}

	hc := wire.HashConfig{Bits: 16, Seed: 1, MaxFeatures: 64, Namespaces: []string{"user", "item"}}
	dec, err := wire.NewDecoder(1<<16, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if dec, err = dec.WithHashing(hc); err != nil {
		t.Fatal(err)
	}
	var e wire.Event
	if err := dec.Decode(ev, &e); err != nil {
		t.Fatalf("the hashed decoder refuses the event: %v", err)
	}
	if len(e.Idx) != 4 || !e.HasLabel || e.Label != 3.5 {
		t.Errorf("decoded event: %d features (want user id, item id, 2 genres), label %v %v", len(e.Idx), e.HasLabel, e.Label)
	}
	if err := dec.WithRequests(100).Decode(req, &e); err != nil {
		t.Fatalf("the hashed decoder refuses the request: %v", err)
	}
	if len(e.Cands) != 2 {
		t.Errorf("decoded request: %d candidates, want 2", len(e.Cands))
	}
}

func TestBaselines(t *testing.T) {
	rs := []Rating{{1, 1, 4, 0}, {1, 2, 2, 1}, {2, 1, 5, 2}, {1, 1, 3, 3}}
	b := RunBaselines(rs, nil, 0.5, 0.5, 5)
	// Mean: nothing yet (0, clipped to 0.5), then 4, 3, 11/3.
	if want := []float64{0.5, 4, 3, 11.0 / 3}; !closeAll(b.Mean, want, 1e-12) {
		t.Errorf("mean %v, want %v", b.Mean, want)
	}
	// Biases, step 0.5: ŷ0 = 0 (→ 0.5), e = 4: bu1 = bi1 = 2.
	// ŷ1 = μ 4 + bu1 2 + bi2 0 = 6 (→ 5), e = −4: bu1 = 0, bi2 = −2.
	// ŷ2 = μ 3 + bu2 0 + bi1 2 = 5, e = 0.
	// ŷ3 = μ 11/3 + bu1 0 + bi1 2 = 17/3 (→ 5).
	if want := []float64{0.5, 5, 5, 5}; !closeAll(b.Biases, want, 1e-12) {
		t.Errorf("biases %v, want %v", b.Biases, want)
	}
	// Another order: the same predictions, in that order.
	r := RunBaselines(rs, []int{2, 0, 1, 3}, 0.5, 0.5, 5)
	if r.Mean[2] != 0.5 || r.Mean[0] != 5 || math.Abs(r.Mean[1]-4.5) > 1e-12 {
		t.Errorf("mean in another order %v", r.Mean)
	}
	m, bb := BaselineRMSE(rs, b, 2)
	if math.Abs(m-math.Sqrt((4+4.0/9)/2)) > 1e-12 || math.Abs(bb-math.Sqrt(2)) > 1e-12 {
		t.Errorf("RMSE from event 2: mean %v, biases %v", m, bb)
	}
}

// TestClassifierBaselines: the running rate predicts each event from the
// ones before it (events before from count but are not judged), and the
// biases' score decides at the threshold that does best, of liked and one
// and two ninths of the ratings' range below it, on any scale.
func TestClassifierBaselines(t *testing.T) {
	rs := []Rating{{1, 1, 4, 0}, {1, 2, 2, 1}, {2, 1, 5, 2}, {1, 1, 3, 3}, {2, 2, 4, 4}}
	base := Baselines{Biases: []float64{0, 0, 3.8, 3.5, 4.2}}
	cb := ClassifierBaselines(rs, base, 4, 2)
	if len(cb) != 2 {
		t.Fatalf("%d baselines", len(cb))
	}
	// The rate before events 2, 3, 4: 1/2 (decides liked, right), 2/3
	// (liked, wrong), 2/4 (liked, right).
	r := cb[0]
	if r.Decisions != 3 || math.Abs(float64(r.Accuracy)-2.0/3) > 1e-12 || r.LogLossN != 3 ||
		math.Abs(float64(r.LogLoss)-(2*math.Ln2+math.Log(3))/3) > 1e-12 || r.AUC != 0 {
		t.Errorf("running rate: %+v", r)
	}
	// Ratings 2..5: thresholds 4 − 2/3, 4 − 1/3 and 4 on 3.8, 3.5, 4.2 for
	// liked, not, liked: 3.667 gets all three right, the others two.
	b := cb[1]
	if !strings.Contains(b.Name, "≥ 3.667 (the best of 3.333, 3.667, 4 ") || b.Decisions != 3 || b.Accuracy != 1 || b.LogLossN != 0 || b.AUC != 1 {
		t.Errorf("biases: %+v", b)
	}
	// The same ×20: the same decisions, at thresholds ×20.
	for i := range rs {
		rs[i].Value *= 20
		base.Biases[i] *= 20
	}
	if b := ClassifierBaselines(rs, base, 80, 2)[1]; !strings.Contains(b.Name, "≥ 73.33 (the best of 66.67, 73.33, 80 ") || b.Accuracy != 1 {
		t.Errorf("biases ×20: %+v", b)
	}
}

// On a synthetic world with biases the bias baseline beats the mean, and
// neither explains the interaction and the noise.
func TestWorldBaselines(t *testing.T) {
	w := World{Users: 50, Items: 80, Factors: 5, Base: 3, BiasSD: 0.5, InteractionSD: 1, Noise: 0.5, Seed: 7}
	rs := w.Ratings(20000)
	if !slices.Equal(rs, w.Ratings(20000)) {
		t.Fatal("the same world gives other ratings")
	}
	var sum, ss float64
	for _, r := range rs {
		sum += r.Value
	}
	mean := sum / float64(len(rs))
	for _, r := range rs {
		ss += (r.Value - mean) * (r.Value - mean)
	}
	sd := math.Sqrt(ss / float64(len(rs)))
	// Var = 2·0.25 (biases) + 1 (interaction) + 0.25 (noise) = 1.75.
	if math.Abs(mean-3) > 0.3 || math.Abs(sd-math.Sqrt(1.75)) > 0.25 {
		t.Errorf("ratings: mean %.3f, sd %.3f; want about 3 and %.3f", mean, sd, math.Sqrt(1.75))
	}
	b := RunBaselines(rs, nil, 0.05, math.Inf(-1), math.Inf(1))
	m, bb := BaselineRMSE(rs, b, len(rs)/2)
	t.Logf("last half: running mean %.4f, biases %.4f", m, bb)
	if !(bb < m-0.1) || bb < math.Sqrt(1.25)-0.05 {
		t.Errorf("last half: running mean %.4f, biases %.4f: want biases well below the mean and not below √1.25 ≈ 1.118 by much", m, bb)
	}
}

func TestMetrics(t *testing.T) {
	var r RMSE
	if !math.IsNaN(r.Value()) {
		t.Error("empty RMSE is not NaN")
	}
	r.Add(1, 2)
	r.Add(3, 1)
	if math.Abs(r.Value()-math.Sqrt(2.5)) > 1e-12 || r.N() != 2 {
		t.Errorf("RMSE %v", r.Value())
	}
	// AUC: positives 0.9, 0.5; negatives 0.5, 0.1: pairs 4, wins 3, a tie ½.
	if a := AUC([]float64{0.9, 0.5, 0.5, 0.1}, []bool{true, true, false, false}); math.Abs(a-3.5/4) > 1e-12 {
		t.Errorf("AUC %v, want %v", a, 3.5/4)
	}
	if a := AUC([]float64{1, 2}, []bool{true, true}); !math.IsNaN(a) {
		t.Errorf("AUC without negatives %v", a)
	}
	var b Binary
	b.Add(true, 2, 1, 0.9)
	b.Add(false, 1, 1, 0.2)
	b.Add(false, -1, 0, math.NaN())
	acc, n := b.Accuracy()
	ll, nll := b.LogLoss()
	if acc != 0.5 || n != 2 || b.Undecided() != 1 || nll != 2 || math.Abs(ll-(-math.Log(0.9)-math.Log(0.8))/2) > 1e-12 || b.AUC() != 1 {
		t.Errorf("binary: accuracy %v of %d, undecided %d, log loss %v of %d, AUC %v", acc, n, b.Undecided(), ll, nll, b.AUC())
	}
	ci := MeanCI([]float64{1, 2, 3, 4})
	h := 1.96 * math.Sqrt(5.0/3/4)
	if ci.Mean != 2.5 || math.Abs(ci.Lower-(2.5-h)) > 1e-12 || math.Abs(ci.Upper-(2.5+h)) > 1e-12 || ci.N != 4 {
		t.Errorf("MeanCI %+v", ci)
	}
	if s, _ := json.Marshal(struct{ A, B Num }{Num(math.NaN()), 1.5}); string(s) != `{"A":null,"B":1.5}` {
		t.Errorf("Num: %s", s)
	}
}

func TestNDCG(t *testing.T) {
	if v := NDCG([]float64{5, 4, 3, 1}, 5); math.Abs(v-1) > 1e-12 {
		t.Errorf("the best order: %v", v)
	}
	g := []float64{1, 5, 3}
	want := (1 + 5/math.Log2(3)) / (5 + 3/math.Log2(3))
	if v := NDCG(g, 2); math.Abs(v-want) > 1e-12 {
		t.Errorf("NDCG@2 %v, want %v", v, want)
	}
	if !slices.Equal(g, []float64{1, 5, 3}) {
		t.Error("NDCG changed its input")
	}
	if v := NDCG([]float64{0, 0}, 5); v != 0 {
		t.Errorf("no gain: %v", v)
	}
}

// TestItemOrders: the item-mean and popularity baselines order a
// request's candidates by their ratings so far, ties (and unrated items,
// at the mean of all) by id.
func TestItemOrders(t *testing.T) {
	m := NewItemMeans()
	for _, r := range [][2]float64{{7, 5}, {3, 2}, {3, 4}, {9, 3}, {3, 3}, {9, 4}} {
		m.Learn(int(r[0]), r[1])
	}
	items := []int{9, 4, 3, 7} // means 3.5, none (3.5, the mean of all), 3, 5; counts 2, 0, 3, 1
	if got, want := m.Order(items), []int{3, 1, 0, 2}; !slices.Equal(got, want) {
		t.Errorf("by mean %v, want %v", got, want)
	}
	if got, want := m.PopularOrder(items), []int{2, 0, 3, 1}; !slices.Equal(got, want) {
		t.Errorf("by popularity %v, want %v", got, want)
	}
}

func TestRequests(t *testing.T) {
	// User 1 rates items 1..6 at events 0, 2, 4, 6, 8, 9 (item 3 twice);
	// user 2 rates at the others.
	var rs []Rating
	items1 := []int{1, 2, 3, 3, 4, 5}
	for i := range 12 {
		if i%2 == 0 && i < 8 || i == 8 || i == 9 {
			rs = append(rs, Rating{User: 1, Item: items1[0], Value: float64(items1[0])})
			items1 = items1[1:]
		} else {
			rs = append(rs, Rating{User: 2, Item: 100 + i, Value: 1})
		}
	}
	reqs := Requests(rs, 2, 2, 3)
	// Event 2 (user 1): items 2, 3, 4 (3 once); event 4 (user 1): 3, 4, 5;
	// event 6 (user 1): 3, 4, 5; event 8 (user 1): 4, 5 only: skipped;
	// event 10 (user 2): 110, 111 only: skipped.
	if len(reqs) != 3 {
		t.Fatalf("%d requests: %+v", len(reqs), reqs)
	}
	if r := reqs[0]; r.Index != 2 || r.User != 1 || !slices.Equal(r.Items, []int{2, 3, 4}) || !slices.Equal(r.Ratings, []float64{2, 3, 4}) {
		t.Errorf("first request %+v", r)
	}
	if r := reqs[2]; r.Index != 6 || !slices.Equal(r.Items, []int{3, 4, 5}) {
		t.Errorf("third request %+v", r)
	}

	m := NewItemMeans()
	m.Learn(1, 4)
	m.Learn(2, 2)
	m.Learn(2, 4)
	// Means: item 1 4, item 2 3, unseen items 10/3; ties by id.
	if got := m.Order([]int{9, 2, 1, 8}); !slices.Equal(got, []int{2, 3, 0, 1}) {
		t.Errorf("item-mean order %v, want [2 3 0 1] (items 1, 8, 9, 2)", got)
	}
}

func TestCollector(t *testing.T) {
	c := NewCollector(4)
	add := func(s string) {
		t.Helper()
		if _, _, err := c.Add([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	at := func(ns int) string { return `"scored_at":"2026-01-01T00:00:00.00000000` + string(rune('0'+ns)) + `Z"` }
	// "reg": a rating model (0 before it learned); "cls": a classifier
	// with probabilities; "ord": an ordinal model with expected; "lvl":
	// levels only; "rk": a ranking model.
	for i, p := range []string{"0", "3.25", "4.5", "2"} {
		id := string(rune('0' + i))
		add(`{"id":"` + id + `","key":"u","model":"reg","version":1,"score":1.5,"prediction":` + p + `,"certainty":{"n":1},` + at(3-i) + `}`)
		add(`{"id":"` + id + `","model":"cls","score":0.` + id + `,"prediction":1,"probability":0.7,` + at(3-i) + `}`)
		add(`{"id":"` + id + `","model":"ord","score":0,"prediction":4,"expected":3.5,"fallback":"glob",` + at(3-i) + `}`)
		add(`{"id":"` + id + `","model":"lvl","score":0,"prediction":3,` + at(3-i) + `}`)
		add(`{"id":"` + id + `","model":"rk","version":` + p[:1] + `,"score":2.5,"prediction":0,` + at(3-i) + `}`)
	}
	add(`{"id":"1","model":"reg","score":9,"prediction":9,` + at(0) + `}`) // a duplicate: the first counts
	add(`{"id":"r-1","model":"reg","ranked":[]}`)
	if _, _, err := c.Add([]byte(`{"id":`)); err == nil {
		t.Error("a broken record: no error")
	}
	kinds := map[string]Kind{"reg": KindRating, "cls": KindClassifier, "ord": KindExpected, "lvl": KindLevels, "rk": KindUnknown}
	for name, k := range kinds {
		if got := c.Model(name).Kind(); got != k {
			t.Errorf("%s: kind %v, want %v", name, got, k)
		}
	}
	if m := c.Model("reg"); m.Duplicates != 1 || m.Records != 4 || c.Foreign != 1 {
		t.Errorf("records %d, duplicates %d, foreign %d", m.Records, m.Duplicates, c.Foreign)
	}
	if k, dead := c.Scored(2); k != 5 || dead {
		t.Errorf("event 2 scored by %d models", k)
	}
	if got := c.Order(); !slices.Equal(got, []int{3, 2, 1, 0}) {
		t.Errorf("order %v, want by scored_at [3 2 1 0]", got)
	}
	rs := []Rating{{Value: 4}, {Value: 3}, {Value: 5}, {Value: 1}}
	base := Baselines{Mean: []float64{3, 3, 3, 3}, Biases: []float64{4, 3, 5, 2}}
	res := Judge(rs, c, base, Options{Lo: 0.5, Hi: 5, Liked: 4, ScoreIsRating: []string{"rk"}})
	byName := map[string]Result{}
	for _, r := range res {
		byName[r.Model] = r
	}
	// reg: events 1..3 predicted 3.25, 4.5, 2 against 3, 5, 1.
	if r := byName["reg"]; r.Predicted != 3 || math.Abs(float64(r.RMSE)-math.Sqrt((0.0625+0.25+1)/3)) > 1e-12 ||
		math.Abs(float64(r.MeanRMSE)-math.Sqrt(8.0/3)) > 1e-12 || math.Abs(float64(r.BiasesRMSE)-math.Sqrt(1.0/3)) > 1e-12 {
		t.Errorf("reg %+v", r)
	}
	// reg as the score of liked: 4.5 (liked) above 3.25 and 2.
	if r := byName["reg"]; r.RatingAUC != 1 || !math.IsNaN(float64(byName["cls"].RatingAUC)) {
		t.Errorf("reg's rating AUC %v, want 1; cls's %v, want NaN", r.RatingAUC, byName["cls"].RatingAUC)
	}
	if r := byName["ord"]; r.Predicted != 4 || r.Fallbacks["glob"] != 4 {
		t.Errorf("ord %+v", r)
	}
	if r := byName["rk"]; r.Predicted != 3 || !r.ScoreAsValue { // none from version 0
		t.Errorf("rk %+v", r)
	}
	if r := byName["lvl"]; r.Predicted != 0 || r.Decisions != 0 {
		t.Errorf("lvl %+v", r)
	}
	// cls: liked = events 0 and 2, scored 0.0 and 0.2 against 0.1 and
	// 0.3: one pair of four in order.
	if r := byName["cls"]; r.Decisions != 4 || r.Accuracy != 0.5 || r.LogLossN != 4 || math.Abs(float64(r.AUC)-0.25) > 1e-12 {
		t.Errorf("cls %+v", r)
	}
	c.Dead(3)
	if _, dead := c.Scored(3); !dead {
		t.Error("Dead did not mark the event")
	}
	if _, ok := c.Index("01"); ok {
		t.Error(`"01" taken for event 1`)
	}
}

func closeAll(a, b []float64, tol float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if math.Abs(a[i]-b[i]) > tol {
			return false
		}
	}
	return true
}

// TestParseWorld: a spec's keys set the world, the rest take the
// defaults; whole-star ratings stay on the scale; popularity skews the
// items drawn; a bad spec names its key.
func TestParseWorld(t *testing.T) {
	w, n, err := ParseWorld("factors=0,ratings=30000,popularity=1,seed=4")
	if err != nil {
		t.Fatal(err)
	}
	if n != 30000 || w.Factors != 0 || w.Popularity != 1 || w.Seed != 4 || w.Users != 600 || w.Items != 3000 || w.Step != 1 || w.Min != 1 || w.Max != 5 {
		t.Fatalf("%+v, %d ratings", w, n)
	}
	count := make([]int, w.Items)
	for _, r := range w.Ratings(n) {
		if r.Value != math.Round(r.Value) || r.Value < 1 || r.Value > 5 {
			t.Fatalf("rating %v: want whole stars in 1..5", r.Value)
		}
		count[r.Item]++
	}
	// P(i) ∝ 1/(i+1): the first item about 10 times the tenth's share.
	if first, tenth := count[0], count[9]; first < 6*tenth || first > 15*tenth {
		t.Errorf("item 0 drawn %d times, item 9 %d: want about 10 times as often", first, tenth)
	}
	for _, c := range []struct{ spec, want string }{
		{"users=x", "users"}, {"colour=3", "unknown key"}, {"ratings=0", "≥ 1"}, {"noise", "key=value"},
	} {
		if _, _, err := ParseWorld(c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want an error naming %q", c.spec, err, c.want)
		}
	}
}

// TestFunkMF: one step moves the biases and factors as Funk's update
// says, and on a world with a user × item term the best step's RMSE is
// below the biases baseline's, the same in every run.
func TestFunkMF(t *testing.T) {
	f := NewFunkMF(0.1, 0.02, 2, 1)
	f.Learn(1, 2, 4) // the first: ŷ = 0 + 0 + 0 + ⟨p, q⟩
	pu, qi := slices.Clone(f.p[1]), slices.Clone(f.q[2])
	bu, bi := f.bu[1], f.bi[2]
	yhat := f.Predict(1, 2)
	if want := 4 + bu + bi + pu[0]*qi[0] + pu[1]*qi[1]; math.Abs(yhat-want) > 1e-12 {
		t.Fatalf("prediction %v, want %v", yhat, want)
	}
	f.Learn(1, 2, 5)
	e := 5 - yhat
	if got, want := f.bu[1], bu+0.1*(e-0.02*bu); math.Abs(got-want) > 1e-12 {
		t.Errorf("b_u %v, want %v", got, want)
	}
	for k := range 2 {
		if got, want := f.p[1][k], pu[k]+0.1*(e*qi[k]-0.02*pu[k]); math.Abs(got-want) > 1e-12 {
			t.Errorf("p_u[%d] %v, want %v", k, got, want)
		}
		if got, want := f.q[2][k], qi[k]+0.1*(e*pu[k]-0.02*qi[k]); math.Abs(got-want) > 1e-12 {
			t.Errorf("q_i[%d] %v, want %v", k, got, want)
		}
	}
	w := World{Users: 100, Items: 150, Factors: 4, Base: 3, BiasSD: 0.5, InteractionSD: 1, Noise: 0.3, Seed: 9}
	rs := w.Ratings(30000)
	mf, step := BestFunkMF(rs, nil, 8, math.Inf(-1), math.Inf(1))
	if again, _ := BestFunkMF(rs, nil, 8, math.Inf(-1), math.Inf(1)); again != mf {
		t.Fatalf("two runs: %v and %v", mf, again)
	}
	_, biases := BaselineRMSE(rs, RunBaselines(rs, nil, 0.05, math.Inf(-1), math.Inf(1)), 0)
	t.Logf("matrix factorisation %.4f (step %g), biases %.4f", mf, step, biases)
	if !(mf < 0.9*biases) {
		t.Errorf("matrix factorisation %.4f, not below 0.9 × the biases' %.4f", mf, biases)
	}
}
