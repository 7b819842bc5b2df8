package tests

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

const calRestartConfig = `
kafka:
  brokers: [%BROKERS%]
  group: calrestart
  commit_interval: 200ms
http:
  listen: "%HTTP%"
log:
  level: info
snapshot:
  dir: %DIR%
  every: 500ms
calibration:
  window: 400
  every: 100
models:
  - name: mam
    type: mam
    kernel: {type: rbf, gamma: 1, features: 128, seed: 3}
    features: {dim: 2}
    balance: true
    delta: 0.05
`

// TestCalibrationAfterRestart: the first record after a restart carries
// the calibrated probability of the window saved with the snapshot (n: the
// window's pairs), where the window used to start empty and records had no
// probability until calibration.every labelled events had been paired
// again.
func TestCalibrationAfterRestart(t *testing.T) {
	b := startBroker(t, 2)
	dir := t.TempDir()
	cfg := strings.ReplaceAll(calRestartConfig, "%DIR%", dir)
	p := startStreamer(t, b, cfg)
	rng := rand.New(rand.NewPCG(5, 6))
	var msgs []kafka.Message
	for i := range 1000 {
		x0, x1 := rng.NormFloat64(), rng.NormFloat64()
		y := 1
		if x0+0.5*x1+0.7*rng.NormFloat64() < 0 {
			y = -1
		}
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("k%d", i%5)), Value: eventJSON(fmt.Sprintf("e-%d", i), []float64{x0, x1}, &y)})
	}
	produce(t, b, "events", msgs)
	out := newConsumer(t, b, "scores")
	type record struct {
		ID        string
		Certainty struct {
			Probability *struct {
				P, Lower, Upper float64
				N               int
			}
		}
	}
	calibrated := 0
	for _, m := range out.read(t, len(msgs), 60*time.Second) {
		var r record
		if err := json.Unmarshal(m.Value, &r); err != nil {
			t.Fatal(err)
		}
		if r.Certainty.Probability != nil {
			calibrated++
		}
	}
	if calibrated == 0 {
		t.Fatalf("no calibrated probability before the restart")
	}
	if err := p.stop(t); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// streamer snapshot inspect shows the entry.
	if out, err := exec.Command(binary, "snapshot", "inspect", dir).CombinedOutput(); err != nil || !strings.Contains(string(out), "calibration:mam") || !strings.Contains(string(out), "calibration window: 400 pairs (of ") {
		t.Errorf("snapshot inspect (%v):\n%s", err, out)
	}

	p = startStreamer(t, b, cfg)
	produce(t, b, "events", []kafka.Message{{Key: []byte("k0"), Value: eventJSON("probe", []float64{0.3, -0.2}, nil)}})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, m := range out.read(t, 1, time.Until(deadline)) {
			var r record
			if err := json.Unmarshal(m.Value, &r); err != nil {
				t.Fatal(err)
			}
			if r.ID != "probe" {
				continue // one published again (at least once)
			}
			pr := r.Certainty.Probability
			if pr == nil || pr.N < 100 || pr.N > 400 || !(pr.Lower <= pr.P && pr.P <= pr.Upper) {
				t.Fatalf("the first record after the restart: probability %+v, want the saved window's (100 to 400 pairs)\n%s", pr, m.Value)
			}
			t.Logf("after the restart: p %.3f [%.3f, %.3f] over %d pairs", pr.P, pr.Lower, pr.Upper, pr.N)
			return
		}
	}
	t.Fatal("no record of the probe")
}
