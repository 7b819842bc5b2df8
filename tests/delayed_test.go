package tests

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

const delayedConfig = `
kafka:
  brokers: [%BROKERS%]
  group: delayed
  commit_interval: 200ms
http:
  listen: "%HTTP%"
log:
  level: warn
labels:
  join_window: {events: 10000, time: 3s}
models:
  - name: mam
    type: mam
    kernel: {type: rbf, gamma: 1, features: 256}
    features: {dim: 2}
`

// TestDelayedLabels: impressions arrive unlabelled and are scored at once;
// their labels arrive 1–5 s later as {"id","label"} events, some never, some
// for ids never seen. The model learns exactly the labels that join within
// the window; the metrics count the late and unknown ones.
func TestDelayedLabels(t *testing.T) {
	b := startBroker(t, 3)
	p := startStreamer(t, b, delayedConfig)
	scores := newConsumer(t, b, "scores")

	const n = 300
	rng := rand.New(rand.NewPCG(5, 6))
	labels := make([]int, n)
	var imps []kafka.Message
	for i := range n {
		x := []float64{rng.NormFloat64(), rng.NormFloat64()}
		labels[i] = -1
		if x[0] > 0 {
			labels[i] = 1
		}
		imps = append(imps, kafka.Message{Key: []byte(fmt.Sprintf("user-%d", i%13)), Value: eventJSON(fmt.Sprintf("imp-%d", i), x, nil)})
	}
	produce(t, b, "events", imps)
	scores.read(t, n, 30*time.Second) // every impression is scored at once
	start := time.Now()

	label := func(from, to int) []kafka.Message {
		var out []kafka.Message
		for i := from; i < to; i++ {
			out = append(out, kafka.Message{Key: []byte(fmt.Sprintf("user-%d", i%13)),
				Value: []byte(fmt.Sprintf(`{"id":"imp-%d","label":%d}`, i, labels[i]))})
		}
		return out
	}
	sleepUntil := func(d time.Duration) { time.Sleep(time.Until(start.Add(d))) }

	sleepUntil(time.Second)
	msgs := label(0, 100)
	for i := range 20 {
		msgs = append(msgs, kafka.Message{Value: []byte(fmt.Sprintf(`{"id":"ghost-%d","label":1}`, i))})
	}
	produce(t, b, "events", msgs)
	sleepUntil(2 * time.Second)
	produce(t, b, "events", label(100, 200))
	sleepUntil(5 * time.Second) // older than the 3 s join window by now
	produce(t, b, "events", label(200, 250))
	// 250..299 are never labelled.

	waitFor(t, 30*time.Second, "all label events processed", func() bool {
		return p.metric(t, "streamer_events_consumed_total", "") == float64(n+100+20+100+50)
	})
	checks := []struct {
		name, labels string
		want         float64
	}{
		{"streamer_model_examples", `model="mam"`, 200},
		{"streamer_events_learned_total", `model="mam"`, 200},
		{"streamer_labels_total", `outcome="joined"`, 200},
		{"streamer_labels_total", `outcome="too_late"`, 50},
		{"streamer_labels_total", `outcome="unknown_id"`, 20},
		{"streamer_join_dropped_total", `reason="expired",source="impressions"`, 100},
		{"streamer_join_pending", `source="impressions"`, 0},
		{"streamer_events_rejected_total", `reason="missing_features"`, 0},
	}
	for _, c := range checks {
		if got := p.metric(t, c.name, c.labels); got != c.want {
			t.Errorf("%s{%s} = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	// No score records for label-only events: only the impressions'.
	if total := highWater(t, b, "scores"); total != n {
		t.Errorf("%d score records, want %d (one per impression)", total, n)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}
