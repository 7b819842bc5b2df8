package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"
)

// labelRangeYAML rates with an fm and tells liked ratings with another;
// its %[1]s is their label keys beyond liked's condition: none, or a
// range of ratings ("min: 0.5, max: 5"); %[2]s a key of the rating model
// ("target_scale: none"), or nothing.
const labelRangeYAML = `
kafka: {brokers: ["127.0.0.1:9092"], group: g, input_topic: in, output_topic: out, dlq_topic: dlq}
models:
  - name: rating
    type: fm
    loss: squared
    factors: 4
    label: {%[1]s}
    %[2]s
    features: {hash: {bits: 16, seed: 1}, namespaces: [user, item], max_features: 64}
  - name: liked
    type: fm
    loss: logistic
    factors: 4
    label: {positive: ">= 4", %[1]s}
    features: {hash: {bits: 16, seed: 1}, namespaces: [user, item], max_features: 64}
`

// TestLabelRangeKeepsRatingsOffTheScaleOut: one rating off the scale
// (1e12, as a producer's bug or a hostile client sends it) poisons an fm
// that learns every label in its own units (target_scale: none): its
// running mean and the range its predictions are clipped to take it in,
// and every later prediction is off by millions. With label.min and
// label.max the event is dead-lettered bad_label, naming the model and
// its range, and the models score every other event exactly as on the
// stream without it. The default fm (target_scale: std), which counts a
// label at most 5σ from its mean, is moved by less than a rating even
// without the range.
func TestLabelRangeKeepsRatingsOffTheScaleOut(t *testing.T) {
	clean := ratingEvents(3000)
	hostile := map[int]string{1000: "1e12", 1500: "-1e12", 2000: "7"}
	var stream []kafka.Message
	for i, m := range clean {
		if label, ok := hostile[i]; ok {
			v := strings.Replace(string(m.Value), `"id":"r`, `"id":"bad-r`, 1)
			v = v[:strings.LastIndex(v, `"label":`)] + `"label":` + label + "}"
			stream = append(stream, kafka.Message{Key: m.Key, Value: []byte(v), Time: m.Time})
		}
		stream = append(stream, m)
	}
	for i := range stream {
		stream[i].Offset = int64(i)
	}
	type record struct {
		Score      float64 `json:"score"`
		Prediction float64 `json:"prediction"`
	}
	run := func(labelKeys, ratingKeys string, events []kafka.Message) (map[string]record, []kafka.Message) {
		t.Helper()
		e := configEngine(t, nil, fmt.Sprintf(labelRangeYAML, labelKeys, ratingKeys))
		s := instanceShard(t, e)
		sink := &memSink{Keep: true}
		for i := range events {
			s.Process(&events[i], sink)
		}
		recs := map[string]record{}
		var dlq []kafka.Message
		for _, m := range sink.Msgs {
			if m.Topic == "dlq" {
				dlq = append(dlq, m)
				continue
			}
			var r struct {
				ID, Model string
				record
			}
			if err := json.Unmarshal(m.Value, &r); err != nil {
				t.Fatalf("%s: %v", m.Value, err)
			}
			recs[r.Model+"/"+r.ID] = r.record
		}
		return recs, dlq
	}
	want, dlq := run("min: 0.5, max: 5", "", clean)
	if len(dlq) != 0 {
		t.Fatalf("%d events of the clean stream dead-lettered", len(dlq))
	}
	got, dlq := run("min: 0.5, max: 5", "", stream)
	if len(dlq) != len(hostile) {
		t.Fatalf("%d events dead-lettered, want the %d off the scale", len(dlq), len(hostile))
	}
	for _, m := range dlq {
		h := map[string]string{}
		for _, kv := range m.Headers {
			h[kv.Key] = string(kv.Value)
		}
		if h["streamer.reason"] != "bad_label" || !strings.Contains(h["streamer.detail"], "outside model rating's label range [0.5, 5] (label.min, label.max)") ||
			!strings.Contains(string(m.Value), `"id":"bad-r`) {
			t.Errorf("dead letter %s: headers %v", m.Value, h)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d records with the range, %d on the clean stream", len(got), len(want))
	}
	for k, w := range want {
		if g, ok := got[k]; !ok || math.Float64bits(g.Score) != math.Float64bits(w.Score) || g.Prediction != w.Prediction {
			t.Fatalf("%s: %+v with the events off the scale dead-lettered, %+v on the clean stream", k, g, w)
		}
	}

	// Without the range the same stream poisons a rating model that
	// learns in the label's units: after the first rating off the scale,
	// its predictions are no longer ratings. The default one is moved by
	// less than a rating.
	moved := func(ratingKeys string) float64 {
		t.Helper()
		cleanRun, _ := run("", ratingKeys, clean)
		poisoned, dlq := run("", ratingKeys, stream)
		if len(dlq) != 0 {
			t.Fatalf("without a range %d events dead-lettered", len(dlq))
		}
		var worst float64
		for i := 1001; i < len(clean); i++ {
			k := fmt.Sprintf("rating/r%d", i)
			worst = max(worst, math.Abs(poisoned[k].Score-cleanRun[k].Score))
		}
		return worst
	}
	none, std := moved("target_scale: none"), moved("")
	t.Logf("without a range the ratings off the scale moved the rating model's scores by %.3g (target_scale none) and %.3g (std) at most", none, std)
	if none < 1e3 {
		t.Errorf("target_scale none, without a range: the ratings off the scale moved the rating model's scores by %v at most: the test does not show what the range prevents", none)
	}
	if !(std < 1) {
		t.Errorf("target_scale std, without a range: the ratings off the scale moved the rating model's scores by %v", std)
	}
}
