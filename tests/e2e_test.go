package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

const ripleyConfig = `
kafka:
  brokers: [%BROKERS%]
  group: e2e
  commit_interval: 500ms
http:
  listen: "%HTTP%"
log:
  level: warn
models:
  - name: mam_rbf
    type: mam
    kernel: {type: rbf, gamma: 10, features: 2048, seed: 7}
    features: {dim: 2, names: [xs, ys]}
    balance: true
    delta: 0.05
  - name: mam_rbf_sum
    type: mam
    kernel: {type: rbf, gamma: 10, features: 2048, seed: 7}
    features: {dim: 2, names: [xs, ys]}
    balance: false
    delta: 0.05
`

type outRecord struct {
	ID         string  `json:"id"`
	Key        string  `json:"key"`
	Model      string  `json:"model"`
	Version    int64   `json:"version"`
	Score      float64 `json:"score"`
	Prediction int     `json:"prediction"`
	Certainty  struct {
		MistakeBound *float64 `json:"mistake_bound"`
		Delta        float64  `json:"delta"`
		N            int64    `json:"n"`
	} `json:"certainty"`
	ScoredAt string `json:"scored_at"`
}

// TestRipleyEndToEnd is the loop end to end: Ripley's training set as
// labelled events, then the test set unlabelled; every test score is read
// back from the output topic over Kafka and judged.
func TestRipleyEndToEnd(t *testing.T) {
	train := readCSV(t, "testdata/ripley_train.csv")
	test := readCSV(t, "testdata/ripley_test.csv")
	b := startBroker(t, 3)
	p := startStreamer(t, b, ripleyConfig)
	scores := newConsumer(t, b, "scores")

	var msgs []kafka.Message
	for i, r := range train {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("user-%d", i%7)), Value: eventJSON(fmt.Sprintf("train-%d", i), r.x, &r.label)})
	}
	produce(t, b, "events", msgs)
	// Two models: two records per event. Seeing them all means all were learned.
	trainOut := scores.read(t, 2*len(train), 60*time.Second)
	for _, m := range trainOut {
		var rec outRecord
		if err := json.Unmarshal(m.Value, &rec); err != nil {
			t.Fatalf("output record %s: %v", m.Value, err)
		}
		if !strings.HasPrefix(rec.ID, "train-") {
			t.Fatalf("unexpected record %s", m.Value)
		}
	}
	for _, model := range []string{"mam_rbf", "mam_rbf_sum"} {
		if n := p.metric(t, "streamer_model_examples", `model="`+model+`"`); n != float64(len(train)) {
			t.Fatalf("%s learned %v examples, want %d", model, n, len(train))
		}
	}

	msgs = msgs[:0]
	for i, r := range test {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("user-%d", i%7)), Value: eventJSON(fmt.Sprintf("test-%d", i), r.x, nil)})
	}
	produce(t, b, "events", msgs)
	testOut := scores.read(t, 2*len(test), 60*time.Second)

	type scored struct {
		y      int
		f, bnd float64
	}
	byModel := map[string][]scored{}
	seen := map[string]bool{}
	for _, m := range testOut {
		var rec outRecord
		if err := json.Unmarshal(m.Value, &rec); err != nil {
			t.Fatal(err)
		}
		var i int
		if _, err := fmt.Sscanf(rec.ID, "test-%d", &i); err != nil {
			t.Fatalf("unexpected record %s", m.Value)
		}
		if seen[rec.Model+rec.ID] {
			continue // at-least-once: duplicates are allowed, judged once
		}
		seen[rec.Model+rec.ID] = true
		if string(m.Key) != fmt.Sprintf("user-%d", i%7) || rec.Key != string(m.Key) {
			t.Fatalf("record %s has key %q, want the input's", rec.ID, m.Key)
		}
		if rec.Certainty.MistakeBound == nil || *rec.Certainty.MistakeBound < 0 || *rec.Certainty.MistakeBound > 1 {
			t.Fatalf("record %s: mistake bound %v not in [0,1]", rec.ID, rec.Certainty.MistakeBound)
		}
		if rec.Certainty.N != int64(len(train)) || rec.Certainty.Delta != 0.05 || rec.Version < 1 || rec.ScoredAt == "" {
			t.Fatalf("record %s: certainty/version fields wrong: %s", rec.ID, m.Value)
		}
		if rec.Prediction != signOf(rec.Score) {
			t.Fatalf("record %s: prediction %d disagrees with score %v", rec.ID, rec.Prediction, rec.Score)
		}
		byModel[rec.Model] = append(byModel[rec.Model], scored{y: test[i].label, f: rec.Score, bnd: *rec.Certainty.MistakeBound})
	}
	for model, s := range byModel {
		if len(s) != len(test) {
			t.Fatalf("%s: %d distinct test scores, want %d", model, len(s), len(test))
		}
		var wrong int
		for _, e := range s {
			if signOf(e.f) != e.y {
				wrong++
			}
		}
		errRate := float64(wrong) / float64(len(s))
		t.Logf("%s: test error %.2f%% on %d Ripley test events", model, 100*errRate, len(s))
		if errRate > 0.10 {
			t.Errorf("%s: test error %.2f%% > 10%%", model, 100*errRate)
		}
		// Bound validity: for every published ρ = |f|, the observed
		// fraction of y·f ≤ −ρ must not exceed the published bound.
		var minBound float64 = 1
		for _, e := range s {
			rho := math.Abs(e.f)
			var viol int
			for _, o := range s {
				if float64(o.y)*o.f <= -rho {
					viol++
				}
			}
			if frac := float64(viol) / float64(len(s)); frac > e.bnd {
				t.Fatalf("%s: bound violated at ρ=%v: observed %v > bound %v", model, rho, frac, e.bnd)
			}
			minBound = math.Min(minBound, e.bnd)
		}
		t.Logf("%s: smallest published mistake bound %.3f", model, minBound)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("streamer exit after SIGTERM: %v", err)
	}
}

