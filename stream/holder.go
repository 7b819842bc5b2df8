package stream

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/refit"
)

// holder is one model's state in a shard (shardModel.h): how an event
// reaches it and how it is saved. There are three:
//
//   - plainHolder (this file): one instance, the configured model itself
//     in instance scope's first shard;
//   - keyedHolder (holder_keyed.go): a key-scoped model, one instance per
//     event key (keyedModels);
//   - mergedHolder (holder_merged.go): a mergeable mam in partition scope,
//     which learns into its partition's statistics and scores with the
//     merge of every partition's (merged.go).
//
// The shard chooses one when it builds the model (Engine.newHolder) and
// never asks which it has. Holders take an event's features as an input,
// dense or hashed alike; a holder runs on the shard's goroutine, under the
// shard's lock, except durable; in instance scope, the shard's lanes share
// it, each use behind its mutex.
type holder interface {
	// observe scores the event in for key and learns from it (label y)
	// when labelled: the prediction and the version to publish.
	observe(key []byte, in *input, y float64, labelled bool) (online.Prediction, int64)
	// find returns the instance that scores key's events read-only
	// (ranking requests): it creates no state. nil for a merged model,
	// whose merge scores.
	find(key []byte) online.Model
	// peek scores in with inst, which find returned, changing nothing:
	// the prediction and the version that made it.
	peek(inst online.Model, in *input) (online.Prediction, int64)

	// instance is the shard's one instance of the model (its refits, the
	// version gauge), nil when key-scoped (an instance per key).
	instance() online.Model

	// capture encodes the state for the shard's snapshot; a key-scoped
	// model's is its delta (d), which durable writes to the key store once
	// the snapshot is durable (needing no lock) and settle then marks
	// clean. The others' d is nil, and durable and settle do nothing.
	capture() (data []byte, d *keyDelta, err error)
	durable(d *keyDelta) (keystore.Marker, error)
	settle(d *keyDelta, mk keystore.Marker)

	// decode checks a saved state before a restore changes anything: a
	// key-scoped model's delta, every key's state decoded (the others:
	// nil). reset: the model restores no saved state (fresh), and a
	// key-scoped one empties its table (the others start as built).
	// restore sets the saved state data (d: decode's; src and lossy
	// rebuild a key-scoped model's table that does not match it,
	// keyedModels.restoreTable). attach and detach: the shard (partition part
	// in partition scope) now holds the state, restored, or lets it go.
	decode(data []byte) (*keyDelta, error)
	reset() error
	restore(data []byte, d *keyDelta, src KeySource, lossy bool) error
	attach(part int)
	detach(part int)

	// publish updates the figures the scrape reads (figures).
	publish()

	// share makes the holder one that the lanes of an instance-scope
	// shard share; mutex then returns the lock that guards key's state
	// (every key's but a key table's), which its users hold around
	// observe and around find with the peeks after it. nil: the shard's
	// goroutine is the holder's only user.
	share()
	mutex(key []byte) *sync.Mutex
}

// figures are a shard's figures of one model for the scrape
// (stateCollector), set by its holder under the shard's lock.
type figures struct {
	examples, hot, stored atomic.Int64 // hot, stored: key-scoped models' keys in memory and in the key store

	// A gamma-auto model's bandwidths (plain holders): each scrape asks
	// (bwWanted) and the next labelled event takes a snapshot (bw), which
	// the following scrape exports; the per-event path allocates only then.
	bwWanted atomic.Bool
	bw       atomic.Pointer[bandwidths]
}

// bandwidths is a gamma-auto MAM's candidates and the one it leans on.
type bandwidths struct {
	chosen int
	cands  []online.BandwidthInfo
}

// snapshotBandwidths keeps, for the scrape, the bandwidths of inst if it
// is (or wraps) a MAM, an OMAM, a krr or an lsrrank with gamma auto.
func (f *figures) snapshotBandwidths(inst online.Model) {
	if mm, ok := online.Unwrap[*online.MAM](inst); ok {
		if c, cands := mm.Bandwidths(); c >= 0 {
			f.bw.Store(&bandwidths{chosen: c, cands: cands})
		}
	}
	g := 0.0 // one width, no error record: omam's gamma auto, or krr's and lsrrank's last fit
	if om, ok := online.Unwrap[*online.OMAM](inst); ok {
		g, _, _ = om.AutoGamma()
	}
	if r, ok := online.Unwrap[*refit.Model](inst); ok {
		g, _ = r.AutoGamma()
	}
	if g > 0 {
		f.bw.Store(&bandwidths{chosen: 0, cands: []online.BandwidthInfo{{Gamma: g, Width: 1, Error: math.NaN(), Weight: 1, Hedge: 1}}})
	}
}

