package stream

import (
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/refit"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/wire"
)

// DLQ header names. A dead-lettered record keeps the input's key and value
// unchanged and says why in these headers.
const (
	HeaderReason    = "streamer.reason"    // a wire.Reason, e.g. "wrong_dimension"
	HeaderDetail    = "streamer.detail"    // human-readable detail, e.g. "got 3 features, want 2"
	HeaderTopic     = "streamer.topic"     // source topic
	HeaderPartition = "streamer.partition" // source partition (decimal)
	HeaderOffset    = "streamer.offset"    // source offset (decimal)
	// HeaderOriginalBytes is on a dead letter whose value was cut to fit
	// the dead-letter topic's max.message.bytes: the value's length as
	// received (decimal). The value kept is its first bytes.
	HeaderOriginalBytes = "streamer.original_bytes"
)

// NamedModel is a configured model instance.
type NamedModel struct {
	Name        string
	Model       online.Model
	Fingerprint string // of the model's configuration: state is restored only into an identically configured model
	// Traits of the model's type and parameters (online.Type.Traits): how
	// it is judged and whether its bound is checked. The zero value is a
	// classifier, checked against its bound if it is an online.Bounder.
	Traits online.Traits

	// Factory, when set, makes the model key-scoped: one instance per
	// event key, built by Factory, at most MaxKeys in memory (least
	// recently used first out, to the key store). Model is then an
	// instance that only answers Type, Dim and Label.
	Factory func() (online.Model, error)
	MaxKeys int

	// New builds an empty instance like Model: every shard but the first
	// gets its own (EngineConfig.Partitioned: one per input partition).
	New func() (online.Model, error)

	// Members are the indexes, in the engine's list, of the models whose
	// predictions this one aggregates (online.Aggregator), each before it
	// in the list. Its input is their predictions' signs, then the event's
	// features: dimension len(Members) + EngineConfig.Dim.
	Members []int

	// Label maps the wire label before Model.Label (nil: none): a
	// condition for a classifier, edges for an ordinal model.
	Label *online.LabelMap
	// Fallback names a global model before this key-scoped one: until a
	// key's own instance decides, its records carry the fallback's answer
	// (fallback.go). "" = none.
	Fallback string
}

// EngineConfig configures an Engine.
type EngineConfig struct {
	OutputTopic     string
	DLQTopic        string
	Dim             int      // input dimension shared by all models
	FeatureNames    []string // optional: names for object-form features
	Rows            int      // > 0: features may also come as a matrix of Rows rows (features.shape)
	MaxMessageBytes int      // larger input values are dead-lettered (0 = no limit)
	MaxFeatureAbs   float64  // events with a feature beyond ±this are dead-lettered as out_of_range (0 = no bound)
	AccuracyWindow  int      // events in the prequential accuracy window

	// Delayed labels: with JoinEvents > 0, unlabelled events with an id are
	// kept (at most JoinEvents of them per shard, each at most JoinTime when
	// > 0) until a label-only event with their id arrives; the models learn
	// then. The items ranking requests show wait in a window of their own
	// (RankConfig.JoinEvents).
	JoinEvents int
	JoinTime   time.Duration

	// MergeLanes says whether, in instance scope, the partitions' lanes
	// learn a mergeable global mam in parallel, each into statistics and
	// a merged view of its own (mergingHolder), or take turns at the one
	// instance behind its lock, scoring each event exactly as one model
	// that learned the events before it in the order the lanes brought
	// them. The view saves the cores' time of the lock and of moving the
	// model's state between them with every event, and costs a second
	// learning of each event and the merges: on two vCPUs, with no broker
	// in the bench, rbf D = 256 lost 9% and linear d = 32 was unchanged,
	// so MergeLanesAuto (the default) takes it with more than two
	// GOMAXPROCS.
	MergeLanes MergeLanes

	// Partitioned keeps model state per input partition, for scale-out:
	// every shard is one partition's state (see merged.go for the models
	// that score with the merge of all partitions); every NamedModel needs
	// New.
	Partitioned bool

	// KeyStore holds the state of key-scoped models beyond what is in
	// memory; nil: the engine opens an in-memory one when a model is
	// key-scoped (lost at exit: for tests and services without snapshots).
	KeyStore *keystore.DB
	// LegacyKeyDir is where an earlier version wrote the evicted instances
	// of key-scoped models (snapshot.dir/keys): keys the key store does not
	// have are read from there once, and move to the key store at the next
	// checkpoint. "" when there is none.
	LegacyKeyDir string
	// KeyHold bounds the bytes of changed keys' states a key-scoped model
	// holds, once evicted, until the next checkpoint writes them to the
	// key store: beyond it the engine asks for a checkpoint early
	// (CheckpointWanted). Default 32 MiB.
	KeyHold int

	// Rank: ranking requests (rank.go); Rank.Model "" = off.
	Rank RankConfig
	// Calibration: calibrated certainty (calibration.go); Window 0 = off.
	Calibration CalibrationConfig
	// Hash: hashed categorical features (hashed.go); nil = dense features.
	// Dim is then 2^Hash.Bits.
	Hash *wire.HashConfig

	// MemoryLimit is the memory the key-scoped models' instances in memory
	// may take at most (checkKeyMemory): 0 = the process's GOMEMLIMIT when
	// set, else the machine's memory (/proc/meminfo); < 0 = no check.
	MemoryLimit int64

	// AllowKeyLoss (--allow-empty-state) lets a restore rebuild a
	// key-scoped model's table that does not belong to the snapshot, with
	// nothing else to rebuild it from, from the snapshot's own keys: the
	// others' states are lost (keyedModels.restoreTable).
	AllowKeyLoss bool
	// Log receives what key-scoped models report: failed keys, rebuilt
	// tables (nil: discarded).
	Log *slog.Logger
}

