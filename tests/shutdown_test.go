package tests

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

const shutdownConfig = `
shutdown_timeout: 2s
kafka:
  brokers: [%BROKERS%]
  group: shutdown
  commit_interval: 200ms
  # Scores wait in the producer's batch until the stop flushes them, so
  # the stop always has something it cannot deliver once the brokers are
  # gone (however fast the events were processed).
  producer: {batch_size: 100000, batch_timeout: 1m}
http:
  listen: "%HTTP%"
log:
  level: info
snapshot:
  dir: %DIR%
  every: 500ms
models:
  - name: mam
    type: mam
    kernel: {type: rbf, gamma: 1, features: 64}
    features: {dim: 2}
`

// TestShutdownIsBounded: with the brokers gone, a stop cannot deliver or
// commit anything; it must still end within shutdown_timeout (plus the
// process's own margin), exit non-zero and say what was not delivered,
// never hang.
func TestShutdownIsBounded(t *testing.T) {
	b := startBroker(t, 2)
	p := startStreamer(t, b, strings.ReplaceAll(shutdownConfig, "%DIR%", t.TempDir()))
	var msgs []kafka.Message
	for i := range 2000 {
		msgs = append(msgs, kafka.Message{Key: []byte(fmt.Sprintf("k%d", i%7)), Value: eventJSON(fmt.Sprintf("e-%d", i), []float64{float64(i%5) / 5, float64(i%3) / 3}, nil)})
	}
	produce(t, b, "events", msgs)
	waitFor(t, 30*time.Second, "events processed", func() bool {
		return p.metric(t, "streamer_events_consumed_total", "") > 0
	})
	b.Close() // the brokers are gone
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		took := time.Since(start)
		t.Logf("exit after %v: %v", took.Round(10*time.Millisecond), err)
		// Nothing can be delivered: the stop gives up, says so and how
		// much was lost, and exits non-zero.
		if err == nil || !strings.Contains(p.logs.String(), `msg="stop timed out" shutdown_timeout=2s undelivered_records=`) {
			t.Errorf("exit %v; want exit 1 after logging that the stop timed out:\n%s", err, p.logs.String())
		}
		// What timed out is the deliveries: there is no key store (no
		// key-scoped model) to blame.
		if strings.Contains(p.logs.String(), "key store") {
			t.Errorf("the stop's log blames a key store, with none configured:\n%s", p.logs.String())
		}
	case <-time.After(20 * time.Second): // shutdown_timeout 2s, the process's own margin 5s more
		t.Fatalf("still running 20s after SIGTERM with shutdown_timeout 2s")
	}
}
