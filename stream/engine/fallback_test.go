package engine

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/internal/allocs"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/internal/testkit"
)

// fakeModel is a model whose predictions a test chooses: predict(x, n),
// n the labels learned before. It accepts the labels of its kind: −1/+1
// (0 read as −1) when levels < 0, the levels 1..levels when levels > 0,
// any finite real when 0; with keep it records the labels it learns.
type fakeModel struct {
	dim     int
	levels  int
	predict func(x []float64, n int64) online.Prediction
	n       int64
	keep    bool
	learned []float64
}

func (m *fakeModel) Type() string    { return "fake" }
func (m *fakeModel) Dim() int        { return m.dim }
func (m *fakeModel) Examples() int64 { return m.n }
func (m *fakeModel) Version() int64  { return 1 }

func (m *fakeModel) Label(v float64) (float64, bool) {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, false
	case m.levels < 0:
		switch v {
		case 1:
			return 1, true
		case -1, 0:
			return -1, true
		}
		return 0, false
	case m.levels > 0:
		return v, v == math.Trunc(v) && v >= 1 && v <= float64(m.levels)
	}
	return v, true
}

func (m *fakeModel) Observe(x []float64, y float64, labelled bool) online.Prediction {
	p := m.predict(x, m.n)
	p.N = m.n
	if labelled {
		m.n++
		if m.keep {
			m.learned = append(m.learned, y)
		}
	}
	return p
}

func (m *fakeModel) MarshalBinary() ([]byte, error) {
	return binary.LittleEndian.AppendUint64(nil, uint64(m.n)), nil
}

func (m *fakeModel) UnmarshalBinary(b []byte) error {
	if len(b) != 8 {
		return fmt.Errorf("%w: fake: %d bytes", online.ErrFormat, len(b))
	}
	m.n = int64(binary.LittleEndian.Uint64(b))
	return nil
}

// scoreRecord is an output record as a consumer reads it.
type scoreRecord struct {
	ID          string   `json:"id"`
	Key         string   `json:"key"`
	Model       string   `json:"model"`
	Version     int64    `json:"version"`
	Score       float64  `json:"score"`
	Prediction  float64  `json:"prediction"`
	Probability *float64 `json:"probability"`
	Expected    *float64 `json:"expected"`
	Fallback    string   `json:"fallback"`
	Certainty   struct {
		N        int64 `json:"n"`
		Interval *struct {
			Lower, Upper, Level float64
		} `json:"interval"`
		Probability *struct {
			P, Lower, Upper float64
			N               int64
		} `json:"probability"`
	} `json:"certainty"`
}

// scoreRecords decodes the score records of sink (every model's, in order)
// and counts its dead letters.
func scoreRecords(t *testing.T, sink *memSink) (recs []scoreRecord, dead int) {
	t.Helper()
	for _, m := range sink.Msgs {
		if m.Topic != "scores" {
			dead++
			continue
		}
		var r scoreRecord
		if err := json.Unmarshal(m.Value, &r); err != nil {
			t.Fatalf("%s: %v", m.Value, err)
		}
		recs = append(recs, r)
	}
	return recs, dead
}

// ratingEvent is event id with features x and a rating.
func ratingEvent(id int, key string, x []float64, rating float64) kafka.Message {
	b, _ := json.Marshal(map[string]any{"id": "e-" + strconv.Itoa(id), "features": x, "label": rating})
	return kafka.Message{Topic: "events", Offset: int64(id), Key: []byte(key), Value: b}
}

// ratings are the half stars 0.5..5.
var ratings = []float64{0.5, 1, 1.5, 2, 2.5, 3, 3.5, 4, 4.5, 5}

var ratingEdges = []float64{1.5, 2.5, 3.5, 4.5}

// mustMap returns l, a label map of the tests' own (valid) making.
func mustMap(l *online.LabelMap, err error) *online.LabelMap {
	if err != nil {
		panic(err)
	}
	return l
}

