package holder

import (
	"fmt"
	"hash/maphash"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
)

// Keyed is a key-scoped model in a shard: one instance per event key,
// in a key table (keyedModels, table.go). In instance scope, where the
// partitions' lanes share it, the table is split by a hash of the key into
// stripes, each with its own lock, index, least-recently-used order and
// max_keys / stripes of the instances in memory: lanes applying different
// keys do not queue at one lock. The stripes share the key store's table
// and are captured, made durable and restored together, as one delta: the
// snapshot and the key store do not know of them.
type Keyed struct {
	spec    *Spec
	fig     *Figures
	stripes []*keyStripe
	seed    maphash.Seed
	shared  bool         // the shard's lanes share the holder (share): each stripe's lock guards it
	hold    int          // KeyedConfig.Hold, divided among the stripes
	want    *atomic.Bool // the engine's wantCkpt
}

// keyStripe is a part of a key table: the keys whose hash falls in it.
type keyStripe struct {
	mu            sync.Mutex
	k             *keyedModels
	examples, hot atomic.Int64 // its figures for the scrape, set under mu
	_             [64]byte     // the stripes' locks and figures on lines of their own
}

// KeyStripes is how many stripes a key table of at most max instances in
// memory is split into when lanes share it: enough that lanes rarely
// meet at one, each keeping at least 1024 instances so that the
// least-recently-used order stays close to the whole table's.
func KeyStripes(maxKeys int) int { return min(16, max(1, maxKeys/1024)) }

// KeyedConfig is where a key table keeps its state.
type KeyedConfig struct {
	Table   *keystore.Table // the shard's table of the model in the key store
	MaxKeys int             // instances in memory, at most
	Stripes int             // stripes of the table (KeyStripes when lanes share it; 1 otherwise)
	Hold    int             // bytes of evicted changed states held before a checkpoint is asked for (Want)
	Want    *atomic.Bool    // set to ask for a checkpoint early
	Legacy  string          // the directory where an earlier version kept the model's evicted keys; "" when none
	Log     *slog.Logger    // nil: none
}

// NewKeyed builds a key table of the model spec.
func NewKeyed(spec *Spec, fig *Figures, c KeyedConfig) (*Keyed, error) {
	n := max(1, c.Stripes)
	h := &Keyed{spec: spec, fig: fig, seed: maphash.MakeSeed(), hold: max(1, c.Hold/n), want: c.Want}
	share := func(i int) int { return c.MaxKeys/n + min(1, max(0, c.MaxKeys%n-i)) } // max_keys in all
	k, err := newKeyedModels(spec.Factory, share(0), c.Table)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(c.Legacy); c.Legacy != "" && err == nil && fi.IsDir() {
		k.legacy = c.Legacy
	}
	k.name = spec.Name
	if spec.RestoreKey != nil {
		k.restore = spec.RestoreKey
	}
	if c.Log != nil {
		k.log = c.Log
	}
	h.stripes = append(h.stripes, &keyStripe{k: k})
	for i := 1; i < n; i++ {
		h.stripes = append(h.stripes, &keyStripe{k: k.sibling(share(i))})
	}
	return h, nil
}

// KeyedStats are a key table's figures over its stripes, for tests and
// tools.
type KeyedStats struct {
	Examples   int64  // every key's examples
	Known      int64  // keys with a state, in the key store or not yet written to it
	Stored     int64  // keys in the key store (its marker)
	Checkpoint uint64 // the last checkpoint written to the key store
	Hot        int    // instances in memory
	Pending    int    // changed instances evicted, waiting for a checkpoint
	Reloaded   int64  // keys read back from pending or the key store
}

// Stats are the table's figures (the shard paused).
func (h *Keyed) Stats() KeyedStats {
	s := KeyedStats{Stored: h.stripes[0].k.stored, Checkpoint: h.stripes[0].k.ckpt}
	for _, st := range h.stripes {
		k := st.k
		s.Examples += k.examples
		s.Known += k.known
		s.Hot += k.hot
		s.Pending += len(k.pending)
		s.Reloaded += k.reloaded
	}
	return s
}

// Stripes is how many stripes the table is in.
func (h *Keyed) Stripes() int { return len(h.stripes) }

// Table is the key store's table the stripes share.
func (h *Keyed) Table() *keystore.Table { return h.stripes[0].k.table }

// Key is key's instance as an event finds it: kept in memory, loaded, or
// created (the shard paused). It is the instance itself, not a copy.
func (h *Keyed) Key(key []byte) (online.Model, error) {
	ent, err := h.stripe(key).k.get(key)
	if err != nil {
		return nil, err
	}
	return ent.m, nil
}

// Lookup is key's instance when the key has a state, nil when it has
// none; it creates nothing (the shard paused).
func (h *Keyed) Lookup(key []byte) (online.Model, error) {
	ent, err := h.stripe(key).k.find(key)
	if ent == nil || err != nil {
		return nil, err
	}
	return ent.m, nil
}

// Check checks the invariants of every stripe's instances in memory (the
// shard paused): linked in their order of use both ways, in the index, at
// most max_keys in all, none failed, none also pending.
func (h *Keyed) Check() error {
	for _, st := range h.stripes {
		if err := st.k.check(); err != nil {
			return err
		}
	}
	return nil
}

// stripe is the stripe holding key.
func (h *Keyed) stripe(key []byte) *keyStripe {
	if len(h.stripes) == 1 {
		return h.stripes[0]
	}
	return h.stripes[maphash.Bytes(h.seed, key)%uint64(len(h.stripes))]
}

