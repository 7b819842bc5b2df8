package engine

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/refit"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/holder"
	"github.com/streamer/streamer/stream/wire"
)

// The engine's bookkeeping per model: prequential quality (judged on the
// prediction published before the model learned from the event) and, for
// models with a certainty bound, the live check of the bound against the
// observed rate of confident mistakes.

// modelDef is a configured model as the whole engine sees it: its
// definition, its metrics and its prequential quality. Its state lives in
// the shards (shardModel, in a holder: package holder), one instance per shard
// (per key in a shard when key-scoped).
type modelDef struct {
	name        string
	fingerprint string
	proto       online.Model    // answers Type, Dim, Label; the instance of the first shard in instance scope
	prep        online.Preparer // proto's preparation (nil: the model does not prepare)
	newInst     func() (online.Model, error)
	keyFactory  func() (online.Model, error) // key-scoped: builds a key's instance
	maxKeys     int
	mergeable   bool          // a global mam whose statistics merge (online.MAM.Mergeable)
	merged      *holder.Merge // partition scope, a mergeable model: scores with the merge of every partition's statistics (bindScope)
	traits      online.Traits
	onRefit     func(refit.Report)
	met         modelMetrics
	members     []int            // the models whose predictions this one aggregates (NamedModel.Members)
	label       *online.LabelMap // maps the wire label before proto.Label (nil: none)
	fallback    int              // the model whose answer a key without one gets (fallback.go; -1: none)
	fbBins      *online.LabelMap // an ordinal model on a regression model's value: its label edges (else nil)
	use         *[256]bool       // hashed features: the fields the model takes (NamedModel.Use; nil: all)
	residual    bool             // learns the label less the fallback's prediction, publishes their sum (residual.go)

	// Prequential quality, shared by the shards: judged on the prediction
	// published before the model learned from the event. Shards judge
	// under judgeMu (a short critical section; everything else on the
	// per-event path is the shard's own); appliers a run of events at a
	// time (Shard.EndRun). The calibration window, shared too, has a lock
	// of its own (calibration.mu): one applier can add its run's pairs
	// while another judges its run's quality, so that neither section
	// bounds how many appliers run in parallel.
	judgeMu    sync.Mutex
	cal        *calibration // nil: calibration off
	quality    *online.Judge
	bound      online.Bounder
	mistakes   int64 // judge.Mistakes() already counted
	violations int   // judge.Violations() already counted
	tau        float64
	tauAt      time.Time // when tau was computed (kendallTau; zero: never)
}

type modelMetrics struct {
	scored, learned, mistakes prometheus.Counter
	accuracy                  prometheus.Gauge
	mae, zeroOne, rmse        prometheus.Gauge
	version                   prometheus.Gauge
	bound                     prometheus.Observer // the shard of the goroutines of no partition (HistShards)
	violations                prometheus.Counter
	observed, limit           []prometheus.Gauge // per grid ρ
	versionAccuracy           prometheus.Gauge
	keyErrors                 prometheus.Counter
}

type engineMetrics struct {
	scored, learned, mistakes, violations *prometheus.CounterVec
	rejected                              *prometheus.CounterVec
	accuracy, version                     *prometheus.GaugeVec
	mae, zeroOne, rmse                    *prometheus.GaugeVec
	tau                                   *scrapeGauges
	observed, limit                       *prometheus.GaugeVec
	bound                                 *HistShards // per model; an applier observes into its partition's shard
	rejectedBy                            map[wire.Reason]prometheus.Counter

	labelsJoined, labelsUnknown, labelsLate prometheus.Counter
	joinDropped                             [2][4]prometheus.Counter // by joinSource, then reason (full, expired, quota, new_keys)
	joinPending                             [2]prometheus.Gauge      // by joinSource

	rankRequests, rankCandidates prometheus.Counter
	rankSeconds, rankWait        prometheus.Histogram

	calObserved, calLower, calUpper, calCount *prometheus.GaugeVec
	calWidth, calCoverage, calPairs           *prometheus.GaugeVec
	calRefits                                 *prometheus.CounterVec

	versionAccuracy                         *prometheus.GaugeVec
	keyErrors                               *prometheus.CounterVec
	refits                                  *prometheus.CounterVec
	refitSeconds                            *prometheus.HistogramVec
	refitWindow, refitSV, refitObj, refitAt *prometheus.GaugeVec

	profileJoins, profileKeyErrors *prometheus.CounterVec
	promotions                     *prometheus.CounterVec
}