// Engine is the scoring state machine: for each input event it decodes and
// validates the event, and for every model scores it, publishes the score
// with its certainty bound, and learns from the event when it is labelled.
// An event that fails validation for any model goes to the dead-letter topic
// and reaches no model.
//
// The Engine holds what its shards share: the models' definitions, metrics
// and prequential quality. The state is in shards (NewShard): in instance
// scope one shard for all the instance's partitions, applied to by a lane
// per partition (Shard.lane), in partition scope one per partition. Shards
// are independent and run in parallel. The per-event work that needs no
// state — decoding, validation and the models' preparation (the feature
// maps) — runs in a Worker, one per partition reader, outside any shard's
// lock.
type Engine struct {
	cfg  EngineConfig
	defs []*modelDef
	met  *engineMetrics
	keys *keystore.DB
	own  bool // keys was opened here
	now  func() time.Time

	mu      sync.Mutex
	shards  map[*Shard]struct{}
	started bool // Start was called: new shards start their refits
	built   int  // shards built

	hashed  *hashStats // hashed features' collision estimate (nil: dense features)
	rankIdx int        // the rank model's index in defs (-1: requests off)
	ope     *opeStats  // off-policy estimates from the labels of requests' first items

	joinWaiting [2]atomic.Int64                // by joinSource: events waiting in every shard's join buffers
	wantCkpt    atomic.Bool                    // a key-scoped model holds more than KeyHold
	refits      atomic.Pointer[[]*refit.Model] // every shard's models refitted in the background (read per event without a lock)
}

// NewEngine builds an engine over the given models. All models must take
// inputs of dimension cfg.Dim.
func NewEngine(cfg EngineConfig, models []NamedModel, reg prometheus.Registerer) (*Engine, error) {
	if len(models) == 0 {
		return nil, errors.New("stream: engine needs at least one model")
	}
	if cfg.AccuracyWindow <= 0 {
		cfg.AccuracyWindow = 1000
	}
	if c := &cfg.Calibration; c.Window > 0 {
		if c.Every <= 0 {
			c.Every = 100
		}
		if !(c.Delta > 0 && c.Delta < 1) {
			c.Delta = 0.1
		}
	}
	if cfg.KeyHold <= 0 {
		cfg.KeyHold = 32 << 20
	}
	rankIdx, err := checkEngine(&cfg, models)
	if err != nil {
		return nil, err
	}
	e := &Engine{cfg: cfg, met: newEngineMetrics(reg), now: time.Now, keys: cfg.KeyStore, shards: map[*Shard]struct{}{},
		rankIdx: rankIdx, ope: &opeStats{}}
	for _, nm := range models {
		d, err := newModelDef(nm, cfg, e.met)
		if err != nil {
			return nil, fmt.Errorf("stream: model %s: %w", nm.Name, err)
		}
		if nm.Factory != nil && e.keys == nil {
			if e.keys, err = keystore.Open("", nil); err != nil {
				return nil, fmt.Errorf("stream: %w", err)
			}
			e.own = true
		}
		e.defs = append(e.defs, d)
	}
	fallbacks, _ := checkFallbacks(models) // checked by checkEngine
	for i, j := range fallbacks {
		if d := e.defs[i]; j >= 0 {
			d.fallback = j
			e.defs[j].keepRec = true
			if e.defs[j].traits.Kind != d.traits.Kind { // an ordinal model on a regression model's value
				d.fbBins = d.label
			}
		}
	}
	if rankIdx >= 0 && usesStats(cfg.Rank.Policy) {
		// Every key of the rank model keeps its exploration statistics.
		d := e.defs[rankIdx]
		d.keyFactory = exploreFactory(d.keyFactory, cfg.Dim)
	}
	if cfg.Hash != nil {
		e.hashed = newHashStats(cfg.Hash.Bits, reg)
	}
	if reg != nil {
		reg.MustRegister(&stateCollector{e: e}, &keyFaultCollector{e: e})
		if rankIdx >= 0 {
			reg.MustRegister(newOPECollector(e.ope))
		}
	}
	return e, nil
}

// CheckEngine reports whether NewEngine would refuse cfg and models (what
// hashed features, ranking requests and partition scope do not go with,
// dimensions, members), building nothing: the service calls it before it
// connects to the brokers.
func CheckEngine(cfg EngineConfig, models []NamedModel) error {
	if len(models) == 0 {
		return errors.New("stream: engine needs at least one model")
	}
	_, err := checkEngine(&cfg, models)
	return err
}

// checkEngine checks cfg (setting the rank defaults) against models and
// returns the rank model's index (-1: requests off).
func checkEngine(cfg *EngineConfig, models []NamedModel) (int, error) {
	if _, err := wire.NewDecoder(cfg.Dim, cfg.FeatureNames, cfg.MaxMessageBytes); err != nil {
		return 0, fmt.Errorf("stream: %w", err)
	}
	if cfg.Rows < 0 || (cfg.Rows > 0 && cfg.Dim%cfg.Rows != 0) {
		return 0, fmt.Errorf("stream: %d rows do not divide dimension %d", cfg.Rows, cfg.Dim)
	}
	rankIdx, err := checkRank(cfg, models)
	if err != nil {
		return 0, err
	}
	if _, err := checkFallbacks(models); err != nil {
		return 0, err
	}
	if err := checkHashed(*cfg, models); err != nil {
		return 0, err
	}
	if cfg.Hash != nil {
		d, _ := wire.NewDecoder(cfg.Dim, nil, cfg.MaxMessageBytes)
		if d == nil || cfg.Dim != 1<<cfg.Hash.Bits {
			return 0, fmt.Errorf("stream: hashed features: dimension %d, want 2^%d", cfg.Dim, cfg.Hash.Bits)
		}
		if _, err := d.WithHashing(*cfg.Hash); err != nil {
			return 0, fmt.Errorf("stream: %w", err)
		}
	}
	for i, nm := range models {
		if want := len(nm.Members) + cfg.Dim; nm.Model.Dim() != want {
			return 0, fmt.Errorf("stream: model %s: dimension %d, want %d", nm.Name, nm.Model.Dim(), want)
		}
		for _, j := range nm.Members {
			if j < 0 || j >= i {
				return 0, fmt.Errorf("stream: model %s: member %d is not a model before it", nm.Name, j)
			}
			if models[j].Factory != nil || nm.Factory != nil {
				return 0, fmt.Errorf("stream: model %s: members and the model aggregating them must be global", nm.Name)
			}
		}
		if cfg.Partitioned && nm.New == nil {
			return 0, fmt.Errorf("stream: model %s: partitioned state needs NamedModel.New", nm.Name)
		}
		if err := checkKeyMemory(cfg, nm); err != nil {
			return 0, err
		}
	}
	return rankIdx, nil
}

