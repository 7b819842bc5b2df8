package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/refit"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/wire"
)

// The engine's bookkeeping per model: prequential quality (judged on the
// prediction published before the model learned from the event) and, for
// models with a certainty bound, the live check of the bound against the
// observed rate of confident mistakes.

type engineModel struct {
	name        string
	fingerprint string
	m           online.Model
	keyed       *keyedModels  // scope: key; m is then the prototype
	keyedBase   int64         // keyed: examples restored from the snapshot
	keyedN      int64         // keyed: examples learned since
	traits      online.Traits // what it publishes, how it is judged
	quality     *online.Judge // prequential quality (online/judge.go)
	bound       online.Bounder
	met         modelMetrics
	mistakes    int64 // judge.Mistakes() already counted
	violations  int   // judge.Violations() already counted

	// Partitioned state (scale-out, partitioned.go).
	partitioned bool
	newInst     func() (online.Model, error)
	keyFactory  func() (online.Model, error) // key-scoped: one keyedModels per partition
	maxKeys     int
	keyDir      string
	onRefit     func(refit.Report)
	parts       map[int]*partModel
	global      *online.MAM         // mergeable: the merge of every partition's statistics; it scores
	remote      map[int]*online.MAM // mergeable: partitions owned by other instances (changelog)
	remoteAt    map[int]time.Time   // when each remote state was made durable
	bg          []online.Model      // instances that may refit in the background
}

type modelMetrics struct {
	scored, learned, mistakes prometheus.Counter
	examples, accuracy        prometheus.Gauge
	mae, zeroOne, tau, rmse   prometheus.Gauge
	version                   prometheus.Gauge
	bound                     prometheus.Observer
	violations                prometheus.Counter
	observed, limit           []prometheus.Gauge // per grid ρ
	versionAccuracy           prometheus.Gauge
	keys                      prometheus.Gauge
	keyErrors                 prometheus.Counter
}

type engineMetrics struct {
	scored, learned, mistakes, violations *prometheus.CounterVec
	rejected                              *prometheus.CounterVec
	examples, accuracy, version           *prometheus.GaugeVec
	mae, zeroOne, tau, rmse               *prometheus.GaugeVec
	observed, limit                       *prometheus.GaugeVec
	bound                                 *prometheus.HistogramVec
	rejectedBy                            map[wire.Reason]prometheus.Counter

	labelsJoined, labelsUnknown, labelsLate, joinDropped prometheus.Counter
	joinPending                                          prometheus.Gauge

	versionAccuracy                         *prometheus.GaugeVec
	keys                                    *prometheus.GaugeVec
	keyErrors                               *prometheus.CounterVec
	refits                                  *prometheus.CounterVec
	refitSeconds                            *prometheus.HistogramVec
	refitWindow, refitSV, refitObj, refitAt *prometheus.GaugeVec
}

var reasons = []wire.Reason{
	wire.ReasonTooLarge, wire.ReasonNotJSON, wire.ReasonWrongType, wire.ReasonMissingFeatures,
	wire.ReasonWrongDimension, wire.ReasonNonFinite, wire.ReasonBadLabel,
}

