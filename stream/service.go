package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/engine"
)

// Service is the whole streamer process: the consumer-group pipeline with
// the scoring engine, the publisher, and the HTTP endpoints (/metrics,
// /healthz, /readyz).
type Service struct {
	cfg      config.Config
	reg      *prometheus.Registry
	log      *slog.Logger
	engine   *engine.Engine
	pub      *Publisher
	pipeline *Pipeline
	store    *StateStore
	ln       net.Listener
	srv      *http.Server
	httpSec  *httpSec // http.tls, http.auth
	health   *BrokerHealth
	sec      *KafkaSecurity
	keys     *keyStore
	served   chan struct{} // closed when the HTTP server has stopped

	// phase is what start-up is doing ("" once started): until then
	// /readyz is 503 with it.
	phase atomic.Pointer[string]
	// ranker answers POST /v1/rank once start-up is done.
	ranker atomic.Pointer[Pipeline]
	// rankRefused counts the POST /v1/rank requests refused (NewRankRefused).
	rankRefused *prometheus.CounterVec
	// httpRefused counts the other requests refused: unknown paths,
	// methods other than GET and HEAD outside the API.
	httpRefused *prometheus.CounterVec
	// backPressureWindow is the period watchBackPressure judges
	// (backPressureWindow; tests shorten it).
	backPressureWindow time.Duration
}

// Option tunes a Service.
type Option func(*options)

type options struct {
	snapshotWriteHook func()
	stateFS           *stateFS // WithStateFS (diskfull.go)
	allowEmptyState   bool
	reload            <-chan os.Signal // WithReloadSignal (httpsec.go)
}

// WithSnapshotWriteHook calls fn inside every snapshot file write, after the
// temporary file is written and before it is made durable and renamed. It
// exists for fault-injection tests (killing the process mid-write).
func WithSnapshotWriteHook(fn func()) Option {
	return func(o *options) { o.snapshotWriteHook = fn }
}

// WithAllowEmptyState lets the service start with empty models when no
// valid state is found although the consumer group has committed offsets
// (the learned state is then lost); without it, start-up stops with a
// *StateLostError.
func WithAllowEmptyState() Option {
	return func(o *options) { o.allowEmptyState = true }
}

// batchOverhead is what a record batch takes beyond kafka-go's count of
// its records (the batch header, 61 bytes, and a margin).
const batchOverhead = 256

func requiredAcks(s string) kafka.RequiredAcks {
	switch s {
	case "none":
		return kafka.RequireNone
	case "one":
		return kafka.RequireOne
	default:
		return kafka.RequireAll
	}
}

func startOffset(s string) int64 {
	if s == "latest" {
		return kafka.LastOffset
	}
	return kafka.FirstOffset
}