// TestLabelMapRatings: one stream of ratings 0.5..5 feeds a regression
// model (the rating as sent), classifiers with label.positive ">= 4" (+1
// from 4 stars, −1 below: 1 star is −1) and ordinal models with
// label.edges (levels 1..5), real ones among them, with no dead letter.
// Without the mapping the classifier dead-letters a rating of 4.
func TestLabelMapRatings(t *testing.T) {
	const dim = 4
	like := mustMap(online.PositiveWhen(">= 4"))
	bins := mustMap(online.BinnedBy(ratingEdges))
	zero := func([]float64, int64) online.Prediction { return online.Prediction{} }
	reg := &fakeModel{dim: dim, predict: zero, keep: true}
	cls := &fakeModel{dim: dim, levels: -1, predict: zero, keep: true}
	ord := &fakeModel{dim: dim, levels: 5, predict: zero, keep: true}
	lg, err := online.NewLogistic(dim, online.LogisticParams{LearningRate: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	om, err := online.NewOMAM(dim, online.OMAMParams{Kernel: online.KernelSpec{Type: "linear"}, Levels: 5, Normalize: true})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: dim, Calibration: CalibrationConfig{Window: 200, Every: 20}},
		[]NamedModel{
			{Name: "r", Model: reg, Traits: online.Traits{Kind: online.Regression}},
			{Name: "like", Model: cls, Label: like},
			{Name: "o", Model: ord, Label: bins, Traits: online.Traits{Kind: online.Ordinal, Levels: 5}},
			{Name: "logistic", Model: lg, Label: like, Traits: online.Traits{Kind: online.Classifier, Probability: true}},
			{Name: "omam", Model: om, Label: bins, Traits: online.Traits{Kind: online.Ordinal, Levels: 5}},
		}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s := instanceShard(t, e)
	sink := &memSink{Keep: true}
	for i := range 300 {
		y := ratings[i%len(ratings)]
		msg := ratingEvent(i, "u", []float64{y - 2.75, float64(i%3) - 1, 0.5, 1}, y)
		s.Process(&msg, sink)
	}
	recs, dead := scoreRecords(t, sink)
	if dead != 0 || len(recs) != 300*5 {
		t.Fatalf("%d dead letters, %d records; want 0 and %d", dead, len(recs), 300*5)
	}
	for i := range 300 {
		y := ratings[i%len(ratings)]
		wantLike := -1.0
		if y >= 4 {
			wantLike = 1
		}
		wantLevel := 1.0
		for _, edge := range ratingEdges {
			if edge <= y {
				wantLevel++
			}
		}
		if reg.learned[i] != y || cls.learned[i] != wantLike || ord.learned[i] != wantLevel {
			t.Fatalf("rating %v learned as %v (regression), %v (classifier), %v (ordinal)", y, reg.learned[i], cls.learned[i], ord.learned[i])
		}
	}
	for _, tc := range []struct{ rating, level float64 }{{0.5, 1}, {1.5, 2}, {2, 2}, {3.5, 4}, {4.5, 5}, {5, 5}} {
		if got := bins.Map(tc.rating); got != tc.level {
			t.Errorf("rating %v: level %v, want %v", tc.rating, got, tc.level)
		}
	}
	// The real models learned: the logistic model's probability of a like
	// is higher for a 5-star item than for a 1-star one.
	p5 := online.Peek(lg, []float64{2.25, 0, 0.5, 1}).Probability
	p1 := online.Peek(lg, []float64{-1.75, 0, 0.5, 1}).Probability
	if !(p5 > 0.5 && p1 < 0.5) {
		t.Errorf("logistic: P(like) %.3f for 5 stars, %.3f for 1 star", p5, p1)
	}
	if om.Examples() != 300 {
		t.Errorf("omam learned %d events, want 300", om.Examples())
	}

	// Without label.positive, 4 stars is no class.
	lg2, _ := online.NewLogistic(dim, online.LogisticParams{LearningRate: 0.1})
	e2, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: dim}, []NamedModel{{Name: "like", Model: lg2}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sink2 := &memSink{Keep: true}
	msg := ratingEvent(0, "u", []float64{1, 0, 0, 0}, 4)
	instanceShard(t, e2).Process(&msg, sink2)
	if len(sink2.Msgs) != 1 || sink2.Msgs[0].Topic != "dlq" {
		t.Fatalf("rating 4 without label.positive: %d messages, want one dead letter", len(sink2.Msgs))
	}
}

// valueModel is a regression model that publishes values: its score is
// offset + x[0], its value x[0] clipped to [lo, hi], once it has learned a
// label (HasValue false before).
func valueModel(dim int, offset, lo, hi float64) *fakeModel {
	return &fakeModel{dim: dim, predict: func(x []float64, n int64) online.Prediction {
		p := online.Prediction{Score: offset + x[0]}
		if n > 0 {
			p.Value, p.HasValue = min(max(x[0], lo), hi), true
		}
		return p
	}}
}

// TestRegressionValue: a regression model's value is the record's
// "prediction" (a float), its interval is centred on the value and
// clipped to the labels' range, the calibration window leaves out the
// prediction made before it had a value, and streamer_model_rmse judges
// the value, not the score.
func TestRegressionValue(t *testing.T) {
	const dim = 2
	m := valueModel(dim, 100, 0.5, 5)
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: dim, Calibration: CalibrationConfig{Window: 1000, Every: 10}},
		[]NamedModel{{Name: "fm", Model: m, Traits: online.Traits{Kind: online.Regression, Value: true}}}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s := instanceShard(t, e)
	sink := &memSink{Keep: true}
	const n = 401
	for i := range n {
		y := ratings[(i*7)%len(ratings)]
		x0 := y + 0.25*float64(i%3-1) // the value is off by 0.25 two times in three
		msg := ratingEvent(i, "u", []float64{x0, 0}, y)
		s.Process(&msg, sink)
		waitCalibrationFit(e)
	}
	recs, _ := scoreRecords(t, sink)
	intervals := 0
	for i, r := range recs {
		y := ratings[(i*7)%len(ratings)]
		x0 := y + 0.25*float64(i%3-1)
		if i == 0 {
			if r.Prediction != 0 || r.Certainty.Interval != nil {
				t.Fatalf("first record %+v: want prediction 0 and no interval before a value", r)
			}
			continue
		}
		if want := min(max(x0, 0.5), 5); r.Prediction != want {
			t.Fatalf("record %d: prediction %v, want the value %v", i, r.Prediction, want)
		}
		if iv := r.Certainty.Interval; iv != nil {
			intervals++
			if iv.Lower < 0.5 || iv.Upper > 5 {
				t.Fatalf("record %d: interval %+v outside the labels' range [0.5, 5]", i, *iv)
			}
			if c := r.Prediction; iv.Lower > 0.5 && iv.Upper < 5 && math.Abs((iv.Lower+iv.Upper)/2-c) > 1e-12 {
				t.Fatalf("record %d: interval %+v not centred on the value %v", i, *iv, c)
			}
		}
	}
	if intervals < n-20 {
		t.Errorf("%d intervals over %d records", intervals, n)
	}
	d := e.defs[0]
	d.judgeMu.Lock()
	added := d.cal.win.Added()
	d.judgeMu.Unlock()
	if added != n-1 {
		t.Errorf("%d calibration pairs, want %d: the first prediction, before a value, left out", added, n-1)
	}
	rmse := testutil.ToFloat64(e.met.rmse.WithLabelValues("fm"))
	if !(rmse < 0.25) {
		t.Errorf("streamer_model_rmse %v: want the value's error (≤ 0.25), not the score's (≈ 100)", rmse)
	}
}

