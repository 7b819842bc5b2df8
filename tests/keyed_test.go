package tests

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
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
