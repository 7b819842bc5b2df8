package engine

import "github.com/segmentio/kafka-go"

// Sink receives the records a shard produces. The pipeline's Publisher is
// the Sink that sends them to Kafka.
type Sink interface {
	// Buffer returns an empty slice to encode a record into.
	Buffer() []byte
	// Publish queues a record; it owns m's byte slices from then on.
	Publish(m kafka.Message)
}