// ordinalFake is an ordinal model over levels 1..3 whose level is read
// from x[0] by edges 2 and 4, undecided (level 0) before it has learned
// undecidedFor labels.
func ordinalFake(dim, undecidedFor int) *fakeModel {
	bins, _ := online.BinnedBy([]float64{2, 4})
	return &fakeModel{dim: dim, levels: 3, predict: func(x []float64, n int64) online.Prediction {
		if n < int64(undecidedFor) {
			return online.Prediction{}
		}
		return online.Prediction{Score: x[0], Label: bins.Level(x[0])}
	}}
}

// TestOrdinalExpected: an ordinal model's records carry "expected", the
// mean rating (as sent, before label.edges binned it) of the window's
// decided pairs with the same predicted level as of the last refit, a
// level without pairs taking the nearest level's; not before the model
// decides nor before the first refit. Its intervals stay within the
// levels, and streamer_model_rmse judges the expected label against the
// rating.
func TestOrdinalExpected(t *testing.T) {
	const dim, every = 2, 10
	m := ordinalFake(dim, 5)
	bins := mustMap(online.BinnedBy([]float64{2, 4}))
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: dim, Calibration: CalibrationConfig{Window: 1000, Every: every}},
		[]NamedModel{{Name: "o", Model: m, Label: bins, Traits: online.Traits{Kind: online.Ordinal, Levels: 3}}}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s := instanceShard(t, e)
	sink := &memSink{Keep: true}
	var sum, cnt [4]float64 // the decided pairs so far, by predicted level
	var want [4]float64     // the expected label per level as of the last refit
	var have bool
	decided := 0
	for i := range 300 {
		y := ratings[(i*3)%len(ratings)]
		x0 := y
		if i < 150 {
			x0 = min(y, 3.5) // level 3 is never predicted at first
		}
		msg := ratingEvent(i, "u", []float64{x0, 0}, y)
		s.Process(&msg, sink)
		recs, dead := scoreRecords(t, &memSink{Msgs: sink.Msgs[len(sink.Msgs)-1:]})
		if dead != 0 {
			t.Fatalf("event %d dead-lettered", i)
		}
		r := recs[0]
		level := 0
		if i >= 5 {
			level = bins.Level(x0)
		}
		switch {
		case level == 0 || !have:
			if r.Expected != nil {
				t.Fatalf("event %d (level %d, refitted %v): expected %v", i, level, have, *r.Expected)
			}
		case r.Expected == nil || math.Abs(*r.Expected-want[level]) > 1e-12:
			t.Fatalf("event %d, level %d: expected %v, want %v", i, level, r.Expected, want[level])
		}
		if iv := r.Certainty.Interval; iv != nil && (iv.Lower < 1 || iv.Upper > 3 || level == 0) {
			t.Fatalf("event %d, level %d: interval %+v", i, level, *iv)
		}
		if level == 0 {
			continue
		}
		sum[level] += y
		cnt[level]++
		if decided++; decided%every == 0 {
			have = true
			for l := 1; l <= 3; l++ {
				k := l
				if cnt[k] == 0 { // the nearest level with pairs (ties: the lower)
					for d := 1; ; d++ {
						if l-d >= 1 && cnt[l-d] > 0 {
							k = l - d
							break
						}
						if l+d <= 3 && cnt[l+d] > 0 {
							k = l + d
							break
						}
					}
				}
				want[l] = sum[k] / cnt[k]
			}
		}
	}
	if want[3] == want[2] {
		t.Fatal("level 3 never got pairs of its own")
	}
	if rmse := testutil.ToFloat64(e.met.rmse.WithLabelValues("o")); !(rmse > 0 && rmse < 1.5) {
		t.Errorf("streamer_model_rmse of the expected label %v", rmse)
	}
}