// NewService wires a service from a config validated against the model
// types of types. reg receives every metric (nil: a fresh registry); the
// HTTP listener is opened here so that a bad http.listen fails start-up.
func NewService(ctx context.Context, cfg config.Config, types *online.Registry, reg *prometheus.Registry, log *slog.Logger, opts ...Option) (*Service, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	// HTTP first: /healthz, /readyz (503 with the phase and its last
	// error) and /metrics answer from the first second, whatever the
	// start-up below waits for.
	health := NewBrokerHealth(reg, log)
	s := &Service{cfg: cfg, reg: reg, log: log, health: health, backPressureWindow: backPressureWindow}
	s.phase.Store(ptr("checking the brokers"))
	if err := s.serveHTTP(o.reload); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			s.stopHTTP(context.Background())
		}
	}()
	// The models, and what the engine does not take of the configuration,
	// before anything connects to the brokers.
	ecfg, models, err := engine.FromConfig(cfg, types)
	if err != nil {
		return nil, err
	}
	if err := engine.Check(ecfg, models); err != nil {
		return nil, err
	}
	// TLS and SASL for every Kafka connection; a wrong password or
	// certificate stops start-up here instead of being retried forever.
	sec, err := NewKafkaSecurity(cfg.Kafka)
	if err != nil {
		return nil, err
	}
	reachable, err := sec.CheckBrokers(ctx, cfg.Kafka.Brokers, cfg.Kafka.ClientID, AuthCheckTimeout, log)
	if err != nil {
		return nil, err
	}
	// A topic or group the brokers will never let this client use stops
	// start-up with the key to fix, rather than being retried forever.
	if reachable {
		if err := sec.CheckAccess(ctx, cfg, AuthCheckTimeout); err != nil {
			return nil, err
		}
	}
	health.principal = sec.principal()
	// Records are batched to what the output and dead-letter topics take
	// (their max.message.bytes); a dead letter larger than that is cut.
	outTopics := []string{cfg.Kafka.OutputTopic, cfg.Kafka.DLQTopic}
	if t := responseTopic(cfg); t != "" {
		outTopics = append(outTopics, t)
	}
	limits := map[string]int{}
	for _, t := range outTopics {
		limits[t] = DefaultMaxMessageBytes
	}
	if reachable {
		limits = sec.TopicLimits(ctx, cfg.Kafka, outTopics, AuthCheckTimeout)
	}
	smallest := limits[cfg.Kafka.OutputTopic]
	for _, t := range outTopics {
		smallest = min(smallest, limits[t])
	}
	batchBytes := max(4<<10, smallest-batchOverhead)
	log.Debug("producer batches", "batch_bytes", batchBytes, "max_message_bytes", limits)
	keys, err := s.openKeys(ctx, cfg, models, o.stateFS)
	if err != nil {
		return nil, err
	}
	legacyKeys := ""
	if cfg.Snapshot.Dir != "" && dirExists(filepath.Join(cfg.Snapshot.Dir, "keys")) {
		legacyKeys = filepath.Join(cfg.Snapshot.Dir, "keys")
	}
	ecfg.KeyStore, ecfg.LegacyKeyDir = keys.db, legacyKeys
	ecfg.Log, ecfg.AllowKeyLoss = log, o.allowEmptyState
	eng, err := engine.New(ecfg, models, reg)
	if err != nil {
		keys.close()
		return nil, err
	}
	published := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "streamer_records_published_total", Help: "Score and dead-letter records acknowledged by the broker."})
	pubErrs := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "streamer_publish_errors_total", Help: "Records whose delivery failed and was queued for retry."})
	undeliverable := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "streamer_records_undeliverable_total", Help: "Records the brokers refused even alone (larger than the topic's max.message.bytes), dropped; /readyz is 503 once there is one."}, []string{"topic"})
	truncated := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "streamer_dead_letters_truncated_total", Help: "Dead letters whose value was cut to fit the dead-letter topic's max.message.bytes (header streamer.original_bytes)."})
	pub := NewPublisher(PublisherConfig{
		Brokers:       cfg.Kafka.Brokers,
		ClientID:      cfg.Kafka.ClientID,
		BatchSize:     cfg.Kafka.Producer.BatchSize,
		BatchTimeout:  cfg.Kafka.Producer.BatchTimeout,
		BatchBytes:    int64(batchBytes),
		RequiredAcks:  requiredAcks(cfg.Kafka.Producer.RequiredAcks),
		BufferBytes:   int64(cfg.Kafka.Producer.BufferBytes),
		Transport:     sec.Transport(cfg.Kafka.ClientID),
		Health:        health,
		TopicKeys:     topicKeys(cfg),
		Truncate:      cfg.Kafka.DLQTopic,
		Undeliverable: undeliverable,
		Truncated:     truncated,
	}, log, func(n int) { published.Add(float64(n)) }, func(n int) { pubErrs.Add(float64(n)) })
	reg.MustRegister(published, pubErrs, undeliverable, truncated, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "streamer_publish_pending", Help: "Records published but not yet acknowledged."},
		func() float64 { return float64(pub.Pending()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "streamer_publish_pending_bytes", Help: "Bytes (keys and values) of the records published but not yet acknowledged; kafka.producer.buffer_bytes bounds them."},
			func() float64 { return float64(pub.PendingBytes()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "streamer_publish_wait_seconds_total", Help: "Time the partitions' appliers waited for acknowledgements at kafka.producer.buffer_bytes, summed over them."},
			func() float64 { return pub.Waited().Seconds() }))
	pipeline := NewPipeline(PipelineConfig{
		Brokers:        cfg.Kafka.Brokers,
		Group:          cfg.Kafka.Group,
		Topic:          cfg.Kafka.InputTopic,
		ClientID:       cfg.Kafka.ClientID,
		StartOffset:    startOffset(cfg.Kafka.StartOffset),
		CommitInterval: cfg.Kafka.CommitInterval,
		SessionTimeout: cfg.Kafka.SessionTimeout,
		FetchMaxBytes:  max(4<<20, 2*cfg.Kafka.MaxMessageBytes),
		Dialer:         sec.Dialer(cfg.Kafka.ClientID),

		SnapshotEvery:       cfg.Snapshot.Every,
		SnapshotEveryEvents: cfg.Snapshot.EveryEvents,
		Health:              health,
		AllowEmptyState:     o.allowEmptyState,
	}, nil, pub, reg, log) // the engine, by UseEngine below

	s.engine, s.pub, s.pipeline, s.sec, s.keys = eng, pub, pipeline, sec, keys
	if cfg.Snapshot.Enabled() {
		s.phase.Store(ptr("opening the state store"))
	}
	s.store, err = OpenStateStore(ctx, cfg.Snapshot, cfg.Kafka.Brokers, cfg.Kafka.ClientID, cfg.Fingerprint(), reg, log, health,
		sec.ChangelogOption(cfg.Kafka.ClientID))
	if err == nil && s.store != nil && o.stateFS != nil {
		err = s.store.useFileFS(cfg.Snapshot, o.stateFS.snap)
	}
	if err == nil && s.store != nil && o.snapshotWriteHook != nil {
		s.store.setWriteHook(o.snapshotWriteHook)
	}
	if err == nil {
		err = pipeline.UseEngine(eng, s.store, cfg.Snapshot.Partitioned(), cfg.Snapshot.RemoteRefresh)
	}
	if err == nil {
		err = openVersions(cfg, pipeline, eng, reg, log) // versions.go
	}
	if err == nil {
		err = pipeline.EnableRankHTTP(RankHTTPConfig{Partitioner: cfg.Rank.Partitioner, MaxBytes: cfg.Kafka.MaxMessageBytes, Registerer: reg, Refused: s.rankRefused,
			Partitions: func(ctx context.Context) (int, error) { return sec.Partitions(ctx, cfg.Kafka, AuthCheckTimeout) },
			LogTopic:   cfg.Rank.LogTopic})
	}
	if err == nil && !cfg.Snapshot.Partitioned() {
		// Bringing the key store to the snapshot writes to it: on a full
		// disk it waits for room (/readyz says so).
		status := s.phaseDetail("restoring the models' state")
		status("")
		err = retryDisk(ctx, log, "restore the models' state", status, func() error { return pipeline.Restore(ctx) })
	}
	if err == nil && !cfg.Snapshot.Partitioned() {
		err = pipeline.applyPendingRollbacks(ctx) // streamer models rollback, while stopped
	}
	if err == nil && pipeline.StartedEmpty() && o.allowEmptyState {
		log.Warn("no valid state found; --allow-empty-state: the models start empty, at the consumer group's committed offsets if it has any")
	}
	if err == nil && pipeline.StartedEmpty() && !o.allowEmptyState {
		s.phase.Store(ptr("no valid state found: checking the consumer group's committed offsets"))
		var committed map[int]int64
		err = retry(ctx, log, health, "fetch committed offsets", &topicUse{key: "kafka.group", topic: cfg.Kafka.InputTopic, needs: "READ"}, func() error {
			var err error
			committed, err = sec.CommittedOffsets(ctx, cfg.Kafka, AuthCheckTimeout)
			return err
		})
		if err == nil && len(committed) > 0 {
			err = &StateLostError{Group: cfg.Kafka.Group, Topic: cfg.Kafka.InputTopic, Committed: committed,
				Where: stateWhere(cfg.Snapshot), Corrupt: s.store.corrupt}
		}
	}
	if err != nil {
		_ = pub.Close(context.Background())
		_ = s.store.Close()
		eng.Close()
		keys.close()
		return nil, engine.ExplainKeyStore(cfg, err)
	}
	if s.store == nil {
		log.Warn("snapshots are off (no snapshot.dir or snapshot.changelog_topic): model state is lost on restart")
	}
	s.noteKeysUnwritable()
	s.ranker.Store(pipeline)
	s.phase.Store(ptr("")) // started: readiness is the pipeline's from now
	ok = true
	return s, nil
}

