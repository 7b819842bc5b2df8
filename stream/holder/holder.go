package holder

import (
	"math"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/refit"
)

// Holder is one model's state in a shard: how an event reaches it and how
// it is saved (the package's doc lists the kinds). The shard chooses one
// when it builds the model and never asks which it has. Holders take an event's features as an input,
// dense or hashed alike; a holder runs on the shard's goroutine, under the
// shard's lock, except durable; in instance scope, the shard's lanes share
// it, each use behind its mutex.
type Holder interface {
	// Observe scores the event in for key and learns from it (label y)
	// when labelled: the prediction and the version to publish.
	Observe(key []byte, in *Input, y float64, labelled bool) (online.Prediction, int64)
	// Find returns the instance that scores key's events read-only
	// (ranking requests): it creates no state. nil for a merged model,
	// whose merge scores.
	Find(key []byte) online.Model
	// Peek scores in with inst, which Find returned, changing nothing:
	// the prediction and the version that made it.
	Peek(inst online.Model, in *Input) (online.Prediction, int64)

	// Instance is the shard's one instance of the model (its refits, the
	// version gauge), nil when key-scoped (an instance per key).
	Instance() online.Model

	// Capture encodes the state for the shard's snapshot; a key-scoped
	// model's is its delta (d), which durable writes to the key store once
	// the snapshot is durable (needing no lock) and settle then marks
	// clean. The others' d is nil, and durable and settle do nothing.
	Capture() (data []byte, d *Delta, err error)
	Durable(d *Delta) (keystore.Marker, error)
	Settle(d *Delta, mk keystore.Marker)

	// Decode checks a saved state before a restore changes anything: a
	// key-scoped model's delta, every key's state decoded (the others:
	// nil). reset: the model restores no saved state (fresh), and a
	// key-scoped one empties its table (the others start as built).
	// Restore sets the saved state data (d: Decode's; src and lossy
	// rebuild a key-scoped model's table that does not match it,
	// keyedModels.restoreTable). attach and detach: the shard (partition part
	// in partition scope) now holds the state, restored, or lets it go.
	Decode(data []byte) (*Delta, error)
	Reset() error
	Restore(data []byte, d *Delta, src KeySource, lossy bool) error
	Attach(part int)
	Detach(part int)

	// Publish updates the figures the scrape reads (figures).
	Publish()

	// Share makes the holder one that the lanes of an instance-scope
	// shard share; Mutex then returns the lock that guards key's state
	// (every key's but a key table's), which its users hold around
	// observe and around find with the peeks after it. nil: the shard's
	// goroutine is the holder's only user.
	Share()
	Mutex(key []byte) *sync.Mutex

	// Counts are the figures of the scrape: examples, and a key-scoped
	// model's keys in memory and in the key store.
	Counts() (examples, hot, stored int64)
}

// Spec is what a holder knows of the model it holds.
type Spec struct {
	Name      string
	Factory   func() (online.Model, error) // key-scoped: builds a key's instance
	Version   prometheus.Gauge             // the model's version: plain and merged holders set it when attached
	KeyErrors prometheus.Counter           // key-scoped: events whose key's state could not be read
	Prepared  bool                         // the worker prepares the model's input (Input.Prep)
	// RestoreKey restores a key's stored state b into m, a fresh instance
	// from Factory; nil: m.UnmarshalBinary(b).
	RestoreKey func(m online.Model, b []byte) error
}

// KeySource returns the keys and states of a key-scoped model in a shard's
// scope as kept outside the key store (the changelog's key records): a
// shard rebuilds its table from them when the table does not belong to its
// snapshot (a partition that moved between instances, a new disk).
type KeySource func(model string) (keys, states [][]byte, err error)

// Wrapper is a key's instance wrapped with state of the service's own (a
// ranking model's exploration statistics): Peek scores with the model it
// wraps.
type Wrapper interface{ Wrapped() online.Model }

// Figures are a shard's figures of one model for the scrape
// (the service's collector), set by its holder under the shard's lock.
type Figures struct {
	Examples, Hot, Stored atomic.Int64 // hot, stored: key-scoped models' keys in memory and in the key store

	// A gamma-auto model's bandwidths (plain holders): each scrape asks
	// (BWWanted) and the next labelled event takes a snapshot (BW), which
	// the following scrape exports; the per-event path allocates only then.
	BWWanted atomic.Bool
	BW       atomic.Pointer[Bandwidths]
}

// Bandwidths is a gamma-auto MAM's candidates and the one it leans on.
type Bandwidths struct {
	Chosen int
	Cands  []online.BandwidthInfo
}