// TestKeyScopedIntervalsDecided: a key-scoped omam (levels 5) sees new
// keys all along, whose instances have no level at first. Their level-0
// predictions stay out of the calibration window and get no interval, and
// every interval is within the levels [1, 5]: with the no-decision pairs
// in the window its intervals were vacuous ({"prediction":3,"interval":
// {"lower":-2,"upper":8}}).
func TestKeyScopedIntervalsDecided(t *testing.T) {
	const dim = 2
	factory := func() (online.Model, error) {
		return online.NewOMAM(dim, online.OMAMParams{Kernel: online.KernelSpec{Type: "linear"}, Levels: 5, Normalize: true})
	}
	proto, _ := factory()
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: dim, Calibration: CalibrationConfig{Window: 300, Every: 20}},
		[]NamedModel{{Name: "k", Model: proto, Factory: factory, MaxKeys: 1000, Label: mustMap(online.BinnedBy(ratingEdges)),
			Traits: online.Traits{Kind: online.Ordinal, Levels: 5}}}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	s := instanceShard(t, e)
	sink := &memSink{Keep: true}
	for id := range 4000 { // a new key every 100 events; its level comes after 64
		y := ratings[(id*7)%len(ratings)]
		msg := ratingEvent(id, "user-"+strconv.Itoa(id/100), []float64{y, 5.5 - y}, y) // the direction orders the ratings
		s.Process(&msg, sink)
		waitCalibrationFit(e)
	}
	recs, _ := scoreRecords(t, sink)
	var undecided, intervals, narrow int
	for i, r := range recs {
		iv := r.Certainty.Interval
		if r.Prediction == 0 {
			undecided++
			if iv != nil {
				t.Fatalf("record %d: interval %+v for no decision", i, *iv)
			}
			continue
		}
		if iv == nil {
			continue
		}
		intervals++
		if iv.Lower < 1 || iv.Upper > 5 || !(iv.Lower <= r.Prediction && r.Prediction <= iv.Upper) {
			t.Fatalf("record %d: interval %+v for level %v", i, *iv, r.Prediction)
		}
		if iv.Upper-iv.Lower < 4 {
			narrow++
		}
	}
	if undecided < 100 || intervals < 500 {
		t.Fatalf("%d undecided records, %d intervals: the test needs both", undecided, intervals)
	}
	d := e.defs[0]
	d.judgeMu.Lock()
	for _, p := range d.cal.win.CopyTo(nil) {
		if p.Score < 1 {
			d.judgeMu.Unlock()
			t.Fatalf("the calibration window holds a pair of level %v", p.Score)
		}
	}
	d.judgeMu.Unlock()
	t.Logf("%d undecided records, %d intervals, %d narrower than the levels", undecided, intervals, narrow)
	q, _ := d.cal.cf.Load().Quantile(0.9)
	mae := testutil.ToFloat64(e.met.mae.WithLabelValues("k"))
	t.Logf("q %v mae %v", q, mae)
	if narrow < intervals/2 {
		t.Errorf("%d of %d intervals narrower than [1, 5]", narrow, intervals)
	}
}

