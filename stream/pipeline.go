package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/engine"
)

// Sink receives the records a Processor produces (engine.Sink). *Publisher
// is the Sink that sends them to Kafka.
type Sink = engine.Sink

var _ Sink = (*Publisher)(nil)

// laneSink is a Sink that gives each partition's records a lane of their
// own (*Publisher: one of its queues, which keeps them in order): a
// partition publishes through its lane.
type laneSink interface {
	Lane(partition int) Sink
}

var _ laneSink = (*Publisher)(nil)

// Processor handles input messages statelessly (no snapshots): the
// pipeline calls Process for one message at a time (never concurrently), in
// offset order per partition, and the processor sends what the message
// produces to out. The Engine, whose state is in shards, is given with
// UseEngine instead.
type Processor interface {
	Process(msg *kafka.Message, out Sink)
}

// ProcessorFunc adapts a function to Processor.
type ProcessorFunc func(msg *kafka.Message, out Sink)

// Process calls f.
func (f ProcessorFunc) Process(msg *kafka.Message, out Sink) { f(msg, out) }

// PipelineConfig configures the consuming side of a Pipeline.
type PipelineConfig struct {
	Brokers        []string
	Group          string
	Topic          string
	ClientID       string
	StartOffset    int64         // kafka.FirstOffset or kafka.LastOffset for partitions without a committed offset
	CommitInterval time.Duration // checkpoint period without a state store
	SessionTimeout time.Duration
	FetchMaxBytes  int
	Dialer         *kafka.Dialer // connections of the group and the readers (TLS, SASL); nil = plaintext

	SnapshotEvery       time.Duration // checkpoint period with a state store
	SnapshotEveryEvents int           // also checkpoint after this many events (0 = off)

	// OnProcessed, when set, is called with each event after it is
	// processed (on the partition's goroutine, outside every lock): for
	// benchmarks.
	OnProcessed func(msg *kafka.Message)
	// Sink, when set, receives the records instead of the publisher and
	// must forward every one of them to it (a counting wrapper, for
	// benchmarks): checkpoints wait for the publisher's deliveries. Like
	// the publisher's, its Lane(partition) method, if it has one, gives
	// each partition's records their own (Publisher.Lane), so that a
	// wrapper's records take the service's path.
	Sink Sink

	// Source, when set, gives each assigned partition's fetcher instead
	// of the brokers (a MemorySource's, for benchmarks: source.go).
	Source func(partition int, offset int64) Fetcher

	// Health receives the brokers' errors on the consumer group and the
	// fetches (nil: none).
	Health *BrokerHealth
	// AllowEmptyState lets a partition (scope partition) start with empty
	// models when it has no state in the changelog but a committed offset;
	// without it the partition is held, not consumed, and /readyz says so.
	AllowEmptyState bool
}

