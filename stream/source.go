package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"
)

// Fetcher reads one partition of a pipeline's input topic in offset order,
// on the partition's goroutine (consume): the service's fetcher reads it
// from the partition's leader (partitionFetcher, fetch.go);
// PipelineConfig.Source can give one that reads elsewhere, such as a
// MemorySource for `streamer bench --no-broker`.
type Fetcher interface {
	// Next returns the next record, with its Topic, Partition, Offset,
	// Key, Value and HighWaterMark (the partition's end offset) set. It
	// blocks until one is there, an error occurs (the pipeline reports
	// it, backs off and calls Next again) or ctx ends (then ctx's error).
	Next(ctx context.Context) (kafka.Message, error)
	// Close releases what the fetcher holds; the pipeline calls it once
	// it stops reading the partition.
	Close()
}

var (
	_ Fetcher = (*partitionFetcher)(nil)
	_ Fetcher = (*memoryFetcher)(nil)
)

// fetcher returns the fetcher of partition from offset (a committed
// offset, or PipelineConfig.StartOffset's kafka.FirstOffset or
// LastOffset): PipelineConfig.Source's when set, else one that fetches
// from the partition's leader.
func (p *Pipeline) fetcher(partition int, offset int64) Fetcher {
	if p.cfg.Source != nil {
		return p.cfg.Source(partition, offset)
	}
	// MaxWait: the broker's wait for a fetch's first record.
	return newPartitionFetcher(bufferedDialer(p.cfg.dialer()), p.cfg.Brokers, p.cfg.Topic, partition, p.cfg.FetchMaxBytes, 2*time.Second, offset)
}

// MemorySource is an input topic held in memory, for measuring the
// service's path from fetch to publish without a broker on it (`streamer
// bench --no-broker`): PipelineConfig.Source = src.Fetcher. The consumer
// group (membership, offset commits) stays on the brokers, whose input
// topic must have the same partitions (its records are not read).
//
// A record's offset is its index in its partition, the high watermark the
// partition's length. Records share the slices given: nothing may write
// to their keys and values. (A Publisher recycles the values published to
// it into its Buffers, so records published as they are (pass-through)
// must go to a publisher whose Buffer nothing calls.)
type MemorySource struct {
	topic string
	parts [][]kafka.Message
}

// NewMemorySource returns the source of topic whose partition i holds
// partitions[i], in offset order; of each message only Key and Value
// are read (Time and Headers are kept as given).
func NewMemorySource(topic string, partitions [][]kafka.Message) *MemorySource {
	return &MemorySource{topic: topic, parts: partitions}
}

// Partitions is the number of partitions.
func (s *MemorySource) Partitions() int { return len(s.parts) }

// Len is the number of records of every partition.
func (s *MemorySource) Len() int {
	n := 0
	for _, p := range s.parts {
		n += len(p)
	}
	return n
}

// Fetcher returns a fetcher of partition from offset: kafka.FirstOffset
// (or any other negative offset but LastOffset) reads from the first
// record, kafka.LastOffset or an offset past the end waits at the end.
// Once its records are read, Next blocks until ctx ends, as a fetch waits
// for records that do not come. Fetchers of one partition are independent
// of each other. A partition the source does not have is an error of
// every Next.
func (s *MemorySource) Fetcher(partition int, offset int64) Fetcher {
	f := &memoryFetcher{topic: s.topic, partition: partition}
	if partition < 0 || partition >= len(s.parts) {
		f.err = fmt.Errorf("stream: memory source: topic %s has no partition %d (%d partitions)", s.topic, partition, len(s.parts))
		return f
	}
	f.recs = s.parts[partition]
	n := int64(len(f.recs))
	switch {
	case offset == kafka.LastOffset || offset > n:
		f.next = n
	case offset < 0:
		f.next = 0
	default:
		f.next = offset
	}
	return f
}

// memoryFetcher reads a MemorySource's partition.
type memoryFetcher struct {
	topic     string
	partition int
	recs      []kafka.Message
	next      int64 // offset of the next record
	err       error // every Next's (a partition the source lacks)
}

// Next returns the next record, or blocks until ctx ends when there is
// none. It does not allocate.
func (f *memoryFetcher) Next(ctx context.Context) (kafka.Message, error) {
	if err := ctx.Err(); err != nil { // as the broker's fetcher: an ended context wins over a record
		return kafka.Message{}, err
	}
	if f.err != nil {
		return kafka.Message{}, f.err
	}
	if f.next >= int64(len(f.recs)) {
		<-ctx.Done()
		return kafka.Message{}, ctx.Err()
	}
	m := f.recs[f.next]
	m.Topic, m.Partition, m.Offset, m.HighWaterMark = f.topic, f.partition, f.next, int64(len(f.recs))
	f.next++
	return m, nil
}

// Close does nothing: the records stay the source's.
func (f *memoryFetcher) Close() {}