// fallbackEngine: a global model g and a key-scoped model k falling back
// on it.
func fallbackEngine(t *testing.T, g, k NamedModel, cal CalibrationConfig, rank string) (*Engine, *Shard) {
	t.Helper()
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: g.Model.Dim(), Calibration: cal,
		JoinEvents: 1000, Rank: RankConfig{Model: rank}}, []NamedModel{g, k}, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e, instanceShard(t, e)
}

// TestFallbackSameKind: a key-scoped omam falls back on a global omam:
// until a key's own instance has a level, the key's record is the global
// model's record for the same event (score, level, expected, interval,
// version) with "fallback":"g"; from then on its own. Every record of the
// key-scoped model carries a level once the global model has one, and
// its calibration window holds only its own levels.
func TestFallbackSameKind(t *testing.T) {
	const dim = 2
	bins := mustMap(online.BinnedBy(ratingEdges))
	factory := func() (online.Model, error) {
		return online.NewOMAM(dim, online.OMAMParams{Kernel: online.KernelSpec{Type: "linear"}, Levels: 5, Normalize: true})
	}
	g, _ := factory()
	proto, _ := factory()
	tr := online.Traits{Kind: online.Ordinal, Levels: 5}
	e, s := fallbackEngine(t, NamedModel{Name: "g", Model: g, Label: bins, Traits: tr},
		NamedModel{Name: "k", Model: proto, Factory: factory, MaxKeys: 1000, Label: bins, Traits: tr, Fallback: "g"},
		CalibrationConfig{Window: 300, Every: 20}, "")
	sink := &memSink{Keep: true}
	for id := range 3000 {
		key := "user-" + strconv.Itoa(id/100) // a new key every 100 events: its own level comes after 64
		y := ratings[(id*7)%len(ratings)]
		msg := ratingEvent(id, key, []float64{y, 5.5 - y}, y)
		s.Process(&msg, sink)
		waitCalibrationFit(e)
	}
	recs, dead := scoreRecords(t, sink)
	if dead != 0 {
		t.Fatalf("%d dead letters", dead)
	}
	var fallbacks, own, gDecided int
	for i := 0; i < len(recs); i += 2 {
		gr, kr := recs[i], recs[i+1]
		if gr.Model != "g" || kr.Model != "k" || gr.ID != kr.ID {
			t.Fatalf("records %d: %s %s, %s %s", i, gr.Model, gr.ID, kr.Model, kr.ID)
		}
		if gr.Prediction != 0 {
			gDecided++
			if kr.Prediction == 0 {
				t.Fatalf("%s: no level for k although g has one: %+v", kr.ID, kr)
			}
		}
		if kr.Fallback == "" {
			if kr.Prediction != 0 {
				own++
			}
			continue
		}
		fallbacks++
		want := gr
		want.Model, want.Fallback = "k", "g"
		if !reflect.DeepEqual(kr, want) {
			t.Fatalf("%s: fallback record\n%+v\nwant g's\n%+v", kr.ID, kr, want)
		}
		if kr.Fallback != "g" {
			t.Fatalf("fallback %q", kr.Fallback)
		}
	}
	if fallbacks < 200 || own < 500 || gDecided < 2500 {
		t.Fatalf("%d fallback records, %d own, g decided %d times", fallbacks, own, gDecided)
	}
	d := e.defs[1]
	d.judgeMu.Lock()
	for _, p := range d.cal.win.CopyTo(nil) {
		if p.Score < 1 {
			d.judgeMu.Unlock()
			t.Fatalf("k's calibration window holds a pair of level %v", p.Score)
		}
	}
	d.judgeMu.Unlock()
	t.Logf("%d fallback records, %d own", fallbacks, own)
}