// Pipeline is the consumer-group loop. One reader goroutine per assigned
// partition decodes and prepares its events (Worker.Prepare) and its
// applier applies them to the partition's shard in offset order, holding
// only that shard's lock, shared; a checkpoint goroutine periodically runs the one checkpoint path
// over every shard: pause it to capture its state with the offsets it
// includes and mark the publisher's stream there, wait until every record
// published before the mark is delivered, make each shard's snapshot
// durable (then write its key deltas to the key store), and only then
// commit those offsets. Without a state store the checkpoint flushes and
// commits. Either way an offset is committed only after every record
// produced from the events before it is delivered, so a crash replays, and
// never skips, events (at-least-once publishing); with a state store a
// restart also resumes each partition exactly where the restored state
// ends, so no event is learned twice.
//
// In instance scope (UseEngine with partitioned false) one shard holds
// every partition of the instance; in partition scope every partition is a
// shard of its own, restored from its scope of the changelog when assigned
// and released when revoked (partition.go).
type Pipeline struct {
	cfg    PipelineConfig
	proc   Processor // stateless processing (nil with an engine)
	engine *engine.Engine
	pub    *Publisher
	log    *slog.Logger
	met    *pipelineMetrics
	store  *StateStore

	startedEmpty bool // Restore found no state although snapshots are on

	// Partition scope (scale-out): see partition.go.
	partitioned bool
	refresh     time.Duration
	remoteSeq   map[int]uint64    // per partition held elsewhere: seq of the state merged (guarded by mu)
	held        map[string]string // "partition N": why it is held, not consumed (guarded by mu)
	smet        *scaleMetrics

	ckptMu    sync.Mutex         // serialises checkpoints
	committed map[int]int64      // per partition: last committed offset (guarded by ckptMu)
	mu        sync.Mutex         // guards shards, owned, remoteSeq; never held on the per-event path
	shards    map[string]*pshard // by scope
	owned     map[int]bool       // partitions of the current generation
	since     atomic.Int64       // events since the last checkpoint
	kick      chan struct{}      // asks for a checkpoint (snapshot.every_events)
	ready     atomic.Bool
	rank      *rankHTTP // POST /v1/rank (nil: off)
	// rankRefused counts POST /v1/rank's errors (RankHTTPConfig.Refused),
	// its 404s while ranking is off included; nil: not counted.
	rankRefused *prometheus.CounterVec
	saves       *saveHealth    // the checkpoints' saves: failures, backoff (saves.go)
	versions    *versionKeeper // model versions and rollbacks (versions.go; nil: off)

	// labels is Run's context: the profiler labels of its goroutines
	// (package stage) add to its own.
	labels context.Context

	// aborted ends the final checkpoints' waits for deliveries that will
	// never come (the brokers refuse the output): see Abort.
	aborted context.Context
	abort   context.CancelFunc
}

type pipelineMetrics struct {
	consumed   prometheus.Counter
	lag        *prometheus.GaugeVec
	commits    prometheus.Counter
	commitErrs prometheus.Counter
	fetchErrs  prometheus.Counter
	assigned   prometheus.Gauge
	latency    *engine.HistShards // by refit; each partition's applier observes into its own shard
	rebalances prometheus.Counter
}

func newPipelineMetrics(reg prometheus.Registerer) *pipelineMetrics {
	m := &pipelineMetrics{
		consumed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamer_events_consumed_total", Help: "Input messages consumed from Kafka."}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "streamer_consumer_lag", Help: "Messages between the last processed offset and the partition's high watermark."},
			[]string{"partition"}),
		commits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamer_offset_commits_total", Help: "Successful consumer-group offset commits."}),
		commitErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamer_offset_commit_errors_total", Help: "Failed consumer-group offset commits."}),
		fetchErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamer_fetch_errors_total", Help: "Errors fetching from the input topic (retried)."}),
		assigned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "streamer_assigned_partitions", Help: "Input partitions currently assigned to this instance."}),
		latency: engine.NewHistShards("streamer_event_processing_seconds", "Per-event processing time: decode, score, publish, learn (excludes fetch wait), by whether a background refit was running.",
			"refit", prometheus.ExponentialBuckets(1e-6, 2, 22)),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamer_rebalances_total", Help: "Consumer-group generations joined."}),
	}
	if reg != nil {
		reg.MustRegister(m.consumed, m.lag, m.commits, m.commitErrs, m.fetchErrs, m.assigned, m.latency, m.rebalances)
	}
	return m
}

// NewPipeline builds a pipeline that processes events with proc, a
// stateless Processor (nil when UseEngine follows); Run starts it.
func NewPipeline(cfg PipelineConfig, proc Processor, pub *Publisher, reg prometheus.Registerer, log *slog.Logger) *Pipeline {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.FetchMaxBytes == 0 {
		cfg.FetchMaxBytes = 4 << 20
	}
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = time.Second
	}
	if cfg.SnapshotEvery == 0 {
		cfg.SnapshotEvery = 5 * time.Second
	}
	if cfg.SessionTimeout == 0 {
		cfg.SessionTimeout = 10 * time.Second
	}
	aborted, abort := context.WithCancel(context.Background())
	p := &Pipeline{
		cfg: cfg, proc: proc, pub: pub, log: log, met: newPipelineMetrics(reg), smet: newScaleMetrics(reg),
		committed: map[int]int64{}, shards: map[string]*pshard{}, owned: map[int]bool{},
		kick: make(chan struct{}, 1), aborted: aborted, abort: abort, saves: newSaveHealth(cfg.SnapshotEvery),
	}
	if proc != nil {
		p.shards[""] = newPShard("", nil)
	}
	return p
}