var reasons = []wire.Reason{
	wire.ReasonTooLarge, wire.ReasonNotJSON, wire.ReasonWrongType, wire.ReasonMissingFeatures,
	wire.ReasonWrongDimension, wire.ReasonNonFinite, wire.ReasonOutOfRange, wire.ReasonBadLabel,
	wire.ReasonBadRequest, wire.ReasonTooManyFeatures,
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
		accuracy:   gauge("streamer_model_accuracy", "Classifiers: prequential accuracy over the sliding window of recent labelled events.", byModel...),
		mae:        gauge("streamer_model_mae", "Ordinal models: prequential mean absolute level error over the recent window.", byModel...),
		zeroOne:    gauge("streamer_model_zero_one", "Ordinal models: prequential zero-one level error over the recent window.", byModel...),
		tau:        newScrapeGauges("streamer_model_kendall_tau", "Ordinal, ranking and regression models: Kendall's tau-b of score against the label over the recent window, computed when scraped, at most once a second (NaN before 100 labelled events).", "model"),
		rmse:       gauge("streamer_model_rmse", "Regression models: root mean squared error of the predicted value (the prediction published, else the score) over the recent window; ordinal models with calibration: of the expected label published against the label as sent (every 100 labelled events).", byModel...),
		version:    gauge("streamer_model_version", "Version of the model that is serving scores.", byModel...),
		observed:   gauge("streamer_bound_observed", "Observed fraction of recent labelled events with y·f ≤ −rho.", "model", "rho"),
		limit:      gauge("streamer_bound_limit", "The model's current certainty bound at rho.", "model", "rho"),
		bound: NewHistShards("streamer_model_mistake_bound", "Distribution of published certainty.mistake_bound values.",
			"model", []float64{0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.999}),
		rejectedBy:      map[wire.Reason]prometheus.Counter{},
		labelsJoined:    labels.WithLabelValues("joined"),
		labelsUnknown:   labels.WithLabelValues("unknown_id"),
		labelsLate:      labels.WithLabelValues("too_late"),
		versionAccuracy: gauge("streamer_model_version_accuracy", "Classifiers: prequential accuracy of the version serving now, since it was swapped in.", byModel...),
		refits:          counter("streamer_refits_total", "Background refits by outcome: accepted, rejected (guard kept the old model), failed, cancelled.", "model", "outcome"),
		refitSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "streamer_refit_duration_seconds",
			Help: "Wall time of background refits.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 18)}, byModel),
		refitWindow: gauge("streamer_refit_window", "Rows the last refit trained on.", byModel...),
		refitSV:     gauge("streamer_refit_support_vectors", "Support vectors of the last refit (SVM).", byModel...),
		refitObj:    gauge("streamer_refit_objective", "Solver objective of the last refit (SVM: dual objective, LIBSVM's sign).", byModel...),
		refitAt:     gauge("streamer_refit_last_timestamp_seconds", "Unix time of the last accepted refit.", byModel...),
		rankRequests: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamer_rank_requests_total",
			Help: "Ranking requests answered (from Kafka and POST /v1/rank)."}),
		rankCandidates: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamer_rank_candidates_total",
			Help: "Candidates scored for ranking requests."}),
		rankSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "streamer_rank_request_seconds",
			Help:    "POST /v1/rank: time from the request's arrival at the handler to its response written (reading the body, decoding, waiting for the shard, ranking, encoding, writing).",
			Buckets: prometheus.ExponentialBuckets(1e-6, 2, 22)}),
		rankWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "streamer_rank_shard_wait_seconds",
			Help:    "POST /v1/rank: time a request waited for the lock of the shard that owns its key (held by the stream's appliers and by checkpoint captures).",
			Buckets: prometheus.ExponentialBuckets(1e-7, 2, 24)}),
		calObserved: gauge("streamer_calibration_observed", "Classifiers: observed rate of the positive class among recent judged events, per decile of their calibrated probability.", "model", "decile"),
		calLower:    gauge("streamer_calibration_lower", "Classifiers: mean Venn-Abers lower probability of recent judged events, per decile of their calibrated probability.", "model", "decile"),
		calUpper:    gauge("streamer_calibration_upper", "Classifiers: mean Venn-Abers upper probability of recent judged events, per decile of their calibrated probability.", "model", "decile"),
		calCount:    gauge("streamer_calibration_events", "Classifiers: recent judged events per decile of their calibrated probability.", "model", "decile"),
		calWidth:    gauge("streamer_calibration_width", "Mean width of the calibrated certainty of recent judged events: upper - lower of the probability (classifiers) or of the conformal interval (other kinds).", "model"),
		calCoverage: gauge("streamer_calibration_coverage", "Ranking, ordinal and regression models: fraction of recent labels inside the conformal interval published for them (target: its level).", "model"),
		calPairs:    gauge("streamer_calibration_pairs", "Prequential (score, label) pairs in the calibration window.", "model"),
		calRefits:   counter("streamer_calibration_refits_total", "Refits of the calibration table (every calibration.every pairs, at most one per calibration.min_interval).", "model"),
		keyErrors:   counter("streamer_model_key_errors_total", "Key-scoped models: keys whose stored state could not be read (a fresh instance scored the event, which the key did not learn).", byModel...),
	}
	for _, r := range reasons {
		m.rejectedBy[r] = m.rejected.WithLabelValues(string(r))
	}
	joinDropped := counter("streamer_join_dropped_total",
		"Events that left a join window unlabelled, by source (impressions: the stream's unlabelled events; requests: the items ranking requests showed, in a window of their own) and reason (full: evicted by a newer one; expired: older than the window's time; quota: not kept, its key had labels.join_window.per_key impressions or rank.join.per_key items waiting; new_keys: a shown item not kept, of a key that has sent no label yet, while such keys' items held rank.join.new_keys of the window).",
		"source", "reason")
	joinPending := gauge("streamer_join_pending", "Events waiting for a delayed label, by source (impressions, requests).", "source")
	for src, name := range joinSources {
		for r, reason := range []string{"full", "expired", "quota", "new_keys"} {
			m.joinDropped[src][r] = joinDropped.WithLabelValues(name, reason)
		}
		m.joinPending[src] = joinPending.WithLabelValues(name)
	}
	m.profileJoins = counter("streamer_profile_joins_total", "Profiles joined to events and ranking candidates, by entity and outcome: joined, or cold (an id with no profile yet: the cold defaults).", "entity", "outcome")
	m.profileKeyErrors = counter("streamer_profile_key_errors_total", "Profiles whose stored state could not be read (the event was not learned into it), by entity.", "entity")
	m.promotions = newPromotions()
	if reg != nil {
		reg.MustRegister(m.profileJoins, m.profileKeyErrors, m.promotions)
		reg.MustRegister(m.scored, m.learned, m.mistakes, m.violations, m.rejected, m.accuracy,
			m.mae, m.zeroOne, m.tau, m.rmse, m.version, m.observed, m.limit, m.bound, labels, joinDropped, joinPending,
			m.versionAccuracy, m.refits, m.refitSeconds, m.refitWindow, m.refitSV, m.refitObj, m.refitAt, m.keyErrors,
			m.rankRequests, m.rankCandidates, m.rankSeconds, m.rankWait, m.calObserved, m.calLower, m.calUpper, m.calCount, m.calWidth, m.calCoverage, m.calPairs, m.calRefits)
	}
	return m
}

