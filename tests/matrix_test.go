package tests

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/stream/engine"
)

const matrixConfig = `
kafka:
  brokers: [%BROKERS%]
  group: matrix
http:
  listen: "%HTTP%"
log:
  level: info
models:
  - name: svm
    type: svm
    kernel: {type: linear}
    features: {shape: [4, 4]}
    window: {events: 1000}
    refit: {every_events: 500, guard: 0}
  - name: mam
    type: mam
    kernel: {type: linear}
    features: {shape: [4, 4]}
  - name: lowrank
    type: lowrank
    rank: 1
    features: {shape: [4, 4]}
    window: {events: 1000}
    refit: {every_events: 500, guard: 0}
  - name: boost
    type: adaboost
    members: [svm, mam]
    stumps: true
    rounds: 20
    features: {shape: [4, 4]}
    window: {events: 1000}
    refit: {every_events: 500, guard: 0}
`

// TestMatrixModelsOverKafka: events whose features are 4×4 matrices sent
// as nested arrays (and some flat), a lowrank model and an adaboost
// aggregate of an svm and a mam beside them, over Kafka: every event is
// scored by every model, both refitted models learn the rank-1 signal
// (prequential accuracy after their first refits), and an event of another
// shape is dead-lettered wrong_dimension naming both shapes.
func TestMatrixModelsOverKafka(t *testing.T) {
	useFastBinary(t) // refits: timing, not concurrency (race-tested in online/refit)
	b := startBroker(t, 2)
	p := startStreamer(t, b, matrixConfig)
	rng := rand.New(rand.NewPCG(3, 4))
	u, v := []float64{1, -1, 0.5, 0}, []float64{0.5, 1, -1, 1}
	events := func(from, n int) []kafka.Message {
		var msgs []kafka.Message
		for i := from; i < from+n; i++ {
			var rows, flat []string
			s := 0.0
			for r := range 4 {
				var row []string
				for c := range 4 {
					x := rng.NormFloat64()
					s += u[r] * v[c] * x
					row = append(row, fmt.Sprintf("%.4f", x))
				}
				rows = append(rows, "["+strings.Join(row, ",")+"]")
				flat = append(flat, row...)
			}
			y := 1
			if s < 0 {
				y = -1
			}
			features := "[" + strings.Join(rows, ",") + "]"
			if i%10 == 0 { // the flat form is accepted too
				features = "[" + strings.Join(flat, ",") + "]"
			}
			msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("k%d", i%7)), Value: []byte(fmt.Sprintf(`{"id":"m-%d","features":%s,"label":%d}`, i, features, y))})
		}
		return msgs
	}
	const n = 3000
	msgs := events(0, n)
	msgs = append(msgs, kafka.Message{Key: []byte("bad"), Value: []byte(`{"id":"bad","features":[[1,2,3,4],[1,2,3,4]],"label":1}`)})
	produce(t, b, "events", msgs)
	waitFor(t, 60*time.Second, "every event scored by every model", func() bool {
		for _, m := range []string{"svm", "mam", "lowrank", "boost"} {
			if p.metric(t, "streamer_events_scored_total", `model="`+m+`"`) != n {
				return false
			}
		}
		return true
	})
	// The refits run in the background while the stream floods in (and
	// adaboost's first ones fail while its members still say "no
	// decision"): judge the next 1000 events, scored once both are fitted.
	waitFor(t, 60*time.Second, "lowrank and adaboost refitted", func() bool {
		return p.metric(t, "streamer_model_version", `model="lowrank"`) >= 1 && p.metric(t, "streamer_model_version", `model="boost"`) >= 1
	})
	produce(t, b, "events", events(n, 1000))
	waitFor(t, 60*time.Second, "the next 1000 events scored", func() bool {
		return p.metric(t, "streamer_events_scored_total", `model="boost"`) == n+1000
	})
	for _, m := range []string{"lowrank", "boost"} {
		acc := p.metric(t, "streamer_model_accuracy", `model="`+m+`"`)
		t.Logf("%s: version %v, prequential accuracy over the last 1000 events %.3f", m, p.metric(t, "streamer_model_version", `model="`+m+`"`), acc)
		if acc < 0.85 {
			t.Errorf("%s: prequential accuracy over the last 1000 events %.3f, want ≥ 0.85", m, acc)
		}
	}
	dl := newConsumer(t, b, "events.dlq").read(t, 1, 30*time.Second)[0]
	if r, d := header(dl, engine.HeaderReason), header(dl, engine.HeaderDetail); r != "wrong_dimension" || !strings.Contains(d, "want 4×4") {
		t.Errorf("dead letter %s %q, want wrong_dimension naming the shape", r, d)
	}
	if err := p.stop(t); err != nil {
		t.Fatal(err)
	}
}