// Models returns the configured models' prototypes (for inspection): in
// instance scope the first shard's instances. The caller must not use them
// concurrently with processing.
func (e *Engine) Models() []NamedModel {
	out := make([]NamedModel, len(e.defs))
	for i, d := range e.defs {
		out[i] = NamedModel{Name: d.name, Model: d.proto, Fingerprint: d.fingerprint}
	}
	return out
}

// Start starts the background work (refits) of the shards' models, and of
// every shard made from now on.
func (e *Engine) Start() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.started = true
	for s := range e.shards {
		s.start()
	}
}

// Close stops the models' background work (a refit in progress is
// cancelled and the serving version stays) and closes a key store the
// engine opened.
func (e *Engine) Close() {
	e.mu.Lock()
	shards := make([]*Shard, 0, len(e.shards))
	for s := range e.shards {
		shards = append(shards, s)
	}
	e.mu.Unlock()
	for _, s := range shards {
		s.stop()
	}
	if e.own {
		_ = e.keys.Close()
	}
}

// Refitting reports whether any model is refitting now. It takes no lock.
func (e *Engine) Refitting() bool {
	if l := e.refits.Load(); l != nil {
		for _, r := range *l {
			if r.Refitting() {
				return true
			}
		}
	}
	return false
}

// relist rebuilds the list Refitting reads after the shards changed; e.mu
// must be held.
func (e *Engine) relist() {
	var l []*refit.Model
	for s := range e.shards {
		for _, m := range s.models {
			if r := refitOf(m.h.instance()); r != nil {
				l = append(l, r)
			}
		}
	}
	e.refits.Store(&l)
}