func newModelDef(nm NamedModel, cfg Config, met *engineMetrics) (*modelDef, error) {
	name := nm.Name
	t := nm.Traits
	if t.Kind == 0 { // a classifier, bounded if it can say so
		_, t.Bound = online.Unwrap[online.Bounder](nm.Model)
		t.Kind = online.Classifier
	}
	if _, ok := nm.Model.(online.Bounder); t.Bound && !ok {
		return nil, fmt.Errorf("its traits say it has a bound, but %T has no Bound method", nm.Model)
	}
	d := &modelDef{name: name, fingerprint: nm.Fingerprint, proto: nm.Model, traits: t, newInst: nm.New,
		keyFactory: nm.Factory, maxKeys: nm.MaxKeys, members: nm.Members, label: nm.Label, fallback: -1, residual: nm.Residual}
	if d.newInst == nil {
		// Only the first shard of an instance-scope engine gets an
		// instance: nm.Model itself.
		d.newInst = func() (online.Model, error) {
			return nil, errors.New("more than one shard, or shards in partition scope, need NamedModel.New")
		}
	}
	if nm.Factory != nil && d.maxKeys <= 0 {
		d.maxKeys = defaultMaxKeys
	}
	if len(nm.Use) > 0 {
		if cfg.Hash == nil {
			return nil, errors.New("features.use needs hashed features")
		}
		d.use = new([256]bool)
		for _, ns := range nm.Use {
			i := slices.Index(cfg.Hash.Namespaces, ns)
			if i < 0 {
				return nil, fmt.Errorf("features.use: namespace %q is not in the hashed features' namespaces", ns)
			}
			d.use[i+1] = true
		}
	}
	if p, ok := nm.Model.(online.Preparer); ok && len(nm.Members) == 0 { // an aggregator's input is not the event's features alone
		d.prep = p
	}
	if g, ok := nm.Model.(*online.MAM); ok && nm.Factory == nil && g.Mergeable() {
		d.mergeable = true
	}
	d.met = modelMetrics{
		scored:  met.scored.WithLabelValues(name),
		learned: met.learned.WithLabelValues(name),
		version: met.version.WithLabelValues(name),
		bound:   met.bound.Shard(name, -1),
	}
	if nm.Factory != nil {
		d.met.keyErrors = met.keyErrors.WithLabelValues(name)
	}
	if c := cfg.Calibration; c.Window > 0 {
		d.cal = newCalibration(name, t, c, met)
	}
	switch t.Kind {
	case online.Classifier:
		d.met.accuracy = met.accuracy.WithLabelValues(name)
		d.met.mistakes = met.mistakes.WithLabelValues(name)
		d.met.versionAccuracy = met.versionAccuracy.WithLabelValues(name)
	case online.Ordinal:
		d.met.mae = met.mae.WithLabelValues(name)
		d.met.zeroOne = met.zeroOne.WithLabelValues(name)
		met.tau.set(name, d.kendallTau)
		if cfg.Calibration.Window > 0 { // the expected label's error (calibration's per-level means)
			d.met.rmse = met.rmse.WithLabelValues(name)
		}
	case online.Ranking:
		met.tau.set(name, d.kendallTau)
	case online.Regression:
		met.tau.set(name, d.kendallTau)
		d.met.rmse = met.rmse.WithLabelValues(name)
	}
	d.onRefit = met.refitReporter(name)
	d.met.version.Set(float64(nm.Model.Version()))
	return d, nil
}

