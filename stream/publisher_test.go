package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/stream/engine"
)

// TestPublisherMarkAwait: Await returns once the records published before
// the mark are acknowledged, whatever was published after it; it waits
// while they are not, until its context ends.
func TestPublisherMarkAwait(t *testing.T) {
	t.Run("delivered", func(t *testing.T) {
		b, err := StartBroker(0, TopicSpec{Name: "out", Partitions: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		pub := NewPublisher(PublisherConfig{Brokers: b.Addrs(), ClientID: "t", BatchSize: 50, BatchTimeout: time.Millisecond,
			BatchBytes: 1 << 20, RequiredAcks: kafka.RequireAll}, nil, nil, nil)
		defer pub.Close(context.Background())
		const n = 500
		for i := range n {
			pub.Publish(kafka.Message{Topic: "out", Key: fmt.Appendf(nil, "k%d", i), Value: []byte("before")})
		}
		m := pub.Mark()
		for range n {
			pub.Publish(kafka.Message{Topic: "out", Value: []byte("after")})
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := pub.Await(ctx, m); err != nil {
			t.Fatal(err)
		}
		// Every record before the mark is on the topic.
		before := 0
		for part := range 2 {
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: b.Addrs(), Topic: "out", Partition: part, MaxWait: 50 * time.Millisecond})
			last := lastOffset(t, b.Addrs()[0], "out", part)
			for off := int64(0); off < last; off++ {
				msg, err := r.ReadMessage(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if string(msg.Value) == "before" {
					before++
				}
			}
			r.Close()
		}
		if before != n {
			t.Fatalf("%d of the %d records published before the mark are on the topic after Await", before, n)
		}
		if err := pub.Flush(ctx); err != nil || pub.Pending() != 0 {
			t.Fatalf("Flush: %v, %d pending", err, pub.Pending())
		}
	})
	t.Run("undelivered", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens: nothing is delivered
		pub := NewPublisher(PublisherConfig{Brokers: []string{addr}, ClientID: "t", BatchSize: 10, BatchTimeout: time.Millisecond,
			BatchBytes: 1 << 20, RequiredAcks: kafka.RequireAll}, nil, nil, nil)
		empty := pub.Mark()
		for range 3 {
			pub.Publish(kafka.Message{Topic: "out", Value: []byte("x")})
		}
		m := pub.Mark()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := pub.Await(ctx, empty); err != nil {
			t.Fatalf("Await of a mark with nothing before it: %v", err)
		}
		if err := pub.Await(ctx, m); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Await with 3 records undelivered: %v, want the context's deadline", err)
		}
		cctx, ccancel := context.WithCancel(context.Background())
		ccancel()
		_ = pub.Close(cctx)
	})
}

// BenchmarkPublish is the per-record cost of Publish on the processing
// path (count the record in its epoch, queue it; for a dead letter, the
// size guard too); the writer's side runs on other goroutines. Target:
// 0 allocs/op, well under the engine's ~1.7 µs per event.
func BenchmarkPublish(b *testing.B) {
	for _, c := range []struct{ name, topic string }{{"score", "scores"}, {"dead_letter", "dlq"}} {
		b.Run(c.name, func(b *testing.B) {
			q := newPubQueue(1 << 12)
			p := &Publisher{ins: []*pubQueue{q}, truncTopic: "dlq", maxRecord: 1 << 20}
			p.epoch.Store(&epoch{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				var batch []kafka.Message
				for r := range q.runs {
					batch = p.take(q, batch[:0], r)
				}
			}()
			m := kafka.Message{Topic: c.topic, Key: []byte("user-42"), Value: []byte(`{"id":"e-1","score":0.5}`),
				Headers: []kafka.Header{{Key: engine.HeaderReason, Value: []byte("not_json")}}}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				p.Publish(m)
				if i%100_000 == 0 {
					p.Mark()
				}
			}
			close(q.runs)
			<-done
		})
	}
}

// TestPublisherRetryBacksOff: records that failed are retried after a
// wait that grows with each failure, with jitter, up to 5 s, and starts
// over after a delivery.
func TestPublisherRetryBacksOff(t *testing.T) {
	p := NewPublisher(PublisherConfig{Brokers: []string{"127.0.0.1:1"}, BatchSize: 10, BatchTimeout: time.Millisecond}, nil, nil, nil)
	defer p.Close(canceled())
	var waits []time.Duration
	for range 8 {
		p.requeue(nil)
		p.retryMu.Lock()
		waits = append(waits, time.Until(p.retryAt))
		p.retryMu.Unlock()
	}
	for i, w := range waits {
		ceiling := min(100*time.Millisecond<<i, 5*time.Second)
		if w > ceiling || w < ceiling/2-10*time.Millisecond {
			t.Fatalf("wait %d = %v, want in [%v, %v]", i, w, ceiling/2, ceiling)
		}
	}
}

