package stream

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
)

// keyedHolder is a key-scoped model in a shard: one instance per event key
// (keyedModels, keyed.go).
type keyedHolder struct {
	def  *modelDef
	fig  *figures
	k    *keyedModels
	hold int          // EngineConfig.KeyHold
	want *atomic.Bool // the engine's wantCkpt
}

// newKeyedHolder builds the shard s's table of key-scoped model d.
func (e *Engine) newKeyedHolder(s *Shard, d *modelDef, fig *figures) (*keyedHolder, error) {
	k, err := newKeyedModels(d.keyFactory, d.maxKeys, e.keys.Table(s.scope, d.name))
	if err != nil {
		return nil, err
	}
	if dir := e.cfg.LegacyKeyDir; dir != "" {
		dir = filepath.Join(dir, d.name)
		if s.scope != "" {
			dir = filepath.Join(dir, "p"+s.scope)
		}
		if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
			k.legacy = dir
		}
	}
	k.name = d.name
	if e.cfg.Log != nil {
		k.log = e.cfg.Log
	}
	return &keyedHolder{def: d, fig: fig, k: k, hold: e.cfg.KeyHold, want: &e.wantCkpt}, nil
}

// keys returns the key table of a key-scoped model, nil for the others
// (the key-fault collector's question).
func (m *shardModel) keys() *keyedModels {
	if h, ok := m.h.(*keyedHolder); ok {
		return h.k
	}
	return nil
}

func (h *keyedHolder) observe(key []byte, in *input, y float64, labelled bool) (online.Prediction, int64) {
	k := h.k
	ent, err := k.get(key)
	if err != nil {
		// An I/O error reading a cold key: score with a fresh instance
		// rather than stall the partition; it is counted, and the key does
		// not learn (its stored state stays).
		h.def.met.keyErrors.Inc()
		inst, _ := k.factory()
		p := in.observe(inst, nil, y, false)
		if in.sparse {
			return p, inst.Version()
		}
		return p, versionOf(p, inst)
	}
	inst := ent.m
	var pr online.Preparer
	if in.prep != nil {
		pr, _ = inst.(online.Preparer)
	}
	p := in.observe(inst, pr, y, labelled)
	if labelled {
		k.learned(ent)
	}
	if k.held > h.hold {
		h.want.Store(true)
	}
	h.fig.hot.Store(int64(k.len()))
	h.fig.examples.Store(k.examples)
	return p, versionOf(p, inst)
}

// find looks key up with keyedModels.find, not get: a request for a key
// that never learned scores with the blank instance and keeps nothing (no
// place in memory, no eviction of a key that did learn). A key whose
// state cannot be read scores with a fresh instance, counted like
// observe's.
func (h *keyedHolder) find(key []byte) online.Model {
	var inst online.Model
	ent, err := h.k.find(key)
	switch {
	case err != nil:
		h.def.met.keyErrors.Inc()
		inst, _ = h.k.factory()
	case ent == nil:
		inst, _ = h.k.blank()
	default:
		inst = ent.m
	}
	return inst
}

// peek looks through a key's exploration statistics (explored): Peek
// looks at the model itself (a Standardized one's moments stay).
func (h *keyedHolder) peek(inst online.Model, in *input) (online.Prediction, int64) {
	if ex, ok := inst.(*explored); ok {
		inst = ex.Model
	}
	p := in.peek(inst)
	return p, versionOf(p, inst)
}

func (h *keyedHolder) instance() online.Model { return nil }

func (h *keyedHolder) capture() ([]byte, *keyDelta, error) {
	d, err := h.k.capture()
	if err != nil {
		return nil, nil, err
	}
	data := d.encode() // d's states now alias the encoding
	h.k.alias(d)
	return data, d, nil
}

func (h *keyedHolder) durable(d *keyDelta) (keystore.Marker, error) { return h.k.apply(d) }

func (h *keyedHolder) settle(d *keyDelta, mk keystore.Marker) { h.k.settle(d, mk) }

func (h *keyedHolder) decode(data []byte) (*keyDelta, error) {
	d, err := decodeDelta(data)
	if err != nil {
		return nil, err
	}
	var sum int64
	for j, b := range d.states {
		inst, err := h.k.factory()
		if err == nil {
			err = inst.UnmarshalBinary(b)
		}
		if err != nil {
			return nil, fmt.Errorf("key %q: %w", d.keys[j], err)
		}
		sum += inst.Examples()
	}
	if d.examples < 0 { // the encoding of earlier versions: every key in memory
		d.examples, d.known = sum, int64(len(d.keys))
	}
	d.sum = sum
	return d, nil
}

func (h *keyedHolder) reset() error { return h.k.reset() }

func (h *keyedHolder) restore(_ []byte, d *keyDelta, src KeySource, lossy bool) error {
	var from func() ([][]byte, [][]byte, error)
	if src != nil {
		name := h.def.name
		from = func() ([][]byte, [][]byte, error) { return src(name) }
	}
	return h.k.restore(d, from, lossy)
}

func (h *keyedHolder) attach(int) {}
func (h *keyedHolder) detach(int) {}

func (h *keyedHolder) publish() {
	h.fig.examples.Store(h.k.examples)
	h.fig.hot.Store(int64(h.k.len()))
	h.fig.stored.Store(h.k.stored)
}