// TestFallbackFromValue: a key-scoped ordinal model whose instances never
// decide falls back on a global regression model that publishes values:
// every record carries the level of the value under label.edges, the value
// as "expected", the value's interval binned into levels, and
// "fallback":"g". The key-scoped model is judged on what it published
// (the value predicts the rating exactly: no level error, RMSE 0), and its
// calibration window stays empty (no interval of its own).
func TestFallbackFromValue(t *testing.T) {
	const dim = 2
	bins := mustMap(online.BinnedBy(ratingEdges))
	never := func([]float64, int64) online.Prediction { return online.Prediction{} }
	factory := func() (online.Model, error) { return &fakeModel{dim: dim, levels: 5, predict: never}, nil }
	proto, _ := factory()
	e, s := fallbackEngine(t, NamedModel{Name: "g", Model: valueModel(dim, 0, 0.5, 5), Traits: online.Traits{Kind: online.Regression, Value: true}},
		NamedModel{Name: "k", Model: proto, Factory: factory, MaxKeys: 100, Label: bins, Traits: online.Traits{Kind: online.Ordinal, Levels: 5}, Fallback: "g"},
		CalibrationConfig{Window: 500, Every: 10}, "")
	sink := &memSink{Keep: true}
	const n = 600
	for id := range n {
		y := ratings[(id*3)%len(ratings)]
		msg := ratingEvent(id, "user-"+strconv.Itoa(id%7), []float64{y, 0}, y)
		s.Process(&msg, sink)
		waitCalibrationFit(e)
	}
	recs, _ := scoreRecords(t, sink)
	for i := 2; i < len(recs); i += 2 { // from the second event on: g has a value
		gr, kr := recs[i], recs[i+1]
		y := ratings[(i/2*3)%len(ratings)]
		if kr.Fallback != "g" || kr.Prediction != float64(bins.Level(y)) || kr.Expected == nil || *kr.Expected != gr.Prediction || gr.Prediction != y {
			t.Fatalf("%s: k's record %+v for g's %+v (rating %v)", kr.ID, kr, gr, y)
		}
		gi, ki := gr.Certainty.Interval, kr.Certainty.Interval
		if (gi == nil) != (ki == nil) {
			t.Fatalf("%s: interval %v for g's %v", kr.ID, ki, gi)
		}
		if ki != nil && (ki.Lower != float64(bins.Level(gi.Lower)) || ki.Upper != float64(bins.Level(gi.Upper)) || ki.Lower < 1 || ki.Upper > 5) {
			t.Fatalf("%s: interval %+v for g's %+v", kr.ID, *ki, *gi)
		}
	}
	if r := recs[1]; r.Fallback != "g" || r.Prediction != 0 || r.Expected != nil {
		t.Fatalf("first event, before g has a value: %+v", r)
	}
	if got := testutil.ToFloat64(e.met.zeroOne.WithLabelValues("k")); got > 0.002 {
		t.Errorf("k's zero-one error %v: want that of the levels it published (0 after the first event)", got)
	}
	if got := testutil.ToFloat64(e.met.rmse.WithLabelValues("k")); got != 0 {
		t.Errorf("k's RMSE of the expected label %v, want 0", got)
	}
	if got := testutil.ToFloat64(e.met.calPairs.WithLabelValues("k")); got != 0 {
		t.Errorf("k's calibration window holds %v pairs: its own instances never decided", got)
	}
}

