package eval

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/stream/engine"
)

// sink keeps the records an engine publishes.
type sink struct{ msgs []kafka.Message }

func (s *sink) Buffer() []byte          { return nil }
func (s *sink) Publish(m kafka.Message) { s.msgs = append(s.msgs, m) }

// reset returns the records kept and forgets them.
func (s *sink) reset() []kafka.Message {
	m := s.msgs
	s.msgs = nil
	return m
}

// TestServiceAgreesWithEval: the service (engine.Engine, built by
// engine.BuildModels) and `streamer eval` build the same models from one
// configuration and judge them the same way, standardised refitted and
// online models included: over the same rows, every model's prequential
// error computed from the predictions the engine publishes equals eval's
// report.
func TestServiceAgreesWithEval(t *testing.T) {
	cfg, err := config.Parse([]byte(`
models:
  - name: svm_std
    type: svm
    features: {dim: 2, standardize: true}
    kernel: {type: rbf, gamma: 0.5}
    window: {events: 250}
    refit: {every_events: 25}
  - name: mam_std
    type: mam
    features: {dim: 2, standardize: true}
    kernel: {type: rbf, gamma: 1, features: 128}
  - name: lda
    type: lda
    features: {dim: 2}
`), nil, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	// Ripley's training rows in a fixed random order (the file is sorted
	// by class).
	header, rows := readCSVLines(t, "testdata/ripley_train.csv")
	rng := rand.New(rand.NewPCG(1, 2))
	rng.Shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	data := filepath.Join(t.TempDir(), "ripley.csv")
	if err := os.WriteFile(data, []byte(header+"\n"+strings.Join(rows, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), cfg, testTypes, Options{Data: data})
	if err != nil {
		t.Fatal(err)
	}

	models, err := engine.BuildModels(cfg, testTypes)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(engine.Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 2}, models, nil)
	if err != nil {
		t.Fatal(err)
	}
	shard, err := e.NewShard("") // instance scope, as the service runs it
	if err == nil {
		_, _, err = shard.Restore(nil, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := NewReader(FormatCSV, f, 2, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out sink
	wrong := map[string]int{}
	n := 0
	var r Row
	for i := 0; rd.Next(&r) == nil; i++ {
		ev, _ := json.Marshal(map[string]any{"id": strconv.Itoa(i), "features": r.X, "label": r.Label})
		shard.Process(&kafka.Message{Topic: "events", Value: ev, Offset: int64(i)}, &out)
		n++
		for _, m := range out.reset() {
			var s struct {
				Model      string `json:"model"`
				Prediction int    `json:"prediction"`
			}
			if err := json.Unmarshal(m.Value, &s); err != nil {
				t.Fatalf("%s: %v", m.Value, err)
			}
			y := r.Label
			if y == 0 {
				y = -1
			}
			if float64(s.Prediction) != y {
				wrong[s.Model]++
			}
		}
	}
	for _, mc := range cfg.Models {
		got := float64(wrong[mc.Name]) / float64(n)
		want := *rep.Models[mc.Name].Prequential.Error
		t.Logf("%s: prequential error %.4f from the engine's published scores, %.4f in eval's report", mc.Name, got, want)
		if rep.Models[mc.Name].Prequential.N != int64(n) || math.Abs(got-want) > 1e-12 {
			t.Errorf("%s: engine %v over %d events, eval %v over %d", mc.Name, got, n, want, rep.Models[mc.Name].Prequential.N)
		}
	}
}
