package tests

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

const ratingsConfig = `
kafka:
  brokers: [%BROKERS%]
  group: ratings
http:
  listen: "%HTTP%"
log:
  level: warn
calibration:
  window: 500
  every: 50
models:
  - name: rating
    type: krr
    solver: exact
    window: {events: 200}
    refit: {every_events: 100}
    features: {dim: 4}
  - name: like
    type: logistic
    label: {positive: ">= 4"}
    features: {dim: 4}
  - name: stars
    type: omam
    levels: 5
    kernel: {type: linear}
    label: {edges: [1.5, 2.5, 3.5, 4.5]}
    features: {dim: 4}
  - name: my_stars
    type: omam
    levels: 5
    kernel: {type: linear}
    label: {edges: [1.5, 2.5, 3.5, 4.5]}
    scope: key
    fallback: stars
    features: {dim: 4}
  - name: fm
    type: fm
    factors: 2
    features: {dim: 4}
  - name: my_stars_fm
    type: omam
    levels: 5
    kernel: {type: linear}
    label: {edges: [1.5, 2.5, 3.5, 4.5]}
    scope: key
    fallback: fm
    features: {dim: 4}
`

// TestRatingsFeedEveryKind: one stream of ratings (0.5..5 in half stars,
// keyed by user) feeds regression models (krr, and fm, whose "prediction"
// is the rating it predicts), a click classifier (label.positive ">= 4"),
// an ordinal model (label.edges into 5 levels), a per-user ordinal model
// that falls back on the global one and another that falls back on fm's
// rating, binned by its edges. No event is dead-lettered; once the global
// ordinal model has a level (fm a rating), every record of the per-user
// models carries one too, its own or the fallback's (marked "fallback");
// every interval lies within the labels' range (the levels 1..5, the
// ratings 0.5..5); "expected" ratings and fm's predictions are ratings.
func TestRatingsFeedEveryKind(t *testing.T) {
	b := startBroker(t, 3)
	p := startStreamer(t, b, ratingsConfig)
	scores := newConsumer(t, b, "scores")
	rng := rand.New(rand.NewPCG(21, 22))
	const users, perUser = 20, 100
	var msgs []kafka.Message
	for u := range users {
		for j := range perUser {
			y := 0.5 * float64(1+rng.IntN(10))
			x := []float64{y + 0.3*rng.NormFloat64(), 5.5 - y, rng.NormFloat64(), 1}
			id := fmt.Sprintf("u%d-%d", u, j)
			v := strings.Replace(string(eventJSON(id, x, nil)), "}", `,"label":`+strconv.FormatFloat(y, 'g', -1, 64)+"}", 1)
			msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("user-%d", u)), Value: []byte(v)})
		}
	}
	// Users arrive one after the other, two at a time: new keys all along.
	var order []kafka.Message
	for u := 0; u < users; u += 2 {
		for j := range perUser {
			order = append(order, msgs[u*perUser+j], msgs[(u+1)*perUser+j])
		}
	}
	produce(t, b, "events", order)
	type record struct {
		ID         string   `json:"id"`
		Model      string   `json:"model"`
		Prediction float64  `json:"prediction"`
		Expected   *float64 `json:"expected"`
		Fallback   string   `json:"fallback"`
		Certainty  struct {
			Interval *struct{ Lower, Upper float64 } `json:"interval"`
		} `json:"certainty"`
	}
	byID := map[string]map[string]record{}
	const models = 6
	for _, m := range scores.read(t, models*len(order), 120*time.Second) {
		var r record
		if err := json.Unmarshal(m.Value, &r); err != nil {
			t.Fatalf("%s: %v", m.Value, err)
		}
		if byID[r.ID] == nil {
			byID[r.ID] = map[string]record{}
		}
		byID[r.ID][r.Model] = r
	}
	if n := p.metric(t, "streamer_events_rejected_total", `reason="bad_label"`); n != 0 {
		t.Errorf("%v events dead-lettered bad_label", n)
	}
	for _, model := range []string{"rating", "like", "stars", "my_stars", "fm", "my_stars_fm"} {
		if n := p.metric(t, "streamer_events_learned_total", `model="`+model+`"`); n != float64(len(order)) {
			t.Errorf("%s learned %v events, want %d", model, n, len(order))
		}
	}
	var fallbacks, own, expected, intervals, fmFallbacks int
	for id, recs := range byID {
		if len(recs) != models {
			t.Fatalf("%s: records of %d models, want %d", id, len(recs), models)
		}
		for model, r := range recs {
			lo, hi := 1.0, 5.0
			if model == "rating" || model == "fm" {
				lo, hi = 0.5, 5
			}
			if iv := r.Certainty.Interval; iv != nil {
				intervals++
				if iv.Lower < lo || iv.Upper > hi || iv.Lower > iv.Upper {
					t.Errorf("%s, %s: interval %+v outside [%v, %v]", id, model, *iv, lo, hi)
				}
				if model != "rating" && r.Prediction == 0 {
					t.Errorf("%s, %s: interval %+v without a level", id, model, *iv)
				}
			}
			if r.Expected != nil {
				expected++
				if *r.Expected < 0.5 || *r.Expected > 5 {
					t.Errorf("%s, %s: expected %v", id, model, *r.Expected)
				}
			}
		}
		mine := recs["my_stars"]
		switch mine.Fallback {
		case "stars":
			fallbacks++
			if g := recs["stars"]; mine.Prediction != g.Prediction {
				t.Errorf("%s: my_stars falls back with level %v, stars published %v", id, mine.Prediction, g.Prediction)
			}
		case "":
			if mine.Prediction != 0 {
				own++
			}
		default:
			t.Errorf("%s: fallback %q", id, mine.Fallback)
		}
		if recs["stars"].Prediction != 0 && mine.Prediction == 0 {
			t.Errorf("%s: my_stars has no level although stars has one (fallback %q)", id, mine.Fallback)
		}
		fm, mineFM := recs["fm"], recs["my_stars_fm"]
		if fm.Prediction != 0 && (fm.Prediction < 0.5 || fm.Prediction > 5) {
			t.Errorf("%s: fm predicts %v, not a rating", id, fm.Prediction)
		}
		if mineFM.Fallback == "fm" && fm.Prediction != 0 {
			fmFallbacks++
			if mineFM.Expected == nil || *mineFM.Expected != fm.Prediction || mineFM.Prediction < 1 || mineFM.Prediction > 5 {
				t.Errorf("%s: my_stars_fm falls back with %+v on fm's %+v", id, mineFM, fm)
			}
		}
		if fm.Prediction != 0 && mineFM.Prediction == 0 {
			t.Errorf("%s: my_stars_fm has no level although fm has a rating (fallback %q)", id, mineFM.Fallback)
		}
	}
	t.Logf("my_stars: %d fallback records, %d own; my_stars_fm: %d on fm's rating; %d intervals, %d expected ratings", fallbacks, own, fmFallbacks, intervals, expected)
	if fallbacks < 500 || own < 300 || fmFallbacks < 500 || intervals < 2000 || expected < 1000 {
		t.Errorf("%d fallback and %d own records of my_stars, %d intervals, %d expected ratings: the test needs more of each", fallbacks, own, intervals, expected)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}
