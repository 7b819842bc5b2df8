package stream

import (
	"context"
	"errors"
	"math"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/refit"
	"github.com/streamer/streamer/stream/wire"
)

// The engine's bookkeeping per model: prequential quality (judged on the
// prediction published before the model learned from the event) and, for
// models with a certainty bound, the live check of the bound against the
// observed rate of confident mistakes.

// checkEvery is how many labelled events pass between the O(window) checks
// (Kendall's τ, bound validity).
const checkEvery = 100

type engineModel struct {
	name        string
	fingerprint string
	m           online.Model
	keyed       *keyedModels          // scope: key; m is then the prototype
	keyedBase   int64                 // keyed: examples restored from the snapshot
	keyedN      int64                 // keyed: examples learned since
	ordinal     bool                  // judged by τ, MAE, zero-one rather than accuracy
	ranking     bool                  // ordinal judging on a real target with no predicted level: τ only
	preq        *online.Prequential   // classifiers: accuracy window
	ord         *online.OrdinalWindow // ordinal: MAE, zero-one, τ window
	bounds      *online.BoundMonitor  // models with a bound
	boundBuf    []float64
	labelled    int
	met         modelMetrics

	// Prequential accuracy of the version serving now (classifiers).
	version                int64
	versionN, versionRight int

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
	mae, zeroOne, tau         prometheus.Gauge
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
	mae, zeroOne, tau                     *prometheus.GaugeVec
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
		tau:        gauge("streamer_model_kendall_tau", "Ordinal models: Kendall's tau-b of score against level over the recent window (every 100 labelled events).", byModel...),
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
			m.mae, m.zeroOne, m.tau, m.version, m.observed, m.limit, m.bound, labels, m.joinDropped, m.joinPending,
			m.versionAccuracy, m.refits, m.refitSeconds, m.refitWindow, m.refitSV, m.refitObj, m.refitAt, m.keys, m.keyErrors)
	}
	return m
}

func newEngineModel(nm NamedModel, window int, met *engineMetrics, partitioned bool) (*engineModel, error) {
	name := nm.Name
	em := &engineModel{name: name, fingerprint: nm.Fingerprint, m: nm.Model}
	if partitioned {
		em.initPartitioned(nm)
	} else {
		em.bg = []online.Model{nm.Model}
	}
	switch nm.Model.Type() {
	case "omam":
		em.ordinal = true
	case "lsrrank", "mlsrrank", "krr", "rfrank":
		// τ only on a real target; with levels (thresholds on the score,
		// as omam) MAE and zero-one too.
		em.ordinal, em.ranking = true, true
		if l, ok := nm.Model.(interface{ Levels() int }); ok && l.Levels() > 0 {
			em.ranking = false
		}
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
	if em.ordinal {
		em.ord = online.NewOrdinalWindow(window)
		em.met.mae = met.mae.WithLabelValues(name)
		em.met.zeroOne = met.zeroOne.WithLabelValues(name)
		em.met.tau = met.tau.WithLabelValues(name)
	} else {
		em.preq = online.NewPrequential(window)
		em.met.accuracy = met.accuracy.WithLabelValues(name)
		em.met.mistakes = met.mistakes.WithLabelValues(name)
		em.met.versionAccuracy = met.versionAccuracy.WithLabelValues(name)
	}
	em.onRefit = func(rep refit.Report) { met.refitted(name, rep) }
	if r, ok := nm.Model.(*refit.Model); ok {
		r.OnRefit(em.onRefit)
	}
	_, bounded := nm.Model.(interface{ Bound(float64) float64 })
	if hb, ok := nm.Model.(interface{ HasBound() bool }); ok && !hb.HasBound() {
		bounded = false
	}
	if bounded && nm.Factory == nil && (!partitioned || em.global != nil) {
		grid := online.DefaultBoundGrid()
		em.bounds = online.NewBoundMonitor(window, grid)
		em.boundBuf = make([]float64, len(grid))
		em.met.violations = met.violations.WithLabelValues(name)
		for _, rho := range grid {
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
func (em *engineModel) judge(p online.Prediction, y float64) {
	em.met.learned.Inc()
	if em.keyed != nil || em.keyFactory != nil {
		em.keyedN++
	}
	em.met.examples.Set(float64(em.examples()))
	em.labelled++
	check := em.labelled%checkEvery == 0
	if em.ordinal {
		em.ord.Add(p.Score, p.Label, int(math.Round(y)))
		if !em.ranking {
			em.met.mae.Set(em.ord.MAE())
			em.met.zeroOne.Set(em.ord.ZeroOne())
		}
		if check {
			em.met.tau.Set(em.ord.KendallTau())
		}
		return
	}
	correct := float64(p.Label) == y
	em.preq.Add(correct)
	if v := p.Version; v != em.version {
		em.version, em.versionN, em.versionRight = v, 0, 0
	}
	em.versionN++
	if correct {
		em.versionRight++
	}
	em.met.versionAccuracy.Set(float64(em.versionRight) / float64(em.versionN))
	if !correct {
		em.met.mistakes.Inc()
	}
	em.met.accuracy.Set(em.preq.Accuracy())
	if em.bounds == nil || !p.HasBound {
		return
	}
	em.bounds.Add(y * p.Score)
	if check {
		b := em.m.(interface{ Bound(float64) float64 })
		limits, violations := em.bounds.Check(b.Bound, em.boundBuf)
		for i := range limits {
			em.met.observed[i].Set(em.bounds.Observed(i))
			em.met.limit[i].Set(limits[i])
		}
		em.met.violations.Add(float64(violations))
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