// TestPublisherCutsDeadLetters: a record to the truncated topic larger
// than the batch limit is cut to fit, its original length in a header;
// other topics' records are left alone.
func TestPublisherCutsDeadLetters(t *testing.T) {
	p := &Publisher{truncTopic: "dlq", maxRecord: 1000}
	m := kafka.Message{Topic: "dlq", Key: []byte("k"), Value: make([]byte, 5000), Headers: []kafka.Header{{Key: engine.HeaderReason, Value: []byte("too_large")}}}
	c := p.cut(m, recordBytes(&m))
	if n := recordBytes(&c); n > 1000 || n < 900 {
		t.Fatalf("cut record takes %d bytes, want just under 1000", n)
	}
	if len(m.Headers) != 1 || len(c.Headers) != 2 || string(c.Headers[1].Value) != "5000" || c.Headers[1].Key != engine.HeaderOriginalBytes {
		t.Fatalf("headers %v (the original's %v): want %s: 5000 added to a copy", c.Headers, m.Headers, engine.HeaderOriginalBytes)
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// TestPublishBatch: a run handed to PublishBatch is delivered like the
// same records published one by one — counted, covered by a mark taken
// after it, a dead letter too large for its topic cut — and a mark taken
// before it does not wait for it.
func TestPublishBatch(t *testing.T) {
	var published atomic.Int64
	cut := prometheus.NewCounter(prometheus.CounterOpts{Name: "cut"})
	pub := NewPublisher(PublisherConfig{ClientID: "t", BatchSize: 50, BatchTimeout: time.Millisecond, BatchBytes: 1 << 10,
		Truncate: "dlq", Truncated: cut, Discard: true}, nil, func(n int) { published.Add(int64(n)) }, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	defer pub.Close(ctx)
	before := pub.Mark()
	if err := pub.Await(ctx, before); err != nil {
		t.Fatal(err)
	}
	const n = 300
	msgs := make([]kafka.Message, 0, n+1)
	for i := range n {
		msgs = append(msgs, kafka.Message{Topic: "out", Value: fmt.Appendf(pub.Buffer(), "r%d", i)})
	}
	big := kafka.Message{Topic: "dlq", Value: bytes.Repeat([]byte{'x'}, 4<<10)}
	msgs = append(msgs, big)
	pub.PublishBatch(msgs)
	if got := pub.Pending() + published.Load(); got != n+1 {
		t.Fatalf("pending + published = %d right after PublishBatch, want %d", got, n+1)
	}
	if err := pub.Await(ctx, pub.Mark()); err != nil {
		t.Fatal(err)
	}
	if published.Load() != n+1 || pub.Pending() != 0 {
		t.Errorf("published %d, pending %d, want %d and 0", published.Load(), pub.Pending(), n+1)
	}
	if c := testutil.ToFloat64(cut); c != 1 {
		t.Errorf("%v records cut, want the dead letter", c)
	}
	pub.PublishBatch(nil) // nothing: no count, no block
	if pub.Pending() != 0 {
		t.Errorf("pending %d after an empty run", pub.Pending())
	}
}

// TestPublisherLanes: with several queues, each partition's applier
// publishes through its lane (Publisher.Lane), and six lanes publishing
// at once over three queues each get every record onto the topic once, in
// the order published.
func TestPublisherLanes(t *testing.T) {
	b, err := StartBroker(0, TopicSpec{Name: "out", Partitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	pub := NewPublisher(PublisherConfig{Brokers: b.Addrs(), ClientID: "t", BatchSize: 50, BatchTimeout: time.Millisecond,
		BatchBytes: 1 << 20, RequiredAcks: kafka.RequireAll, Loops: 3}, nil, nil, nil)
	defer pub.Close(context.Background())
	if len(pub.ins) != 3 {
		t.Fatalf("%d queues, want 3", len(pub.ins))
	}
	const lanes, n = 6, 300
	var wg sync.WaitGroup
	for lane := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out := pub.Lane(lane)
			var run []kafka.Message
			for i := range n {
				run = append(run, kafka.Message{Topic: "out", Value: fmt.Appendf(out.Buffer(), "%d:%d", lane, i)})
				if len(run) == 1+i%17 || i == n-1 {
					out.(batchSink).PublishBatch(run)
					run = run[:0]
				}
			}
		}()
	}
	wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: b.Addrs(), Topic: "out", Partition: 0, MaxWait: 50 * time.Millisecond})
	defer r.Close()
	next := make([]int, lanes)
	for range lanes * n {
		msg, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var lane, i int
		if _, err := fmt.Sscanf(string(msg.Value), "%d:%d", &lane, &i); err != nil {
			t.Fatal(err)
		}
		if i != next[lane] {
			t.Fatalf("lane %d: record %d after %d", lane, i, next[lane]-1)
		}
		next[lane]++
	}
}

// TestPubQueueBoundsRecords: a publisher's queue holds as many records as
// its capacity whether they come one at a time (Publish) or in runs; a
// publisher waits while it is full and goes on once the loop takes a run;
// a run larger than the room left still goes in (so a large run cannot
// wait forever behind single records), and the queue is then full.
func TestPubQueueBoundsRecords(t *testing.T) {
	const capacity = 1024 // records: far more runs than the 39 a bound by runs gave
	q := newPubQueue(capacity)
	p := &Publisher{ins: []*pubQueue{q}}
	p.epoch.Store(&epoch{})
	m := kafka.Message{Topic: "scores", Value: []byte(`{}`)}
	for range capacity {
		p.Publish(m) // never waits: the loop is not running
	}
	if n := len(q.runs); n != capacity {
		t.Fatalf("%d runs queued, want %d", n, capacity)
	}
	published := waiting(t, func() { p.Publish(m) }, "a record beyond the full queue")
	var batch []kafka.Message
	batch = p.take(q, batch, <-q.runs) // the loop takes one: room for one
	<-published
	batch = p.take(q, batch, <-q.runs) // and another
	run := make([]kafka.Message, 100)
	for i := range run {
		run[i] = m
	}
	p.PublishBatch(run) // 100 records into the room of 1
	if n := q.queued.n.Load(); n != capacity-1+int64(len(run)) {
		t.Fatalf("%d records queued after a run of %d into the room of one, want %d", n, len(run), capacity-1+len(run))
	}
	for len(q.runs) > 0 {
		batch = p.take(q, batch[:0], <-q.runs)
	}
	if n := q.queued.n.Load(); n != 0 {
		t.Fatalf("%d records counted with the queue empty, want 0", n)
	}
	if n := p.pending.Load(); n != int64(capacity+1+len(run)) {
		t.Fatalf("%d records pending, want %d", n, capacity+1+len(run))
	}
}

// TestLanesWaitForAcknowledgements: a lane's publisher waits while the
// bytes of the records published and not yet acknowledged are at the
// bound, and goes on once acknowledgements bring them under it, or once
// the publisher is released; Publish (a ranking response) does not wait.
func TestLanesWaitForAcknowledgements(t *testing.T) {
	q := newPubQueue(1024)
	p := &Publisher{ins: []*pubQueue{q}, met: &pubMetrics{published: func(int) {}, errors: func(int) {}}}
	p.epoch.Store(&epoch{})
	p.pendingSize.init(40)
	lane := p.Lane(0).(*pubLane)
	// Records of 12 bytes: three, then one more, reach the bound; Publish
	// does not wait for it.
	m := kafka.Message{Topic: "scores", Key: []byte("k"), Value: []byte(`{"score":1}`)}
	lane.PublishBatch([]kafka.Message{m, m, m})
	lane.Publish(m)
	p.Publish(m)
	atBound := func() { lane.Publish(m) }
	done := waiting(t, atBound, "a lane's record with 60 bytes pending, the bound 40,")
	var batch []kafka.Message
	for len(batch) < 3 {
		batch = p.take(q, batch, <-q.runs)
	}
	p.delivered(batch[:2]) // 60 − 24 = 36: under the bound
	<-done
	if n, b := p.Pending(), p.pendingSize.n.Load(); n != 4 || b != 48 {
		t.Fatalf("%d records of %d bytes pending, want 4 of 48", n, b)
	}
	p.settle(batch[2]) // a record given up counts down too
	if b := p.pendingSize.n.Load(); b != 36 {
		t.Fatalf("%d bytes pending after a record given up, want 36", b)
	}
	lane.Publish(m) // 48
	done = waiting(t, atBound, "a lane's record with 48 bytes pending, the bound 40,")
	p.Release()
	<-done
	lane.Publish(m) // released: no wait however many are pending
	if n, b := p.Pending(), p.pendingSize.n.Load(); n != 6 || b != 72 {
		t.Fatalf("%d records of %d bytes pending, want 6 of 72", n, b)
	}
}

// waiting starts publish on a goroutine and fails the test if it returns
// within 20 ms (it should wait); the channel closes once it returns.
func waiting(t *testing.T, publish func(), what string) chan struct{} {
	t.Helper()
	done := make(chan struct{})
	go func() {
		publish()
		close(done)
	}()
	select {
	case <-done:
		t.Fatalf("%s went in without waiting", what)
	case <-time.After(20 * time.Millisecond):
	}
	return done
}
