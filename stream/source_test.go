package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/internal/allocs"
)

// memoryTopic returns parts partitions of n records each, "p-i" keyed
// "k-p-i".
func memoryTopic(parts, n int) [][]kafka.Message {
	out := make([][]kafka.Message, parts)
	for p := range out {
		for i := range n {
			out[p] = append(out[p], kafka.Message{Key: fmt.Appendf(nil, "k-%d-%d", p, i), Value: fmt.Appendf(nil, "%d-%d", p, i)})
		}
	}
	return out
}

// TestMemorySource: a fetcher returns its partition's records in order,
// with topic, partition, offset and high watermark set as a fetch sets
// them, from the offset it was made at (FirstOffset: the first,
// LastOffset or past the end: none); once they are read, Next blocks
// until its context ends and returns the context's error.
func TestMemorySource(t *testing.T) {
	src := NewMemorySource("in", memoryTopic(2, 5))
	if src.Partitions() != 2 || src.Len() != 10 {
		t.Fatalf("%d partitions, %d records, want 2 and 10", src.Partitions(), src.Len())
	}
	ctx := context.Background()
	for _, c := range []struct {
		part        int
		offset      int64
		first, want int64 // the first offset returned, records returned
	}{
		{0, kafka.FirstOffset, 0, 5}, {1, kafka.FirstOffset, 0, 5}, {1, 0, 0, 5}, {0, 3, 3, 2}, {1, 5, 5, 0},
		{0, kafka.LastOffset, 5, 0}, {0, 99, 5, 0},
	} {
		f := src.Fetcher(c.part, c.offset)
		for i := range c.want {
			msg, err := f.Next(ctx)
			if err != nil {
				t.Fatalf("partition %d from %d: record %d: %v", c.part, c.offset, i, err)
			}
			off := c.first + i
			if msg.Topic != "in" || msg.Partition != c.part || msg.Offset != off || msg.HighWaterMark != 5 ||
				string(msg.Key) != fmt.Sprintf("k-%d-%d", c.part, off) || string(msg.Value) != fmt.Sprintf("%d-%d", c.part, off) {
				t.Fatalf("partition %d from %d: record %d is %+v", c.part, c.offset, i, msg)
			}
		}
		// The end: Next waits for records that do not come, until its
		// context ends.
		if err := nextBlocksUntilCancel(ctx, f, 20*time.Millisecond); err != nil {
			t.Fatalf("partition %d from %d: %v", c.part, c.offset, err)
		}
		f.Close()
	}
	// An ended context wins over a record; a partition the source lacks
	// is an error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := src.Fetcher(0, 0).Next(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Next with an ended context: %v", err)
	}
	if _, err := src.Fetcher(2, 0).Next(ctx); err == nil {
		t.Error("partition 2 of 2: no error")
	}
	if raceEnabled {
		return
	}
	f := src.Fetcher(0, 0).(*memoryFetcher)
	if n := allocs.PerRun(100, func() {
		f.next = 0
		if _, err := f.Next(ctx); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Next allocates %v times per record, want 0", n)
	}
}