func ptr[T any](v T) *T { return &v }

// stateWhere says where the state of cfg is kept, for messages.
func stateWhere(cfg config.Snapshot) string {
	var where []string
	if cfg.Dir != "" {
		where = append(where, "snapshot.dir "+cfg.Dir)
	}
	if cfg.ChangelogTopic != "" {
		where = append(where, "snapshot.changelog_topic "+cfg.ChangelogTopic)
	}
	return strings.Join(where, " and ")
}

// serveHTTP opens http.listen and serves POST /v1/rank, /metrics,
// /healthz and /readyz (and /debug/pprof/ when configured) until stopHTTP:
// over TLS with http.tls, the protected groups only with a token with
// http.auth (httpsec.go). A bad TLS or tokens file fails it, before
// anything connects to the brokers.
func (s *Service) serveHTTP(reload <-chan os.Signal) error {
	sec, err := newHTTPSec(s.cfg.HTTP, s.reg, s.log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.cfg.HTTP.Listen)
	if err != nil {
		return fmt.Errorf("http.listen: %w", err)
	}
	s.ln = ln
	cfg := s.cfg
	mux := http.NewServeMux()
	// The endpoints outside the API answer GET and HEAD; another method, or
	// a path served by nothing, gets the API's JSON error body, counted.
	s.httpRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streamer_http_refused_total",
		Help: "HTTP requests outside the API's endpoints answered with an error (404 not_found: a path served by nothing, a typo or a probe; 405 method_not_allowed: another method than GET or HEAD on /metrics, /healthz, /readyz), by code and reason."},
		[]string{"code", "reason"})
	refused := s.httpRefused
	refused.WithLabelValues("404", reasonNotFound)
	refused.WithLabelValues("405", reasonMethod)
	if err := s.reg.Register(refused); err != nil {
		return err
	}
	get := func(h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				w.Header().Set("Allow", "GET, HEAD")
				WriteRankError(w, refused, http.StatusMethodNotAllowed, reasonMethod, r.Method+" "+r.URL.Path+": want GET or HEAD")
				return
			}
			h(w, r)
		}
	}
	mux.Handle("/metrics", get(promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}).ServeHTTP))
	mux.HandleFunc("/healthz", get(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "ok")
	}))
	mux.HandleFunc("/readyz", get(func(w http.ResponseWriter, r *http.Request) {
		if reason := s.NotReady(); reason != "" {
			http.Error(w, "not ready: "+reason+s.readyWarning(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready"+s.readyWarning())
	}))
	s.rankRefused = NewRankRefused()
	if err := s.reg.Register(s.rankRefused); err != nil {
		return err
	}
	// Every method: ServeRank answers another than POST with a 405 and a
	// JSON body, as it answers every error.
	mux.HandleFunc("/v1/rank", func(w http.ResponseWriter, r *http.Request) {
		p := s.ranker.Load()
		if p == nil {
			WriteRankError(w, s.rankRefused, http.StatusServiceUnavailable, reasonNotReady, s.NotReady())
			return
		}
		p.ServeRank(w, r)
	})
	profileRefused := NewProfileRefused()
	if err := s.reg.Register(profileRefused); err != nil {
		return err
	}
	mux.HandleFunc("/v1/profiles/", func(w http.ResponseWriter, r *http.Request) {
		p := s.ranker.Load()
		if p == nil {
			WriteRankError(w, profileRefused, http.StatusServiceUnavailable, reasonNotReady, s.NotReady())
			return
		}
		p.ServeProfile(w, r, profileRefused)
	})
	if err := s.serveModels(mux); err != nil { // versionshttp.go
		return err
	}
	// Every other path: a 404 with the API's JSON error body naming the
	// endpoints, counted, instead of net/http's plain "404 page not found".
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if len(p) > 200 {
			p = p[:200] + "…"
		}
		WriteRankError(w, refused, http.StatusNotFound, reasonNotFound, "no endpoint "+strconv.Quote(p)+": "+endpoints)
	})
	if cfg.HTTP.PProf { // off by default: /debug/pprof/ is then a 404
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	s.srv = &http.Server{Handler: sec.guard(mux), ReadHeaderTimeout: min(5*time.Second, cfg.HTTP.ReadTimeout),
		ReadTimeout: cfg.HTTP.ReadTimeout, WriteTimeout: cfg.HTTP.WriteTimeout, IdleTimeout: cfg.HTTP.IdleTimeout,
		TLSConfig: sec.serverTLS(), ErrorLog: errorLog(s.log)}
	s.served = make(chan struct{})
	go func() {
		defer close(s.served)
		var err error
		if s.srv.TLSConfig != nil {
			err = s.srv.ServeTLS(ln, "", "") // the certificate: TLSConfig.GetConfigForClient
		} else {
			err = s.srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server", "err", err)
		}
	}()
	s.httpSec = sec
	sec.start(reload)
	return nil
}

// endpoints lists what the HTTP server serves, for the 404 of any other
// path.
const endpoints = "GET /metrics, /healthz, /readyz; POST /v1/rank; GET /v1/profiles/{entity}/{id}; " +
	"GET /v1/models, GET /v1/models/{model}, POST /v1/models/{model}/rollback; /debug/pprof/ with http.pprof"

// stopHTTP stops the HTTP server, waiting for the requests in flight
// until ctx ends.
func (s *Service) stopHTTP(ctx context.Context) {
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
	}
	<-s.served
	s.httpSec.stop()
}

