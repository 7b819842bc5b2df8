package tests

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/stream/engine"
)

const oversizeConfig = `
shutdown_timeout: 10s
kafka:
  brokers: [%BROKERS%]
  group: oversize
  input_topic: %INPUT%
  max_message_bytes: 1048576
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
    kernel: {type: linear}
    features: {dim: 2}
`

// bigProduce writes msgs to topic in batches of at most batchBytes (the
// topic decides what it accepts).
func bigProduce(t *testing.T, b *stream.Broker, topic string, batchBytes int64, msgs []kafka.Message) {
	t.Helper()
	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), Topic: topic, Balancer: &kafka.Murmur2Balancer{},
		BatchTimeout: 5 * time.Millisecond, BatchBytes: batchBytes, RequiredAcks: kafka.RequireAll, Transport: ownTransport(t)}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
}

// readAll reads topic from the beginning until n records are read.
func readAll(t *testing.T, b *stream.Broker, topic string, n int) []kafka.Message {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: b.Addrs(), Topic: topic, Partition: 0, MaxBytes: 4 << 20, MaxWait: 100 * time.Millisecond,
		ReadBatchTimeout: time.Minute}) // megabyte records decode slowly under -race
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out []kafka.Message
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("read %d of %d records of %s: %v", len(out), n, topic, err)
		}
		out = append(out, m)
	}
	return out
}

func header(m kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func validEvents(from, n int) []kafka.Message {
	out := make([]kafka.Message, 0, n)
	for i := from; i < from+n; i++ {
		y := 1 - 2*(i%2)
		out = append(out, kafka.Message{Key: []byte(fmt.Sprintf("k%d", i%13)), Value: eventJSON(fmt.Sprintf("e-%d", i), []float64{float64(y) + float64(i%7)/10, float64(i%5) / 5}, &y)})
	}
	return out
}

// stopExit0 sends SIGTERM and wants exit 0 within 20 s.
func stopExit0(t *testing.T, p *proc) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("exit %v, want 0\n%s", err, p.logs.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("still running 20s after SIGTERM\n%s", p.logs.String())
	}
}

// TestOversizedDeadLetters: input values larger than the dead-letter topic
// takes (2 MB values on an input topic that accepts them; the dead-letter
// topic at Kafka's default max.message.bytes) are dead-lettered cut to
// fit, with their original size in a header; nothing wedges: every valid
// event before and after is scored, snapshots and commits go on, the
// service stays ready and stops cleanly.
func TestOversizedDeadLetters(t *testing.T) {
	b := startBroker(t, 2)
	if err := b.CreateTopic(context.Background(), "big", 2, kafka.ConfigEntry{ConfigName: "max.message.bytes", ConfigValue: "4194304"}); err != nil {
		t.Fatal(err)
	}
	cfg := strings.NewReplacer("%INPUT%", "big", "%DIR%", t.TempDir()).Replace(oversizeConfig)
	p := startStreamer(t, b, cfg)
	const valid, big, after = 20_000, 20, 5_000
	huge := bytes.Repeat([]byte("x"), 2<<20)
	msgs := validEvents(0, valid)
	for i := range big { // spread over the stream
		at := (i + 1) * valid / (big + 1)
		msgs[at] = kafka.Message{Key: []byte("big"), Value: huge}
	}
	bigProduce(t, b, "big", 16<<20, msgs)
	bigProduce(t, b, "big", 16<<20, validEvents(valid, after))
	scored := valid - big + after
	waitFor(t, 90*time.Second, "every valid event scored and every record delivered", func() bool {
		return p.metric(t, "streamer_events_scored_total", `model="mam"`) == float64(scored) &&
			p.metric(t, "streamer_records_published_total", "") == float64(scored+big) &&
			p.metric(t, "streamer_publish_pending", "") == 0
	})
	// A checkpoint is taken only when there is something new: more events
	// show that snapshots and commits go on past the oversized ones.
	snaps, commits := p.metric(t, "streamer_snapshots_total", ""), p.metric(t, "streamer_offset_commits_total", "")
	bigProduce(t, b, "big", 16<<20, validEvents(valid+after, 100))
	waitFor(t, 30*time.Second, "snapshots and commits going on", func() bool {
		return p.metric(t, "streamer_snapshots_total", "") > snaps && p.metric(t, "streamer_offset_commits_total", "") > commits
	})
	dl := readAll(t, b, "events.dlq", big)
	for _, m := range dl {
		if r := header(m, engine.HeaderReason); r != "too_large" {
			t.Fatalf("dead letter reason %q, want too_large", r)
		}
		if n, _ := strconv.Atoi(header(m, engine.HeaderOriginalBytes)); n != len(huge) {
			t.Fatalf("%s = %q, want %d", engine.HeaderOriginalBytes, header(m, engine.HeaderOriginalBytes), len(huge))
		}
		if len(m.Value) > stream.DefaultMaxMessageBytes || len(m.Value) < 1_000_000 || !bytes.Equal(m.Value, huge[:len(m.Value)]) {
			t.Fatalf("dead letter value of %d bytes, want the input's first bytes, under the topic's %d", len(m.Value), stream.DefaultMaxMessageBytes)
		}
	}
	if n := p.metric(t, "streamer_dead_letters_truncated_total", ""); n != big {
		t.Errorf("streamer_dead_letters_truncated_total = %v, want %d", n, big)
	}
	if code, body := p.readyzBody(); code != 200 {
		t.Errorf("/readyz = %d %q, want 200", code, body)
	}
	stopExit0(t, p)
}