func newEngineMetrics(reg prometheus.Registerer) *engineMetrics {
	byModel := []string{"model"}
	gauge := func(name, help string, labels ...string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels)
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	labels := counter("streamer_labels_total", "Label-only events (delayed labels), by outcome: joined, unknown_id, too_late.", "outcome")
	m := &engineMetrics{
		scored:     counter("streamer_events_scored_total", "Events scored, by model.", byModel...),
		learned:    counter("streamer_events_learned_total", "Labelled events learned from, by model.", byModel...),
		mistakes:   counter("streamer_model_mistakes_total", "Prequential mistakes of classifiers (the prediction published before learning differs from the label).", byModel...),
		violations: counter("streamer_bound_violations_total", "Bound-validity checks (every 100 labelled events, per ρ of the grid) where the observed rate of y·f ≤ −ρ over the recent window exceeded bound(ρ). Zero on i.i.d. data; an alarm under drift.", byModel...),
		rejected:   counter("streamer_events_rejected_total", "Events sent to the dead-letter topic, by reason.", "reason"),
		examples:   gauge("streamer_model_examples", "Examples the model has learned (its n; n_eff under decay).", byModel...),
		accuracy:   gauge("streamer_model_accuracy", "Classifiers: prequential accuracy over the sliding window of recent labelled events.", byModel...),
		mae:        gauge("streamer_model_mae", "Ordinal models: prequential mean absolute level error over the recent window.", byModel...),
		zeroOne:    gauge("streamer_model_zero_one", "Ordinal models: prequential zero-one level error over the recent window.", byModel...),
		tau:        gauge("streamer_model_kendall_tau", "Ordinal, ranking and regression models: Kendall's tau-b of score against the label over the recent window (every 100 labelled events).", byModel...),
		rmse:       gauge("streamer_model_rmse", "Regression models: root mean squared error of the score over the recent window (every 100 labelled events).", byModel...),
		version:    gauge("streamer_model_version", "Version of the model that is serving scores.", byModel...),
		observed:   gauge("streamer_bound_observed", "Observed fraction of recent labelled events with y·f ≤ −rho.", "model", "rho"),
		limit:      gauge("streamer_bound_limit", "The model's current certainty bound at rho.", "model", "rho"),
		bound: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "streamer_model_mistake_bound", Help: "Distribution of published certainty.mistake_bound values.",
			Buckets: []float64{0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.999}}, byModel),
		rejectedBy:    map[wire.Reason]prometheus.Counter{},
		labelsJoined:  labels.WithLabelValues("joined"),
		labelsUnknown: labels.WithLabelValues("unknown_id"),
		labelsLate:    labels.WithLabelValues("too_late"),
		joinDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamer_join_dropped_total",
			Help: "Impressions that left the join window unlabelled (too old, or evicted by newer ones)."}),
		joinPending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamer_join_pending",
			Help: "Impressions waiting for a delayed label."}),
		versionAccuracy: gauge("streamer_model_version_accuracy", "Classifiers: prequential accuracy of the version serving now, since it was swapped in.", byModel...),
		refits:          counter("streamer_refits_total", "Background refits by outcome: accepted, rejected (guard kept the old model), failed, cancelled.", "model", "outcome"),
		refitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "streamer_refit_duration_seconds",
			Help: "Wall time of background refits.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 18)}, byModel),
		refitWindow: gauge("streamer_refit_window", "Rows the last refit trained on.", byModel...),
		refitSV:     gauge("streamer_refit_support_vectors", "Support vectors of the last refit (SVM).", byModel...),
		refitObj:    gauge("streamer_refit_objective", "Solver objective of the last refit (SVM: dual objective, LIBSVM's sign).", byModel...),
		refitAt:     gauge("streamer_refit_last_timestamp_seconds", "Unix time of the last accepted refit.", byModel...),
		keys:        gauge("streamer_model_keys", "Key-scoped models: instances in memory.", byModel...),
		keyErrors:   counter("streamer_model_key_errors_total", "Key-scoped models: evicted state that could not be reloaded (a fresh instance scored instead).", byModel...),
	}
	for _, r := range reasons {
		m.rejectedBy[r] = m.rejected.WithLabelValues(string(r))
	}
	if reg != nil {
		reg.MustRegister(m.scored, m.learned, m.mistakes, m.violations, m.rejected, m.examples, m.accuracy,
			m.mae, m.zeroOne, m.tau, m.rmse, m.version, m.observed, m.limit, m.bound, labels, m.joinDropped, m.joinPending,
			m.versionAccuracy, m.refits, m.refitSeconds, m.refitWindow, m.refitSV, m.refitObj, m.refitAt, m.keys, m.keyErrors)
	}
	return m
}

