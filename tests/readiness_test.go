package tests

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/streamer/streamer/stream"
)

const readinessConfig = `
shutdown_timeout: 3s
kafka:
  brokers: [%BROKERS%]
  group: readiness
  unready_after: 2s
  commit_interval: 200ms
http:
  listen: "%HTTP%"
log:
  level: info
snapshot:
  dir: %DIR%
  every: 300ms
models:
  - name: mam
    type: mam
    kernel: {type: rbf, gamma: 1, features: 64}
    features: {dim: 2}
`

// TestReadyzFollowsBrokerOutage: the brokers go away while events are
// being scored, published and checkpointed (the outage begins while
// deliveries are awaited); /readyz turns 503 within kafka.unready_after
// plus the probe's period, saying the brokers are unreachable and for how
// long, and streamer_broker_failing_seconds{component="brokers"} grows;
// when they are back, /readyz is 200 again.
func TestReadyzFollowsBrokerOutage(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	addr := freeAddr(t)
	_, portS, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portS)
	topics := []stream.TopicSpec{{Name: "events", Partitions: 2}, {Name: "scores", Partitions: 2}, {Name: "events.dlq", Partitions: 1}}
	b, err := stream.StartBroker(port, topics...)
	if err != nil {
		t.Fatal(err)
	}
	p := startStreamer(t, b, strings.ReplaceAll(readinessConfig, "%DIR%", t.TempDir()))
	bigProduce(t, b, "events", 1<<20, validEvents(0, 20_000))
	waitFor(t, 30*time.Second, "events flowing", func() bool { return p.metric(t, "streamer_events_consumed_total", "") > 2000 })
	b.Close() // mid-stream: deliveries in flight, a checkpoint awaiting them
	down := time.Now()
	var body string
	waitFor(t, 15*time.Second, "/readyz 503 for the outage", func() bool {
		var code int
		code, body = p.readyzBody()
		return code == 503 && strings.Contains(body, "brokers: failing for")
	})
	t.Logf("503 after %v: %s", time.Since(down).Round(100*time.Millisecond), strings.TrimSpace(body))
	if d := time.Since(down); d < 2*time.Second {
		t.Errorf("/readyz 503 after %v, before kafka.unready_after (2s)", d)
	}
	if s := p.metric(t, "streamer_broker_failing_seconds", `component="brokers"`); s < 2 {
		t.Errorf(`streamer_broker_failing_seconds{component="brokers"} = %v, want ≥ 2`, s)
	}
	b2, err := stream.StartBroker(port, topics...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b2.Close)
	waitFor(t, 60*time.Second, "/readyz 200 with the brokers back", func() bool { code, _ := p.readyzBody(); return code == 200 })
}

// TestReadyzWhenPublishingFails: the output topic disappears while the
// service runs (deleted; the brokers do not create topics): publishing
// fails, and past kafka.unready_after /readyz is 503 naming the topic,
// and streamer_broker_failing_seconds{component="publish scores"} says
// for how long. The stop stays bounded.
func TestReadyzWhenPublishingFails(t *testing.T) {
	t.Parallel() // see "Parallel tests" in harness_test.go
	b := startBroker(t, 2)
	p := startStreamer(t, b, strings.ReplaceAll(readinessConfig, "%DIR%", t.TempDir()))
	bigProduce(t, b, "events", 1<<20, validEvents(0, 1000))
	waitFor(t, 30*time.Second, "events scored", func() bool { return p.metric(t, "streamer_records_published_total", "") == 1000 })
	if err := b.DeleteTopic(context.Background(), "scores"); err != nil {
		t.Fatal(err)
	}
	bigProduce(t, b, "events", 1<<20, validEvents(1000, 1000))
	var body string
	waitFor(t, 30*time.Second, "/readyz 503 naming the output topic", func() bool {
		var code int
		code, body = p.readyzBody()
		return code == 503 && strings.Contains(body, "publish scores: failing for")
	})
	t.Logf("%s", strings.TrimSpace(body))
	if s := p.metric(t, "streamer_broker_failing_seconds", `component="publish scores"`); s < 2 {
		t.Errorf(`streamer_broker_failing_seconds{component="publish scores"} = %v, want ≥ 2`, s)
	}
	time.Sleep(5 * time.Second) // the failure goes on: its warnings must not flood the log
	logs := p.logs.String()
	if n := strings.Count(logs, "\n"); n > 40 {
		t.Errorf("%d log lines while publishing fails, want the repeats held back:\n%s", n, logs)
	}
	start := time.Now()
	_ = p.stop(t) // nothing can be delivered: exit 1 after shutdown_timeout, saying so
	if d := time.Since(start); d > 15*time.Second {
		t.Errorf("stop took %v with shutdown_timeout 3s", d)
	}
}
