package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/snapshot"
)

// calEngine is an engine of a classifier mam and an ordinal omam (two
// levels, from the labels' sign), calibrated over windows of 200 pairs
// refitted every 50, its models fingerprinted fp, each built by its New
// as well (partition scope).
func calEngine(t *testing.T, fp string) *Engine {
	t.Helper()
	newMAM := func() (online.Model, error) {
		return online.NewMAM(2, online.MAMParams{Kernel: online.KernelSpec{Type: online.KernelRBF, Gamma: 1, Features: 64, Seed: 1}, Balance: true, Delta: 0.05})
	}
	newOMAM := func() (online.Model, error) {
		return online.NewOMAM(2, online.OMAMParams{Kernel: online.KernelSpec{Type: online.KernelRBF, Gamma: 1, Features: 64, Seed: 1}, Levels: 2, Edges: []float64{0}, Normalize: true})
	}
	m, err := newMAM()
	if err != nil {
		t.Fatal(err)
	}
	om, err := newOMAM()
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{OutputTopic: "scores", DLQTopic: "dlq", Dim: 2, MaxMessageBytes: 1 << 16,
		Calibration: CalibrationConfig{Window: 200, Every: 50, Delta: 0.1}},
		[]NamedModel{{Name: "mam", Model: m, New: newMAM, Fingerprint: fp},
			{Name: "omam", Model: om, New: newOMAM, Fingerprint: fp, Traits: online.Traits{Kind: online.Ordinal, Levels: 2}}},
		prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// calEvent is event i of a noisy linear concept (labelled ±1 unless not
// labelled).
func calEvent(rng *rand.Rand, i int, labelled bool) *kafka.Message {
	x0, x1 := rng.NormFloat64(), rng.NormFloat64()
	v := fmt.Appendf(nil, `{"id":"e%d","features":[%g,%g]`, i, x0, x1)
	if labelled {
		y := 1
		if x0+0.5*x1+0.7*rng.NormFloat64() < 0 {
			y = -1
		}
		v = fmt.Appendf(v, `,"label":%d`, y)
	}
	return &kafka.Message{Topic: "events", Offset: int64(i), Value: append(v, '}')}
}

// certainties returns the certainty object of each record in msgs, by
// model.
func certainties(t *testing.T, msgs []kafka.Message) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, m := range msgs {
		var r struct {
			Model     string
			Certainty json.RawMessage
		}
		if err := json.Unmarshal(m.Value, &r); err != nil {
			t.Fatal(err)
		}
		out[r.Model] = string(r.Certainty)
	}
	return out
}