// TestRefusedBatchIsSplit: a batch the brokers refuse for its size (the
// dead-letter topic's max.message.bytes lowered while the service runs,
// so the batches sized at start-up are too large) is sent again record by
// record; the one record too large even alone is counted, logged once and
// turns /readyz 503, and holds nothing back: the others are delivered,
// snapshots and commits go on.
func TestRefusedBatchIsSplit(t *testing.T) {
	b := startBroker(t, 2)
	cfg := strings.NewReplacer("%INPUT%", "events", "%DIR%", t.TempDir()).Replace(oversizeConfig)
	p := startStreamer(t, b, cfg)
	garbage := func(n int) kafka.Message { return kafka.Message{Key: []byte("g"), Value: bytes.Repeat([]byte("n"), n)} }
	// Eleven 100 KB dead letters in a row: at Kafka's default limit they
	// make more than one batch's worth.
	var msgs []kafka.Message
	msgs = append(msgs, validEvents(0, 1000)...)
	for range 11 {
		msgs = append(msgs, garbage(100_000))
	}
	msgs = append(msgs, validEvents(1000, 1000)...)
	bigProduce(t, b, "events", 500_000, msgs)
	waitFor(t, 60*time.Second, "the first dead letters delivered", func() bool {
		return p.metric(t, "streamer_records_published_total", "") == 2000+11 && p.metric(t, "streamer_publish_pending", "") == 0
	})
	if err := b.SetTopicConfig(context.Background(), "events.dlq", "max.message.bytes", "250000"); err != nil {
		t.Fatal(err)
	}
	msgs = msgs[:0]
	for range 11 {
		msgs = append(msgs, garbage(100_000))
	}
	msgs = append(msgs, garbage(400_000)) // more than the topic takes, even alone
	msgs = append(msgs, validEvents(2000, 1000)...)
	bigProduce(t, b, "events", 500_000, msgs)
	waitFor(t, 60*time.Second, "the rest delivered, the one too large given up", func() bool {
		return p.metric(t, "streamer_records_published_total", "") == 3000+22 &&
			p.metric(t, "streamer_records_undeliverable_total", `topic="events.dlq"`) == 1 &&
			p.metric(t, "streamer_publish_pending", "") == 0
	})
	snaps := p.metric(t, "streamer_snapshots_total", "")
	commits := p.metric(t, "streamer_offset_commits_total", "")
	bigProduce(t, b, "events", 500_000, validEvents(3000, 100)) // something new to checkpoint
	waitFor(t, 30*time.Second, "snapshots and commits going on", func() bool {
		return p.metric(t, "streamer_snapshots_total", "") > snaps && p.metric(t, "streamer_offset_commits_total", "") > commits
	})
	if got := len(readAll(t, b, "events.dlq", 22)); got != 22 {
		t.Fatalf("%d dead letters, want 22", got)
	}
	code, body := p.readyzBody()
	if code != 503 || !strings.Contains(body, "events.dlq: 1 records could not be delivered") {
		t.Errorf("/readyz = %d %q, want 503 naming the undeliverable record", code, body)
	}
	if n := strings.Count(p.logs.String(), "a record cannot be delivered"); n != 1 {
		t.Errorf("logged %d times, want once:\n%s", n, p.logs.String())
	}
	stopExit0(t, p)
}