// UseEngine makes the pipeline process events with engine's shards. With
// partitioned false (instance scope) one shard holds every partition and,
// with a store, checkpoints save it as one snapshot (call Restore before
// Run). With partitioned true (partition scope, scale-out) every input
// partition is a shard whose state is restored from its scope of the
// changelog when the partition is assigned, consumed from the offset that
// state includes, checkpointed to its scope and released when the
// partition is revoked; every refresh the other partitions' latest state is
// read from the changelog and merged (Engine.SetRemote). Partition scope
// needs a store with a changelog.
func (p *Pipeline) UseEngine(engine *engine.Engine, store *StateStore, partitioned bool, refresh time.Duration) error {
	p.engine, p.store, p.partitioned, p.refresh, p.proc = engine, store, partitioned, refresh, nil
	p.remoteSeq = map[int]uint64{}
	p.held = map[string]string{}
	clear(p.shards)
	if partitioned {
		if store == nil || store.changelog == nil {
			return errors.New("stream: partition scope needs a state store with a changelog")
		}
		return nil
	}
	st, err := engine.NewShard("")
	if err != nil {
		return err
	}
	p.shards[""] = newPShard("", st)
	return nil
}

// Restore loads the newest valid snapshot of the store, if any, into the
// instance-scope shard (empty models when there is none) and makes each
// partition resume at its offsets, whatever the group has committed.
func (p *Pipeline) Restore(ctx context.Context) error {
	sh := p.shards[""]
	if sh == nil || sh.st == nil {
		return errors.New("stream: Restore needs UseEngine in instance scope")
	}
	var snap *snapshot.Snapshot
	if p.store != nil {
		var err error
		if snap, err = p.store.Load(ctx); err != nil {
			return err
		}
	}
	if snap == nil {
		if _, _, err := sh.st.Restore(nil, p.keySource("")); err != nil {
			return err
		}
		if p.store != nil {
			p.startedEmpty = true
			p.log.Info("no usable snapshot: the models start empty (if the consumer group has committed offsets, start-up stops and says why, unless --allow-empty-state)")
		}
		return nil
	}
	fresh, dropped, err := sh.st.Restore(snap.Models, p.keySource(""))
	if err != nil {
		return err
	}
	offsets := map[int]int64{}
	for _, o := range snap.Offsets {
		if o.Topic == p.cfg.Topic {
			offsets[int(o.Partition)] = o.Offset
		}
	}
	maps.Copy(sh.next, offsets)
	maps.Copy(sh.saved, offsets)
	p.log.Info("restored snapshot", "seq", snap.Seq, "created", snap.CreatedAt, "offsets", offsets,
		"models", len(snap.Models)-len(dropped), "fresh_models", fresh, "dropped_models", dropped)
	if len(fresh) > 0 {
		p.log.Warn("models start empty: new, or configured differently from the snapshot", "models", fresh)
	}
	return nil
}

// Abort makes the stop of Run not wait for the publisher's deliveries (the
// final checkpoints give up at once): for when the brokers refuse them.
// What was not delivered is not committed, so it is processed again after
// a restart: nothing is lost.
func (p *Pipeline) Abort() { p.abort() }

// StartedEmpty reports whether Restore found no valid state to restore
// although snapshots are on.
func (p *Pipeline) StartedEmpty() bool { return p.startedEmpty }

// Ready reports whether the pipeline has joined its group and owns its
// partitions.
func (p *Pipeline) Ready() bool { return p.ready.Load() }