// CheckpointWanted reports, once, that a key-scoped model holds more
// changed keys than EngineConfig.KeyHold allows until the next checkpoint:
// the pipeline then checkpoints early.
func (e *Engine) CheckpointWanted() bool {
	return e.wantCkpt.Load() && e.wantCkpt.CompareAndSwap(true, false)
}

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
	dec, _ := wire.NewDecoder(e.cfg.Dim, e.cfg.FeatureNames, e.cfg.MaxMessageBytes) // checked by NewEngine
	dec = dec.WithMaxAbs(e.cfg.MaxFeatureAbs)
	if e.cfg.Rows > 0 {
		dec = dec.WithShape(e.cfg.Rows)
	}
	if e.cfg.JoinEvents > 0 {
		dec = dec.WithLabelOnly()
	}
	if e.rankIdx >= 0 {
		dec = dec.WithRequests(e.cfg.Rank.MaxCandidates)
	}
	if e.cfg.Hash != nil {
		dec, _ = dec.WithHashing(*e.cfg.Hash) // checked by NewEngine
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

// workerBytes is about the memory of a Worker: its decoded features and
// every model's preparation of them.
func (e *Engine) workerBytes() int {
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

// Shard is one unit of state: every model's state for a set of input
// partitions (all of an instance's in instance scope, one in partition
// scope), with the scratch of its per-event path. A shard is applied to by
// one goroutine at a time; an instance-scope shard's lanes (lane) apply to
// its state in parallel, and Capture, Restore, Settle and Close need every
// lane paused (the pipeline holds the shard's lock exclusively). Different
// shards run in parallel.
type Shard struct {
	e      *Engine
	scope  string // "" instance scope; the partition number in partition scope
	part   int    // partition scope: the partition (-1 in instance scope)
	models []*shardModel
	labels []float64
	preds  []online.Prediction
	rec    wire.Score
	recs   []wire.Score // per model: its record for the event being applied, kept for the models others fall back on
	idBuf  []byte
	join   *joinBuffer  // the stream's impressions (nil: delayed labels off)
	shown  *joinBuffer  // the items ranking requests showed (nil: delayed labels or requests off, or rank JoinEvents < 0)
	jmu    *sync.Mutex  // guards join and shown, which an instance-scope shard's lanes share
	in     input        // the event's features as the models take them (shardModel.feed)
	rk     *rankScratch // ranking requests' scratch (nil until the first)
	stream uint64       // the exploration draws' stream (rankScratch)
	runs   bool         // an applier's (lane or partition shard; applies): judged and scores wait for endRun
	judged []judgement  // the run's labelled events' predictions
	scores []int        // per model: the run's published predictions
	w      *Worker      // Process's
	closed bool
}

// shardModel is one model's state in one shard: its holder (holder.go),
// and what the shard's per-event path keeps for it.
type shardModel struct {
	def   *modelDef
	h     holder
	in    []float64           // an aggregator's input: the members' predictions, then the features
	view  input               // the input h takes (feed)
	bound prometheus.Observer // an applier's (Shard.applies): its partition's shard of the model's mistake-bound histogram

	figures // for the scrape (stateCollector)
}

// input returns what the model observes for an event with features x,
// when preds are the shard's models' predictions for it so far: x, or for
// an aggregator its members' predicted classes followed by x.
func (m *shardModel) input(x []float64, preds []online.Prediction) []float64 {
	if m.in == nil {
		return x
	}
	ms := m.def.members
	for k, j := range ms {
		m.in[k] = float64(preds[j].Label)
	}
	copy(m.in[len(ms):], x)
	return m.in
}

// feed returns the input the model takes for the event in (shared by the
// models): in with prep, the worker's preparation for this model (nil:
// none), and for an aggregator its input (preds: the shard's models'
// predictions so far).
func (m *shardModel) feed(in *input, prep []float64, preds []online.Prediction) *input {
	v := &m.view
	*v = *in
	v.prep = prep
	if m.in != nil {
		v.x = m.input(in.x, preds)
	}
	return v
}

// peek scores in with the model's instance for key without changing any
// state (holder.find, then holder.peek).
func (m *shardModel) peek(key []byte, in *input) (online.Prediction, int64) {
	mu := m.lock(key)
	defer unlock(mu)
	return m.h.peek(m.h.find(key), in)
}

// observe is h.observe, behind the lock of key's state when the shard's
// lanes share the holder.
func (m *shardModel) observe(key []byte, in *input, y float64, labelled bool) (online.Prediction, int64) {
	mu := m.lock(key)
	p, v := m.h.observe(key, in, y, labelled)
	unlock(mu)
	return p, v
}

// lock takes the lock of key's state in the holder when the shard's lanes
// share it (holder.mutex), and returns it for unlock.
func (m *shardModel) lock(key []byte) *sync.Mutex {
	mu := m.h.mutex(key)
	if mu != nil {
		mu.Lock()
	}
	return mu
}

func unlock(mu *sync.Mutex) {
	if mu != nil {
		mu.Unlock()
	}
}

// counts are the model's figures in the shard for the scrape: examples,
// and a key-scoped model's keys in memory and in the key store.
func (m *shardModel) counts() (examples, hot, stored int64) {
	switch h := m.h.(type) {
	case *keyedHolder:
		return h.counts()
	case *mergingHolder:
		return h.counts(), 0, 0
	}
	return m.examples.Load(), m.hot.Load(), m.stored.Load()
}

// NewShard returns an empty shard for scope: "" (instance scope: every
// partition of the instance) or an input partition's number (partition
// scope). Call Restore before processing, with the saved state or nil.
func (e *Engine) NewShard(scope string) (*Shard, error) {
	s := &Shard{e: e, scope: scope, part: -1, jmu: new(sync.Mutex),
		labels: make([]float64, len(e.defs)), preds: make([]online.Prediction, len(e.defs)), recs: make([]wire.Score, len(e.defs))}
	if scope != "" {
		p, err := strconv.Atoi(scope)
		if err != nil || p < 0 {
			return nil, fmt.Errorf("stream: shard scope %q is not a partition", scope)
		}
		s.part = p
		s.stream = uint64(p + 1)
	}
	if e.cfg.JoinEvents > 0 {
		s.join = newJoinBuffer(e.joinConfig(srcImpressions))
		if e.rankIdx >= 0 && e.cfg.Rank.JoinEvents > 0 {
			s.shown = newJoinBuffer(e.joinConfig(srcRequests))
		}
	}
	e.mu.Lock()
	first := e.built == 0
	e.built++
	e.mu.Unlock()
	models, err := e.buildModels(s, first)
	if err != nil {
		return nil, err
	}
	if scope == "" {
		// Instance scope: the partitions' lanes share the holders, and the
		// judge reads the first shard's instances' bounds (the configured
		// models themselves) behind the same locks.
		for _, m := range models {
			m.h.share()
			if d, mu := m.def, m.h.mutex(nil); first && d.bound != nil && d.merged == nil && mu != nil {
				d.bound = &lockedBounder{mu: mu, b: d.bound}
			}
		}
	}
	s.models = models
	s.w = e.NewWorker()
	return s, nil
}

// MergeLanes is EngineConfig.MergeLanes.
type MergeLanes int

const (
	MergeLanesAuto MergeLanes = iota // with GOMAXPROCS > 2
	MergeLanesOn
	MergeLanesOff
)

// ParseMergeLanes reads "auto", "on" or "off".
func ParseMergeLanes(s string) (MergeLanes, error) {
	switch s {
	case "auto":
		return MergeLanesAuto, nil
	case "on":
		return MergeLanesOn, nil
	case "off":
		return MergeLanesOff, nil
	}
	return 0, fmt.Errorf("merge lanes %q: want auto, on or off", s)
}

// mergeLanes says whether instance scope's lanes learn mergeable models
// in parallel (EngineConfig.MergeLanes).
func (e *Engine) mergeLanes() bool {
	switch e.cfg.MergeLanes {
	case MergeLanesOn:
		return true
	case MergeLanesOff:
		return false
	}
	return runtime.GOMAXPROCS(0) > 2
}

// lockedBounder is a model's bound read behind the lock its holder's
// users take (holder.mutex).
type lockedBounder struct {
	mu *sync.Mutex
	b  online.Bounder
}

func (l *lockedBounder) Bound(rho float64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Bound(rho)
}

// lane returns a lane of s, an instance-scope shard, for the applier of
// input partition part: a shard that applies events to s's state (its
// holders and join buffers, each behind its own lock) with scratch of its
// own, so that the instance's partitions apply their events in parallel.
// Each model takes one event at a time, in the order its lanes bring them:
// a partition's events in offset order, as in a shard of its own; a
// key-scoped model's keys live in one partition each, so every key's
// instance sees exactly the events it would see applied serially. Capture,
// Restore, Durable, Settle and Close are s's: the pipeline calls them with
// every lane paused.
func (s *Shard) lane(part int) *Shard {
	e := s.e
	l := &Shard{e: e, scope: s.scope, part: s.part, join: s.join, shown: s.shown, jmu: s.jmu, stream: uint64(part + 1),
		labels: make([]float64, len(e.defs)), preds: make([]online.Prediction, len(e.defs)), recs: make([]wire.Score, len(e.defs))}
	l.models = make([]*shardModel, len(s.models))
	for i, m := range s.models {
		lm := &shardModel{def: m.def, h: m.h}
		if mh, ok := m.h.(*mergingHolder); ok {
			lm.h = mh.laneFor() // statistics and a view of its own
		}
		if m.in != nil {
			lm.in = make([]float64, len(m.in))
		}
		l.models[i] = lm
	}
	return l
}

// idle tells the lane's holders that its applier found no event waiting
// (the shard's lock held shared): a lane's statistics of a mergeable
// global model are published (mergingHolder).
func (l *Shard) idle() { l.eachLaneMAM((*laneMAM).idle) }

// waited tells the lane's holders that its applier then waited d for its
// next event.
func (l *Shard) waited(d time.Duration) { l.eachLaneMAM(func(lh *laneMAM) { lh.waited(d) }) }

// leave ends lane l (the shard's lock held exclusively): what its
// partition's events taught a mergeable global model goes into the
// shard's state (mergingHolder).
func (l *Shard) leave() { l.eachLaneMAM((*laneMAM).leave) }

// eachLaneMAM calls fn with each of the lane's holders of a mergeable
// global model.
func (l *Shard) eachLaneMAM(fn func(*laneMAM)) {
	for _, m := range l.models {
		if lh, ok := m.h.(*laneMAM); ok {
			fn(lh)
		}
	}
}

// buildModels makes empty instances of every model for shard s.
func (e *Engine) buildModels(s *Shard, first bool) ([]*shardModel, error) {
	out := make([]*shardModel, len(e.defs))
	for i, d := range e.defs {
		sm := &shardModel{def: d}
		if len(d.members) > 0 {
			sm.in = make([]float64, len(d.members)+e.cfg.Dim)
		}
		h, err := e.newHolder(s, d, first, &sm.figures)
		if err != nil {
			return nil, fmt.Errorf("stream: model %s: %w", d.name, err)
		}
		sm.h = h
		if r := refitOf(h.instance()); r != nil {
			r.OnRefit(d.onRefit)
		}
		out[i] = sm
	}
	return out, nil
}

// newHolder builds model d's holder in shard s (first: the engine's first
// shard): key-scoped, merged, or one plain instance.
func (e *Engine) newHolder(s *Shard, d *modelDef, first bool, fig *figures) (holder, error) {
	if d.keyFactory != nil {
		return e.newKeyedHolder(s, d, fig)
	}
	var m online.Model
	if first && !e.cfg.Partitioned {
		m = d.proto // instance scope: the configured instance itself
		if g, ok := m.(*online.MAM); ok && g.Mergeable() && e.mergeLanes() {
			return newMergingHolder(d, fig, g), nil // learned by the lanes in parallel
		}
	} else {
		var err error
		if m, err = d.newInst(); err != nil {
			return nil, err
		}
	}
	if d.mergeable {
		own, ok := m.(*online.MAM)
		if !ok {
			return nil, fmt.Errorf("partition instance is a %T, want *online.MAM", m)
		}
		return &mergedHolder{single: single{def: d, fig: fig, m: own}, own: own, s: d.merged}, nil
	}
	h := &plainHolder{single: single{def: d, fig: fig, m: m}}
	if d.prep != nil {
		h.prep, _ = m.(online.Preparer)
	}
	return h, nil
}

func (s *Shard) start() {
	for _, m := range s.models {
		if r := refitOf(m.h.instance()); r != nil {
			r.Start()
		}
	}
}

func (s *Shard) stop() {
	for _, m := range s.models {
		if r := refitOf(m.h.instance()); r != nil {
			_ = r.Close()
		}
	}
}

// Close releases the shard (its partition was revoked, after its final
// checkpoint): refits stop, and a mergeable model keeps the partition's
// statistics as its remote state until a newer one arrives. The key store
// keeps the shard's table (the partition may come back).
func (s *Shard) Close() {
	if s.closed {
		return
	}
	s.closed = true
	s.stop()
	if s.join != nil {
		s.e.joinMoved(srcImpressions, -s.join.pending())
	}
	if s.shown != nil {
		s.e.joinMoved(srcRequests, -s.shown.pending())
	}
	for _, m := range s.models {
		m.h.detach(s.part)
		m.examples.Store(0)
		m.hot.Store(0)
		m.stored.Store(0)
	}
	s.e.mu.Lock()
	delete(s.e.shards, s)
	s.e.relist()
	s.e.mu.Unlock()
}

// Process decodes msg and applies it (Worker.Prepare, then Apply) with the
// shard's own worker.
func (s *Shard) Process(msg *kafka.Message, out Sink) {
	s.w.Prepare(msg)
	s.Apply(s.w, msg, out)
}

// Apply scores, publishes and learns the event w prepared from msg: the
// part of the per-event work that reads and changes the shard's state.
func (s *Shard) Apply(w *Worker, msg *kafka.Message, pub Sink) {
	s.ApplyAt(w, msg, pub, s.e.now())
}

// ApplyAt is Apply at time now (scored_at, the delayed labels' clock),
// for a caller that has just read the clock anyway (the pipeline's
// applier, timing its events).
func (s *Shard) ApplyAt(w *Worker, msg *kafka.Message, pub Sink, now time.Time) {
	if err := w.err; err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			s.e.reject(msg, pub, we.Reason, we.Detail)
		} else {
			s.e.reject(msg, pub, wire.ReasonNotJSON, err.Error())
		}
		return
	}
	ev := &w.ev
	if ev.HasLabel {
		for i, d := range s.e.defs {
			y, ok := d.proto.Label(d.label.Map(ev.Label))
			if !ok {
				s.e.reject(msg, pub, wire.ReasonBadLabel,
					fmt.Sprintf("label %v is not in model %s's label set", ev.Label, d.name))
				return
			}
			s.labels[i] = y
		}
	}
	if !ev.HasFeatures {
		// A label: for an impression, or (with an item) for an item a
		// ranking request showed, kept apart.
		id, src := ev.ID, srcImpressions
		if ev.Item != nil {
			s.idBuf = itemID(s.idBuf[:0], ev.ID, ev.Item)
			id, src = s.idBuf, srcRequests
		}
		s.lateLabel(src, id, msg.Key, ev.Label, now.UnixNano())
		return
	}
	id := ev.ID
	if !ev.HasID {
		// No id in the event: its position in the log is a unique id.
		s.idBuf = append(s.idBuf[:0], msg.Topic...)
		s.idBuf = append(s.idBuf, ':')
		s.idBuf = strconv.AppendInt(s.idBuf, int64(msg.Partition), 10)
		s.idBuf = append(s.idBuf, ':')
		s.idBuf = strconv.AppendInt(s.idBuf, msg.Offset, 10)
		id = s.idBuf
	}
	if ev.IsRequest {
		s.request(ev, msg, id, pub, now)
		return
	}
	key := msg.Key
	if len(key) == 0 {
		key = ev.Key
	}
	ob, _ := pub.(*outbox) // the pipeline's: its records are encoded off this goroutine
	in := &s.in
	if s.e.cfg.Hash != nil {
		s.e.hashed.add(ev.Hash, ev.Idx)
		in.setHashed(ev.Idx, ev.Val, ev.Field)
	} else {
		in.setDense(ev.Features)
	}
	for i, m := range s.models {
		var prep []float64
		if w.prepared {
			prep = w.prep[i]
		}
		p, version := m.observe(msg.Key, m.feed(in, prep, s.preds), s.labels[i], ev.HasLabel)
		d := m.def
		r := &s.rec
		*r = wire.Score{
			ID: id, Key: key, Model: d.name, Version: version,
			Score: p.Score, Prediction: p.Label, Probability: p.Probability, HasProbability: p.HasProbability,
			HasBound: p.HasBound, MistakeBound: p.MistakeBound, Delta: p.Delta, N: p.N,
			EventTS: ev.TS, ScoredAt: now,
		}
		if d.traits.Kind == online.Regression && p.HasValue {
			r.Value, r.HasValue = p.Value, true
		}
		decided := d.decided(&p)
		if c := d.cal; c != nil && (decided || d.traits.Kind == online.Classifier) {
			// An ordinal model's expected label goes to p.Value too, for the judge.
			if x, ok := c.certainty(&p, &r.Calibrated); ok {
				r.Expected, r.HasExpected = x, true
			}
		}
		if !decided && d.fallback >= 0 {
			d.fallbackRecord(r, &s.recs[d.fallback])
		}
		if d.keepRec {
			s.recs[i] = *r
		}
		s.preds[i] = p
		publishScore(pub, ob, s.e.cfg.OutputTopic, msg.Key, r)
		s.scored(m, i, p)
		if ev.HasLabel {
			s.judge(i, p, s.labels[i], ev.Label, s.preds)
		}
	}
	if !ev.HasLabel && ev.HasID && s.join != nil {
		s.jmu.Lock()
		defer s.jmu.Unlock()
		before := s.join.pending()
		var d joinDrops
		if s.e.cfg.Hash != nil {
			_, d = s.join.putSparse(ev.ID, key, ev.Idx, ev.Val, ev.Field, s.preds, now.UnixNano())
		} else {
			_, d = s.join.put(ev.ID, key, ev.Features, s.preds, now.UnixNano())
		}
		s.e.joinDropped(srcImpressions, d)
		s.e.joinMoved(srcImpressions, s.join.pending()-before)
	}
}

