package stream

import "github.com/segmentio/kafka-go"

// deliver hands a batch of the publisher's loop to the writer or, with
// PublisherConfig.Discard, acknowledges it at once without sending it
// (delivered, as completion does a batch the brokers took). A discarding
// publisher keeps Publish, Buffer, Mark, Await, Flush and Close as they
// are, and the queue and the loop that batches the records: what it leaves
// out is kafka-go's writer and the brokers. It allocates nothing per
// record.
func (p *Publisher) deliver(batch []kafka.Message) {
	if p.discard {
		p.delivered(batch)
		return
	}
	p.write(batch)
}