// TestFallbackKeyUnreadable: a key whose stored state cannot be read is
// scored by a fresh instance (counted in streamer_model_key_errors_total):
// its record carries the fallback's answer.
func TestFallbackKeyUnreadable(t *testing.T) {
	const dim = 2
	lg, _ := online.NewLogistic(dim, online.LogisticParams{LearningRate: 0.1})
	factory := func() (online.Model, error) { return online.NewLogistic(dim, online.LogisticParams{LearningRate: 0.1}) }
	proto, _ := factory()
	tr := online.Traits{Kind: online.Classifier, Probability: true}
	e, s := fallbackEngine(t, NamedModel{Name: "g", Model: lg, Traits: tr},
		NamedModel{Name: "k", Model: proto, Factory: factory, MaxKeys: 100, Traits: tr, Fallback: "g"}, CalibrationConfig{}, "")
	sink := &memSink{Keep: true}
	for id := range 200 {
		y := float64(1 - 2*(id%2))
		msg := ratingEvent(id, "alice", []float64{y, 0.5}, y)
		s.Process(&msg, sink)
	}
	// bob's stored state does not decode.
	if _, err := s.models[1].keys(t).Table().Apply(1, nil, [][]byte{[]byte("bob")}, [][]byte{[]byte("not a state")}); err != nil {
		t.Fatal(err)
	}
	sink.Msgs = nil
	msg := ratingEvent(1000, "bob", []float64{1, 0.5}, 1)
	s.Process(&msg, sink)
	recs, _ := scoreRecords(t, sink)
	gr, kr := recs[0], recs[1]
	if kr.Fallback != "g" || kr.Score != gr.Score || kr.Prediction != 1 || kr.Probability == nil || *kr.Probability != *gr.Probability {
		t.Fatalf("bob's record %+v, g's %+v", kr, gr)
	}
	if got := testutil.ToFloat64(e.met.keyErrors.WithLabelValues("k")); got != 1 {
		t.Errorf("key errors %v, want 1", got)
	}
	// alice's own instance has learned: her records are her own.
	sink.Msgs = nil
	msg = ratingEvent(1001, "alice", []float64{1, 0.5}, 1)
	s.Process(&msg, sink)
	if recs, _ := scoreRecords(t, sink); recs[1].Fallback != "" || recs[1].Prediction != 1 {
		t.Fatalf("alice's record %+v", recs[1])
	}
}

