package stream

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/online"
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
}

// EngineConfig configures an Engine.
type EngineConfig struct {
	OutputTopic     string
	DLQTopic        string
	Dim             int      // input dimension shared by all models
	FeatureNames    []string // optional: names for object-form features
	MaxMessageBytes int      // larger input values are dead-lettered (0 = no limit)
	AccuracyWindow  int      // events in the prequential accuracy window
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
	rec    wire.Score
	idBuf  []byte
	met    *engineMetrics
	now    func() time.Time
}

type engineModel struct {
	name        string
	fingerprint string
	m           online.Model
	preq        *online.Prequential
	met         modelMetrics
}

type modelMetrics struct {
	scored, learned, mistakes prometheus.Counter
	examples, accuracy        prometheus.Gauge
	version                   prometheus.Gauge
	bound                     prometheus.Observer
}

type engineMetrics struct {
	scored, learned, mistakes *prometheus.CounterVec
	rejected                  *prometheus.CounterVec
	examples, accuracy        *prometheus.GaugeVec
	version                   *prometheus.GaugeVec
	bound                     *prometheus.HistogramVec
	rejectedBy                map[wire.Reason]prometheus.Counter
}

var reasons = []wire.Reason{
	wire.ReasonTooLarge, wire.ReasonNotJSON, wire.ReasonWrongType, wire.ReasonMissingFeatures,
	wire.ReasonWrongDimension, wire.ReasonNonFinite, wire.ReasonBadLabel,
}

func newEngineMetrics(reg prometheus.Registerer) *engineMetrics {
	m := &engineMetrics{
		scored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamer_events_scored_total", Help: "Events scored, by model."}, []string{"model"}),
		learned: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamer_events_learned_total", Help: "Labelled events learned from, by model."}, []string{"model"}),
		mistakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamer_model_mistakes_total", Help: "Prequential mistakes (prediction made before learning differs from the label), by model."}, []string{"model"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "streamer_events_rejected_total", Help: "Events sent to the dead-letter topic, by reason."}, []string{"reason"}),
		examples: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "streamer_model_examples", Help: "Examples the model has learned (its n)."}, []string{"model"}),
		accuracy: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "streamer_model_accuracy", Help: "Prequential accuracy over the sliding window of recent labelled events."}, []string{"model"}),
		version: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "streamer_model_version", Help: "Version of the model that is serving scores."}, []string{"model"}),
		bound: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "streamer_model_mistake_bound", Help: "Distribution of published certainty.mistake_bound values.",
			Buckets: []float64{0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.999}}, []string{"model"}),
		rejectedBy: map[wire.Reason]prometheus.Counter{},
	}
	for _, r := range reasons {
		m.rejectedBy[r] = m.rejected.WithLabelValues(string(r))
	}
	if reg != nil {
		reg.MustRegister(m.scored, m.learned, m.mistakes, m.rejected, m.examples, m.accuracy, m.version, m.bound)
	}
	return m
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
	e := &Engine{
		cfg:    cfg,
		dec:    wire.NewDecoder(cfg.Dim, cfg.FeatureNames, cfg.MaxMessageBytes),
		labels: make([]float64, len(models)),
		met:    newEngineMetrics(reg),
		now:    time.Now,
	}
	for _, nm := range models {
		if nm.Model.Dim() != cfg.Dim {
			return nil, fmt.Errorf("stream: model %s: dimension %d, want %d", nm.Name, nm.Model.Dim(), cfg.Dim)
		}
		em := &engineModel{name: nm.Name, fingerprint: nm.Fingerprint, m: nm.Model, preq: online.NewPrequential(cfg.AccuracyWindow)}
		em.met = modelMetrics{
			scored:   e.met.scored.WithLabelValues(nm.Name),
			learned:  e.met.learned.WithLabelValues(nm.Name),
			mistakes: e.met.mistakes.WithLabelValues(nm.Name),
			examples: e.met.examples.WithLabelValues(nm.Name),
			accuracy: e.met.accuracy.WithLabelValues(nm.Name),
			version:  e.met.version.WithLabelValues(nm.Name),
			bound:    e.met.bound.WithLabelValues(nm.Name),
		}
		em.met.examples.Set(float64(nm.Model.Examples()))
		em.met.version.Set(float64(nm.Model.Version()))
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

// Capture implements Stateful: every model's serialised state.
func (e *Engine) Capture() ([]snapshot.Model, error) {
	out := make([]snapshot.Model, len(e.models))
	for i, m := range e.models {
		data, err := m.m.MarshalBinary()
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
	byName := map[string]snapshot.Model{}
	for _, s := range saved {
		byName[s.Name] = s
	}
	restored := make([]online.Model, len(e.models))
	for i, m := range e.models {
		s, ok := byName[m.name]
		delete(byName, m.name)
		if !ok || s.Fingerprint != m.fingerprint || s.Type != m.m.Type() {
			fresh = append(fresh, m.name)
			continue
		}
		r, err := online.Restore(s.Data)
		if err != nil {
			return nil, nil, fmt.Errorf("stream: restore model %s: %w", m.name, err)
		}
		if r.Dim() != m.m.Dim() || r.Type() != m.m.Type() {
			return nil, nil, fmt.Errorf("stream: restore model %s: saved state is %s with dim %d, configured %s with dim %d",
				m.name, r.Type(), r.Dim(), m.m.Type(), m.m.Dim())
		}
		restored[i] = r
	}
	for i, r := range restored {
		if r == nil {
			continue
		}
		m := e.models[i]
		m.m = r
		m.met.examples.Set(float64(r.Examples()))
		m.met.version.Set(float64(r.Version()))
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
	now := e.now()
	for i, m := range e.models {
		p := m.m.Observe(ev.Features, e.labels[i], ev.HasLabel)
		r := &e.rec
		*r = wire.Score{
			ID: id, Key: key, Model: m.name, Version: m.m.Version(),
			Score: p.Score, Prediction: p.Label,
			HasBound: p.HasBound, MistakeBound: p.MistakeBound, Delta: p.Delta, N: p.N,
			EventTS: ev.TS, ScoredAt: now,
		}
		pub.Publish(kafka.Message{Topic: e.cfg.OutputTopic, Key: msg.Key, Value: wire.AppendScore(pub.Buffer(), r)})
		m.met.scored.Inc()
		if p.HasBound {
			m.met.bound.Observe(p.MistakeBound)
		}
		if ev.HasLabel {
			correct := float64(p.Label) == e.labels[i]
			m.preq.Add(correct)
			if !correct {
				m.met.mistakes.Inc()
			}
			m.met.learned.Inc()
			m.met.accuracy.Set(m.preq.Accuracy())
			m.met.examples.Set(float64(m.m.Examples()))
		}
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