// keyStore is the embedded store of key-scoped models (nil db without
// any): in snapshot.dir/keystore when there is a snapshot.dir, else in a
// temporary directory removed at stop (the state is then in the changelog,
// or nowhere without snapshots).
type keyStore struct {
	db  *keystore.DB
	tmp string
}

func openKeyStore(cfg config.Config, models []engine.NamedModel, log *slog.Logger, opts ...keystore.Option) (*keyStore, error) {
	if !slices.ContainsFunc(models, func(m engine.NamedModel) bool { return m.Factory != nil }) {
		return &keyStore{}, nil
	}
	dir, tmp := "", ""
	if cfg.Snapshot.Dir != "" {
		dir = filepath.Join(cfg.Snapshot.Dir, "keystore")
		if old := filepath.Join(cfg.Snapshot.Dir, "keys"); dirExists(old) {
			log.Warn("snapshot.dir/keys holds the evicted key-scoped models of an earlier version: each such key is read from there on its next event and moves to the key store (snapshot.dir/keystore) at the next checkpoint", "dir", old)
		}
	} else {
		removeStaleKeyStores(os.TempDir(), log)
		var err error
		if tmp, err = os.MkdirTemp("", tmpKeyStorePrefix); err != nil {
			return nil, fmt.Errorf("key store: %w", err)
		}
		holdTmpKeyStore(tmp, true)
		dir = tmp
	}
	db, err := keystore.Open(dir, log, opts...)
	if err != nil {
		if tmp != "" {
			_ = os.RemoveAll(tmp)
			holdTmpKeyStore(tmp, false)
		}
		return nil, engine.ExplainKeyStoreOpen(cfg, fmt.Errorf("snapshot.dir: key store: %w", err))
	}
	// A restore that falls back to an older snapshot takes the key store
	// back as far (keystore.Table.UndoTo).
	db.SetUndoDepth(cfg.Snapshot.Keep)
	return &keyStore{db: db, tmp: tmp}, nil
}