// judgement is model i's prediction p for a labelled event (label y, raw
// on the wire; pub the prediction published), waiting in an applier's
// shard for endRun.
type judgement struct {
	model  int
	p, pub online.Prediction
	y, raw float64
}

// judge judges model i's prediction p for an event (its label y, raw on
// the wire; preds every model's predictions for it) with modelDef.judge,
// or in an applier's shard keeps it for endRun.
func (s *Shard) judge(i int, p online.Prediction, y, raw float64, preds []online.Prediction) {
	d := s.models[i].def
	if !s.runs {
		d.judge(p, y, raw, preds)
		return
	}
	s.judged = append(s.judged, judgement{model: i, p: p, pub: d.published(p, preds), y: y, raw: raw})
}

// applies makes s the shard (or lane) input partition part's applier
// applies events to: it counts and judges them a run at a time (endRun),
// and observes the bounds it publishes into the partition's shard of the
// histogram.
func (s *Shard) applies(part int) {
	s.runs = true
	s.scores = make([]int, len(s.models))
	for _, m := range s.models {
		m.bound = s.e.met.bound.shard(m.def.name, part)
	}
}

// scored records model m's (the i-th) published prediction p: at once
// (modelDef.scored), or in an applier's run, counted for endRun and its
// bound observed into the partition's shard.
func (s *Shard) scored(m *shardModel, i int, p online.Prediction) {
	if !s.runs {
		m.def.scored(p)
		return
	}
	s.scores[i]++
	if p.HasBound {
		m.bound.Observe(p.MistakeBound)
	}
}