// TestCalibrationSurvivesRestore: an instance-scope shard's snapshot
// carries its models' calibration; a restore loads the window and fits the
// table at once, so the first record after it carries the certainty the
// shard that saved it would have published (the same table: probability
// and interval alike, the ordinal model's expected label too), where the
// calibration used to start empty and the record had none. A model that
// starts empty (another fingerprint) starts its calibration empty too; a
// partition-scope shard's snapshot has no calibration.
func TestCalibrationSurvivesRestore(t *testing.T) {
	a := calEngine(t, "fp")
	s := instanceShard(t, a)
	rng := rand.New(rand.NewPCG(7, 8))
	sink := &memSink{Keep: true}
	for i := range 1000 { // a multiple of Every: the last table is of the window as saved
		s.Process(calEvent(rng, i, true), sink)
		waitCalibrationFit(a)
	}
	cp, err := s.Capture()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range cp.Models {
		names = append(names, m.Name)
	}
	if !slices.Contains(names, CalibrationName("mam")) || !slices.Contains(names, CalibrationName("omam")) {
		t.Fatalf("snapshot entries %v: no calibration", names)
	}

	// The saving shard refits on the window it saved (its last refit was
	// at the last multiple of Every of its decided pairs): the table the
	// restored one must have.
	for _, d := range a.defs {
		d.cal.mu.Lock()
		d.cal.fitNow()
		d.cal.mu.Unlock()
	}

	probe := calEvent(rng, 1000, false)
	after := func(e *Engine, saved []snapshot.Model) (map[string]string, []string) {
		t.Helper()
		sh, err := e.NewShard("")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(sh.Close)
		fresh, dropped, err := sh.Restore(saved, nil)
		if err != nil || len(dropped) > 0 {
			t.Fatalf("restore: dropped %v, err %v", dropped, err)
		}
		out := &memSink{Keep: true}
		p := *probe
		sh.Process(&p, out)
		return certainties(t, out.Msgs), fresh
	}
	live := &memSink{Keep: true}
	p := *probe
	s.Process(&p, live)
	want := certainties(t, live.Msgs)
	if !strings.Contains(want["mam"], `"probability":{`) || !strings.Contains(want["omam"], `"interval":{`) {
		t.Fatalf("the saving shard's certainty has no table: %v", want)
	}

	got, fresh := after(calEngine(t, "fp"), cp.Models)
	if len(fresh) > 0 || got["mam"] != want["mam"] || got["omam"] != want["omam"] {
		t.Errorf("after a restore (fresh %v):\n got %v\nwant %v", fresh, got, want)
	}
	b := calEngine(t, "fp")
	after(b, cp.Models)
	for i, d := range b.defs {
		if got, want := d.cal.win.CopyTo(nil), a.defs[i].cal.win.CopyTo(nil); !slices.Equal(got, want) || b.defs[i].cal.win.Added() != a.defs[i].cal.win.Added() {
			t.Errorf("%s: the window restored differs", d.name)
		}
	}
	if got, want := *b.defs[1].cal.exp.Load(), *a.defs[1].cal.exp.Load(); !slices.Equal(got, want) {
		t.Errorf("omam's expected labels %v, want %v", got, want)
	}

	// Without the entries (a snapshot of the build before): no table.
	var models []snapshot.Model
	for _, m := range cp.Models {
		if m.Type != CalibrationStateType {
			models = append(models, m)
		}
	}
	if got, _ := after(calEngine(t, "fp"), models); strings.Contains(got["mam"], "probability") || strings.Contains(got["omam"], "interval") {
		t.Errorf("a table without a saved calibration: %v", got)
	}
	// Another fingerprint: the models start empty, and so do their
	// calibrations.
	if got, fresh := after(calEngine(t, "other"), cp.Models); len(fresh) != 2 || strings.Contains(got["mam"], "probability") {
		t.Errorf("another fingerprint: fresh %v, certainty %v", fresh, got)
	}
	// A damaged entry: logged, and the calibration starts empty.
	damaged := slices.Clone(cp.Models)
	for i := range damaged {
		if damaged[i].Name == CalibrationName("mam") {
			damaged[i].Data = damaged[i].Data[:len(damaged[i].Data)-3]
		}
	}
	if got, _ := after(calEngine(t, "fp"), damaged); strings.Contains(got["mam"], "probability") || got["omam"] != want["omam"] {
		t.Errorf("a damaged entry of mam's: %v", got)
	}

	// Partition scope: no calibration in a partition's snapshot.
	pe := calEngine(t, "fp")
	ps, err := pe.NewShard("0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ps.Close)
	if _, _, err := ps.Restore(nil, nil); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		ps.Process(calEvent(rng, i, true), &memSink{})
	}
	pc, err := ps.Capture()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range pc.Models {
		if m.Type == CalibrationStateType {
			t.Errorf("partition scope saved %s", m.Name)
		}
	}
}

// TestCalibrationEntryDecoding: an entry round-trips; a truncated,
// extended or other-format one is refused.
func TestCalibrationEntryDecoding(t *testing.T) {
	e := calEngine(t, "fp")
	s := instanceShard(t, e)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range 120 {
		s.Process(calEvent(rng, i, true), &memSink{})
	}
	waitCalibrationFit(e)
	for _, d := range e.defs {
		b := d.cal.encode()
		pairs, added, err := CalibrationSummary(b)
		if err != nil || pairs != d.cal.win.Len() || added != d.cal.win.Added() {
			t.Fatalf("%s: summary %d pairs of %d (%v), want %d of %d", d.name, pairs, added, err, d.cal.win.Len(), d.cal.win.Added())
		}
		for _, bad := range [][]byte{b[:len(b)-1], append(slices.Clone(b), 0), append([]byte{2}, b[1:]...), b[:10], nil} {
			if _, err := decodeCalibration(bad); err == nil {
				t.Errorf("%s: a damaged entry of %d bytes decoded", d.name, len(bad))
			}
		}
	}
}
