package engine

import (
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/stream/wire"
)

// Worker is the scratch of one partition's reader: it decodes, validates
// and prepares an event (Prepare) without touching any model's state, so
// that the workers of a shard's partitions run in parallel and the shard's
// lock covers only scoring and learning (Shard.Apply).
type Worker struct {
	e        *Engine
	dec      *wire.Decoder
	ev       wire.Event
	err      error
	prep     [][]float64 // per model: its preparation of ev.Features (nil: it does not prepare, or features are hashed)
	prepared bool        // prep holds ev.Features'
}

// NewWorker returns a worker for one partition reader.
func (e *Engine) NewWorker() *Worker {
	dec, _ := wire.NewDecoder(e.cfg.Dim, e.cfg.FeatureNames, e.cfg.MaxMessageBytes) // checked by New
	dec = dec.WithMaxAbs(e.cfg.MaxFeatureAbs)
	if e.cfg.Rows > 0 {
		dec = dec.WithShape(e.cfg.Rows)
	}
	if e.cfg.JoinEvents > 0 {
		dec = dec.WithLabelOnly()
	}
	if e.rankIdx >= 0 {
		dec = dec.WithRequests(e.cfg.Rank.MaxCandidates)
		if e.cfg.Rank.Replay {
			dec = dec.WithLogged()
		}
	}
	if e.cfg.Hash != nil {
		dec, _ = dec.WithHashing(*e.cfg.Hash) // checked by New
		dec = e.withProfiles(dec)
	}
	w := &Worker{e: e, dec: dec, prep: make([][]float64, len(e.defs))}
	if e.cfg.Hash != nil {
		// Prepare skips hashed events (the models take their entries,
		// a hashed input): a dense buffer would be 2^bits floats per model
		// in each of a partition's prepared-event slots, for nothing.
		return w
	}
	for i, d := range e.defs {
		if d.prep != nil {
			w.prep[i] = make([]float64, d.prep.PreparedLen())
		}
	}
	return w
}

// WorkerBytes is about the memory of a Worker: its decoded features and
// every model's preparation of them.
func (e *Engine) WorkerBytes() int {
	n := e.cfg.Dim
	if e.cfg.Hash != nil {
		n = 0 // hashed events keep their entries, not Dim floats
	}
	for _, d := range e.defs {
		if d.prep != nil && e.cfg.Hash == nil {
			n += d.prep.PreparedLen()
		}
	}
	return 8*n + 1024
}

// Prepare decodes msg and prepares its features for every model that
// prepares (online.Preparer): the part of the per-event work that reads no
// state.
func (w *Worker) Prepare(msg *kafka.Message) {
	w.err = w.dec.Decode(msg.Value, &w.ev)
	w.prepared = w.err == nil && w.ev.HasFeatures && !w.ev.IsRequest && w.e.cfg.Hash == nil
	if !w.prepared {
		return
	}
	for i, d := range w.e.defs {
		if d.prep != nil {
			d.prep.Prepare(w.prep[i], w.ev.Features)
		}
	}
}