// snapshotBandwidths keeps, for the scrape, the bandwidths of inst if it
// is (or wraps) a MAM, an OMAM, a krr or an lsrrank with gamma auto.
func (f *Figures) snapshotBandwidths(inst online.Model) {
	if mm, ok := online.Unwrap[*online.MAM](inst); ok {
		if c, cands := mm.Bandwidths(); c >= 0 {
			f.BW.Store(&Bandwidths{Chosen: c, Cands: cands})
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
		f.BW.Store(&Bandwidths{Chosen: 0, Cands: []online.BandwidthInfo{{Gamma: g, Width: 1, Error: math.NaN(), Weight: 1, Hedge: 1}}})
	}
}

// Input is an event's features as a model takes them: dense (X, and Prep,
// the worker's preparation of X for the model, nil when there is none) or,
// with hashed features, Sparse (Idx, Val; Field[k] the field of entry k,
// wire.Event.Field). Holders read it through observe and peek, the one
// place the two kinds part.
type Input struct {
	Sparse bool
	X      []float64
	Prep   []float64
	Idx    []int32
	Val    []float64
	Field  []uint8
}

// SetDense makes in the dense features x.
func (in *Input) SetDense(x []float64) { *in = Input{X: x} }

// SetHashed makes in the hashed features (idx, val, field).
func (in *Input) SetHashed(idx []int32, val []float64, field []uint8) {
	*in = Input{Sparse: true, Idx: idx, Val: val, Field: field}
}

// observe scores in with inst and learns (in, y) when labelled. Dense
// features are observed prepared when pr (inst's online.Preparer) and
// in.prep are set; hashed ones through online.ObserveFields (a model that
// reads fields gets them, the others ObserveSparse).
func (in *Input) observe(inst online.Model, pr online.Preparer, y float64, labelled bool) online.Prediction {
	switch {
	case in.Sparse:
		return online.ObserveFields(inst.(online.SparseModel), in.Idx, in.Val, in.Field, y, labelled) // checkHashed: every model is one
	case pr != nil && in.Prep != nil:
		return pr.ObservePrepared(in.Prep, in.X, y, labelled)
	default:
		return inst.Observe(in.X, y, labelled)
	}
}

// peek scores in with inst without changing any state (online.Peek;
// hashed features: online.PeekFields).
func (in *Input) peek(inst online.Model) online.Prediction {
	if in.Sparse {
		return online.PeekFields(inst.(online.SparseModel), in.Idx, in.Val, in.Field)
	}
	return online.Peek(inst, in.X)
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
	spec *Spec
	fig  *Figures
	m    online.Model
	mu   *sync.Mutex // set by share
}

func (h *single) Instance() online.Model { return h.m }

func (h *single) Share()                   { h.mu = new(sync.Mutex) }
func (h *single) Mutex([]byte) *sync.Mutex { return h.mu }

func (h *single) Capture() ([]byte, *Delta, error) {
	data, err := h.m.MarshalBinary()
	return data, nil, err
}

// Restore restores into the shard's instance: it has the type and the
// configuration (equal fingerprints) that wrote the state.
func (h *single) Restore(data []byte, _ *Delta, _ KeySource, _ bool) error {
	return h.m.UnmarshalBinary(data)
}

func (h *single) Publish() { h.fig.Examples.Store(h.m.Examples()) }

func (h *single) Counts() (examples, hot, stored int64) { return h.fig.Examples.Load(), 0, 0 }

// plainHolder is a model with one instance in the shard.
type plainHolder struct {
	single
	prep online.Preparer // m, when the worker's preparation applies to it
}

// NewPlain is the holder of m, a model with one instance in the
// shard.
func NewPlain(spec *Spec, fig *Figures, m online.Model) Holder {
	h := &plainHolder{single: single{spec: spec, fig: fig, m: m}}
	if spec.Prepared {
		h.prep, _ = m.(online.Preparer)
	}
	return h
}

// unkeyed is the key store's side of a holder that keeps no keys (plain,
// merged): nothing to write, settle, decode or empty.
type unkeyed struct{}

func (unkeyed) Durable(*Delta) (keystore.Marker, error) { return keystore.Marker{}, nil }
func (unkeyed) Settle(*Delta, keystore.Marker)          {}
func (unkeyed) Decode([]byte) (*Delta, error)           { return nil, nil }
func (unkeyed) Reset() error                            { return nil }

func (h *plainHolder) Observe(_ []byte, in *Input, y float64, labelled bool) (online.Prediction, int64) {
	p := in.observe(h.m, h.prep, y, labelled)
	if labelled {
		h.fig.Examples.Store(h.m.Examples())
		if h.fig.BWWanted.Load() { // a scrape asked: at most one snapshot per scrape
			h.fig.BWWanted.Store(false)
			h.fig.snapshotBandwidths(h.m)
		}
	}
	return p, versionOf(p, h.m)
}

func (h *plainHolder) Find([]byte) online.Model { return h.m }

func (h *plainHolder) Peek(inst online.Model, in *Input) (online.Prediction, int64) {
	p := in.peek(inst)
	return p, versionOf(p, inst)
}

func (h *plainHolder) Attach(int) { h.spec.Version.Set(float64(h.m.Version())) }
func (h *plainHolder) Detach(int) {}
