package stream

import "github.com/segmentio/kafka-go"

// deliver hands a batch of the publisher's loop to the writer, or, with
// PublisherConfig.Discard, drops it.
func (p *Publisher) deliver(batch []kafka.Message) {
	if p.discard {
		p.drop(batch)
		return
	}
	p.write(batch)
}

// drop acknowledges batch at once without sending it, as completion does
// a delivered batch: its epochs' and the total pending counts go down,
// its values are recycled into Buffer's, and the published callback gets
// its count. A discarding publisher (PublisherConfig.Discard) keeps
// Publish, Buffer, Mark, Await, Flush and Close as they are, and the
// queue and the loop that batches the records: what it leaves out is
// kafka-go's writer and the brokers. It allocates nothing per record.
func (p *Publisher) drop(batch []kafka.Message) {
	for i := range batch {
		if e, ok := batch[i].WriterData.(*epoch); ok {
			e.pending.Add(-1)
		}
	}
	p.free.putValues(batch)
	p.met.published(len(batch))
	p.pending.Add(-int64(len(batch)))
}
