package tests

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online/rank"
)

const keyedConfig = `
kafka:
  brokers: [%BROKERS%]
  group: keyed
http:
  listen: "%HTTP%"
log:
  level: warn
snapshot:
  dir: %DIR%
models:
  - name: taste
    type: mam
    kernel: {type: linear}
    features: {dim: 2}
    scope: key
    max_keys: 3
`

// TestKeyScopedModels: one model per user. Two users of opposite taste get
// opposite scores for the same item; with more users than max_keys, at most
// max_keys instances stay in memory and an evicted user's model comes back
// from disk intact.
func TestKeyScopedModels(t *testing.T) {
	b := startBroker(t, 3)
	p := startStreamer(t, b, strings.ReplaceAll(keyedConfig, "%DIR%", t.TempDir()))
	scores := newConsumer(t, b, "scores")
	rng := rand.New(rand.NewPCG(11, 12))
	var msgs []kafka.Message
	for i := range 400 {
		for _, user := range []string{"alice", "bob"} {
			x := []float64{rng.NormFloat64(), rng.NormFloat64()}
			y := 1
			if (x[0] > 0) != (user == "alice") { // alice likes x₀ > 0, bob the opposite
				y = -1
			}
			msgs = append(msgs, kafka.Message{Key: []byte(user), Value: eventJSON(fmt.Sprintf("%s-%d", user, i), x, &y)})
		}
	}
	// Eight more users push alice and bob out of memory (max_keys 3).
	for u := range 8 {
		for i := range 20 {
			y := 1 - 2*(i%2)
			msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("user%d", u)), Value: eventJSON(fmt.Sprintf("u%d-%d", u, i), []float64{rng.NormFloat64(), 1}, &y)})
		}
	}
	produce(t, b, "events", msgs)
	scores.read(t, len(msgs), 60*time.Second)
	if k := p.metric(t, "streamer_model_keys", `model="taste"`); k > 3 {
		t.Fatalf("%v key instances in memory, max_keys 3", k)
	}
	// The same items for both users: scores of opposite sign.
	var probes []kafka.Message
	for _, user := range []string{"alice", "bob"} {
		for j, x := range [][]float64{{1, 0.2}, {-1, 0.3}} {
			probes = append(probes, kafka.Message{Key: []byte(user), Value: eventJSON(fmt.Sprintf("probe-%s-%d", user, j), x, nil)})
		}
	}
	produce(t, b, "events", probes)
	got := map[string]float64{}
	for _, m := range scores.read(t, len(probes), 30*time.Second) {
		var r struct {
			ID    string  `json:"id"`
			Score float64 `json:"score"`
			N     struct {
				N int64 `json:"n"`
			} `json:"certainty"`
		}
		if err := json.Unmarshal(m.Value, &r); err != nil {
			t.Fatal(err)
		}
		if r.N.N != 400 {
			t.Errorf("%s scored by a model with n=%d, want the user's own 400 (reloaded after eviction)", r.ID, r.N.N)
		}
		got[r.ID] = r.Score
	}
	if !(got["probe-alice-0"] > 0 && got["probe-alice-1"] < 0 && got["probe-bob-0"] < 0 && got["probe-bob-1"] > 0) {
		t.Fatalf("scores %v: want alice + on x₀>0, bob − on x₀>0", got)
	}
	if n := p.metric(t, "streamer_model_examples", `model="taste"`); n != 800+160 {
		t.Errorf("examples %v, want %d", n, 800+160)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}

const keyedRankingConfig = `
kafka:
  brokers: [%BROKERS%]
  group: keyed-rank
http:
  listen: "%HTTP%"
log:
  level: warn
snapshot:
  dir: %DIR%
models:
  - name: prefs
    type: lsrrank
    kernel: {type: rbf, gamma: 0.5}
    lambda: 0.001
    levels: 5
    window: {events: 150}
    refit: {every_events: 50}
    features: {dim: 3}
    scope: key
    max_keys: 3
  - name: prefs_rf
    type: lsrrank
    solver: features
    kernel: {type: rbf, gamma: 0.5, features: 128, seed: 7}
    lambda: 0.001
    levels: 5
    window: {events: 150}
    refit: {every_events: 50}
    features: {dim: 3}
    scope: key
    max_keys: 3
  - name: prefs_auto
    type: lsrrank
    solver: features
    kernel: {type: rbf, features: 128, seed: 7}
    lambda: 0.001
    levels: 5
    window: {events: 150}
    refit: {every_events: 50}
    features: {dim: 3}
    scope: key
    max_keys: 3
`

// taste is a user's liking of an item with features x: alice likes items
// with large x₀ + sin(2x₁), bob the opposite.
func taste(user string, x []float64) float64 {
	t := x[0] + math.Sin(2*x[1])
	if user == "bob" {
		return -t
	}
	return t
}

