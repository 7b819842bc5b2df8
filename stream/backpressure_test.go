package stream

import (
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/streamer/streamer/internal/keystore"
)

// TestSlowOutputBoundsPending runs the service over a backlog while the
// broker answers every produce request to the output topic late (its
// request handler sleeps), so that consuming is far faster than
// publishing. The records published and not yet acknowledged must stay
// within kafka.producer.buffer_bytes, plus at most one run of records per
// partition's applier (a run goes in whole once under the bound), where
// without the bound the whole backlog's records would be pending at once;
// the appliers' waiting must show in the publisher's account of it. Once
// the broker is fast again the service catches up: every event scored
// once (one record per model), every key's model exactly its events,
// offsets committed to the end.
func TestSlowOutputBoundsPending(t *testing.T) {
	const (
		events = 4000
		bound  = 16 << 10
		delay  = 20 * time.Millisecond
	)
	r := newDiskFullRig(t, 1<<30)
	r.cfg.Kafka.Producer.BufferBytes = bound

	var slow atomic.Bool
	slow.Store(true)
	var slowed atomic.Int64
	r.holdScores(func() {
		if slow.Load() {
			slowed.Add(1)
			time.Sleep(delay)
		}
	})

	r.produce(events)
	run := r.start()
	pub := run.s.pub
	addr := r.b.Addrs()[0]
	acked := func() int64 { return lastOffset(t, addr, "scores", 0) + lastOffset(t, addr, "scores", 1) }

	// While the output is slow: sample the pending bytes until a quarter of
	// the records are acknowledged.
	var peak int64
	deadline := time.Now().Add(60 * time.Second)
	for next := time.Now(); acked() < events/2; {
		for time.Now().Before(next) {
			peak = max(peak, pub.PendingBytes())
			time.Sleep(200 * time.Microsecond)
		}
		next = time.Now().Add(10 * time.Millisecond)
		if time.Now().After(deadline) {
			t.Fatalf("%d records acknowledged after 60 s", acked())
		}
	}
	waited := pub.Waited()
	slow.Store(false)
	waitFor(t, 60*time.Second, "the service to catch up", func() bool { return r.caughtUp(run.s) })
	slots := run.s.pipeline.slotsPerPartition()
	if _, err := run.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r.checkExact()

	var biggest, total int
	for p := range 2 {
		for _, m := range readTopic(t, addr, "scores", p) {
			biggest = max(biggest, len(m.Key)+len(m.Value))
			total++
		}
	}
	if total != 2*events {
		t.Errorf("%d score records for %d events of two models", total, events)
	}
	// Two partitions' appliers; a run is at most a partition's slots, an
	// event two records.
	limit := int64(bound + 2*slots*2*biggest)
	t.Logf("%d slowed produce requests; peak pending %d bytes (bound %d, limit %d with the runs in flight, the backlog's records %d bytes or more); appliers waited %v",
		slowed.Load(), peak, bound, limit, 2*events*(biggest/2), waited)
	if slowed.Load() == 0 {
		t.Fatal("no produce request to the output topic was slowed: the test measured nothing")
	}
	if peak > limit {
		t.Errorf("peak pending %d bytes, over the bound %d plus a run per applier (%d)", peak, bound, limit)
	}
	if peak < bound {
		t.Errorf("peak pending %d bytes never reached the bound %d: the broker was not slow enough to test it", peak, bound)
	}
	if waited <= 0 {
		t.Error("the appliers never waited at the bound")
	}
}

// holdScores has the broker answer each produce request to the output
// topic only once hold returns (other connections' requests go on
// meanwhile), then as usual.
func (r *diskFullRig) holdScores(hold func()) {
	c := r.b.c
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		for _, tp := range req.(*kmsg.ProduceRequest).Topics {
			if tp.Topic == "scores" {
				c.SleepControl(hold)
				break
			}
		}
		return nil, nil, false // handled as usual, once held
	})
}

// readTopic returns every record of a topic's partition.
func readTopic(t *testing.T, addr, topic string, part int) []kafka.Message {
	t.Helper()
	end := lastOffset(t, addr, topic, part)
	conn, err := leader(addr, topic, part)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var out []kafka.Message
	for int64(len(out)) < end {
		if _, err := conn.Seek(int64(len(out)), kafka.SeekAbsolute); err != nil {
			t.Fatal(err)
		}
		conn.SetReadDeadline(time.Now().Add(10 * time.Second))
		b := conn.ReadBatch(1, 16<<20)
		for {
			m, err := b.ReadMessage()
			if err != nil {
				break
			}
			out = append(out, m)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestStopWhileBackPressured stops the service while the broker holds
// every produce request to the output topic unanswered, with the
// partitions' appliers waiting at kafka.producer.buffer_bytes (which the
// service logs, once a window): the stop
// gives up at shutdown_timeout (Run returns, saying how many records were
// not delivered), commits no offset past its durable state nor past what
// was delivered; a new instance, the broker answering again, then catches
// up, and every key's model has learned each of its events once.
func TestStopWhileBackPressured(t *testing.T) {
	const events = 4000
	r := newDiskFullRig(t, 1<<30)
	r.cfg.Kafka.Producer.BufferBytes = 16 << 10
	r.cfg.ShutdownTimeout = time.Second
	r.tune = func(s *Service) { s.backPressureWindow = 200 * time.Millisecond }

	held := make(chan struct{})
	var once sync.Once
	answer := func() { once.Do(func() { close(held) }) }
	t.Cleanup(answer) // before the broker closes (cleanups run last first)
	var holding atomic.Int64
	r.holdScores(func() {
		holding.Add(1)
		<-held
	})

	r.produce(events)
	run := r.start()
	waitFor(t, 30*time.Second, "the appliers to wait at the bound", func() bool {
		return run.s.pub.PendingBytes() >= 16<<10 && run.s.pub.Waited() > 0
	})
	waitFor(t, 30*time.Second, "the back-pressure to be logged", func() bool {
		return strings.Contains(r.log.String(), "publishing is held back by the brokers")
	})
	_, err := run.stop(t) // fails the test if Run does not return within 30 s
	if err == nil || !strings.Contains(err.Error(), "shutdown_timeout") {
		t.Fatalf("Run returned %v, want the stop to give up at shutdown_timeout", err)
	}
	if holding.Load() == 0 {
		t.Fatal("no produce request to the output topic was held")
	}
	r.checkCommitted(run.s)
	committed, ends := r.committed(run.s), r.ends()
	var left int64
	for p, end := range ends {
		left += end - committed[p]
	}
	if left == 0 {
		t.Fatal("every offset committed, though no score record was delivered")
	}

	answer()
	// The stop gave up on the key store's close at shutdown_timeout; a
	// process would exit and free it, this one waits for the close.
	waitFor(t, 30*time.Second, "the stopped instance's key store to close", func() bool {
		db, err := keystore.Open(filepath.Join(r.dir, "keystore"), nil)
		if err != nil {
			return false
		}
		return db.Close() == nil
	})
	again := r.start()
	waitFor(t, 60*time.Second, "the new instance to catch up", func() bool { return r.caughtUp(again.s) })
	if _, err := again.stop(t); err != nil {
		t.Fatalf("Run: %v", err)
	}
	r.checkExact()
}
