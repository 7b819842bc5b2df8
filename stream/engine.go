package stream

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

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
	// recently used evicted first, to KeyDir when set). Model is then an
	// instance that only answers Type, Dim and Label.
	Factory func() (online.Model, error)
	MaxKeys int
	KeyDir  string

	// New builds an empty instance like Model: with EngineConfig.Partitioned
	// every input partition gets its own (see partitioned.go).
	New func() (online.Model, error)
}

// EngineConfig configures an Engine.
type EngineConfig struct {
	OutputTopic     string
	DLQTopic        string
	Dim             int      // input dimension shared by all models
	FeatureNames    []string // optional: names for object-form features
	MaxMessageBytes int      // larger input values are dead-lettered (0 = no limit)
	AccuracyWindow  int      // events in the prequential accuracy window

	// Delayed labels: with JoinEvents > 0, unlabelled events with an id are
	// kept (at most JoinEvents of them, each at most JoinTime when > 0) until
	// a label-only event with their id arrives; the models learn then.
	JoinEvents int
	JoinTime   time.Duration

	// Partitioned keeps model state per input partition, for scale-out
	// (see partitioned.go): every NamedModel needs New.
	Partitioned bool
}

// Engine is the scoring Processor: for each input event it decodes and
// validates the event, and for every model scores it, publishes the score
// with its certainty bound, and learns from the event when it is labelled.
// An event that fails validation for any model goes to the dead-letter topic
// and reaches no model.
type Engine struct {
	cfg    EngineConfig
	dec    *wire.Decoder
	ev     wire.Event
	models []*engineModel
	labels []float64
	preds  []online.Prediction
	rec    wire.Score
	idBuf  []byte
	met    *engineMetrics
	join   *joinBuffer // nil: delayed labels off
	now    func() time.Time

	started bool // Start was called: partition instances start their refits
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
	dec, err := wire.NewDecoder(cfg.Dim, cfg.FeatureNames, cfg.MaxMessageBytes)
	if err != nil {
		return nil, fmt.Errorf("stream: %w", err)
	}
	e := &Engine{
		cfg:    cfg,
		dec:    dec,
		labels: make([]float64, len(models)),
		preds:  make([]online.Prediction, len(models)),
		met:    newEngineMetrics(reg),
		now:    time.Now,
	}
	if cfg.JoinEvents > 0 {
		e.dec = e.dec.WithLabelOnly()
		e.join = newJoinBuffer(cfg.JoinEvents, cfg.Dim, len(models), int64(cfg.JoinTime))
	}
	for _, nm := range models {
		if nm.Model.Dim() != cfg.Dim {
			return nil, fmt.Errorf("stream: model %s: dimension %d, want %d", nm.Name, nm.Model.Dim(), cfg.Dim)
		}
		if cfg.Partitioned && nm.New == nil {
			return nil, fmt.Errorf("stream: model %s: partitioned state needs NamedModel.New", nm.Name)
		}
		em, err := newEngineModel(nm, cfg.AccuracyWindow, e.met, cfg.Partitioned)
		if err != nil {
			return nil, fmt.Errorf("stream: model %s: %w", nm.Name, err)
		}
		e.models = append(e.models, em)
	}
	return e, nil
}

// Models returns the engine's models (for snapshots and inspection). The
// caller must not use them concurrently with Process.
func (e *Engine) Models() []NamedModel {
	out := make([]NamedModel, len(e.models))
	for i, m := range e.models {
		out[i] = NamedModel{Name: m.name, Model: m.m, Fingerprint: m.fingerprint}
	}
	return out
}

// Start starts the background work of models that have some (refits).
func (e *Engine) Start() {
	e.started = true
	for _, m := range e.models {
		for _, inst := range m.background() {
			if r := refitOf(inst); r != nil {
				r.Start()
			}
		}
	}
}

// Close stops the models' background work; a refit in progress is
// cancelled and the serving version stays.
func (e *Engine) Close() {
	for _, m := range e.models {
		for _, inst := range m.background() {
			if r := refitOf(inst); r != nil {
				_ = r.Close()
			}
		}
	}
}

// Refitting reports whether any model is refitting now.
func (e *Engine) Refitting() bool {
	for _, m := range e.models {
		for _, inst := range m.background() {
			if r := refitOf(inst); r != nil && r.Refitting() {
				return true
			}
		}
	}
	return false
}

// Capture implements Stateful: every model's serialised state.
func (e *Engine) Capture() ([]snapshot.Model, error) {
	if e.cfg.Partitioned {
		return nil, errors.New("stream: partitioned state is captured per partition (CapturePartition)")
	}
	out := make([]snapshot.Model, len(e.models))
	for i, m := range e.models {
		var data []byte
		var err error
		if m.keyed != nil {
			data, err = m.keyed.MarshalBinary()
		} else {
			data, err = m.m.MarshalBinary()
		}
		if err != nil {
			return nil, fmt.Errorf("stream: capture model %s: %w", m.name, err)
		}
		out[i] = snapshot.Model{Name: m.name, Type: m.m.Type(), Fingerprint: m.fingerprint, Data: data}
	}
	return out, nil
}