// TestKeyScopedRanking: per-user kernel ranking on a recommendation-shaped
// stream (keys are users, features describe the rated item, ratings 1–5),
// with an exact and a random-feature lsrrank, and one with random features
// and gamma auto (each key's width fixed by its own warm-up, its data scale
// part of the key's state on disk), each scope: key with levels.
// Alice and bob rate 300 items each by opposite tastes; then eight more
// users push them out of memory (max_keys 3). On 40 held-out items, each
// user's scores — from that user's own model, reloaded from disk, trained
// on the user's window of 150 — order the items by that user's taste
// (Kendall τ-b > 0.5 for alice's taste and for bob's, which is the mirror
// of alice's), and the published levels are ratings 1..5 close to the
// user's noiseless rating. streamer_model_keys stays within max_keys.
func TestKeyScopedRanking(t *testing.T) {
	b := startBroker(t, 3)
	p := startStreamer(t, b, strings.ReplaceAll(keyedRankingConfig, "%DIR%", t.TempDir()))
	scores := newConsumer(t, b, "scores")
	rng := rand.New(rand.NewPCG(21, 22))
	item := func() []float64 { return []float64{rng.NormFloat64(), rng.NormFloat64(), rng.NormFloat64()} }
	rating := func(user string, x []float64) int {
		return int(min(5, max(1, math.Round(3+1.3*taste(user, x)+0.3*rng.NormFloat64()))))
	}
	var msgs []kafka.Message
	for i := range 300 {
		for _, user := range []string{"alice", "bob"} {
			x := item()
			y := rating(user, x)
			msgs = append(msgs, kafka.Message{Key: []byte(user), Value: eventJSON(fmt.Sprintf("%s-%d", user, i), x, &y)})
		}
	}
	for u := range 8 {
		for i := range 60 {
			x := item()
			y := 1 + rng.IntN(5)
			msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("user%d", u)), Value: eventJSON(fmt.Sprintf("u%d-%d", u, i), x, &y)})
		}
	}
	produce(t, b, "events", msgs)
	models := []string{"prefs", "prefs_rf", "prefs_auto"}
	scores.read(t, len(models)*len(msgs), 120*time.Second) // one record per (event, model)
	for _, model := range models {
		if k := p.metric(t, "streamer_model_keys", `model="`+model+`"`); k > 3 || k < 1 {
			t.Errorf("%s: %v key instances in memory, max_keys 3", model, k)
		}
		// With levels the engine judges the level too (MAE, zero-one; the
		// recent window is mostly the random users, whose thresholds are
		// not fitted yet: level 0 counts as an error of y).
		mae, zo := p.metric(t, "streamer_model_mae", `model="`+model+`"`), p.metric(t, "streamer_model_zero_one", `model="`+model+`"`)
		if !(mae >= 0 && mae <= 5 && zo >= 0 && zo <= 1) {
			t.Errorf("%s: streamer_model_mae %v, streamer_model_zero_one %v", model, mae, zo)
		}
	}
	// The same held-out items for both users.
	held := make([][]float64, 40)
	for j := range held {
		held[j] = item()
	}
	var probes []kafka.Message
	for _, user := range []string{"alice", "bob"} {
		for j, x := range held {
			probes = append(probes, kafka.Message{Key: []byte(user), Value: eventJSON(fmt.Sprintf("probe-%s-%d", user, j), x, nil)})
		}
	}
	produce(t, b, "events", probes)
	type rec struct {
		ID         string  `json:"id"`
		Model      string  `json:"model"`
		Score      float64 `json:"score"`
		Prediction int     `json:"prediction"`
		Certainty  struct {
			N int64 `json:"n"`
		} `json:"certainty"`
	}
	got := map[string]rec{} // model/id → record
	for _, m := range scores.read(t, len(models)*len(probes), 60*time.Second) {
		var r rec
		if err := json.Unmarshal(m.Value, &r); err != nil {
			t.Fatal(err)
		}
		if r.Certainty.N != 150 {
			t.Errorf("%s/%s scored by a model trained on %d events, want the user's own window of 150 (reloaded after eviction)", r.Model, r.ID, r.Certainty.N)
		}
		if r.Prediction < 1 || r.Prediction > 5 {
			t.Errorf("%s/%s: level %d, want a rating 1..5", r.Model, r.ID, r.Prediction)
		}
		got[r.Model+"/"+r.ID] = r
	}
	for _, model := range models {
		for _, user := range []string{"alice", "bob"} {
			f, want, alice := make([]float64, len(held)), make([]float64, len(held)), make([]float64, len(held))
			var mae, constMAE float64
			for j, x := range held {
				r, ok := got[fmt.Sprintf("%s/probe-%s-%d", model, user, j)]
				if !ok {
					t.Fatalf("%s: no score for %s's probe %d", model, user, j)
				}
				f[j], want[j], alice[j] = r.Score, taste(user, x), taste("alice", x)
				ideal := min(5, max(1, math.Round(3+1.3*want[j]))) // the noiseless rating
				mae += math.Abs(float64(r.Prediction)-ideal) / float64(len(held))
				constMAE += math.Abs(3-ideal) / float64(len(held))
			}
			own, vsAlice := rank.Measure(f, want).KendallTauB, rank.Measure(f, alice).KendallTauB
			t.Logf("%s, %s: τ-b against own taste %.3f, against alice's %.3f; level MAE %.3f (constant 3: %.3f)",
				model, user, own, vsAlice, mae, constMAE)
			if own <= 0.5 {
				t.Errorf("%s, %s: τ-b %.3f against the user's own taste, want > 0.5", model, user, own)
			}
			// Measured: level MAE 0.25–0.28 against 1.23 for the constant 3
			// (prefs_auto: 0.28 and 0.48; τ-b 0.77–0.86 for every model).
			if mae > 0.5*constMAE {
				t.Errorf("%s, %s: level MAE %.3f, want ≤ 0.5 × the constant rating's %.3f", model, user, mae, constMAE)
			}
		}
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}