func newEngineModel(nm NamedModel, window int, met *engineMetrics, partitioned bool) (*engineModel, error) {
	name := nm.Name
	t := nm.Traits
	if t.Kind == 0 { // a classifier, bounded if it can say so
		_, t.Bound = online.Unwrap[online.Bounder](nm.Model)
		t.Kind = online.Classifier
	}
	if _, ok := nm.Model.(online.Bounder); t.Bound && !ok {
		return nil, fmt.Errorf("its traits say it has a bound, but %T has no Bound method", nm.Model)
	}
	em := &engineModel{name: name, fingerprint: nm.Fingerprint, m: nm.Model, traits: t, newInst: nm.New}
	if partitioned {
		em.initPartitioned(nm)
	} else {
		em.bg = []online.Model{nm.Model}
	}
	if nm.Factory != nil && !partitioned {
		k, err := newKeyedModels(nm.Factory, nm.MaxKeys, nm.KeyDir)
		if err != nil {
			return nil, err
		}
		em.keyed = k
	}
	em.met = modelMetrics{
		scored:   met.scored.WithLabelValues(name),
		learned:  met.learned.WithLabelValues(name),
		examples: met.examples.WithLabelValues(name),
		version:  met.version.WithLabelValues(name),
		bound:    met.bound.WithLabelValues(name),
	}
	if nm.Factory != nil {
		em.met.keys = met.keys.WithLabelValues(name)
		em.met.keyErrors = met.keyErrors.WithLabelValues(name)
	}
	// The live bound check needs one bound for the whole stream: not for
	// key-scoped models, nor for partitioned ones other than the merged
	// global model.
	jt := t
	if t.Bound && (nm.Factory != nil || (partitioned && em.global == nil)) {
		jt.Bound = false
	}
	em.quality = online.NewJudge(jt, window)
	if jt.Bound {
		em.bound = nm.Model.(online.Bounder)
	}
	switch t.Kind {
	case online.Classifier:
		em.met.accuracy = met.accuracy.WithLabelValues(name)
		em.met.mistakes = met.mistakes.WithLabelValues(name)
		em.met.versionAccuracy = met.versionAccuracy.WithLabelValues(name)
	case online.Ordinal:
		em.met.mae = met.mae.WithLabelValues(name)
		em.met.zeroOne = met.zeroOne.WithLabelValues(name)
		em.met.tau = met.tau.WithLabelValues(name)
	case online.Ranking:
		em.met.tau = met.tau.WithLabelValues(name)
	case online.Regression:
		em.met.tau = met.tau.WithLabelValues(name)
		em.met.rmse = met.rmse.WithLabelValues(name)
	}
	em.onRefit = func(rep refit.Report) { met.refitted(name, rep) }
	if r, ok := online.Unwrap[*refit.Model](nm.Model); ok {
		r.OnRefit(em.onRefit)
	}
	if jt.Bound {
		em.met.violations = met.violations.WithLabelValues(name)
		for _, rho := range em.quality.BoundGrid() {
			r := strconv.FormatFloat(rho, 'g', -1, 64)
			em.met.observed = append(em.met.observed, met.observed.WithLabelValues(name, r))
			em.met.limit = append(em.met.limit, met.limit.WithLabelValues(name, r))
		}
	}
	em.refresh()
	return em, nil
}

// instance is the model that scores and learns an event with this key
// from this input partition.
func (em *engineModel) instance(part int, key []byte) online.Model {
	if em.partitioned {
		return em.partInstance(part, key)
	}
	if em.keyed == nil {
		return em.m
	}
	return em.keyedInstance(em.keyed, key)
}

// keyedInstance is k's instance for key.
func (em *engineModel) keyedInstance(k *keyedModels, key []byte) online.Model {
	m, err := k.get(key)
	if err != nil {
		// An I/O error reloading an evicted key: score with a fresh
		// instance rather than stall the partition; it is counted.
		em.met.keyErrors.Inc()
		m, _ = k.factory()
	}
	em.met.keys.Set(float64(em.keyCount()))
	return m
}

// examples is the model's n (summed over keys for key-scoped models).
func (em *engineModel) examples() int64 {
	switch {
	case em.keyed != nil || em.keyFactory != nil:
		return em.keyedBase + em.keyedN
	case em.partitioned && em.global == nil:
		var n int64
		for _, p := range em.parts {
			n += p.m.Examples()
		}
		return n
	}
	return em.m.Examples()
}

