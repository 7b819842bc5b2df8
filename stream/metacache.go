package stream

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
)

// metadataCache sits between a kafka.Writer and its transport. The writer
// asks for the topic's metadata once for every message it is handed (to
// count the topic's partitions for the balancer); the transport answers
// from its own cache but copies and filters the whole response each time,
// which cost about 1 µs per score record, more than scoring it. This layer
// keeps each single-topic answer for ttl and hands the same response back,
// which the writer only reads. Errors are never kept, and every other
// request passes through untouched. A topic that gains partitions is seen
// at most ttl later than the transport alone would see it.
//
// The clock is the time of the writer's current call, set by the caller
// (Tick) once per WriteMessages: reading the system clock for every
// message cost as much as the lookup it saves on some virtual machines.
type metadataCache struct {
	next  kafka.RoundTripper
	ttl   time.Duration
	clock atomic.Int64 // unix nanoseconds, set by Tick

	mu      sync.Mutex
	entries map[metaKey]metaEntry
}

type metaKey struct {
	topic string
	auto  bool
}

type metaEntry struct {
	resp    kafka.Response
	expires int64 // unix nanoseconds
}

func newMetadataCache(next kafka.RoundTripper, ttl time.Duration) *metadataCache {
	c := &metadataCache{next: next, ttl: ttl, entries: map[metaKey]metaEntry{}}
	c.Tick()
	return c
}

// Tick sets the cache's clock to now.
func (c *metadataCache) Tick() { c.clock.Store(time.Now().UnixNano()) }

// RoundTrip implements kafka.RoundTripper.
func (c *metadataCache) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	m, ok := req.(*metadataAPI.Request)
	if !ok || len(m.TopicNames) != 1 {
		return c.next.RoundTrip(ctx, addr, req)
	}
	k := metaKey{m.TopicNames[0], m.AllowAutoTopicCreation}
	now := c.clock.Load()
	c.mu.Lock()
	e, hit := c.entries[k]
	c.mu.Unlock()
	if hit && now < e.expires {
		return e.resp, nil
	}
	resp, err := c.next.RoundTrip(ctx, addr, req)
	if err != nil || !cacheable(resp, k.topic) {
		return resp, err
	}
	c.mu.Lock()
	c.entries[k] = metaEntry{resp: resp, expires: now + int64(c.ttl)}
	c.mu.Unlock()
	return resp, nil
}

// cacheable: the answer names the topic without an error and with
// partitions (a topic still being created is asked again next time).
func cacheable(resp kafka.Response, topic string) bool {
	r, ok := resp.(*metadataAPI.Response)
	if !ok {
		return false
	}
	for _, t := range r.Topics {
		if t.Name == topic {
			return t.ErrorCode == 0 && len(t.Partitions) > 0
		}
	}
	return false
}