// Restore replaces the state of every model that has a saved state with an
// identical configuration. It returns the names of models that start empty
// (new, or configured differently from the saved state) and of saved models
// no longer configured. A saved state that does not decode is an error.
func (e *Engine) Restore(saved []snapshot.Model) (fresh, dropped []string, err error) {
	if e.cfg.Partitioned {
		return nil, nil, errors.New("stream: partitioned state is restored per partition (RestorePartition)")
	}
	byName := map[string]snapshot.Model{}
	for _, s := range saved {
		byName[s.Name] = s
	}
	for _, m := range e.models {
		s, ok := byName[m.name]
		delete(byName, m.name)
		if !ok || !m.accepts(s) {
			fresh = append(fresh, m.name)
			continue
		}
		// Restore into the configured model: it has the type and the
		// configuration (equal fingerprints) that wrote the state.
		var err error
		if m.keyed != nil {
			err = m.keyed.UnmarshalBinary(s.Data)
			m.keyedBase = m.keyed.examples()
		} else {
			err = m.m.UnmarshalBinary(s.Data)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("stream: restore model %s: %w", m.name, err)
		}
		m.refresh()
	}
	for name := range byName {
		dropped = append(dropped, name)
	}
	return fresh, dropped, nil
}

// Process implements Processor.
func (e *Engine) Process(msg *kafka.Message, pub Sink) {
	if err := e.dec.Decode(msg.Value, &e.ev); err != nil {
		var we *wire.Error
		if errors.As(err, &we) {
			e.reject(msg, pub, we.Reason, we.Detail)
		} else {
			e.reject(msg, pub, wire.ReasonNotJSON, err.Error())
		}
		return
	}
	ev := &e.ev
	if ev.HasLabel {
		for i, m := range e.models {
			y, ok := m.m.Label(ev.Label)
			if !ok {
				e.reject(msg, pub, wire.ReasonBadLabel,
					fmt.Sprintf("label %v is not in model %s's label set", ev.Label, m.name))
				return
			}
			e.labels[i] = y
		}
	}
	now := e.now()
	if !ev.HasFeatures {
		e.lateLabel(ev.ID, msg.Key, int(msg.Partition), now.UnixNano())
		return
	}
	id := ev.ID
	if !ev.HasID {
		// No id in the event: its position in the log is a unique id.
		e.idBuf = append(e.idBuf[:0], msg.Topic...)
		e.idBuf = append(e.idBuf, ':')
		e.idBuf = strconv.AppendInt(e.idBuf, int64(msg.Partition), 10)
		e.idBuf = append(e.idBuf, ':')
		e.idBuf = strconv.AppendInt(e.idBuf, msg.Offset, 10)
		id = e.idBuf
	}
	key := msg.Key
	if len(key) == 0 {
		key = ev.Key
	}
	for i, m := range e.models {
		inst := m.instance(int(msg.Partition), msg.Key)
		p := inst.Observe(ev.Features, e.labels[i], ev.HasLabel)
		e.preds[i] = p
		version := p.Version
		if version == 0 {
			version = inst.Version()
		}
		r := &e.rec
		*r = wire.Score{
			ID: id, Key: key, Model: m.name, Version: version,
			Score: p.Score, Prediction: p.Label, Probability: p.Probability, HasProbability: p.HasProbability,
			HasBound: p.HasBound, MistakeBound: p.MistakeBound, Delta: p.Delta, N: p.N,
			EventTS: ev.TS, ScoredAt: now,
		}
		pub.Publish(kafka.Message{Topic: e.cfg.OutputTopic, Key: msg.Key, Value: wire.AppendScore(pub.Buffer(), r)})
		m.scored(p)
		if ev.HasLabel {
			m.judge(p, e.labels[i])
		}
	}
	if !ev.HasLabel && ev.HasID && e.join != nil {
		e.met.joinDropped.Add(float64(e.join.put(ev.ID, ev.Features, e.preds, now.UnixNano())))
		e.met.joinPending.Set(float64(e.join.pending()))
	}
}

// lateLabel learns from the impression a label-only event labels, judging
// the predictions published at impression time.
func (e *Engine) lateLabel(id, key []byte, part int, now int64) {
	if e.join == nil {
		return // the decoder only accepts label-only events with a join buffer
	}
	s, status, dropped := e.join.take(id, now)
	e.met.joinDropped.Add(float64(dropped))
	e.met.joinPending.Set(float64(e.join.pending()))
	switch status {
	case unknownID:
		e.met.labelsUnknown.Inc()
		return
	case tooLate:
		e.met.labelsLate.Inc()
		return
	}
	e.met.labelsJoined.Inc()
	for i, m := range e.models {
		m.instance(part, key).Observe(s.x, e.labels[i], true)
		m.judge(s.preds[i], e.labels[i])
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
	r, _ := online.Unwrap[*refit.Model](m)
	return r
}