// endRun ends the run of events an applier applied: the models' counts
// of published predictions move once, and the predictions it kept
// (judge) are judged, each model's under one hold of its judge's lock.
// The appliers of an instance's partitions share every model's judge (its
// prequential quality and calibration window) and counters, and would
// otherwise queue at the lock, and contend for the counters' cache
// lines, once per event.
func (s *Shard) endRun() {
	for i, n := range s.scores {
		if n > 0 {
			s.models[i].def.met.scored.Add(float64(n))
			s.scores[i] = 0
		}
	}
	if len(s.judged) == 0 {
		return
	}
	for i, m := range s.models {
		d, n := m.def, 0
		b := d.bound
		if lb, ok := m.h.(interface{ bounder() online.Bounder }); ok && b != nil {
			b = lb.bounder() // a lane's view (mergingHolder)
		}
		for k := range s.judged {
			if j := &s.judged[k]; j.model == i {
				if n == 0 {
					d.judgeMu.Lock()
				}
				d.judgeLocked(j.p, j.pub, j.y, j.raw, b)
				n++
			}
		}
		if n > 0 {
			d.judgeMu.Unlock()
			d.met.learned.Add(float64(n))
		}
	}
	s.judged = s.judged[:0]
}

// lateLabel learns from the event a label-only event labels (src: an
// impression, or an item a ranking request showed; raw: the wire label),
// judging the predictions published when it was scored.
func (s *Shard) lateLabel(src joinSource, id, key []byte, raw float64, now int64) {
	j := s.join // the decoder only accepts label-only events with one
	if src == srcRequests {
		j = s.shown
	}
	if j == nil { // shown items are not kept
		s.e.met.labelsUnknown.Inc()
		return
	}
	// Held until the models learned: the slot taken is free to the
	// other lanes' events once it is let go.
	s.jmu.Lock()
	defer s.jmu.Unlock()
	before := j.pending()
	sl, status, dropped := j.take(id, now)
	s.e.joinDropped(src, joinDrops{expired: dropped})
	s.e.joinMoved(src, j.pending()-before)
	switch status {
	case unknownID:
		s.e.met.labelsUnknown.Inc()
		return
	case tooLate:
		s.e.met.labelsLate.Inc()
		return
	}
	s.e.met.labelsJoined.Inc()
	in := &s.in
	if s.e.cfg.Hash != nil {
		in.setHashed(sl.idx, sl.val, sl.field)
	} else {
		in.setDense(sl.x)
	}
	for i, m := range s.models {
		m.observe(key, m.feed(in, nil, sl.preds), s.labels[i], true)
		s.judge(i, sl.preds[i], s.labels[i], raw, sl.preds)
	}
	if sl.ope.first {
		s.e.ope.add(sl.ope, s.e.reward(s.labels[s.e.rankIdx], raw))
	}
}

