package engine

import (
	"errors"
	"fmt"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/holder"
)

// Checkpoint is a shard's state captured at a pause: the models' encoded
// states for the shard's snapshot, and the key-scoped models' deltas,
// written to the key store once the snapshot is durable (Durable, Settle).
type Checkpoint struct {
	Models  []snapshot.Model
	deltas  []*holder.Delta // per entry of Models; nil unless key-scoped
	holders []holder.Holder // per entry of Models: the models', then the profiles' tables
	markers []keystore.Marker
}

// Capture serialises the shard's state. The caller holds the shard's lock,
// so the state includes exactly the events before the offsets saved with
// it.
func (s *Shard) Capture() (*Checkpoint, error) {
	c := &Checkpoint{Models: make([]snapshot.Model, len(s.models)), deltas: make([]*holder.Delta, len(s.models)), holders: make([]holder.Holder, len(s.models))}
	for i, m := range s.models {
		data, d, err := m.h.Capture()
		c.deltas[i], c.holders[i] = d, m.h
		if err != nil {
			return nil, fmt.Errorf("stream: capture model %s: %w", m.def.name, err)
		}
		c.Models[i] = snapshot.Model{Name: m.def.name, Type: m.def.proto.Type(), Fingerprint: m.def.fingerprint, Data: data}
	}
	if err := s.captureProfiles(c); err != nil {
		return nil, err
	}
	s.captureRank(c)
	s.captureCalibration(c)
	return c, nil
}

// Durable writes the key deltas of c, whose snapshot is now durable, to
// the key store. It needs no lock; Settle, with the shard's lock, then
// marks the written keys clean, also after an error (of the models whose
// keys were not written: the others' are).
func (s *Shard) Durable(c *Checkpoint) error {
	c.markers = make([]keystore.Marker, len(c.deltas))
	var errs []error
	for i, h := range c.holders {
		if d := c.deltas[i]; d != nil {
			mk, err := h.Durable(d)
			if err != nil {
				// Not settled: the keys stay dirty and the next checkpoint
				// writes them again. The other models' writes go on, and
				// are settled: a model whose keys were written and not
				// settled would write the same checkpoint twice.
				c.deltas[i] = nil
				errs = append(errs, fmt.Errorf("stream: %s: write keys to the key store: %w", c.Models[i].Name, err))
				continue
			}
			c.markers[i] = mk
		}
	}
	return errors.Join(errs...)
}

// Settle marks the keys Durable wrote clean (the caller holds the shard's
// lock).
func (s *Shard) Settle(c *Checkpoint) {
	if c.markers == nil {
		return
	}
	for i, h := range c.holders {
		if d := c.deltas[i]; d != nil {
			h.Settle(d, c.markers[i])
			h.Publish()
		}
	}
}

// Deltas are the key-scoped models' deltas of the checkpoint, by model
// (nil for the others), for the changelog's key records.
func (c *Checkpoint) Deltas() []*holder.Delta { return c.deltas }

// KeySource returns the keys and states of a key-scoped model in a shard's
// scope as kept outside the key store (holder.KeySource).
type KeySource = holder.KeySource

// Restore sets the shard's state from a snapshot of its scope (nil or
// empty saved: every model starts empty) and starts the shard. Models
// whose saved state is missing or was written by a different
// configuration start empty (fresh); saved models no longer configured are
// dropped. A saved state that does not decode is an error. src (may be
// nil) rebuilds key-scoped models' tables that do not match the snapshot.
func (s *Shard) Restore(saved []snapshot.Model, src KeySource) (fresh, dropped []string, err error) {
	byName := map[string]snapshot.Model{}
	for _, sv := range saved {
		byName[sv.Name] = sv
	}
	// Decode every key-scoped delta before anything changes.
	deltas := make([]*holder.Delta, len(s.models))
	for i, m := range s.models {
		sv, ok := byName[m.def.name]
		if !ok || !m.def.accepts(sv) {
			continue
		}
		d, err := m.h.Decode(sv.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("stream: restore model %s: %w", m.def.name, err)
		}
		deltas[i] = d
	}
	for i, m := range s.models {
		sv, ok := byName[m.def.name]
		delete(byName, m.def.name)
		if !ok || !m.def.accepts(sv) {
			fresh = append(fresh, m.def.name)
			if err := m.h.Reset(); err != nil {
				return nil, nil, fmt.Errorf("stream: model %s: %w", m.def.name, err)
			}
			continue
		}
		if err := m.h.Restore(sv.Data, deltas[i], src, s.e.cfg.AllowKeyLoss); err != nil {
			return nil, nil, fmt.Errorf("stream: restore model %s: %w", m.def.name, err)
		}
	}
	pfresh, err := s.restoreProfiles(byName, src)
	if err != nil {
		return nil, nil, err
	}
	fresh = append(fresh, pfresh...)
	s.restoreRank(byName)
	s.restoreCalibration(byName, fresh)
	for name := range byName {
		dropped = append(dropped, name)
	}
	e := s.e
	e.mu.Lock()
	if _, ok := e.shards[s]; !ok {
		e.shards[s] = struct{}{}
		e.relist()
		if e.started {
			s.start()
		}
	}
	e.mu.Unlock()
	for _, m := range s.models {
		m.h.Attach(s.part)
		m.h.Publish()
	}
	return fresh, dropped, nil
}

// EmptyShard returns an instance-scope shard whose models start empty
// (NewShard(""), then Restore of nothing), for a caller that feeds it
// records itself: a replay, a simulation.
func (e *Engine) EmptyShard() (*Shard, error) {
	s, err := e.NewShard("")
	if err != nil {
		return nil, err
	}
	if _, _, err := s.Restore(nil, nil); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}
