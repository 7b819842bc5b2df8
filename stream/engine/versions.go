package engine

import (
	"errors"
	"fmt"

	"github.com/streamer/streamer/snapshot"
)

// Model versions and rollback: the pipeline keeps the states of the global
// models as checkpoints saved them (snapshot.VersionStore) and sets a
// model's state back to one of them (SetModel) while the stream goes on.

// ModelInfo describes a configured model, for the versions and rollbacks.
type ModelInfo struct {
	Name        string
	Type        string
	Fingerprint string
	KeyScoped   bool // a state per key, in the key store: no versions, no rollback
}

// ModelInfos describes the configured models, in the configuration's
// order.
func (e *Engine) ModelInfos() []ModelInfo {
	out := make([]ModelInfo, len(e.defs))
	for i, d := range e.defs {
		out[i] = ModelInfo{Name: d.name, Type: d.proto.Type(), Fingerprint: d.fingerprint, KeyScoped: d.keyFactory != nil}
	}
	return out
}

// The errors of SetModel (and CheckState).
var (
	ErrUnknownModel   = errors.New("no model of that name is configured")
	ErrKeyScopedModel = errors.New("the model is key-scoped: its state is its keys' in the key store, which a version does not hold")
	ErrPartitionScope = errors.New("in partition scope each partition keeps its own state of the model")
	// ErrRefitting: a background refit of the model is running; its
	// result, fitted on the state before, would replace the state set.
	ErrRefitting = errors.New("a background refit of the model is running")
)

// StateMismatchError refuses a saved state that another configuration of
// the model wrote (another type, or another fingerprint).
type StateMismatchError struct {
	Model                       string
	SavedType, SavedFingerprint string
	Type, Fingerprint           string // the model's as configured now
}

func (e *StateMismatchError) Error() string {
	if e.SavedType != e.Type {
		return fmt.Sprintf("model %s: the saved state is of type %q, the model is configured as type %q", e.Model, e.SavedType, e.Type)
	}
	return fmt.Sprintf("model %s: the saved state was written by another configuration of the model (fingerprint %s; configured now: %s)", e.Model, e.SavedFingerprint, e.Fingerprint)
}

// def returns the definition of the model named name.
func (e *Engine) def(name string) (int, *modelDef) {
	for i, d := range e.defs {
		if d.name == name {
			return i, d
		}
	}
	return -1, nil
}

// CheckState reports whether saved may be set as the state of its model
// (SetModel): a configured global model, of the type and configuration
// that wrote it (the check of a restore).
func (e *Engine) CheckState(saved snapshot.Model) error {
	_, d := e.def(saved.Name)
	switch {
	case d == nil:
		return fmt.Errorf("model %s: %w", saved.Name, ErrUnknownModel)
	case d.keyFactory != nil:
		return fmt.Errorf("model %s: %w", saved.Name, ErrKeyScopedModel)
	case !d.accepts(saved):
		return &StateMismatchError{Model: d.name, SavedType: saved.Type, SavedFingerprint: saved.Fingerprint,
			Type: d.proto.Type(), Fingerprint: d.fingerprint}
	}
	return nil
}

// SetModel sets the state of one global model of s, an instance-scope
// shard, to saved (a state the model saved before: a version), and leaves
// every other model alone. The caller holds the shard's lock exclusively
// (every lane paused), so that the next event and the next request see
// the state set. It refuses, changing nothing, a model that is not
// configured, is key-scoped, another configuration's state (CheckState),
// a state that does not decode, and a model whose background refit is
// running (ErrRefitting: try again once it is done).
func (s *Shard) SetModel(saved snapshot.Model) error {
	if s.part >= 0 {
		return fmt.Errorf("model %s: %w", saved.Name, ErrPartitionScope)
	}
	if err := s.e.CheckState(saved); err != nil {
		return err
	}
	i, d := s.e.def(saved.Name)
	m := s.models[i]
	if r := refitOf(m.h.Instance()); r != nil && r.Refitting() {
		// Refits start only on the event path, under the shard's lock,
		// which the caller holds: none starts before the state is set.
		return fmt.Errorf("model %s: %w", d.name, ErrRefitting)
	}
	// Decoded into a fresh instance first: a state that does not decode
	// changes nothing.
	probe, err := d.newInst()
	if err != nil {
		return fmt.Errorf("model %s: %w", d.name, err)
	}
	if err := probe.UnmarshalBinary(saved.Data); err != nil {
		return fmt.Errorf("model %s: the saved state does not decode: %w", d.name, err)
	}
	if err := m.h.Restore(saved.Data, nil, nil, false); err != nil {
		return fmt.Errorf("model %s: set state: %w", d.name, err)
	}
	m.h.Attach(s.part)
	m.h.Publish()
	return nil
}

// ModelExamples returns the examples each model has learned (by the
// configuration's order), as the scrape counts them; the caller holds the
// shard's lock exclusively (right after Capture: the counts of the state
// captured).
func (s *Shard) ModelExamples() []int64 {
	out := make([]int64, len(s.models))
	for i, m := range s.models {
		out[i], _, _ = m.h.Counts()
	}
	return out
}