// input is an event's features as a model takes them: dense (x, and prep,
// the worker's preparation of x for the model, nil when there is none) or,
// with hashed features (EngineConfig.Hash), sparse (idx, val; field[k] the
// field of entry k, wire.Event.Field). Holders read it through observe
// and peek, the one place the two kinds part.
type input struct {
	sparse bool
	x      []float64
	prep   []float64
	idx    []int32
	val    []float64
	field  []uint8
}

// setDense makes in the dense features x.
func (in *input) setDense(x []float64) { *in = input{x: x} }

// setHashed makes in the hashed features (idx, val, field).
func (in *input) setHashed(idx []int32, val []float64, field []uint8) {
	*in = input{sparse: true, idx: idx, val: val, field: field}
}

// observe scores in with inst and learns (in, y) when labelled. Dense
// features are observed prepared when pr (inst's online.Preparer) and
// in.prep are set; hashed ones through online.ObserveFields (a model that
// reads fields gets them, the others ObserveSparse).
func (in *input) observe(inst online.Model, pr online.Preparer, y float64, labelled bool) online.Prediction {
	switch {
	case in.sparse:
		return online.ObserveFields(inst.(online.SparseModel), in.idx, in.val, in.field, y, labelled) // checkHashed: every model is one
	case pr != nil && in.prep != nil:
		return pr.ObservePrepared(in.prep, in.x, y, labelled)
	default:
		return inst.Observe(in.x, y, labelled)
	}
}

// peek scores in with inst without changing any state (online.Peek;
// hashed features: online.PeekFields).
func (in *input) peek(inst online.Model) online.Prediction {
	if in.sparse {
		return online.PeekFields(inst.(online.SparseModel), in.idx, in.val, in.field)
	}
	return online.Peek(inst, in.x)
}

// versionOf is the version to publish for p made by inst.
func versionOf(p online.Prediction, inst online.Model) int64 {
	if p.Version != 0 {
		return p.Version
	}
	return inst.Version()
}

// single is the part of a holder with one instance in the shard (plain,
// merged): its state is that instance's, saved and restored whole.
type single struct {
	unkeyed
	def *modelDef
	fig *figures
	m   online.Model
	mu  *sync.Mutex // set by share
}

func (h *single) instance() online.Model { return h.m }

func (h *single) share()                   { h.mu = new(sync.Mutex) }
func (h *single) mutex([]byte) *sync.Mutex { return h.mu }

func (h *single) capture() ([]byte, *keyDelta, error) {
	data, err := h.m.MarshalBinary()
	return data, nil, err
}

// restore restores into the shard's instance: it has the type and the
// configuration (equal fingerprints) that wrote the state.
func (h *single) restore(data []byte, _ *keyDelta, _ KeySource, _ bool) error {
	return h.m.UnmarshalBinary(data)
}

func (h *single) publish() { h.fig.examples.Store(h.m.Examples()) }

// plainHolder is a model with one instance in the shard.
type plainHolder struct {
	single
	prep online.Preparer // m, when the worker's preparation applies to it
}

// unkeyed is the key store's side of a holder that keeps no keys (plain,
// merged): nothing to write, settle, decode or empty.
type unkeyed struct{}

func (unkeyed) durable(*keyDelta) (keystore.Marker, error) { return keystore.Marker{}, nil }
func (unkeyed) settle(*keyDelta, keystore.Marker)          {}
func (unkeyed) decode([]byte) (*keyDelta, error)           { return nil, nil }
func (unkeyed) reset() error                               { return nil }

func (h *plainHolder) observe(_ []byte, in *input, y float64, labelled bool) (online.Prediction, int64) {
	p := in.observe(h.m, h.prep, y, labelled)
	if labelled {
		h.fig.examples.Store(h.m.Examples())
		if h.fig.bwWanted.Load() { // a scrape asked: at most one snapshot per scrape
			h.fig.bwWanted.Store(false)
			h.fig.snapshotBandwidths(h.m)
		}
	}
	return p, versionOf(p, h.m)
}

func (h *plainHolder) find([]byte) online.Model { return h.m }

func (h *plainHolder) peek(inst online.Model, in *input) (online.Prediction, int64) {
	p := in.peek(inst)
	return p, versionOf(p, inst)
}

func (h *plainHolder) attach(int) { h.def.met.version.Set(float64(h.m.Version())) }
func (h *plainHolder) detach(int) {}