func (k *keyStore) close() {
	if k == nil || k.db == nil {
		return
	}
	_ = k.db.Close()
	if k.tmp != "" {
		_ = os.RemoveAll(k.tmp)
		holdTmpKeyStore(k.tmp, false)
	}
}

func dirExists(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// Addr is the address the HTTP endpoints are served on.
func (s *Service) Addr() string { return s.ln.Addr().String() }

// Registry is the registry holding the service's metrics.
func (s *Service) Registry() *prometheus.Registry { return s.reg }

// readyWarning is what /readyz says beside readiness, each on a line of
// its own after a newline: a rank.partitioner that does not map keys as
// the producers do (Pipeline.RankWarning); "" when nothing.
func (s *Service) readyWarning() string {
	var out string
	if p := s.ranker.Load(); p != nil { // set once start-up is done
		if w := p.RankWarning(); w != "" {
			out = "\nwarning: " + w
		}
		if d := s.engine.KeyFaults(); d != "" { // engine: failed keys
			out += "\ndegraded: " + d
		}
	}
	return out
}

// Ready reports whether the service has joined its consumer group and the
// brokers refuse it nothing.
func (s *Service) Ready() bool { return s.NotReady() == "" }

// NotReady returns why the service is not ready ("" when it is): the
// brokers' standing refusals (BrokerHealth), or the consumer group not
// joined yet.
func (s *Service) NotReady() string {
	if p := *s.phase.Load(); p != "" {
		if r := s.health.Reason(); r != "" {
			return "starting: " + p + ": " + r
		}
		if r := s.health.Retrying(); r != "" {
			return "starting: " + p + "; retrying: " + r
		}
		return "starting: " + p
	}
	if r := s.health.Reason(); r != "" {
		return r
	}
	if r := s.pipeline.SavesFailing(s.cfg.Kafka.UnreadyAfter); r != "" {
		return r
	}
	if r := s.pipeline.Held(); r != "" {
		return r
	}
	if r := s.pub.Undeliverable(); r != "" {
		return r
	}
	if r := s.health.Stalled(s.cfg.Kafka.UnreadyAfter); r != "" {
		return r
	}
	if !s.pipeline.Ready() {
		if r := s.health.Retrying(); r != "" {
			return "consumer group not joined; retrying: " + r
		}
		return "consumer group not joined"
	}
	return ""
}

// Run serves until ctx ends, then shuts down cleanly: stop consuming, flush
// the producer, commit what was processed, stop the HTTP server.
func (s *Service) Run(ctx context.Context) error {
	s.log.Info("streamer running", "brokers", s.cfg.Kafka.Brokers, "group", s.cfg.Kafka.Group,
		"input", s.cfg.Kafka.InputTopic, "output", s.cfg.Kafka.OutputTopic, "dlq", s.cfg.Kafka.DLQTopic,
		"http", s.Addr(), "models", len(s.cfg.Models))
	s.engine.Start()
	probeCtx, stopProbe := context.WithCancel(context.Background())
	probed := make(chan struct{})
	go func() { defer close(probed); s.probeBrokers(probeCtx) }()
	pressed := make(chan struct{})
	go func() { defer close(pressed); s.watchBackPressure(probeCtx) }()
	defer func() { stopProbe(); <-probed; <-pressed }()
	// Once ctx ends, the stop may take cfg.ShutdownTimeout: past it, the
	// final checkpoints and the producer give up (late closes).
	finished, late := make(chan struct{}), make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-ctx.Done():
		case <-finished:
			return
		}
		select {
		case <-time.After(s.cfg.ShutdownTimeout):
			close(late)
			s.pub.Release() // an applier waiting for deliveries stops waiting
			s.pipeline.Abort()
		case <-finished:
		}
	}()
	// A refusal of the brokers during start-up stops the service with it.
	pctx, stop := context.WithCancel(ctx)
	var fatal *BrokerRefusal
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case r := <-s.health.Fatal():
			fatal = r
			s.pub.Release()
			s.pipeline.Abort() // what the brokers refuse will not be delivered
			stop()
		case <-pctx.Done():
		}
	}()
	stuck, err := s.runPipeline(pctx, late) // stuck: gave up on it at shutdown_timeout
	stop()
	<-watched
	if fatal != nil {
		r := *fatal // the standing one is shared with /readyz
		s.sec.explainSessionTimeout(ctx, &r, s.cfg.Kafka)
		s.log.Error("the brokers refuse this configuration: stopping", "key", r.Key, "err", &r)
		err = &r
	}
	if !stuck {
		s.engine.Close()
	}
	s.log.Info("stopping: flushing producer")
	cctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-late:
			cancel()
		case <-finished:
		}
	}()
	pctx, pcancel := context.WithCancel(cctx)
	defer pcancel()
	if fatal != nil {
		pcancel() // refused: the records will not be delivered (nor their offsets committed)
	}
	if perr := s.pub.Close(pctx); perr != nil && err == nil {
		err = perr
	}
	loss := s.stopLoss(stuck) // what the final checkpoint did not save
	select {
	case <-late:
		if fatal == nil {
			pending := s.pub.Pending()
			err = fmt.Errorf("stream: the stop took longer than shutdown_timeout (%v): gave up with %d records not delivered; the offsets of their events are not committed, so they are processed again after the restart", s.cfg.ShutdownTimeout, pending)
			if loss != "" {
				err = fmt.Errorf("%w; %s", err, loss)
			}
			s.log.Error("stop timed out", "shutdown_timeout", s.cfg.ShutdownTimeout.String(), "undelivered_records", pending)
		}
	default:
		if loss != "" && err == nil {
			err = errors.New("stream: " + loss)
		}
	}
	logStopLoss(s.log, loss)
	s.stopHTTP(cctx)
	_ = s.store.Close()
	if kerr := s.closeKeys(late); kerr != nil {
		s.log.Error("stopping", "err", kerr)
	}
	s.log.Info("stopped")
	return err
}

