package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/refit"
	"github.com/streamer/streamer/stream/internal/testkit"
)

// memSink keeps what it is given (testkit.MemSink).
type memSink = testkit.MemSink

func newTestEngine(t testing.TB, dim int, kernel online.KernelSpec) *Engine {
	t.Helper()
	m, err := online.NewMAM(dim, online.MAMParams{Kernel: kernel, Balance: true, Delta: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: dim, MaxMessageBytes: 1 << 16},
		[]NamedModel{{Name: "mam", Model: m}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// instanceShard is e's instance-scope shard with empty models, as a
// pipeline without a snapshot starts it.
func instanceShard(t testing.TB, e *Engine) *Shard {
	t.Helper()
	s, err := e.NewShard("")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Restore(nil, nil); err != nil {
		t.Fatal(err)
	}
	return s
}

func event32(i int) []byte {
	b := []byte(`{"id":"e-` + strconv.Itoa(i) + `","key":"user-42","ts":"2026-11-22T04:00:00Z","features":[`)
	for j := range 32 {
		if j > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64((i*31+j*17)%200-100)/37.0, 'f', 9, 64)
	}
	return append(b, `],"label":1}`...)
}

func TestEngineScoresThenLearns(t *testing.T) {
	e := newTestEngine(t, 2, online.KernelSpec{Type: "linear"})
	s := instanceShard(t, e)
	sink := &memSink{Keep: true}
	in := []string{
		`{"id":"a","features":[1,0],"label":1}`,
		`{"id":"b","features":[-1,0],"label":-1}`,
		`{"id":"c","features":[0.9,0.1]}`,
		`{"id":"d","features":[0.9]}`,
	}
	for i, v := range in {
		s.Process(&kafka.Message{Topic: "events", Offset: int64(i), Key: []byte("k"), Value: []byte(v)}, sink)
	}
	if len(sink.Msgs) != 4 {
		t.Fatalf("got %d records, want 4", len(sink.Msgs))
	}
	var recs []map[string]any
	for _, m := range sink.Msgs[:3] {
		var r map[string]any
		if err := json.Unmarshal(m.Value, &r); err != nil {
			t.Fatalf("%s: %v", m.Value, err)
		}
		recs = append(recs, r)
	}
	// The first event is scored by the empty model (no decision), then learned.
	if recs[0]["prediction"].(float64) != 0 || recs[0]["certainty"].(map[string]any)["n"].(float64) != 0 {
		t.Fatalf("first record %v: want no decision with n=0", recs[0])
	}
	if recs[2]["prediction"].(float64) != 1 || recs[2]["certainty"].(map[string]any)["n"].(float64) != 2 {
		t.Fatalf("third record %v: want prediction 1 with n=2", recs[2])
	}
	if m := sink.Msgs[3]; m.Topic != "dlq" || string(m.Value) != in[3] {
		t.Fatalf("bad event: got topic %q value %q", m.Topic, m.Value)
	}
	if n := e.defs[0].proto.Examples(); n != 2 {
		t.Fatalf("model learned %d examples, want 2", n)
	}
}

// BenchmarkEngineProcess is the per-event path inside the pipeline lock:
// decode a 32-float event, score and learn with a linear MAM, encode the
// score record. Target: ≥ 300 k events/s on one core and 0 allocs/op.
func BenchmarkEngineProcess(b *testing.B) {
	for _, kernel := range []online.KernelSpec{{Type: "linear"}, {Type: "rbf", Gamma: 1.0 / 32, Features: 256, Seed: 1}} {
		b.Run(kernel.Type, func(b *testing.B) {
			s := instanceShard(b, newTestEngine(b, 32, kernel))
			sink := &memSink{}
			msgs := make([]kafka.Message, 64)
			for i := range msgs {
				msgs[i] = kafka.Message{Topic: "events", Key: []byte("user-42"), Value: event32(i)}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				s.Process(&msgs[i&63], sink)
				i++
			}
		})
	}
}

// BenchmarkEngineProcessCalibrated is BenchmarkEngineProcess's linear MAM
// with the service's calibration (a window of 2 000 pairs refitted every
// 100 but not sooner than 10 ms after the last, in the background), on
// labelled events whose scores spread over the table's cells: every
// record carries certainty.probability. (Its refits run on the clock:
// time it, do not count its instructions.)
func BenchmarkEngineProcessCalibrated(b *testing.B) {
	m, err := online.NewMAM(32, online.MAMParams{Kernel: online.KernelSpec{Type: "linear"}, Balance: true, Delta: 0.05})
	if err != nil {
		b.Fatal(err)
	}
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 32, MaxMessageBytes: 1 << 16,
		Calibration: CalibrationConfig{Window: 2000, Every: 100, MinInterval: 10 * time.Millisecond}}, []NamedModel{{Name: "mam", Model: m}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	s := instanceShard(b, e)
	sink := &memSink{}
	rng := rand.New(rand.NewPCG(1, 2))
	msgs := make([]kafka.Message, 1024)
	for i := range msgs {
		v := []byte(`{"id":"e-` + strconv.Itoa(i) + `","features":[`)
		var dot float64
		for j := range 32 {
			x := rng.NormFloat64()
			if j < 4 {
				dot += x
			}
			if j > 0 {
				v = append(v, ',')
			}
			v = strconv.AppendFloat(v, x, 'f', 6, 64)
		}
		y := "1"
		if dot+rng.NormFloat64() < 0 {
			y = "-1"
		}
		msgs[i] = kafka.Message{Topic: "events", Key: []byte("user-42"), Value: append(v, `],"label":`+y+`}`...)}
	}
	for i := range 4000 { // the table fitted
		s.Process(&msgs[i&1023], sink)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.Process(&msgs[i&1023], sink)
		i++
	}
}

// TestNewBadConfig: a bad engine configuration is an error, never a
// panic (the decoder's arguments were once a panic).
func TestNewBadConfig(t *testing.T) {
	m, err := online.NewMAM(2, online.DefaultMAMParams())
	if err != nil {
		t.Fatal(err)
	}
	for name, cfg := range map[string]Config{
		"dim 0":            {OutputTopic: "scores", DLQTopic: "dlq", Dim: 0},
		"negative max":     {OutputTopic: "scores", DLQTopic: "dlq", Dim: 2, MaxMessageBytes: -1},
		"duplicate names":  {OutputTopic: "scores", DLQTopic: "dlq", Dim: 2, FeatureNames: []string{"a", "a"}},
		"model dimension":  {OutputTopic: "scores", DLQTopic: "dlq", Dim: 3},
		"names for dim 2+": {OutputTopic: "scores", DLQTopic: "dlq", Dim: 2, FeatureNames: []string{"a"}},
	} {
		if e, err := New(cfg, []NamedModel{{Name: "m", Model: m}}, nil); err == nil || e != nil {
			t.Errorf("%s: New = %v, %v; want an error", name, e, err)
		}
	}
	if _, err := New(Config{Dim: 2}, nil, nil); err == nil {
		t.Error("no models: no error")
	}
}

// TestBandwidthMetrics: a mam with gamma auto exports its bandwidths'
// gammas, errors and weights and the gamma it leans on; an omam with gamma
// auto its one width, a krr its last fit's.
func TestBandwidthMetrics(t *testing.T) {
	m, err := online.NewMAM(2, online.MAMParams{Kernel: online.KernelSpec{Type: online.KernelRBF, Features: 64, Seed: 1}, Balance: true, Delta: 0.05})
	if err != nil {
		t.Fatal(err)
	}
	om, err := online.NewOMAM(2, online.OMAMParams{Kernel: online.KernelSpec{Type: online.KernelRBF, Features: 64, Seed: 1}, Levels: 2, Edges: []float64{0}, Normalize: true})
	if err != nil {
		t.Fatal(err)
	}
	kp := refit.DefaultKRRParams()
	kp.Kernel = refit.RankKernel{Type: "rbf"} // gamma auto, solver exact
	kp.Window.Events, kp.Refit.EveryEvents = 300, 100
	krr, err := refit.KRRType().New(2, &kp)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 2, MaxMessageBytes: 1 << 16},
		[]NamedModel{{Name: "auto", Model: m}, {Name: "ordinal", Model: om, Traits: online.Traits{Kind: online.Ordinal, Levels: 2}},
			{Name: "krr", Model: krr, Traits: online.Traits{Kind: online.Regression, Refitted: true}}}, reg)
	if err != nil {
		t.Fatal(err)
	}
	s := instanceShard(t, e)
	sink := &memSink{}
	feed := func(from, n int) {
		for i := from; i < from+n; i++ {
			y := 1 - 2*(i%2)
			msg := kafka.Message{Value: fmt.Appendf(nil, `{"id":"e%d","features":[%g,%g],"label":%d}`, i, float64(y)+float64(i%7)/10, float64(i%5)/5, y)}
			s.Process(&msg, sink)
		}
	}
	feed(0, 1000)
	if n, err := testutil.GatherAndCount(reg, "streamer_model_bandwidth_gamma"); err != nil || n != 0 {
		t.Fatalf("bandwidths exported before a scrape asked for them: %d series (%v)", n, err)
	}
	feed(1000, 1) // the scrape's request is served by the next labelled event
	for name, want := range map[string]int{"streamer_model_bandwidth_gamma": 8, "streamer_model_bandwidth_error": 8, "streamer_model_bandwidth_weight": 8, "streamer_model_bandwidth_chosen": 3} {
		if n, err := testutil.GatherAndCount(reg, name); err != nil || n != want {
			t.Errorf("%s: %d series (%v), want %d", name, n, err, want)
		}
	}
	g, _, _ := om.AutoGamma()
	want := fmt.Sprintf("streamer_model_bandwidth_chosen{model=%q} %g", "ordinal", g)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mf := range mfs {
		if mf.GetName() == "streamer_model_bandwidth_chosen" {
			for _, mt := range mf.GetMetric() {
				got = append(got, fmt.Sprintf("streamer_model_bandwidth_chosen{model=%q} %g", mt.GetLabel()[0].GetValue(), mt.GetGauge().GetValue()))
			}
		}
	}
	if !slices.Contains(got, want) {
		t.Errorf("chosen gammas %q, want %q among them", got, want)
	}
}