func (h *Keyed) Share() { h.shared = true }

// Mutex is the lock of key's stripe when the shard's lanes share the
// table.
func (h *Keyed) Mutex(key []byte) *sync.Mutex {
	if !h.shared {
		return nil
	}
	return &h.stripe(key).mu
}

// Faults is the count of failed keys (faults.go) over the stripes.
func (h *Keyed) Faults() int64 {
	var n int64
	for _, st := range h.stripes {
		n += st.k.faults.n.Load()
	}
	return n
}

// Counts are the figures the scrape reads: examples, keys in memory and
// keys in the key store.
func (h *Keyed) Counts() (examples, hot, stored int64) {
	for _, st := range h.stripes {
		examples += st.examples.Load()
		hot += st.hot.Load()
	}
	return examples, hot, h.fig.Stored.Load()
}

func (h *Keyed) Observe(key []byte, in *Input, y float64, labelled bool) (online.Prediction, int64) {
	st := h.stripe(key)
	k := st.k
	ent, err := k.get(key)
	if err != nil {
		// An I/O error reading a cold key: score with a fresh instance
		// rather than stall the partition; it is counted, and the key does
		// not learn (its stored state stays).
		h.spec.KeyErrors.Inc()
		inst, _ := k.factory()
		p := in.observe(inst, nil, y, false)
		if in.Sparse {
			return p, inst.Version()
		}
		return p, versionOf(p, inst)
	}
	inst := ent.m
	var pr online.Preparer
	if in.Prep != nil {
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

// Updater changes a key's state in place (Keyed.Update).
type Updater interface{ Update(m online.Model) }

// Update has u change key's instance (created when new) and counts it as
// learned: how a keyed state that is not a model, an entity's profile,
// learns an event. An I/O error reading a cold key is counted (like
// Observe's) and returned, the key unchanged.
func (h *Keyed) Update(key []byte, u Updater) error {
	st := h.stripe(key)
	k := st.k
	ent, err := k.get(key)
	if err != nil {
		h.spec.KeyErrors.Inc()
		return err
	}
	u.Update(ent.m)
	k.learned(ent)
	st.examples.Store(k.examples)
	if k.held > h.hold {
		h.want.Store(true)
	}
	st.hot.Store(int64(k.len()))
	return nil
}

// Find looks key up with keyedModels.find, not get: a request for a key
// that never learned scores with the blank instance and keeps nothing (no
// place in memory, no eviction of a key that did learn). A key whose
// state cannot be read scores with a fresh instance, counted like
// observe's.
func (h *Keyed) Find(key []byte) online.Model {
	var inst online.Model
	k := h.stripe(key).k
	ent, err := k.find(key)
	switch {
	case err != nil:
		h.spec.KeyErrors.Inc()
		inst, _ = k.factory()
	case ent == nil:
		inst, _ = k.blank()
	default:
		inst = ent.m
	}
	return inst
}

// Peek looks through a key's exploration statistics (Wrapper): Peek
// looks at the model itself (a Standardized one's moments stay).
func (h *Keyed) Peek(inst online.Model, in *Input) (online.Prediction, int64) {
	if w, ok := inst.(Wrapper); ok {
		inst = w.Wrapped()
	}
	p := in.peek(inst)
	return p, versionOf(p, inst)
}

func (h *Keyed) Instance() online.Model { return nil }

// Capture captures every stripe's delta, in one delta: the stripes'
// keys one after the other, their examples and keys known summed. The
// stripes' own deltas (d.parts) settle each one.
func (h *Keyed) Capture() ([]byte, *Delta, error) {
	d := &Delta{parts: make([]*Delta, len(h.stripes))}
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

func (h *Keyed) Durable(d *Delta) (keystore.Marker, error) { return h.stripes[0].k.apply(d) }

func (h *Keyed) Settle(d *Delta, mk keystore.Marker) {
	for i, st := range h.stripes {
		st.k.settle(d.parts[i], mk)
	}
}

func (h *Keyed) Decode(data []byte) (*Delta, error) {
	d, err := decodeDelta(data)
	if err != nil {
		return nil, err
	}
	var sum int64
	restore := h.stripes[0].k.restore // as the key's state will be read back (Spec.RestoreKey)
	for j, b := range d.states {
		inst, err := h.spec.Factory()
		if err == nil {
			err = restore(inst, b)
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

// Reset empties the table (once: the stripes share it) and every stripe.
func (h *Keyed) Reset() error {
	if err := h.stripes[0].k.reset(); err != nil {
		return err
	}
	for _, st := range h.stripes[1:] {
		st.k.restart(tableRestore{}, false)
	}
	return nil
}

// Restore brings the table to d's checkpoint (keyedModels.restoreTable, once:
// the stripes share it), then empties every stripe, the table's totals
// counted in the first, and redoes d's keys each in its own stripe.
func (h *Keyed) Restore(_ []byte, d *Delta, src KeySource, lossy bool) error {
	var from func() ([][]byte, [][]byte, error)
	if src != nil {
		name := h.spec.Name
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

func (h *Keyed) Attach(int) {}
func (h *Keyed) Detach(int) {}

func (h *Keyed) Publish() {
	for _, st := range h.stripes {
		st.examples.Store(st.k.examples)
		st.hot.Store(int64(st.k.len()))
	}
	h.fig.Stored.Store(h.stripes[0].k.stored)
}