// BenchmarkMemorySourceNext is the per-record cost of a MemorySource's
// fetcher (`streamer bench --no-broker`). Target: 0 allocs/op.
func BenchmarkMemorySourceNext(b *testing.B) {
	const n = 4096
	src := NewMemorySource("in", memoryTopic(1, n))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := src.Fetcher(0, kafka.FirstOffset).(*memoryFetcher)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%n == 0 {
			f.next = 0
		}
		if _, err := f.Next(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDiscardPublisher: a publisher with Discard acknowledges every record
// without a broker: Await returns for a mark, Flush and Close for all,
// the published callback counts every record, and the values come back
// as Buffers.
func TestDiscardPublisher(t *testing.T) {
	var published atomic.Int64
	pub := NewPublisher(PublisherConfig{ClientID: "t", BatchSize: 50, BatchTimeout: time.Millisecond, Discard: true}, nil,
		func(n int) { published.Add(int64(n)) }, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 500
	vals := map[*byte]bool{}
	for i := range n {
		v := fmt.Appendf(pub.Buffer(), "before-%d", i)
		vals[&v[:1][0]] = true
		pub.Publish(kafka.Message{Topic: "out", Key: fmt.Appendf(nil, "k%d", i), Value: v})
	}
	m := pub.Mark()
	for range n {
		pub.Publish(kafka.Message{Topic: "out", Value: fmt.Appendf(pub.Buffer(), "after")})
	}
	if err := pub.Await(ctx, m); err != nil {
		t.Fatal(err)
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if published.Load() != 2*n || pub.Pending() != 0 {
		t.Errorf("published %d, pending %d, want %d and 0", published.Load(), pub.Pending(), 2*n)
	}
	// A buffer is a value published before, emptied.
	if b := pub.Buffer(); len(b) != 0 || cap(b) == 0 {
		t.Errorf("Buffer returned len %d cap %d", len(b), cap(b))
	} else if b = b[:1]; !vals[&b[0]] {
		// The most recently freed comes first: an "after" value.
		seen := false
		for range 2 * n {
			if c := pub.Buffer()[:1]; vals[&c[0]] {
				seen = true
				break
			}
		}
		if !seen {
			t.Error("no Buffer is a value published before")
		}
	}
	m = pub.Mark()
	if err := pub.Await(ctx, m); err != nil { // nothing since the last mark
		t.Fatal(err)
	}
	pub.Publish(kafka.Message{Topic: "out", Value: []byte("last")})
	if err := pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if published.Load() != 2*n+1 || pub.Pending() != 0 {
		t.Errorf("after Close: published %d, pending %d, want %d and 0", published.Load(), pub.Pending(), 2*n+1)
	}
	if raceEnabled {
		return
	}
	// Publishing allocates nothing once the buffers circulate.
	pub = NewPublisher(PublisherConfig{BatchSize: 1000, Discard: true}, nil, nil, nil)
	defer pub.Close(ctx)
	key := []byte("k")
	publish := func() {
		pub.Publish(kafka.Message{Topic: "out", Key: key, Value: append(pub.Buffer(), `{"id":"e-1","score":0.5}`...)})
	}
	for range 10_000 {
		publish()
	}
	if err := pub.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if a := allocs.PerRun(1000, func() {
		publish()
		if pub.Pending() > 500 { // the loop keeps up: the buffers come back
			if err := pub.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}); a != 0 {
		t.Errorf("Buffer and Publish allocate %v times per record, want 0", a)
	}
}

// BenchmarkDiscardPublish is the per-record cost of a discarding
// publisher (`streamer bench --no-broker`): a Buffer, Publish, and the
// loop's batching and acknowledging on its own goroutine. Target:
// 0 allocs/op.
func BenchmarkDiscardPublish(b *testing.B) {
	var published atomic.Int64
	pub := NewPublisher(PublisherConfig{BatchSize: 1000, BatchTimeout: 5 * time.Millisecond, Discard: true}, nil,
		func(n int) { published.Add(int64(n)) }, nil)
	key := []byte("user-42")
	ctx := context.Background()
	b.ReportAllocs()
	n := 0
	for ; b.Loop(); n++ {
		pub.Publish(kafka.Message{Topic: "out", Key: key, Value: append(pub.Buffer(), `{"id":"e-1","score":0.5}`...)})
		if n%100_000 == 0 {
			pub.Mark()
		}
	}
	if err := pub.Close(ctx); err != nil {
		b.Fatal(err)
	}
	if published.Load() != int64(n) {
		b.Fatalf("published %d of %d", published.Load(), n)
	}
}

// BenchmarkDiscardPublishRuns is the per-record cost of a discarding
// publisher fed by parallel appliers, each through its lane (one of the
// publisher's queues: one per four GOMAXPROCS), taking buffers through a
// bufCache and handing it runs of 64 records (PublishBatch), as an applier
// does after a run of events: run with
// -cpu 1,2,8 to see whether the appliers contend for the publisher's
// queue. Target: 0 allocs/op.
func BenchmarkDiscardPublishRuns(b *testing.B) {
	var published atomic.Int64
	pub := NewPublisher(PublisherConfig{BatchSize: 1000, BatchTimeout: 5 * time.Millisecond, Discard: true}, nil,
		func(n int) { published.Add(int64(n)) }, nil)
	const run = 64
	var sent, lanes atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		key := []byte("user-42")
		msgs := make([]kafka.Message, 0, run)
		out := pub.Lane(int(lanes.Add(1))).(*pubLane) // an applier's lane
		bufs := newBufCache(out)                      // and buffers
		n := int64(0)
		for pb.Next() {
			msgs = append(msgs, kafka.Message{Topic: "out", Key: key, Value: append(bufs.Buffer(), `{"id":"e-1","score":0.5}`...)})
			if len(msgs) == run {
				out.PublishBatch(msgs)
				clear(msgs)
				msgs = msgs[:0]
			}
			n++
		}
		out.PublishBatch(msgs)
		sent.Add(n)
	})
	if err := pub.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	if published.Load() != sent.Load() {
		b.Fatalf("published %d of %d", published.Load(), sent.Load())
	}
}

// recordingLanes wraps a publisher as PipelineConfig.Sink, with lanes
// (Lane): each notes the records it carries, and counts those of another
// partition (a record's value is "partition-offset").
type recordingLanes struct {
	Sink
	mu      sync.Mutex
	lanes   map[int]int // partition → records through its lane
	strayed atomic.Int64
}

func (s *recordingLanes) Lane(partition int) Sink {
	return &sinkLane{s: s, partition: partition, Sink: s.Sink.(*Publisher).Lane(partition)}
}

type sinkLane struct {
	Sink
	s         *recordingLanes
	partition int
}

func (l *sinkLane) Publish(m kafka.Message) {
	l.s.mu.Lock()
	l.s.lanes[l.partition]++
	l.s.mu.Unlock()
	if !bytes.HasPrefix(m.Value, fmt.Appendf(nil, "%d-", l.partition)) {
		l.s.strayed.Add(1)
	}
	l.Sink.Publish(m)
}

// TestPipelineMemorySource runs a pass-through pipeline whose records come
// from a MemorySource and go to a discarding publisher, in a consumer
// group on the embedded broker whose input topic is empty: every record
// is processed once, in order per partition, and the group commits the
// offsets after the last. The records go through a Sink with lanes, as
// the service's go through the publisher's: each partition's through its
// own lane (Lane).
func TestPipelineMemorySource(t *testing.T) {
	const parts, n = 3, 400
	b, err := StartBroker(0, TopicSpec{Name: "in", Partitions: parts})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	src := NewMemorySource("in", memoryTopic(parts, n))
	var published atomic.Int64
	pub := NewPublisher(PublisherConfig{BatchSize: 100, Discard: true}, nil, func(k int) { published.Add(int64(k)) }, nil)
	defer pub.Close(context.Background())
	next := make([]int64, parts) // per partition, on its goroutine
	var processed atomic.Int64
	bad := make(chan string, 1)
	sink := &recordingLanes{Sink: pub, lanes: map[int]int{}}
	pl := NewPipeline(PipelineConfig{Brokers: b.Addrs(), Group: "g", Topic: "in", StartOffset: kafka.FirstOffset,
		CommitInterval: 50 * time.Millisecond, Source: src.Fetcher, Sink: sink}, ProcessorFunc(func(msg *kafka.Message, out Sink) {
		if msg.Offset != next[msg.Partition] || string(msg.Value) != fmt.Sprintf("%d-%d", msg.Partition, msg.Offset) {
			select {
			case bad <- fmt.Sprintf("partition %d: offset %d (want %d), value %q", msg.Partition, msg.Offset, next[msg.Partition], msg.Value):
			default:
			}
		}
		next[msg.Partition]++
		processed.Add(1)
		out.Publish(kafka.Message{Topic: "out", Key: msg.Key, Value: msg.Value})
	}), pub, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- pl.Run(rctx) }()
	for processed.Load() < parts*n || published.Load() < parts*n {
		select {
		case msg := <-bad:
			t.Fatal(msg)
		case err := <-errc:
			t.Fatalf("pipeline stopped: %v", err)
		case <-ctx.Done():
			t.Fatalf("%d of %d processed, %d published", processed.Load(), parts*n, published.Load())
		case <-time.After(10 * time.Millisecond):
		}
	}
	stop()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-bad:
		t.Fatal(msg)
	default:
	}
	if processed.Load() != parts*n || published.Load() != parts*n {
		t.Errorf("%d processed, %d published, want %d", processed.Load(), published.Load(), parts*n)
	}
	sink.mu.Lock()
	for p := range parts {
		if sink.lanes[p] != n {
			t.Errorf("partition %d: %d records through its lane, want %d", p, sink.lanes[p], n)
		}
	}
	sink.mu.Unlock()
	if k := sink.strayed.Load(); k != 0 {
		t.Errorf("%d records through another partition's lane", k)
	}
	// Run's stop committed every partition's end.
	client := &kafka.Client{Addr: kafka.TCP(b.Addrs()...), Timeout: 10 * time.Second}
	resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: "g", Topics: map[string][]int{"in": {0, 1, 2}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, po := range resp.Topics["in"] {
		if po.CommittedOffset != n || po.Error != nil {
			t.Errorf("partition %d: committed %d (%v), want %d", po.Partition, po.CommittedOffset, po.Error, n)
		}
	}
	if len(resp.Topics["in"]) != parts {
		t.Errorf("committed offsets %+v", resp.Topics)
	}
}
