package stream

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
)

// countingTransport counts the metadata requests that reach the transport.
type countingTransport struct {
	next     kafka.RoundTripper
	metadata atomic.Int64
}

func (c *countingTransport) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	if _, ok := req.(*metadataAPI.Request); ok {
		c.metadata.Add(1)
	}
	return c.next.RoundTrip(ctx, addr, req)
}

// TestMetadataCache: a writer behind the cache asks the transport for the
// topic's metadata a handful of times for thousands of records (kafka-go
// asks once per record), every record still reaches its partition, and
// the answer is asked again once the clock passes the ttl. A topic that
// does not exist is never kept.
func TestMetadataCache(t *testing.T) {
	b, err := StartBroker(0, TopicSpec{Name: "out", Partitions: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	counting := &countingTransport{next: &kafka.Transport{ClientID: "t"}}
	cache := newMetadataCache(counting, time.Hour)
	// RequireAll: WriteMessages returns once the broker has the records
	// (kafka-go's default, none, returns before, and the offsets read
	// below could lag them on a loaded machine).
	w := &kafka.Writer{Addr: kafka.TCP(b.Addrs()...), Balancer: &kafka.Murmur2Balancer{}, Transport: cache,
		BatchSize: 500, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 3000
	msgs := make([]kafka.Message, 0, 100)
	for i := range n {
		msgs = append(msgs, kafka.Message{Topic: "out", Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v")})
		if len(msgs) == cap(msgs) {
			cache.Tick()
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				t.Fatal(err)
			}
			msgs = msgs[:0]
		}
	}
	asked := counting.metadata.Load()
	t.Logf("%d records, %d metadata requests reached the transport", n, asked)
	if asked > 5 {
		t.Errorf("%d metadata requests for %d records: the cache does not hold", asked, n)
	}
	total := int64(0)
	for part := range 3 {
		last := lastOffset(t, b.Addrs()[0], "out", part)
		if last == 0 {
			t.Errorf("partition %d got no records: the balancer saw fewer partitions", part)
		}
		total += last
	}
	if total != n {
		t.Errorf("%d records on the topic, want %d", total, n)
	}

	// Past the ttl the transport is asked again.
	cache.clock.Add(int64(2 * time.Hour))
	if err := w.WriteMessages(ctx, kafka.Message{Topic: "out", Value: []byte("v")}); err != nil {
		t.Fatal(err)
	}
	if got := counting.metadata.Load(); got != asked+1 {
		t.Errorf("after the ttl: %d metadata requests, want %d", got, asked+1)
	}

	// An unknown topic's answer (an error code) is not kept.
	req := &metadataAPI.Request{TopicNames: []string{"missing"}}
	before := counting.metadata.Load()
	for range 3 {
		if _, err := cache.RoundTrip(ctx, kafka.TCP(b.Addrs()...), req); err != nil {
			t.Fatal(err)
		}
	}
	if got := counting.metadata.Load() - before; got != 3 {
		t.Errorf("unknown topic: %d of 3 requests reached the transport, want all", got)
	}
}