// joinSource is what a join buffer keeps: the stream's impressions
// (Shard.join) or the items ranking requests showed (Shard.shown).
type joinSource int

const (
	srcImpressions joinSource = iota
	srcRequests
)

// joinSources are the sources' names (the label source of the join
// metrics).
var joinSources = [...]string{"impressions", "requests"}

// joinConfig sizes a shard's join buffer for src.
func (e *Engine) joinConfig(src joinSource) joinConfig {
	c := joinConfig{events: e.cfg.JoinEvents, dim: e.cfg.Dim, models: len(e.defs), maxAge: int64(e.cfg.JoinTime)}
	if src == srcRequests {
		r := &e.cfg.Rank
		c.events, c.maxAge, c.perKey, c.entries = r.JoinEvents, int64(r.JoinTime), r.JoinPerKey, r.JoinEntries
	}
	if e.cfg.Hash != nil {
		c.dim = 0 // hashed entries (hashed.go)
	} else {
		c.entries = 0
	}
	return c
}

// joinMoved adds n events of src (n < 0: removes) to the count waiting in
// every shard's join buffers.
func (e *Engine) joinMoved(src joinSource, n int) {
	if n != 0 {
		e.met.joinPending[src].Set(float64(e.joinWaiting[src].Add(int64(n))))
	}
}

// joinDropped counts the events of src that left unlabelled.
func (e *Engine) joinDropped(src joinSource, d joinDrops) {
	c := &e.met.joinDropped[src]
	if d.full > 0 {
		c[0].Add(float64(d.full))
	}
	if d.expired > 0 {
		c[1].Add(float64(d.expired))
	}
	if d.quota > 0 {
		c[2].Add(float64(d.quota))
	}
}

func (e *Engine) reject(msg *kafka.Message, pub Sink, reason wire.Reason, detail string) {
	c, ok := e.met.rejectedBy[reason]
	if !ok {
		c = e.met.rejected.WithLabelValues(string(reason))
	}
	c.Inc()
	pub.Publish(kafka.Message{
		Topic: e.cfg.DLQTopic,
		Key:   msg.Key,
		Value: msg.Value,
		Headers: []kafka.Header{
			{Key: HeaderReason, Value: []byte(reason)},
			{Key: HeaderDetail, Value: []byte(detail)},
			{Key: HeaderTopic, Value: []byte(msg.Topic)},
			{Key: HeaderPartition, Value: strconv.AppendInt(nil, int64(msg.Partition), 10)},
			{Key: HeaderOffset, Value: strconv.AppendInt(nil, msg.Offset, 10)},
		},
	})
}

// refitOf returns the model refitted in the background that m is or wraps
// (a standardised one is wrapped), nil if there is none.
func refitOf(m online.Model) *refit.Model {
	if m == nil {
		return nil
	}
	r, _ := online.Unwrap[*refit.Model](m)
	return r
}

// Checkpoint is a shard's state captured at a pause: the models' encoded
// states for the shard's snapshot, and the key-scoped models' deltas,
// written to the key store once the snapshot is durable (Durable, Settle).
type Checkpoint struct {
	Models  []snapshot.Model
	deltas  []*keyDelta // per model; nil unless key-scoped
	markers []keystore.Marker
}

// Capture serialises the shard's state. The caller holds the shard's lock,
// so the state includes exactly the events before the offsets saved with
// it.
func (s *Shard) Capture() (*Checkpoint, error) {
	c := &Checkpoint{Models: make([]snapshot.Model, len(s.models)), deltas: make([]*keyDelta, len(s.models))}
	for i, m := range s.models {
		data, d, err := m.h.capture()
		c.deltas[i] = d
		if err != nil {
			return nil, fmt.Errorf("stream: capture model %s: %w", m.def.name, err)
		}
		c.Models[i] = snapshot.Model{Name: m.def.name, Type: m.def.proto.Type(), Fingerprint: m.def.fingerprint, Data: data}
	}
	return c, nil
}

// Durable writes the key deltas of c, whose snapshot is now durable, to
// the key store. It needs no lock; Settle, with the shard's lock, then
// marks the written keys clean, also after an error (of the models whose
// keys were not written: the others' are).
func (s *Shard) Durable(c *Checkpoint) error {
	c.markers = make([]keystore.Marker, len(s.models))
	var errs []error
	for i, m := range s.models {
		if d := c.deltas[i]; d != nil {
			mk, err := m.h.durable(d)
			if err != nil {
				// Not settled: the keys stay dirty and the next checkpoint
				// writes them again. The other models' writes go on, and
				// are settled: a model whose keys were written and not
				// settled would write the same checkpoint twice.
				c.deltas[i] = nil
				errs = append(errs, fmt.Errorf("stream: model %s: write keys to the key store: %w", m.def.name, err))
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
	for i, m := range s.models {
		if d := c.deltas[i]; d != nil {
			m.h.settle(d, c.markers[i])
			m.h.publish()
		}
	}
}

// KeySource returns the keys and states of a key-scoped model in a shard's
// scope as kept outside the key store (the changelog's key records): a
// shard rebuilds its table from them when the table does not belong to its
// snapshot (a partition that moved between instances, a new disk).
type KeySource func(model string) (keys, states [][]byte, err error)

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
	deltas := make([]*keyDelta, len(s.models))
	for i, m := range s.models {
		sv, ok := byName[m.def.name]
		if !ok || !m.def.accepts(sv) {
			continue
		}
		d, err := m.h.decode(sv.Data)
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
			if err := m.h.reset(); err != nil {
				return nil, nil, fmt.Errorf("stream: model %s: %w", m.def.name, err)
			}
			continue
		}
		if err := m.h.restore(sv.Data, deltas[i], src, s.e.cfg.AllowKeyLoss); err != nil {
			return nil, nil, fmt.Errorf("stream: restore model %s: %w", m.def.name, err)
		}
	}
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
		m.h.attach(s.part)
		m.h.publish()
	}
	return fresh, dropped, nil
}