func signOf(f float64) int {
	switch {
	case f > 0:
		return 1
	case f < 0:
		return -1
	}
	return 0
}

const dlqConfig = `
kafka:
  brokers: [%BROKERS%]
  group: dlq
  max_message_bytes: 2048
  commit_interval: 200ms
http:
  listen: "%HTTP%"
log:
  level: warn
models:
  - name: mam
    type: mam
    kernel: {type: linear}
    features: {dim: 2, names: [xs, ys]}
  - name: mam_rbf
    type: mam
    kernel: {type: rbf, gamma: 1, features: 64}
    features: {dim: 2, names: [xs, ys]}
`

// TestDeadLetter mixes every kind of bad input into a valid stream: each must
// land in the dead-letter topic with the right reason and the original key
// and value, and the model must have learned exactly the valid labelled ones.
func TestDeadLetter(t *testing.T) {
	b := startBroker(t, 2)
	p := startStreamer(t, b, dlqConfig)
	bad := []struct{ value, reason string }{
		{`not json at all`, "not_json"},
		{`{"id":"trunc","features":[0.1,`, "not_json"},
		{`[0.1,0.2]`, "not_json"},
		{`{"id":"t1","features":"0.1,0.2","label":1}`, "wrong_type"},
		{`{"id":"t2","features":[0.1,"x"],"label":1}`, "wrong_type"},
		{`{"id":"t3","features":[0.1,0.2],"label":"yes"}`, "wrong_type"},
		{`{"id":"m1","label":1}`, "missing_features"},
		{`{"id":"m2","features":{"xs":0.1},"label":1}`, "missing_features"},
		{`{"id":"d1","features":[0.1,0.2,0.3],"label":1}`, "wrong_dimension"},
		{`{"id":"n1","features":[1e999,0.2],"label":1}`, "non_finite"},
		{`{"id":"n2","features":[0.1,0.2],"label":-1e999}`, "non_finite"},
		{`{"id":"l1","features":[0.1,0.2],"label":2}`, "bad_label"},
		{`{"id":"l2","features":[0.1,0.2],"label":0.5}`, "bad_label"},
		{`{"id":"big","features":[0.1,0.2],"label":1,"pad":"` + strings.Repeat("x", 4096) + `"}`, "too_large"},
		// Finite, but it would overflow the rbf projection: no model may
		// see it (and count it learned without learning it).
		{`{"id":"h1","features":[1.797e308,0.2],"label":1}`, "out_of_range"},
		{`{"id":"h2","features":{"xs":0.1,"ys":-1e16},"label":-1}`, "out_of_range"},
	}
	var msgs []kafka.Message
	validLabelled := 0
	for i := range 400 {
		key := []byte(fmt.Sprintf("k%d", i%5))
		switch {
		case i%25 == 0 && i/25 < len(bad):
			msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("bad-%d", i/25)), Value: []byte(bad[i/25].value)})
		case i%3 == 0:
			msgs = append(msgs, kafka.Message{Key: key, Value: []byte(fmt.Sprintf(`{"id":"u%d","features":{"ys":%d,"xs":0.5}}`, i, i%4))})
		default:
			labels := []string{"-1", "1", "0", "true", "false"}
			msgs = append(msgs, kafka.Message{Key: key, Value: []byte(fmt.Sprintf(`{"id":"v%d","features":[%d.5,-0.25],"label":%s}`, i, i%7-3, labels[i%5]))})
			validLabelled++
		}
	}
	produce(t, b, "events", msgs)

	dlq := newConsumer(t, b, "events.dlq").read(t, len(bad), 60*time.Second)
	got := map[string]kafka.Message{}
	for _, m := range dlq {
		got[string(m.Key)] = m
	}
	for i, c := range bad {
		m, ok := got[fmt.Sprintf("bad-%d", i)]
		if !ok {
			t.Errorf("bad event %d (%s) not dead-lettered", i, c.reason)
			continue
		}
		if string(m.Value) != c.value {
			t.Errorf("bad event %d: DLQ value changed", i)
		}
		h := map[string]string{}
		for _, hd := range m.Headers {
			h[hd.Key] = string(hd.Value)
		}
		if h["streamer.reason"] != c.reason {
			t.Errorf("bad event %d %.40q: reason %q (%s), want %q", i, c.value, h["streamer.reason"], h["streamer.detail"], c.reason)
		}
		if h["streamer.topic"] != "events" || h["streamer.offset"] == "" || h["streamer.detail"] == "" {
			t.Errorf("bad event %d: headers %v", i, h)
		}
	}
	waitFor(t, 30*time.Second, "all events processed", func() bool {
		return p.metric(t, "streamer_events_consumed_total", "") == float64(len(msgs))
	})
	for _, model := range []string{"mam", "mam_rbf"} {
		if n := p.metric(t, "streamer_model_examples", `model="`+model+`"`); n != float64(validLabelled) {
			t.Fatalf("%s learned %v examples, want %d valid labelled", model, n, validLabelled)
		}
		if n := p.metric(t, "streamer_events_learned_total", `model="`+model+`"`); n != float64(validLabelled) {
			t.Fatalf("%s: streamer_events_learned_total %v, want %d valid labelled (as its examples)", model, n, validLabelled)
		}
	}
	want := map[string]int{}
	for _, c := range bad {
		want[c.reason]++
	}
	for reason, n := range want {
		if v := p.metric(t, "streamer_events_rejected_total", `reason="`+reason+`"`); v != float64(n) {
			t.Errorf("streamer_events_rejected_total{reason=%q} = %v, want %d", reason, v, n)
		}
	}
	// Without rank.model, POST /v1/rank is a 404 that says so, and counted.
	hresp, err := http.Post("http://"+p.http+"/v1/rank", "application/json", strings.NewReader(`{"key":"u","candidates":[{"item":"a","features":[1,2]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(hresp.Body)
	hresp.Body.Close()
	if hresp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), `{"error":{"reason":"ranking_off","detail":"ranking requests are off: set rank.model"}}`) ||
		p.metric(t, "streamer_rank_refused_total", `code="404",reason="ranking_off"`) != 1 {
		t.Errorf("POST /v1/rank without rank.model: %d %s, want a counted 404 ranking_off", hresp.StatusCode, body)
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	// A clean stop commits everything that was processed.
	client := &kafka.Client{Addr: kafka.TCP(b.Addrs()...)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: "dlq", Topics: map[string][]int{"events": {0, 1}}})
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	for _, po := range resp.Topics["events"] {
		committed += po.CommittedOffset
	}
	if committed != int64(len(msgs)) {
		t.Fatalf("committed offsets sum to %d after SIGTERM, want %d", committed, len(msgs))
	}
}
