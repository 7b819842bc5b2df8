package engine

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
	"github.com/streamer/streamer/stream/holder"
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

// DeadLetterHeader is the value of header key of dead letter m ("" when
// it has none).
func DeadLetterHeader(m *kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

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
	// of an instance-scope engine gets its own (in partition scope, every
	// input partition's shard: Engine.NewShard).
	New func() (online.Model, error)

	// Members are the indexes, in the engine's list, of the models whose
	// predictions this one aggregates (online.Aggregator), each before it
	// in the list. Its input is their predictions' signs, then the event's
	// features: dimension len(Members) + Config.Dim.
	Members []int

	// Label maps the wire label before Model.Label (nil: none): a
	// condition for a classifier, edges for an ordinal model.
	Label *online.LabelMap
	// Fallback names a global model before this key-scoped one: until a
	// key's own instance decides, its records carry the fallback's answer
	// (fallback.go). "" = none.
	Fallback string

	// Residual (with a Fallback, a regression model): the key's instance
	// learns the label less the fallback's prediction for the event, and
	// its published score is the fallback's plus its own (residual.go).
	Residual bool

	// Use, with hashed features, names the namespaces whose features the
	// model takes (each listed in the hashing's Namespaces); nil: all.
	Use []string
}

// Config configures an Engine.
type Config struct {
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
	// (RankConfig.JoinEvents). JoinPerKey > 0 bounds the events of one
	// message key kept: one more is not kept (dropped, reason quota).
	JoinEvents int
	JoinTime   time.Duration
	JoinPerKey int

	// MergeLanes says whether, in instance scope, the partitions' lanes
	// learn a mergeable global mam in parallel, each into statistics and
	// a merged view of its own (holder.NewMerging), or take turns at the one
	// instance behind its lock, scoring each event exactly as one model
	// that learned the events before it in the order the lanes brought
	// them. The view saves the cores' time of the lock and of moving the
	// model's state between them with every event, and costs a second
	// learning of each event and the merges: on two vCPUs, with no broker
	// in the bench, rbf D = 256 lost 9% and linear d = 32 was unchanged,
	// so MergeLanesAuto (the default) takes it with more than two
	// GOMAXPROCS.
	MergeLanes MergeLanes

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

	// Profiles are the entities whose profiles the shards keep and join
	// (profiles.go); they need Hash.
	Profiles []ProfileConfig
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
// per partition (Shard.Lane), in partition scope one per partition. Shards
// are independent and run in parallel. The per-event work that needs no
// state — decoding, validation and the models' preparation (the feature
// maps) — runs in a Worker, one per partition reader, outside any shard's
// lock.
type Engine struct {
	cfg      Config
	defs     []*modelDef
	met      *engineMetrics
	keys     *keystore.DB
	ownsKeys bool // keys was opened here
	now      func() time.Time

	mu      sync.Mutex
	shards  map[*Shard]struct{}
	started bool // Start was called: new shards start their refits
	built   int  // shards built
	// Where the engine keeps state, bound by its first shard's scope or
	// by the first remote state (partition scope): scoped once bound,
	// partScope for state per input partition (bindLocked).
	scoped, partScope bool

	hashed *hashStats // hashed features' collision estimate (nil: dense features)

	profiles []*profileDef // the entities' profiles (profiles.go)
	fragDec  *wire.Decoder // decodes the profiles' rendered features (nil: no profiles)
	rankIdx  int           // the configured rank model's index in defs (-1: requests off)
	ope      *opeStats     // off-policy estimates from the labels of requests' first items
	// The model that ranks (the champion: rankIdx until a challenger is
	// promoted) and the challenger (-1: none), by index in defs
	// (challenger.go).
	champ, chal atomic.Int32

	joinWaiting [2]atomic.Int64                // by joinSource: events waiting in every shard's join buffers
	wantCkpt    atomic.Bool                    // a key-scoped model holds more than KeyHold
	refits      atomic.Pointer[[]*refit.Model] // every shard's models refitted in the background (read per event without a lock)
}

// New builds an engine over the given models. All models must take
// inputs of dimension cfg.Dim.
func New(cfg Config, models []NamedModel, reg prometheus.Registerer) (*Engine, error) {
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
	e.champ.Store(int32(rankIdx))
	e.chal.Store(int32(challengerIndex(&e.cfg.Rank, models)))
	for _, nm := range models {
		d, err := newModelDef(nm, cfg, e.met)
		if err != nil {
			return nil, fmt.Errorf("stream: model %s: %w", nm.Name, err)
		}
		if nm.Factory != nil && e.keys == nil {
			if e.keys, err = keystore.Open("", nil); err != nil {
				return nil, fmt.Errorf("stream: %w", err)
			}
			e.ownsKeys = true
		}
		e.defs = append(e.defs, d)
	}
	if e.profiles, err = newProfileDefs(&e.cfg, models, e.met); err != nil {
		return nil, err
	}
	if len(e.profiles) > 0 {
		if e.keys == nil {
			if e.keys, err = keystore.Open("", nil); err != nil {
				return nil, fmt.Errorf("stream: %w", err)
			}
			e.ownsKeys = true
		}
		d, _ := wire.NewDecoder(e.cfg.Dim, nil, 0)
		if d, err = d.WithHashing(*e.cfg.Hash); err != nil {
			return nil, fmt.Errorf("stream: %w", err)
		}
		e.fragDec = d.Fragments()
	}
	fallbacks, _ := checkFallbacks(models) // checked by checkEngine
	for i, j := range fallbacks {
		if d := e.defs[i]; j >= 0 {
			d.fallback = j
			if e.defs[j].traits.Kind != d.traits.Kind && d.traits.Kind == online.Ordinal { // an ordinal model on a regression model's value
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
			reg.MustRegister(newOPECollector(e))
		}
	}
	e.challenge()
	return e, nil
}

// Check reports whether New would refuse cfg and models (what
// hashed features, ranking requests and partition scope do not go with,
// dimensions, members), building nothing: the service calls it before it
// connects to the brokers.
func Check(cfg Config, models []NamedModel) error {
	if len(models) == 0 {
		return errors.New("stream: engine needs at least one model")
	}
	if _, err := checkEngine(&cfg, models); err != nil {
		return err
	}
	_, err := newProfileDefs(&cfg, models, newEngineMetrics(nil))
	return err
}

// checkEngine checks cfg (setting the rank defaults) against models and
// returns the rank model's index (-1: requests off).
func checkEngine(cfg *Config, models []NamedModel) (int, error) {
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
	if err := checkChallenger(cfg, models, rankIdx); err != nil {
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
	if e.ownsKeys {
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
			if r := refitOf(m.h.Instance()); r != nil {
				l = append(l, r)
			}
		}
	}
	e.refits.Store(&l)
}

// CheckpointWanted reports, once, that a key-scoped model holds more
// changed keys than Config.KeyHold allows until the next checkpoint:
// the pipeline then checkpoints early.
func (e *Engine) CheckpointWanted() bool {
	return e.wantCkpt.Load() && e.wantCkpt.CompareAndSwap(true, false)
}

// MergeLanes is Config.MergeLanes.
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
// in parallel (Config.MergeLanes).
func (e *Engine) mergeLanes() bool {
	switch e.cfg.MergeLanes {
	case MergeLanesOn:
		return true
	case MergeLanesOff:
		return false
	}
	return runtime.GOMAXPROCS(0) > 2
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
	c := joinConfig{events: e.cfg.JoinEvents, dim: e.cfg.Dim, models: len(e.defs), maxAge: int64(e.cfg.JoinTime), perKey: e.cfg.JoinPerKey}
	if src == srcRequests {
		r := &e.cfg.Rank
		c.events, c.maxAge, c.perKey, c.entries = r.JoinEvents, int64(r.JoinTime), r.JoinPerKey, r.JoinEntries
		c.protect, c.newShare = r.JoinLabelled > 0, 1-r.JoinLabelled
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
	if d.newKeys > 0 {
		c[3].Add(float64(d.newKeys))
	}
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

// bindLocked binds where the engine keeps state (partitioned: per input
// partition) the first time it is asked (e.mu held): the models' merged
// views and live bound checks (modelDef.bindScope); later it refuses the
// other scope.
func (e *Engine) bindLocked(partitioned bool) error {
	if !e.scoped {
		e.scoped, e.partScope = true, partitioned
		for _, d := range e.defs {
			d.bindScope(partitioned, e.cfg.AccuracyWindow, e.met)
		}
		return nil
	}
	if e.partScope != partitioned {
		return fmt.Errorf("the engine keeps state in %s", map[bool]string{false: "instance scope", true: "partition scope"}[e.partScope])
	}
	return nil
}

// SetRemote sets the statistics of partition part, owned by another
// instance, from its latest snapshot (made durable at createdAt), and
// merges them into the models that score with the merge of all
// partitions. Partitions held here are left alone; the other models ignore
// remote state.
func (e *Engine) SetRemote(part int, saved []snapshot.Model, createdAt time.Time) error {
	e.mu.Lock()
	err := e.bindLocked(true) // only partition scope has remote state, read before the shards may be made
	e.mu.Unlock()
	if err != nil {
		return fmt.Errorf("stream: remote state of partition %d: %w", part, err)
	}
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
		d.merged.SetRemote(part, inst.(*online.MAM), createdAt)
	}
	return nil
}

// RemoteState reports how many partitions' remote statistics the merged
// models hold, and when the oldest of them was made durable.
func (e *Engine) RemoteState() (n int, oldest time.Time) {
	e.mu.Lock() // the merged models are set when the scope is bound
	defer e.mu.Unlock()
	seen := map[int]bool{}
	for _, d := range e.defs {
		if d.merged == nil {
			continue
		}
		d.merged.Remotes(func(part int, at time.Time) {
			seen[part] = true
			if oldest.IsZero() || at.Before(oldest) {
				oldest = at
			}
		})
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
	profileEventsDesc = prometheus.NewDesc("streamer_profile_events",
		"Entity profiles: events learned into the profiles, over every shard and entity.", []string{"entity"}, nil)
	profilesDesc = prometheus.NewDesc("streamer_profiles",
		"Entity profiles: profiles in memory.", []string{"entity"}, nil)
	profilesStoredDesc = prometheus.NewDesc("streamer_profiles_stored",
		"Entity profiles: profiles in the embedded key store (as of the last checkpoint).", []string{"entity"}, nil)
)

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- examplesDesc
	ch <- keysDesc
	ch <- keysStoredDesc
	ch <- bwGammaDesc
	ch <- bwErrorDesc
	ch <- bwWeightDesc
	ch <- bwChosenDesc
	ch <- profileEventsDesc
	ch <- profilesDesc
	ch <- profilesStoredDesc
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.e
	e.mu.Lock()
	shards := make([]*Shard, 0, len(e.shards))
	for s := range e.shards {
		shards = append(shards, s)
	}
	e.mu.Unlock()
	for i, d := range e.profiles {
		var n, hot, stored int64
		for _, s := range shards {
			e, h, st := s.profiles[i].h.Counts()
			n, hot, stored = n+e, hot+h, stored+st
		}
		ch <- prometheus.MustNewConstMetric(profileEventsDesc, prometheus.GaugeValue, float64(n), d.cfg.Entity)
		ch <- prometheus.MustNewConstMetric(profilesDesc, prometheus.GaugeValue, float64(hot), d.cfg.Entity)
		ch <- prometheus.MustNewConstMetric(profilesStoredDesc, prometheus.GaugeValue, float64(stored), d.cfg.Entity)
	}
	for i, d := range e.defs {
		var n, hot, stored int64
		for _, s := range shards {
			e, h, st := s.models[i].h.Counts()
			n, hot, stored = n+e, hot+h, stored+st
		}
		if d.merged != nil {
			n = d.merged.Examples()
		}
		ch <- prometheus.MustNewConstMetric(examplesDesc, prometheus.GaugeValue, float64(n), d.name)
		if d.keyFactory != nil {
			ch <- prometheus.MustNewConstMetric(keysDesc, prometheus.GaugeValue, float64(hot), d.name)
			ch <- prometheus.MustNewConstMetric(keysStoredDesc, prometheus.GaugeValue, float64(stored), d.name)
		}
		// A gamma-auto model's bandwidths: the shard with the most
		// examples speaks for it (in instance scope, the only one).
		var bw *holder.Bandwidths
		var most int64 = -1
		for _, s := range shards {
			sm := s.models[i]
			sm.BWWanted.Store(true) // taken by a plain holder's next labelled event; the others take none
			if b := sm.BW.Load(); b != nil && sm.Examples.Load() > most {
				bw, most = b, sm.Examples.Load()
			}
		}
		if bw != nil {
			for b, c := range bw.Cands {
				l := strconv.Itoa(b)
				ch <- prometheus.MustNewConstMetric(bwGammaDesc, prometheus.GaugeValue, c.Gamma, d.name, l)
				ch <- prometheus.MustNewConstMetric(bwErrorDesc, prometheus.GaugeValue, c.Error, d.name, l)
				ch <- prometheus.MustNewConstMetric(bwWeightDesc, prometheus.GaugeValue, c.Weight, d.name, l)
			}
			if bw.Chosen >= 0 && bw.Chosen < len(bw.Cands) {
				ch <- prometheus.MustNewConstMetric(bwChosenDesc, prometheus.GaugeValue, bw.Cands[bw.Chosen].Gamma, d.name)
			}
		}
	}
}