// SetRemote sets the statistics of partition part, owned by another
// instance, from its latest snapshot (made durable at createdAt), and
// merges them into the models that score with the merge of all
// partitions. Partitions held here are left alone; the other models ignore
// remote state.
func (e *Engine) SetRemote(part int, saved []snapshot.Model, createdAt time.Time) error {
	for _, d := range e.defs {
		if d.merged == nil {
			continue
		}
		i := slices.IndexFunc(saved, func(s snapshot.Model) bool { return s.Name == d.name })
		if i < 0 || !d.accepts(saved[i]) {
			continue
		}
		inst, err := d.newInst()
		if err != nil {
			return err
		}
		if err := inst.UnmarshalBinary(saved[i].Data); err != nil {
			return fmt.Errorf("stream: model %s of partition %d: %w", d.name, part, err)
		}
		d.merged.setRemote(part, inst.(*online.MAM), createdAt)
	}
	return nil
}

// RemoteState reports how many partitions' remote statistics the merged
// models hold, and when the oldest of them was made durable.
func (e *Engine) RemoteState() (n int, oldest time.Time) {
	seen := map[int]bool{}
	for _, d := range e.defs {
		if d.merged == nil {
			continue
		}
		d.merged.mu.Lock()
		for part, at := range d.merged.remoteAt {
			seen[part] = true
			if oldest.IsZero() || at.Before(oldest) {
				oldest = at
			}
		}
		d.merged.mu.Unlock()
	}
	return len(seen), oldest
}

// stateCollector exports the gauges that sum over the shards, read at
// scrape time: every model's examples, and the key-scoped models' keys in
// memory and in the store.
type stateCollector struct{ e *Engine }

var (
	examplesDesc = prometheus.NewDesc("streamer_model_examples",
		"Examples the model has learned (its n; n_eff under decay), over every shard; a key-scoped model's over every key, in memory or not.", []string{"model"}, nil)
	keysDesc = prometheus.NewDesc("streamer_model_keys",
		"Key-scoped models: instances in memory.", []string{"model"}, nil)
	keysStoredDesc = prometheus.NewDesc("streamer_model_keys_stored",
		"Key-scoped models: keys in the embedded key store (as of the last checkpoint).", []string{"model"}, nil)
	bwGammaDesc = prometheus.NewDesc("streamer_model_bandwidth_gamma",
		"mam with kernel.gamma auto: each candidate bandwidth's gamma (bandwidth = its index, in increasing gamma).", []string{"model", "bandwidth"}, nil)
	bwErrorDesc = prometheus.NewDesc("streamer_model_bandwidth_error",
		"mam with kernel.gamma auto: each candidate bandwidth's prequential error over the recent window.", []string{"model", "bandwidth"}, nil)
	bwWeightDesc = prometheus.NewDesc("streamer_model_bandwidth_weight",
		"mam with kernel.gamma auto: each candidate bandwidth's weight in the scoring mixture.", []string{"model", "bandwidth"}, nil)
	bwChosenDesc = prometheus.NewDesc("streamer_model_bandwidth_chosen",
		"mam with kernel.gamma auto: the gamma of the bandwidth with the fewest recent mistakes.", []string{"model"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- examplesDesc
	ch <- keysDesc
	ch <- keysStoredDesc
	ch <- bwGammaDesc
	ch <- bwErrorDesc
	ch <- bwWeightDesc
	ch <- bwChosenDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.e
	e.mu.Lock()
	shards := make([]*Shard, 0, len(e.shards))
	for s := range e.shards {
		shards = append(shards, s)
	}
	e.mu.Unlock()
	for i, d := range e.defs {
		var n, hot, stored int64
		for _, s := range shards {
			e, h, st := s.models[i].counts()
			n, hot, stored = n+e, hot+h, stored+st
		}
		if d.merged != nil {
			n = d.merged.examples()
		}
		ch <- prometheus.MustNewConstMetric(examplesDesc, prometheus.GaugeValue, float64(n), d.name)
		if d.keyFactory != nil {
			ch <- prometheus.MustNewConstMetric(keysDesc, prometheus.GaugeValue, float64(hot), d.name)
			ch <- prometheus.MustNewConstMetric(keysStoredDesc, prometheus.GaugeValue, float64(stored), d.name)
		}
		// A gamma-auto model's bandwidths: the shard with the most
		// examples speaks for it (in instance scope, the only one).
		var bw *bandwidths
		var most int64 = -1
		for _, s := range shards {
			sm := s.models[i]
			sm.bwWanted.Store(true) // taken by a plain holder's next labelled event; the others take none
			if b := sm.bw.Load(); b != nil && sm.examples.Load() > most {
				bw, most = b, sm.examples.Load()
			}
		}
		if bw != nil {
			for b, c := range bw.cands {
				l := strconv.Itoa(b)
				ch <- prometheus.MustNewConstMetric(bwGammaDesc, prometheus.GaugeValue, c.Gamma, d.name, l)
				ch <- prometheus.MustNewConstMetric(bwErrorDesc, prometheus.GaugeValue, c.Error, d.name, l)
				ch <- prometheus.MustNewConstMetric(bwWeightDesc, prometheus.GaugeValue, c.Weight, d.name, l)
			}
			if bw.chosen >= 0 && bw.chosen < len(bw.cands) {
				ch <- prometheus.MustNewConstMetric(bwChosenDesc, prometheus.GaugeValue, bw.cands[bw.chosen].Gamma, d.name)
			}
		}
	}
}
