package engine

import (
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/stream/wire"
)

// Outbox holds the records one event's application produced, in the order
// produced, until the partition's applier has released the shard's lock
// and encodes and publishes them (pshard.applyLoop): under the lock it
// keeps only the scores' fields, and their encoding (JSON, float
// formatting: as much CPU as the scoring of a small model) runs while
// another partition's applier holds the lock. A slot's outbox is reused:
// in the steady state it allocates nothing.
//
// A score's ID is copied (it may be the shard's scratch, which the next
// event overwrites); its other byte slices (key, event_ts) are the slot's
// message's or its worker's decoded event's, which stay untouched until
// the slot is reused, after its outbox is published.
type Outbox struct {
	bufs   Buffers          // where the records' buffers come from: the partition's applier's (its slots share it)
	floats *wire.FloatCache // the partition's applier's (its slots share it)
	recs   []outRec
	scores []wire.Score
	ids    []byte // the scores' ids, back to back
}

// Buffers hands out empty buffers to encode records into.
type Buffers interface{ Buffer() []byte }

// NewOutbox returns an empty outbox whose records are encoded into
// buffers from bufs, their floats formatted through floats (both the
// partition's applier's, which its outboxes share).
func NewOutbox(bufs Buffers, floats *wire.FloatCache) *Outbox {
	return &Outbox{bufs: bufs, floats: floats}
}

// outRec is one record of an outbox: a score to encode (score >= 0, its
// index in scores; msg has the topic and key) or a record to publish as
// it is (score < 0).
type outRec struct {
	msg   kafka.Message
	score int32
	id    [2]int32 // a score's id in ids: start, end
}

// Buffer returns the sink's buffer: a record published through the outbox
// as it is (a ranking request's answer) was encoded into it.
func (o *Outbox) Buffer() []byte { return o.bufs.Buffer() }

// Publish keeps m, to be published as it is.
func (o *Outbox) Publish(m kafka.Message) { o.recs = append(o.recs, outRec{msg: m, score: -1}) }

// addScore keeps r, to be encoded into a record of topic with key.
func (o *Outbox) addScore(topic string, key []byte, r *wire.Score) {
	start := len(o.ids)
	o.ids = append(o.ids, r.ID...)
	o.recs = append(o.recs, outRec{msg: kafka.Message{Topic: topic, Key: key}, score: int32(len(o.scores)), id: [2]int32{int32(start), int32(len(o.ids))}})
	o.scores = append(o.scores, *r)
}

// Encode appends the records held to dst, in order, the scores encoded
// into the sink's buffers, and empties the outbox.
func (o *Outbox) Encode(dst []kafka.Message) []kafka.Message {
	for i := range o.recs {
		rec := &o.recs[i]
		if rec.score < 0 {
			dst = append(dst, rec.msg)
			continue
		}
		r := &o.scores[rec.score]
		r.ID = o.ids[rec.id[0]:rec.id[1]:rec.id[1]]
		m := rec.msg
		m.Value = o.floats.AppendScore(o.bufs.Buffer(), r)
		dst = append(dst, m)
	}
	clear(o.recs) // drop the references to the records' bytes
	o.recs = o.recs[:0]
	clear(o.scores)
	o.scores = o.scores[:0]
	o.ids = o.ids[:0]
	return dst
}

// publishScores publishes the event's records, one per model in the
// models' order, to the output topic with key: into ob when the caller
// has one (Shard.ApplyAt's phase after the fallbacks).
func (s *Shard) publishScores(pub Sink, ob *Outbox, key []byte) {
	for i := range s.models {
		publishScore(pub, ob, s.e.cfg.OutputTopic, key, &s.recs[i])
	}
}

// publishScore publishes score record r to topic with key: into ob when
// the caller has one (a partition's applier), else encoded into pub at
// once.
func publishScore(pub Sink, ob *Outbox, topic string, key []byte, r *wire.Score) {
	if ob != nil {
		ob.addScore(topic, key, r)
		return
	}
	pub.Publish(kafka.Message{Topic: topic, Key: key, Value: wire.AppendScore(pub.Buffer(), r)})
}
