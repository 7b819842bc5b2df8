package tests

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

const hashedConfig = `
kafka:
  brokers: [%BROKERS%]
  group: hashed
  commit_interval: 200ms
http:
  listen: "%HTTP%"
log:
  level: warn
models:
  - name: clicks
    type: logistic
    features:
      hash: {bits: 18, seed: 1}
      namespaces: [user, item]
      interactions: [[user, item]]
      max_features: 64
  - name: clicks_rbf
    type: mam
    features:
      hash: {bits: 18, seed: 1}
      namespaces: [user, item]
      interactions: [[user, item]]
      max_features: 64
`

// TestHashedOverKafka: categorical events (namespaces, a bag, a number)
// configured with features.hash reach a logistic model and an rbf mam
// (the default kernel, its frequencies generated per hashed index) over
// Kafka, which learn a signal carried by the user × item interaction
// alone; an event with more features than max_features, or a dense array,
// is dead-lettered with its reason; a model type that does not take hashed
// features (lda) stops start-up naming it.
func TestHashedOverKafka(t *testing.T) {
	b := startBroker(t, 3)
	p := startStreamer(t, b, hashedConfig)
	rng := rand.New(rand.NewPCG(4, 5))
	const n = 5000
	var msgs []kafka.Message
	for i := range n {
		ug, ig := rng.IntN(4), rng.IntN(4)
		y := -1
		if (ug+ig)%2 == 0 {
			y = 1
		}
		msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "u%d", i%50), Value: fmt.Appendf(nil,
			`{"id":"e%d","features":{"user":{"group":"g%d"},"item":{"group":"h%d","tags":["x","y%d"]},"hour":%d},"label":%d}`,
			i, ug, ig, rng.IntN(3), rng.IntN(24), y)})
	}
	tags := make([]string, 70)
	for i := range tags {
		tags[i] = fmt.Sprintf(`"t%d"`, i)
	}
	msgs = append(msgs,
		kafka.Message{Value: []byte(`{"features":{"tags":[` + strings.Join(tags, ",") + `]},"label":1}`)},
		kafka.Message{Value: []byte(`{"features":[1,2,3],"label":1}`)})
	produce(t, b, "events", msgs)
	waitFor(t, 60*time.Second, "every event processed", func() bool {
		return p.metric(t, "streamer_events_consumed_total", "") == n+2
	})
	if acc := p.metric(t, "streamer_model_accuracy", `model="clicks"`); acc < 0.95 {
		t.Errorf("prequential accuracy %.3f, want ≥ 0.95 (the signal is the interaction)", acc)
	}
	if acc := p.metric(t, "streamer_model_accuracy", `model="clicks_rbf"`); acc < 0.9 {
		t.Errorf("rbf mam: prequential accuracy %.3f, want ≥ 0.9", acc)
	} else {
		t.Logf("prequential accuracy: logistic %.3f, rbf mam %.3f", p.metric(t, "streamer_model_accuracy", `model="clicks"`), acc)
	}
	for _, r := range []string{"too_many_features", "wrong_type"} {
		if got := p.metric(t, "streamer_events_rejected_total", `reason="`+r+`"`); got != 1 {
			t.Errorf("rejected %s: %v, want 1", r, got)
		}
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}

	bad := spawnStreamer(t, strings.Join(b.Addrs(), ","), strings.Replace(hashedConfig, "type: logistic", "type: lda", 1))
	select {
	case err := <-bad.done:
		if err == nil || !strings.Contains(bad.logs.String(), "lda does not take hashed features") {
			t.Fatalf("lda with hashed features: exit %v, log %s", err, bad.logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("lda with hashed features did not stop start-up")
	}
}

const hashedSVMConfig = `
kafka:
  brokers: [%BROKERS%]
  group: hashed-svm
  commit_interval: 200ms
http:
  listen: "%HTTP%"
log:
  level: warn
snapshot:
  dir: %DIR%
  every: 300ms
models:
  - name: svm
    type: svm
    kernel: {type: rbf, gamma: 0.1}
    window: {events: 1000}
    refit: {every_events: 500}
    features:
      hash: {bits: 18, seed: 1}
      namespaces: [user, item]
      interactions: [[user, item]]
      max_features: 64
  - name: exact
    type: mam
    kernel: {type: rbf, gamma: 0.1}
    budget: 300
    features:
      hash: {bits: 18, seed: 1}
      namespaces: [user, item]
      interactions: [[user, item]]
      max_features: 64
`

// TestHashedSVMOverKafka: categorical events (namespaces, a bag) hashed
// into 2^18 indices reach a kernel svm refitted in the background
// from its window of sparse rows, and an exact-kernel mam over a budget of
// sparse rows, over Kafka: both learn a signal carried by the user × item
// interaction alone; the svm's versions keep coming; after a restart the
// models resume from the snapshot (the serving svm version and the
// examples learned restored).
func TestHashedSVMOverKafka(t *testing.T) {
	useFastBinary(t)
	b := startBroker(t, 3)
	cfg := strings.ReplaceAll(hashedSVMConfig, "%DIR%", t.TempDir())
	p := startStreamer(t, b, cfg)
	rng := rand.New(rand.NewPCG(6, 7))
	event := func(i int) kafka.Message {
		ug, ig := rng.IntN(4), rng.IntN(4)
		y := -1
		if (ug+ig)%2 == 0 {
			y = 1
		}
		return kafka.Message{Key: fmt.Appendf(nil, "u%d", i%50), Value: fmt.Appendf(nil,
			`{"id":"e%d","features":{"user":{"group":"g%d"},"item":{"group":"h%d","tags":["x","y%d"]},"hour":"h%d"},"label":%d}`,
			i, ug, ig, rng.IntN(3), rng.IntN(24), y)}
	}
	const n = 4000
	var msgs []kafka.Message
	for i := range n {
		msgs = append(msgs, event(i))
	}
	for i := 0; i < n; i += 1000 { // in bursts, so that refits land in between
		produce(t, b, "events", msgs[i:i+1000])
		time.Sleep(200 * time.Millisecond)
	}
	waitFor(t, 90*time.Second, "every event processed", func() bool {
		return p.metric(t, "streamer_events_consumed_total", "") == n
	})
	waitFor(t, 60*time.Second, "refits", func() bool {
		return p.metric(t, "streamer_refits_total", `model="svm",outcome="accepted"`) >= 3
	})
	t.Logf("svm: %v refits accepted, serving version's accuracy %.3f; exact mam: prequential accuracy %.3f",
		p.metric(t, "streamer_refits_total", `model="svm",outcome="accepted"`), p.metric(t, "streamer_model_version_accuracy", `model="svm"`),
		p.metric(t, "streamer_model_accuracy", `model="exact"`))
	if a := p.metric(t, "streamer_model_version_accuracy", `model="svm"`); a < 0.95 {
		t.Errorf("svm: accuracy of the serving version %.3f < 0.95 (the signal is the interaction)", a)
	}
	// Prequential over all 4 000 events, learning phase included: 0.89–0.95
	// over nine runs (the order in which the three partitions' events are
	// learned varies from run to run); a model blind to the interaction
	// stays near 0.5.
	if a := p.metric(t, "streamer_model_accuracy", `model="exact"`); a < 0.85 {
		t.Errorf("exact mam: prequential accuracy %.3f < 0.85", a)
	}
	version := p.metric(t, "streamer_model_version", `model="svm"`)
	learned := p.metric(t, "streamer_model_examples", `model="exact"`)
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}

	p = startStreamer(t, b, cfg)
	if v := p.metric(t, "streamer_model_version", `model="svm"`); v != version {
		t.Errorf("after restart the svm serves version %v, want %v", v, version)
	}
	if e := p.metric(t, "streamer_model_examples", `model="exact"`); e != learned {
		t.Errorf("after restart the exact mam has learned %v examples, want %v", e, learned)
	}
	msgs = msgs[:0]
	for i := n; i < n+500; i++ {
		msgs = append(msgs, event(i))
	}
	produce(t, b, "events", msgs)
	waitFor(t, 60*time.Second, "the new events processed", func() bool {
		return p.metric(t, "streamer_model_examples", `model="exact"`) == learned+500
	})
	if err := p.stop(t); err != nil {
		t.Fatalf("exit: %v", err)
	}
}
