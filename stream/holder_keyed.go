package stream

import (
	"fmt"
	"hash/maphash"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
)

// keyedHolder is a key-scoped model in a shard: one instance per event key,
// in a key table (keyedModels, keyed.go). In instance scope, where the
// partitions' lanes share it, the table is split by a hash of the key into
// stripes, each with its own lock, index, least-recently-used order and
// max_keys / stripes of the instances in memory: lanes applying different
// keys do not queue at one lock. The stripes share the key store's table
// and are captured, made durable and restored together, as one delta: the
// snapshot and the key store do not know of them.
type keyedHolder struct {
	def     *modelDef
	fig     *figures
	stripes []*keyStripe
	seed    maphash.Seed
	shared  bool         // the shard's lanes share the holder (share): each stripe's lock guards it
	hold    int          // EngineConfig.KeyHold, divided among the stripes
	want    *atomic.Bool // the engine's wantCkpt
}

// keyStripe is a part of a key table: the keys whose hash falls in it.
type keyStripe struct {
	mu            sync.Mutex
	k             *keyedModels
	examples, hot atomic.Int64 // its figures for the scrape, set under mu
	_             [64]byte     // the stripes' locks and figures on lines of their own
}

// keyStripes is how many stripes a key table of at most max instances in
// memory is split into when lanes share it: enough that lanes rarely
// meet at one, each keeping at least 1024 instances so that the
// least-recently-used order stays close to the whole table's.
func keyStripes(maxKeys int) int { return min(16, max(1, maxKeys/1024)) }

// newKeyedHolder builds the shard s's table of key-scoped model d, in
// stripes when the shard's lanes share it (instance scope).
func (e *Engine) newKeyedHolder(s *Shard, d *modelDef, fig *figures) (*keyedHolder, error) {
	n := 1
	if s.scope == "" {
		n = keyStripes(d.maxKeys)
	}
	h := &keyedHolder{def: d, fig: fig, seed: maphash.MakeSeed(), hold: max(1, e.cfg.KeyHold/n), want: &e.wantCkpt}
	share := func(i int) int { return d.maxKeys/n + min(1, max(0, d.maxKeys%n-i)) } // max_keys in all
	k, err := newKeyedModels(d.keyFactory, share(0), e.keys.Table(s.scope, d.name))
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
	h.stripes = append(h.stripes, &keyStripe{k: k})
	for i := 1; i < n; i++ {
		h.stripes = append(h.stripes, &keyStripe{k: k.sibling(share(i))})
	}
	return h, nil
}

// stripe is the stripe holding key.
func (h *keyedHolder) stripe(key []byte) *keyStripe {
	if len(h.stripes) == 1 {
		return h.stripes[0]
	}
	return h.stripes[maphash.Bytes(h.seed, key)%uint64(len(h.stripes))]
}

func (h *keyedHolder) share() { h.shared = true }

// mutex is the lock of key's stripe when the shard's lanes share the
// table.
func (h *keyedHolder) mutex(key []byte) *sync.Mutex {
	if !h.shared {
		return nil
	}
	return &h.stripe(key).mu
}

// faults is the count of failed keys (keyfault.go) over the stripes.
func (h *keyedHolder) faults() int64 {
	var n int64
	for _, st := range h.stripes {
		n += st.k.faults.n.Load()
	}
	return n
}

// counts are the figures the scrape reads: examples, keys in memory and
// keys in the key store.
func (h *keyedHolder) counts() (examples, hot, stored int64) {
	for _, st := range h.stripes {
		examples += st.examples.Load()
		hot += st.hot.Load()
	}
	return examples, hot, h.fig.stored.Load()
}

func (h *keyedHolder) observe(key []byte, in *input, y float64, labelled bool) (online.Prediction, int64) {
	st := h.stripe(key)
	k := st.k
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
		st.examples.Store(k.examples)
	}
	if k.held > h.hold {
		h.want.Store(true)
	}
	st.hot.Store(int64(k.len()))
	return p, versionOf(p, inst)
}

// find looks key up with keyedModels.find, not get: a request for a key
// that never learned scores with the blank instance and keeps nothing (no
// place in memory, no eviction of a key that did learn). A key whose
// state cannot be read scores with a fresh instance, counted like
// observe's.
func (h *keyedHolder) find(key []byte) online.Model {
	var inst online.Model
	k := h.stripe(key).k
	ent, err := k.find(key)
	switch {
	case err != nil:
		h.def.met.keyErrors.Inc()
		inst, _ = k.factory()
	case ent == nil:
		inst, _ = k.blank()
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

// capture captures every stripe's delta, in one delta: the stripes'
// keys one after the other, their examples and keys known summed. The
// stripes' own deltas (d.parts) settle each one.
func (h *keyedHolder) capture() ([]byte, *keyDelta, error) {
	d := &keyDelta{parts: make([]*keyDelta, len(h.stripes))}
	for i, st := range h.stripes {
		p, err := st.k.capture()
		if err != nil {
			return nil, nil, err
		}
		d.parts[i], d.ckpt = p, p.ckpt // the same in every stripe
		d.examples += p.examples
		d.known += p.known
		d.keys = append(d.keys, p.keys...)
		d.states = append(d.states, p.states...)
	}
	data := d.encode() // d's states now alias the encoding
	off := 0
	for i, p := range d.parts {
		n := len(p.keys)
		p.keys, p.states = d.keys[off:off+n:off+n], d.states[off:off+n:off+n]
		off += n
		h.stripes[i].k.alias(p)
	}
	return data, d, nil
}

func (h *keyedHolder) durable(d *keyDelta) (keystore.Marker, error) { return h.stripes[0].k.apply(d) }

func (h *keyedHolder) settle(d *keyDelta, mk keystore.Marker) {
	for i, st := range h.stripes {
		st.k.settle(d.parts[i], mk)
	}
}

func (h *keyedHolder) decode(data []byte) (*keyDelta, error) {
	d, err := decodeDelta(data)
	if err != nil {
		return nil, err
	}
	var sum int64
	for j, b := range d.states {
		inst, err := h.def.keyFactory()
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

// reset empties the table (once: the stripes share it) and every stripe.
func (h *keyedHolder) reset() error {
	if err := h.stripes[0].k.reset(); err != nil {
		return err
	}
	for _, st := range h.stripes[1:] {
		st.k.restart(tableRestore{}, false)
	}
	return nil
}

// restore brings the table to d's checkpoint (keyedModels.restoreTable, once:
// the stripes share it), then empties every stripe, the table's totals
// counted in the first, and redoes d's keys each in its own stripe.
func (h *keyedHolder) restore(_ []byte, d *keyDelta, src KeySource, lossy bool) error {
	var from func() ([][]byte, [][]byte, error)
	if src != nil {
		name := h.def.name
		from = func() ([][]byte, [][]byte, error) { return src(name) }
	}
	r, err := h.stripes[0].k.restoreTable(d, from, lossy)
	if err != nil {
		return err
	}
	for i, st := range h.stripes {
		st.k.restart(r, i == 0)
	}
	if r.redone {
		for i, key := range d.keys {
			h.stripe(key).k.redo(key, d.states[i])
		}
	}
	return nil
}

func (h *keyedHolder) attach(int) {}
func (h *keyedHolder) detach(int) {}

func (h *keyedHolder) publish() {
	for _, st := range h.stripes {
		st.examples.Store(st.k.examples)
		st.hot.Store(int64(st.k.len()))
	}
	h.fig.stored.Store(h.stripes[0].k.stored)
}