// Run consumes until ctx ends, then stops consuming, flushes the publisher,
// commits what was processed and returns nil. It returns an error if the
// group cannot be set up at all; the brokers' errors in joining it are
// retried and reported to Health.
func (p *Pipeline) Run(ctx context.Context) error {
	if p.proc == nil && p.engine == nil {
		return errors.New("stream: pipeline has neither a processor nor an engine")
	}
	p.labels = ctx
	group, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                p.cfg.Group,
		Brokers:           p.cfg.Brokers,
		Topics:            []string{p.cfg.Topic},
		StartOffset:       p.cfg.StartOffset,
		Dialer:            p.cfg.dialer(),
		HeartbeatInterval: max(100*time.Millisecond, p.cfg.SessionTimeout/10),
		SessionTimeout:    p.cfg.SessionTimeout,
		RebalanceTimeout:  p.cfg.SessionTimeout,
		JoinGroupBackoff:  time.Second,
		ErrorLogger:       dedupLogger(p.log, "consumer group", p.cfg.Health),
	})
	if err != nil {
		return fmt.Errorf("stream: consumer group: %w", err)
	}
	var wg sync.WaitGroup
	stopFollowing := func() {}
	if p.partitioned {
		fctx, cancel := context.WithCancel(ctx)
		stopFollowing = cancel
		wg.Go(func() { p.followRemote(fctx) })
	}
	var joinErrs repeats // logged once while they repeat
	wait := newBackoff(250*time.Millisecond, 5*time.Second)
	for {
		gen, err := group.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
				break
			}
			// A refusal stands on /readyz (and, at start-up, stops the
			// service through Health.Fatal); either way, retry.
			if p.cfg.Health.Report("consumer group", err, nil) == nil {
				joinErrs.warn(p.log, err.Error(), "join consumer group", "group", p.cfg.Group, "err", err)
			}
			p.ready.Store(false)
			select {
			case <-ctx.Done():
			case <-time.After(wait.next()):
			}
			continue
		}
		wait.reset()
		p.cfg.Health.OK("consumer group")
		p.startGeneration(gen)
	}
	stopFollowing()
	wg.Wait()
	p.ready.Store(false)
	// Close ends the generation: workers stop, checkpoint and commit, then
	// the member leaves the group.
	_ = group.Close()
	return nil
}

func (p *Pipeline) startGeneration(gen *kafka.Generation) {
	assigned := gen.Assignments[p.cfg.Topic]
	p.met.rebalances.Inc()
	p.met.assigned.Set(float64(len(assigned)))
	parts := make([]int, 0, len(assigned))
	for _, a := range assigned {
		parts = append(parts, a.ID)
	}
	p.log.Info("joined consumer group", "group", p.cfg.Group, "generation", gen.ID, "partitions", parts)
	p.mu.Lock()
	clear(p.owned)
	for _, a := range assigned {
		p.owned[a.ID] = true
	}
	sh := p.shards[""]
	p.mu.Unlock()
	for _, a := range assigned {
		part, off := a.ID, a.Offset
		if p.partitioned {
			gen.Start(func(ctx context.Context) {
				if sh, off, ok := p.restorePartition(ctx, part, off); ok {
					p.consume(ctx, gen, sh, part, off)
				}
			})
			continue
		}
		sh.mu.Lock()
		if mine, ok := sh.next[part]; ok {
			// The state already includes the events before mine (restored
			// from a snapshot, or learned while we owned the partition
			// before): resume exactly there, whatever the group committed.
			if mine != off {
				p.log.Info("resuming partition at the state's offset", "partition", part, "offset", mine, "group_offset", off)
			}
			off = mine
		}
		sh.mu.Unlock()
		gen.Start(func(ctx context.Context) { p.consume(ctx, gen, sh, part, off) })
	}
	gen.Start(func(ctx context.Context) { p.checkpointLoop(ctx, gen) })
	if r := p.rank; r != nil && (p.partitioned || r.keyed) { // its requests map keys to partitions
		gen.Start(r.refreshPartitions)
	}
	p.ready.Store(true)
}