// refresh sets the gauges that follow the model's state.
func (em *engineModel) refresh() {
	em.met.examples.Set(float64(em.examples()))
	em.met.version.Set(float64(em.m.Version()))
}

// scored records a published prediction.
func (em *engineModel) scored(p online.Prediction) {
	em.met.scored.Inc()
	if p.HasBound {
		em.met.bound.Observe(p.MistakeBound)
	}
}

// judge records a labelled event: p is the prediction published for it
// before the model learned from it, y its label (as mapped by the model).
// The judging is online.Judge's; this exports it.
func (em *engineModel) judge(p online.Prediction, y float64) {
	em.met.learned.Inc()
	if em.keyed != nil || em.keyFactory != nil {
		em.keyedN++
	}
	em.met.examples.Set(float64(em.examples()))
	j := em.quality
	checked := j.Add(p, y, em.bound)
	switch em.traits.Kind {
	case online.Classifier:
		if n := j.Mistakes(); n != em.mistakes {
			em.met.mistakes.Add(float64(n - em.mistakes))
			em.mistakes = n
		}
		em.met.accuracy.Set(j.Accuracy())
		em.met.versionAccuracy.Set(j.VersionAccuracy())
	case online.Ordinal:
		em.met.mae.Set(j.MAE())
		em.met.zeroOne.Set(j.ZeroOne())
	}
	if !checked {
		return
	}
	if em.met.tau != nil {
		em.met.tau.Set(j.KendallTau())
	}
	if em.met.rmse != nil {
		em.met.rmse.Set(j.RMSE())
	}
	if _, all := j.Violations(); em.bound != nil && p.HasBound {
		for i := range em.met.observed {
			em.met.observed[i].Set(j.BoundObserved(i))
			em.met.limit[i].Set(j.BoundLimit(i))
		}
		em.met.violations.Add(float64(all - em.violations))
		em.violations = all
	}
}

// refitted records a refit report (called from the model's refit goroutine).
func (m *engineMetrics) refitted(model string, r refit.Report) {
	outcome := "accepted"
	switch {
	case r.Rejected:
		outcome = "rejected"
	case errors.Is(r.Err, context.Canceled):
		outcome = "cancelled"
	case r.Err != nil:
		outcome = "failed"
	}
	m.refits.WithLabelValues(model, outcome).Inc()
	m.refitSeconds.WithLabelValues(model).Observe(r.Duration.Seconds())
	if r.Accepted {
		m.refitWindow.WithLabelValues(model).Set(float64(r.Window))
		m.refitSV.WithLabelValues(model).Set(float64(r.Stats.SupportVectors))
		m.refitObj.WithLabelValues(model).Set(r.Stats.Objective)
		m.refitAt.WithLabelValues(model).SetToCurrentTime()
		m.version.WithLabelValues(model).Set(float64(r.Version))
	}
}

// accepts reports whether saved state s may be restored into the model:
// written by an identically configured model (equal fingerprints and type),
// or — the one-time migration of state written before the model registry,
// whose fingerprints were computed differently — an encoding of format
// version 1 whose own parameters and dimension are exactly those
// configured now. (Such a state does not record feature names: a reordering
// of features.names made together with the upgrade is not detected.)
func (em *engineModel) accepts(s snapshot.Model) bool {
	if s.Type != em.m.Type() {
		return false
	}
	if s.Fingerprint == em.fingerprint {
		return true
	}
	if em.newInst == nil {
		return false
	}
	states := [][]byte{s.Data}
	if IsKeyed(s.Data) {
		_, st, err := DecodeKeyed(s.Data)
		if err != nil || len(st) == 0 {
			return false
		}
		states = st
	}
	want, err := em.m.MarshalBinary()
	if err != nil {
		return false
	}
	conf, err := online.Configuration(want)
	if err != nil {
		return false
	}
	for _, b := range states {
		if !online.IsVersion1(b) {
			return false
		}
		cand, err := em.newInst()
		if err != nil || cand.UnmarshalBinary(b) != nil {
			return false
		}
		got, err := cand.MarshalBinary()
		if err != nil {
			return false
		}
		if c, err := online.Configuration(got); err != nil || c != conf {
			return false
		}
	}
	return true
}