// TestRankFallback: a ranking request for a key whose key-scoped rank
// model has no answer yet is scored by the fallback ("fallback":"g" in the
// response, the global model's scores); once the key has learned, by its
// own instance. A shown item's delayed label judges what was published.
func TestRankFallback(t *testing.T) {
	const dim = 4
	mk := func() (online.Model, error) {
		return online.NewMAM(dim, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
	}
	g, _ := mk()
	proto, _ := mk()
	e, s := fallbackEngine(t, NamedModel{Name: "g", Model: g}, NamedModel{Name: "k", Model: proto, Factory: mk, MaxKeys: 100, Fallback: "g"},
		CalibrationConfig{}, "k")
	trainFirstAxis(s, dim) // teaches g (and key "" of k)
	sink := &memSink{Keep: true}
	s.Process(&kafka.Message{Topic: "events", Key: []byte("u"), Value: testkit.Request32(10, dim, 3)}, sink)
	type ranking struct {
		Model, Fallback string
		Ranked          []struct {
			Item  string
			Score float64
		}
	}
	var r ranking
	if err := json.Unmarshal(sink.Msgs[0].Value, &r); err != nil {
		t.Fatal(err)
	}
	if r.Model != "k" || r.Fallback != "g" || len(r.Ranked) != 3 || r.Ranked[0].Item != "i9" {
		t.Fatalf("response %s", sink.Msgs[0].Value)
	}
	x := make([]float64, dim)
	x[0], x[1] = 0.9-0.5, 0.3
	if want := online.Peek(g, x).Score; math.Abs(r.Ranked[0].Score-want) > 1e-12 {
		t.Fatalf("first score %v, want g's %v", r.Ranked[0].Score, want)
	}
	// The shown item's label: k is judged on g's prediction (right here,
	// where k's own had none: a mistake), and k's own instance for u
	// learns it.
	mistakes := testutil.ToFloat64(e.met.mistakes.WithLabelValues("k"))
	learned := testutil.ToFloat64(e.met.learned.WithLabelValues("k"))
	lbl := kafka.Message{Topic: "events", Key: []byte("u"), Value: []byte(`{"id":"r-1","item":"i9","label":1}`)}
	s.Process(&lbl, sink)
	if got := testutil.ToFloat64(e.met.learned.WithLabelValues("k")); got != learned+1 {
		t.Fatalf("k learned %v labels, want %v", got, learned+1)
	}
	if got := testutil.ToFloat64(e.met.mistakes.WithLabelValues("k")); got != mistakes {
		t.Errorf("k's mistakes %v → %v on the label of g's right first item: want it judged on what was published", mistakes, got)
	}
	for i := range 20 {
		y := 1 - 2*(i%2)
		v, _ := json.Marshal(map[string]any{"features": []float64{float64(y), 0.2, 0, 0}, "label": y})
		s.Process(&kafka.Message{Topic: "events", Key: []byte("u"), Value: v}, &memSink{})
	}
	sink.Msgs = nil
	s.Process(&kafka.Message{Topic: "events", Key: []byte("u"), Value: testkit.Request32(10, dim, 3)}, sink)
	r = ranking{}
	if err := json.Unmarshal(sink.Msgs[0].Value, &r); err != nil {
		t.Fatal(err)
	}
	if r.Fallback != "" || r.Ranked[0].Item != "i9" {
		t.Fatalf("after u learned: %s", sink.Msgs[0].Value)
	}
}

// TestFallbackAllocs: the per-event path with a fallback and an ordinal
// model's expected label does not allocate.
func TestFallbackAllocs(t *testing.T) {
	const dim = 2
	bins := mustMap(online.BinnedBy([]float64{2, 4}))
	never := func([]float64, int64) online.Prediction { return online.Prediction{} }
	factory := func() (online.Model, error) { return &fakeModel{dim: dim, levels: 3, predict: never}, nil }
	proto, _ := factory()
	e, s := fallbackEngine(t, NamedModel{Name: "g", Model: ordinalFake(dim, 0), Label: bins, Traits: online.Traits{Kind: online.Ordinal, Levels: 3}},
		NamedModel{Name: "k", Model: proto, Factory: factory, MaxKeys: 100, Label: bins, Traits: online.Traits{Kind: online.Ordinal, Levels: 3}, Fallback: "g"},
		CalibrationConfig{Window: 100, Every: 60}, "")
	sink := &memSink{}
	msgs := make([]kafka.Message, 60)
	for i := range msgs {
		y := ratings[i%len(ratings)]
		msgs[i] = ratingEvent(i, "user-"+strconv.Itoa(i%5), []float64{y, 0}, y)
	}
	for i := range msgs { // g's 60th decision fits its table: the expected labels are on
		s.Process(&msgs[i], sink)
	}
	waitCalibrationFit(e)
	sink.Keep = true
	s.Process(&msgs[0], sink)
	if recs, _ := scoreRecords(t, sink); recs[1].Fallback != "g" || recs[1].Expected == nil {
		t.Fatalf("k's record %+v: want g's, with an expected label", recs[1])
	}
	sink.Keep, sink.Msgs = false, nil
	i := 0
	if n := allocs.PerRun(50, func() { // 51 events: g's next fit is at its 120th
		s.Process(&msgs[i%len(msgs)], sink)
		i++
	}); n != 0 {
		t.Errorf("%v allocs per event", n)
	}
}

// TestLevelMeansTable: the expected label per level is the mean label of
// the level's pairs in the window, or the nearest level's that has some,
// the lower one on a tie; pairs that left the window count no more.
func TestLevelMeansTable(t *testing.T) {
	m := newLevelMeans(4, 5)
	if m.table() != nil {
		t.Fatal("a table without pairs")
	}
	for _, p := range []struct {
		level int
		raw   float64
	}{{1, 9}, {1, 1}, {3, 3}, {5, 5}, {1, 2}} { // the first (1, 9) leaves the window of 4
		m.add(p.level, p.raw)
	}
	want := []float64{0, 1.5, 1.5, 3, 3, 5} // level 2 ties between 1 and 3: the lower; 4 between 3 and 5: 3
	if got := *m.table(); !slices.Equal(got, want) {
		t.Fatalf("table %v, want %v", got, want)
	}
	m.add(7, 7) // a level beyond those known grows the table
	if got := *m.table(); len(got) != 8 || got[7] != 7 || got[6] != 5 {
		t.Fatalf("table %v after a pair of level 7", got)
	}
}
