package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/wire"
)

const residualYAML = `
kafka: {brokers: ["127.0.0.1:9092"], group: g, input_topic: in, output_topic: out, dlq_topic: dlq}
rank: {model: per_user}
models:
  - name: rating
    type: fm
    loss: squared
    factors: 4
    features: {hash: {bits: 16, seed: 1}, namespaces: [user, item], max_features: 64}
  - name: per_user
    type: fm
    loss: squared
    factors: 0
    scope: key
    fallback: rating
    residual: true
    learn_intercept: true
    features: {hash: {bits: 16, seed: 1}, namespaces: [user, item], max_features: 64, use: [item]}
`

// TestResidualModel: a residual key-scoped model publishes its fallback's
// prediction plus its own, and its key's instance is exactly a twin fed
// the key's events (the namespaces it uses) with the label less the
// fallback's published prediction; a ranking request's scores are the
// same sums.
func TestResidualModel(t *testing.T) {
	e := configEngine(t, nil, residualYAML)
	s := instanceShard(t, e)
	events := ratingEvents(2000)
	sink := &memSink{Keep: true}
	twin, _ := e.defs[1].keyFactory()
	dec := e.NewWorker().dec
	var ev wire.Event
	var idx []int32
	var val []float64
	unclipped := 0 // events whose correction lies outside the residuals learned
	for i := range events {
		before := len(sink.Msgs)
		s.Process(&events[i], sink)
		var recs [2]struct {
			Model             string
			Score, Prediction float64
			Fallback          string
		}
		for k, m := range sink.Msgs[before:] {
			if err := json.Unmarshal(m.Value, &recs[k]); err != nil {
				t.Fatal(err)
			}
		}
		if string(events[i].Key) != "u3" {
			continue
		}
		if err := dec.Decode(events[i].Value, &ev); err != nil {
			t.Fatal(err)
		}
		idx, val = idx[:0], val[:0]
		for k, f := range ev.Field {
			if f == 2 { // item
				idx, val = append(idx, ev.Idx[k]), append(val, ev.Val[k])
			}
		}
		fb := recs[0].Prediction
		own := online.PeekSparse(twin.(online.SparseModel), idx, val)
		if recs[1].Fallback == "" && own.HasValue {
			// the key's own score, not its value: that is clipped to
			// the residuals learned so far, which do not bound the next
			// one (after one residual it would be that residual,
			// whatever the model learned)
			if recs[1].Prediction != fb+own.Score {
				t.Fatalf("event %d: published %v, want the fallback's %v + the key's own %v", i, recs[1].Prediction, fb, own.Score)
			}
			if own.Value != own.Score {
				unclipped++
			}
		}
		twin.(online.SparseModel).ObserveSparse(idx, val, ev.Label-fb, true)
	}
	if unclipped == 0 {
		t.Fatal("no correction outside the range of the residuals learned: the test does not tell the score from the clipped value")
	}
	got, _ := s.models[1].h.Find([]byte("u3")).MarshalBinary()
	want, _ := twin.MarshalBinary()
	if !bytes.Equal(got, want) {
		t.Fatal("the key's instance is not the twin that learned the residuals")
	}

	// A ranking request's scores are the sums too: each candidate's is
	// what the model publishes for an unlabelled event of the same
	// features (scored, not learned).
	rdec, err := e.RequestDecoder(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	req := `{"id":"q","key":"u3","features":{"user":{"id":"u3"}},"candidates":[`
	for m := range 3 {
		if m > 0 {
			req += ","
		}
		req += fmt.Sprintf(`{"item":"m%d","features":{"item":{"id":"m%d","genres":["%s"]}}}`, m, m, genres[m%4])
	}
	if err := rdec.Decode([]byte(req+"]}"), &ev); err != nil {
		t.Fatal(err)
	}
	var ranked struct {
		Ranked []struct {
			Item  string
			Score float64
		}
	}
	if err := json.Unmarshal(s.Rank(nil, &ev), &ranked); err != nil || len(ranked.Ranked) != 3 {
		t.Fatalf("ranking: %v %+v", err, ranked)
	}
	for _, it := range ranked.Ranked {
		m := atoi(it.Item[1:])
		msg := kafka.Message{Key: []byte("u3"), Value: fmt.Appendf(nil, `{"id":"p","features":{"user":{"id":"u3"},"item":{"id":"m%d","genres":["%s"]}}}`, m, genres[m%4])}
		before := len(sink.Msgs)
		s.Process(&msg, sink)
		var rec struct {
			Model    string
			Score    float64
			Fallback string
		}
		if err := json.Unmarshal(sink.Msgs[before+1].Value, &rec); err != nil || rec.Model != "per_user" || rec.Fallback != "" {
			t.Fatalf("record %s: %v", sink.Msgs[before+1].Value, err)
		}
		if it.Score != rec.Score {
			t.Errorf("%s ranked at %v, scored at %v as an event", it.Item, it.Score, rec.Score)
		}
	}
}

// TestResidualShownItemsKeepTheSum: the items a ranking request showed
// wait for their labels with every model's prediction, and a residual
// model that does not rank keeps there what it would publish for the item
// as an event, the fallback's value plus its own score (its label is
// judged against that, as an event's is), not its own score alone.
func TestResidualShownItemsKeepTheSum(t *testing.T) {
	// residualYAML's models, ranked by rating; the shown items wait for
	// their labels
	e := configEngine(t, nil, strings.Replace(residualYAML, "rank: {model: per_user}",
		"labels: {join_window: {events: 100, time: 1h}}\nrank: {model: rating, join: {events: 100, time: 1h}}", 1))
	s := instanceShard(t, e)
	sink := &memSink{Keep: true}
	events := ratingEvents(600)
	for i := range events {
		s.Process(&events[i], sink)
	}
	req := `{"id":"q","key":"u3","features":{"user":{"id":"u3"}},"candidates":[`
	for m := range 3 {
		if m > 0 {
			req += ","
		}
		req += fmt.Sprintf(`{"item":"m%d","features":{"item":{"id":"m%d","genres":["%s"]}}}`, m, m, genres[m%4])
	}
	s.Process(&kafka.Message{Key: []byte("u3"), Value: []byte(req + "]}")}, sink)
	for m := range 3 {
		// what per_user publishes for the item as an unlabelled event
		// (scored, not learned)
		msg := kafka.Message{Key: []byte("u3"), Value: fmt.Appendf(nil, `{"id":"p","features":{"user":{"id":"u3"},"item":{"id":"m%d","genres":["%s"]}}}`, m, genres[m%4])}
		before := len(sink.Msgs)
		s.Process(&msg, sink)
		var rec struct {
			Model             string
			Score, Prediction float64
			Fallback          string
		}
		if err := json.Unmarshal(sink.Msgs[before+1].Value, &rec); err != nil || rec.Model != "per_user" || rec.Fallback != "" {
			t.Fatalf("record %s: %v", sink.Msgs[before+1].Value, err)
		}
		sl, status, _ := s.shown.take(itemID(nil, []byte("q"), fmt.Appendf(nil, "m%d", m)), e.now().UnixNano())
		if status != joined {
			t.Fatalf("m%d: shown item not kept (status %v)", m, status)
		}
		if kept := sl.preds[1]; kept.Score != rec.Score || kept.Value != rec.Prediction {
			t.Errorf("m%d: the shown item keeps per_user's %v (value %v), published as an event %v (value %v)", m, kept.Score, kept.Value, rec.Score, rec.Prediction)
		}
	}
}