// bindScope sets what of d depends on where the engine's shards keep
// state, which the engine learns from its first shard (Engine.NewShard):
// in partition scope (partitioned) a mergeable model scores with the merge
// of every partition's statistics (merged); and the live bound check,
// which needs one bound for the whole stream, is for global models in
// instance scope and for the merged model in partition scope, never for
// key-scoped ones. It runs once, before the first shard's holders are
// built, and before any judging.
func (d *modelDef) bindScope(partitioned bool, window int, met *engineMetrics) {
	if partitioned && d.mergeable {
		d.merged = holder.NewMerge(d.proto.(*online.MAM))
	}
	jt := d.traits
	if jt.Bound && (d.keyFactory != nil || (partitioned && !d.mergeable)) {
		jt.Bound = false
	}
	j := online.NewJudge(jt, window)
	j.DeferTau() // computed when scraped (kendallTau), not every 100 labelled events
	d.judgeMu.Lock()
	d.quality = j
	d.judgeMu.Unlock()
	if !jt.Bound {
		return
	}
	if d.merged != nil {
		d.bound = d.merged
	} else {
		d.bound = d.proto.(online.Bounder)
	}
	d.met.violations = met.violations.WithLabelValues(d.name)
	for _, rho := range d.quality.BoundGrid() {
		r := strconv.FormatFloat(rho, 'g', -1, 64)
		d.met.observed = append(d.met.observed, met.observed.WithLabelValues(d.name, r))
		d.met.limit = append(d.met.limit, met.limit.WithLabelValues(d.name, r))
	}
}

// scored records a published prediction.
func (d *modelDef) scored(p online.Prediction) {
	d.met.scored.Inc()
	if p.HasBound {
		d.met.bound.Observe(p.MistakeBound)
	}
}

// judge records a labelled event: p is the model's own prediction for it
// before it learned from it, y its label (as mapped by the model), raw the
// wire label, preds every model's prediction for the event (a fallback's
// among them). What the model published (p, or its fallback's answer) is
// judged; the calibration window takes p when it is a decision. The
// judging is online.Judge's; this exports it. Shards call it
// concurrently.
func (d *modelDef) judge(p online.Prediction, y, raw float64, preds []online.Prediction, cal *wire.Calibrated) {
	d.met.learned.Inc()
	pub := d.published(p, preds)
	if c := d.cal; c != nil && d.decided(&p) {
		c.mu.Lock()
		c.add(p, y, raw, cal)
		c.mu.Unlock()
	}
	d.judgeMu.Lock()
	defer d.judgeMu.Unlock()
	d.judgeLocked(p, pub, y, raw, d.bound)
	d.judged()
}

// judged sets the prequential quality's gauges (and mistakes counter)
// from the judge; judgeMu is held.
func (d *modelDef) judged() {
	j := d.quality
	switch d.traits.Kind {
	case online.Classifier:
		if n := j.Mistakes(); n != d.mistakes {
			d.met.mistakes.Add(float64(n - d.mistakes))
			d.mistakes = n
		}
		d.met.accuracy.Set(j.Accuracy())
		d.met.versionAccuracy.Set(j.VersionAccuracy())
	case online.Ordinal:
		d.met.mae.Set(j.MAE())
		d.met.zeroOne.Set(j.ZeroOne())
	}
}