// backPressureWindow is the period watchBackPressure judges and logs at
// most once.
const backPressureWindow = time.Minute

// watchBackPressure logs, at most once a window (s.backPressureWindow),
// that the brokers hold publishing back: when the partitions' appliers
// waited at kafka.producer.buffer_bytes for half the window or more,
// summed over them. The lag then grows with no error anywhere; the metric
// streamer_publish_wait_seconds_total and the alert say the same.
func (s *Service) watchBackPressure(ctx context.Context) {
	window := s.backPressureWindow
	t := time.NewTicker(window)
	defer t.Stop()
	last := s.pub.Waited()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		w := s.pub.Waited()
		if held := w - last; held >= window/2 {
			s.log.Warn("publishing is held back by the brokers: the output topic takes records slower than the service scores them, so it consumes only as fast (the lag grows)",
				"appliers_waited", held.Round(time.Millisecond).String(), "window", window.String(),
				"pending_bytes", s.pub.PendingBytes(), "kafka.producer.buffer_bytes", s.cfg.Kafka.Producer.BufferBytes)
		}
		last = w
	}
}

// probeBrokers asks the brokers for their API versions every few seconds
// until ctx ends, reporting to the health as component "brokers": so
// that /readyz turns 503 when they have been unreachable for longer than
// kafka.unready_after whatever the service is doing meanwhile (waiting
// for deliveries in a checkpoint, joining, idle).
func (s *Service) probeBrokers(ctx context.Context) {
	every := min(2*time.Second, s.cfg.Kafka.UnreadyAfter/4)
	tr := s.sec.Transport(s.cfg.Kafka.ClientID)
	defer tr.CloseIdleConnections()
	client := &kafka.Client{Addr: kafka.TCP(s.cfg.Kafka.Brokers...), Transport: tr}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, max(every, 3*time.Second))
		_, err := client.ApiVersions(pctx, &kafka.ApiVersionsRequest{})
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			s.health.failed("brokers", "unreachable: "+err.Error())
			tr.CloseIdleConnections() // dial afresh next time
		default:
			s.health.OK("brokers")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// responseTopic is where the responses to ranking requests read from Kafka
// go when it is not the output topic ("" otherwise).
func responseTopic(cfg config.Config) string {
	if t := cfg.Rank.ResponseTopic; cfg.Rank.Enabled() && t != "" && t != cfg.Kafka.OutputTopic {
		return t
	}
	return ""
}

// topicKeys names the topics the service writes by their config keys.
func topicKeys(cfg config.Config) map[string]string {
	m := map[string]string{cfg.Kafka.OutputTopic: "kafka.output_topic", cfg.Kafka.DLQTopic: "kafka.dlq_topic"}
	if t := responseTopic(cfg); t != "" {
		m[t] = "rank.response_topic"
	}
	if t := cfg.Rank.LogTopic; cfg.Rank.Enabled() && t != "" {
		m[t] = "rank.log_topic"
	}
	return m
}
