package stream

import "github.com/segmentio/kafka-go"

// bufCache hands one goroutine (a partition's applier) the buffers of
// its sink's records: from a *Publisher bufRun at a time (Publisher.Buffers,
// one hold of its lock), where Buffer takes its lock for every record and
// the partitions' appliers contend for it; from any other sink one by one.
type bufCache struct {
	src  Sink
	bulk bulkBuffers // src's, if it hands out runs of buffers
	free [][]byte
}

// bufRun is the buffers a bufCache takes at once.
const bufRun = 64

// bulkBuffers is a Sink that hands out buffers a run at a time.
type bulkBuffers interface {
	Buffers(dst [][]byte, n int) [][]byte
}

func newBufCache(src Sink) *bufCache {
	b, _ := src.(bulkBuffers)
	return &bufCache{src: src, bulk: b}
}

// Buffer returns an empty buffer to encode a record into.
func (c *bufCache) Buffer() []byte {
	if c.bulk == nil {
		return c.src.Buffer()
	}
	if len(c.free) == 0 {
		c.free = c.bulk.Buffers(c.free, bufRun)
	}
	n := len(c.free) - 1
	b := c.free[n]
	c.free[n] = nil
	c.free = c.free[:n]
	return b
}

// batchSink is a Sink that takes a run of records at once (*Publisher:
// its shared counts change once per run, not once per record).
type batchSink interface {
	PublishBatch(msgs []kafka.Message)
}

// publishAll publishes msgs to sink, in order: at once when it takes
// runs.
func publishAll(sink Sink, msgs []kafka.Message) {
	if b, ok := sink.(batchSink); ok {
		b.PublishBatch(msgs)
		return
	}
	for _, m := range msgs {
		sink.Publish(m)
	}
}