// judgeLocked is judge's part under judgeMu: p the model's prediction, pub
// the one published for the event. The quality gauges are the caller's to
// set (judged), once for the events it judges under one hold; the
// calibration window is the caller's to give p (calibration.add, under
// its own lock).
func (d *modelDef) judgeLocked(p, pub online.Prediction, y, raw float64, b online.Bounder) {
	j := d.quality
	if d.traits.Kind == online.Ordinal && pub.HasValue {
		j.AddValue(pub.Value, raw) // the expected label published
	}
	if !j.Add(pub, y, b) {
		return
	}
	if d.met.rmse != nil {
		d.met.rmse.Set(j.RMSE())
	}
	if _, all := j.Violations(); b != nil && p.HasBound {
		for i := range d.met.observed {
			d.met.observed[i].Set(j.BoundObserved(i))
			d.met.limit[i].Set(j.BoundLimit(i))
		}
		d.met.violations.Add(float64(all - d.violations))
		d.violations = all
	}
}

// tauRefresh is the least time between two computations of a model's
// τ-b for the gauge: a scrape sooner gets the last one. τ holds the
// model's judge lock for about 100 µs (a window of 1 000), which the
// appliers wait for; /metrics asked for it in a loop (by a client, when
// it is not in http.auth.protect) would otherwise stall them.
var tauRefresh = time.Second

// kendallTau is the model's τ-b over its judge's window, for the gauge's
// scrape: computed now, unless it was less than tauRefresh ago (NaN
// before its scope is bound).
func (d *modelDef) kendallTau() float64 {
	d.judgeMu.Lock()
	defer d.judgeMu.Unlock()
	if d.quality == nil {
		return math.NaN()
	}
	if now := time.Now(); d.tauAt.IsZero() || now.Sub(d.tauAt) >= tauRefresh {
		d.tau, d.tauAt = d.quality.KendallTau(), now
	}
	return d.tau
}

// scrapeGauges is a gauge vector by model whose values are computed when
// Prometheus collects them, for a measure too dear to keep current on the
// events' path: Kendall's τ-b over a window of 1 000 costs about 100 µs,
// which at every 100th labelled event was a fifth of the CPU of a ratings
// configuration's regression models (`streamer bench --config
// configs/recommendation-ratings.yaml --no-broker`).
type scrapeGauges struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	fns  map[string]func() float64 // by model
}

func newScrapeGauges(name, help, label string) *scrapeGauges {
	return &scrapeGauges{desc: prometheus.NewDesc(name, help, []string{label}, nil), fns: map[string]func() float64{}}
}

// set makes f the value of the gauge labelled value.
func (g *scrapeGauges) set(value string, f func() float64) {
	g.mu.Lock()
	g.fns[value] = f
	g.mu.Unlock()
}

func (g *scrapeGauges) Describe(ch chan<- *prometheus.Desc) { ch <- g.desc }

func (g *scrapeGauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	fns := maps.Clone(g.fns)
	g.mu.Unlock()
	for v, f := range fns {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, f(), v)
	}
}

// accepts reports whether saved state s may be restored into the model:
// written by an identically configured model (equal fingerprints and type),
// or — the one-time migration of state written before the model registry,
// whose fingerprints were computed differently — an encoding of format
// version 1 whose own parameters and dimension are exactly those
// configured now. (Such a state does not record feature names: a reordering
// of features.names made together with the upgrade is not detected.)
func (em *modelDef) accepts(s snapshot.Model) bool {
	if s.Type != em.proto.Type() {
		return false
	}
	if s.Fingerprint == em.fingerprint {
		return true
	}
	build := em.newInst
	if em.keyFactory != nil {
		build = em.keyFactory
	}
	states := [][]byte{s.Data}
	if holder.IsKeyed(s.Data) {
		_, st, err := holder.DecodeKeyed(s.Data)
		if err != nil || len(st) == 0 {
			return false
		}
		states = st
	}
	want, err := em.proto.MarshalBinary()
	if err != nil {
		return false
	}
	conf, err := online.Configuration(want)
	if err != nil {
		return false
	}
	for _, b := range states {
		b, err := KeyModelState(b) // a key's model, less its exploration statistics
		if err != nil || !online.IsVersion1(b) {
			return false
		}
		cand, err := build()
		if err != nil {
			return false
		}
		if ex, ok := cand.(*explored); ok {
			cand = ex.Model
		}
		if cand.UnmarshalBinary(b) != nil {
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
