package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/wire"
)

// Sink receives the records a Processor produces. *Publisher is the Sink
// that sends them to Kafka.
type Sink interface {
	// Buffer returns an empty slice to encode a record into.
	Buffer() []byte
	// Publish queues a record; it owns m's byte slices from then on.
	Publish(m kafka.Message)
}

var _ Sink = (*Publisher)(nil)

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
	// benchmarks): checkpoints wait for the publisher's deliveries.
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
	engine *Engine
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
	saves       *saveHealth // the checkpoints' saves: failures, backoff (saves.go)

	// labels is Run's context: the profiler labels of its goroutines
	// (labels.go) add to its own.
	labels context.Context

	// aborted ends the final checkpoints' waits for deliveries that will
	// never come (the brokers refuse the output): see Abort.
	aborted context.Context
	abort   context.CancelFunc
}

// pshard is a shard as the pipeline runs it: the engine's state (nil for a
// stateless Processor), the lock its partitions' appliers take for a run of
// events, and its offsets.
//
// The partitions' appliers hold mu shared, each applying its own events
// (in instance scope through a lane of the shard: Shard.lane); checkpoint
// captures, ranking requests and stateless processing hold it exclusively
// (lock), so that they see the state between two events of every
// partition. A goroutine that is to lock it counts itself in waiting
// first, and in served once it holds it; an applier that finds one waiting
// lets go of mu between two events (yield) and takes it back only once
// every goroutine waiting then holds it (or has held it): a request waits
// for the one event each applier is applying, not for their runs.
// sync.RWMutex lets no reader in while a writer waits. gateMu guards
// waiting and served.
type pshard struct {
	scope string
	mu    sync.RWMutex
	st    *Shard        // nil: stateless
	next  map[int]int64 // per partition: next offset to process; the state includes everything before it (guarded by mu; a feed's applier keeps its own, feed.next)
	feeds map[int]*feed // per partition feeding the shard now (guarded by mu)
	saved map[int]int64 // offsets of the last durable snapshot (guarded by the pipeline's ckptMu)

	gateMu          sync.Mutex
	gate            sync.Cond // broadcast when served grows
	waiting, served int64
	requests        atomic.Int32 // = waiting, read without gateMu on the per-event path
}

// lock takes sh.mu exclusively, ahead of the appliers' next events.
func (sh *pshard) lock() {
	sh.waits()
	sh.mu.Lock()
	sh.in()
}

// waits counts a goroutine in waiting, before it locks sh.mu.
func (sh *pshard) waits() {
	sh.gateMu.Lock()
	sh.waiting++
	sh.requests.Store(int32(sh.waiting))
	sh.gateMu.Unlock()
}

// in counts a goroutine that holds sh.mu exclusively in served, and wakes
// the appliers waiting for it.
func (sh *pshard) in() {
	sh.gateMu.Lock()
	sh.waiting--
	sh.served++
	sh.requests.Store(int32(sh.waiting))
	sh.gate.Broadcast()
	sh.gateMu.Unlock()
}

func (sh *pshard) unlock() { sh.mu.Unlock() }

// yield lets the goroutines waiting to lock sh.mu in: an applier that
// holds it shared lets go of it, waits until those waiting at this moment
// have taken it, and takes it back (behind them).
func (sh *pshard) yield() {
	sh.gateMu.Lock()
	target := sh.served + sh.waiting
	sh.mu.RUnlock()
	for sh.served < target {
		sh.gate.Wait()
	}
	sh.gateMu.Unlock()
	sh.mu.RLock()
}

// foldNext brings sh.next up to the offsets the feeds' appliers reached;
// sh.mu is held exclusively.
func (sh *pshard) foldNext() {
	for _, f := range sh.feeds {
		if f.next >= 0 {
			sh.next[f.partition] = f.next
		}
	}
}

func newPShard(scope string, st *Shard) *pshard {
	sh := &pshard{scope: scope, st: st, next: map[int]int64{}, feeds: map[int]*feed{}, saved: map[int]int64{}}
	sh.gate.L = &sh.gateMu
	return sh
}

type pipelineMetrics struct {
	consumed   prometheus.Counter
	lag        *prometheus.GaugeVec
	commits    prometheus.Counter
	commitErrs prometheus.Counter
	fetchErrs  prometheus.Counter
	assigned   prometheus.Gauge
	latency    *histShards // by refit; each partition's applier observes into its own shard
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
		latency: newHistShards("streamer_event_processing_seconds", "Per-event processing time: decode, score, publish, learn (excludes fetch wait), by whether a background refit was running.",
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
func (p *Pipeline) UseEngine(engine *Engine, store *StateStore, partitioned bool, refresh time.Duration) error {
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
			p.log.Info("no snapshot found: starting with empty models")
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

// consume reads partition from offset and applies its events to shard sh
// in offset order until ctx ends (revoked, or shutting down), then
// checkpoints.
func (p *Pipeline) consume(ctx context.Context, gen *kafka.Generation, sh *pshard, partition int, offset int64) {
	setStage(p.labels, "stage", "fetch", "partition", strconv.Itoa(partition))
	r := p.fetcher(partition, offset) // source.go
	defer r.Close()
	var out Sink = p.pub
	if p.cfg.Sink != nil {
		out = p.cfg.Sink
	}
	lag := p.met.lag.WithLabelValues(strconv.Itoa(partition))
	idle, running := p.met.latency.shard("idle", partition), p.met.latency.shard("running", partition)
	defer p.met.lag.DeleteLabelValues(strconv.Itoa(partition))
	component := fmt.Sprintf("fetch %s/%d", p.cfg.Topic, partition)
	defer p.cfg.Health.Forget(component)
	input := &topicUse{key: "kafka.input_topic", topic: p.cfg.Topic, needs: "READ"}
	fetched := false
	var fetchErrs repeats // logged once while they repeat
	wait := newBackoff(250*time.Millisecond, 5*time.Second)
	fetch := func() (kafka.Message, bool) {
		for {
			msg, err := r.Next(ctx)
			if err == nil {
				if !fetched {
					p.cfg.Health.OK(component)
					fetched = true
					wait.reset()
				}
				return msg, true
			}
			if ctx.Err() != nil {
				return msg, false
			}
			p.met.fetchErrs.Inc()
			fetched = false
			if p.cfg.Health.Report(component, err, input) == nil {
				fetchErrs.warn(p.log, err.Error(), "fetch", "partition", partition, "err", err)
			}
			select {
			case <-ctx.Done():
				return msg, false
			case <-time.After(wait.next()):
			}
		}
	}
	// done accounts for a processed event that took busy of processing,
	// and ran for a run of n processed events (after their done): the
	// counters every partition shares move once per run.
	done := func(msg *kafka.Message, busy time.Duration) {
		if p.engine != nil && p.engine.Refitting() {
			running.Observe(busy.Seconds())
		} else {
			idle.Observe(busy.Seconds())
		}
		lag.Set(float64(msg.HighWaterMark - msg.Offset - 1))
		if p.cfg.OnProcessed != nil {
			p.cfg.OnProcessed(msg)
		}
	}
	ran := func(n int) {
		p.met.consumed.Add(float64(n))
		if every := p.cfg.SnapshotEveryEvents; (every > 0 && p.since.Add(int64(n)) >= int64(every)) || (p.engine != nil && p.store != nil && p.engine.CheckpointWanted()) {
			select {
			case p.kick <- struct{}{}:
			default:
			}
		}
	}
	if sh.st == nil {
		for {
			msg, ok := fetch()
			if !ok {
				break
			}
			start := time.Now()
			sh.mu.Lock() // no appliers to let go of it: no gate
			p.proc.Process(&msg, out)
			sh.next[partition] = msg.Offset + 1
			sh.mu.Unlock()
			done(&msg, time.Since(start))
			ran(1)
		}
	} else {
		p.apply(sh, partition, out, fetch, done, ran)
	}
	// Revoked or shutting down: make what we processed durable and commit it
	// before the partition can move to another member.
	cctx, cancel := context.WithTimeout(p.aborted, 30*time.Second)
	defer cancel()
	p.checkpoint(cctx, gen)
	if p.partitioned {
		p.releasePartition(partition)
		return
	}
	p.mu.Lock()
	delete(p.owned, partition)
	p.mu.Unlock()
}

// slot is one fetched event, decoded and prepared by its own worker,
// waiting to be applied.
type slot struct {
	msg  kafka.Message
	w    *Worker
	out  outbox        // the records applying it produced, until its partition's publisher takes them
	busy time.Duration // preparing and applying it
}

// feed is a partition feeding a shard: its slots, its applier's queue.
type feed struct {
	partition int
	st        *Shard // what the applier applies events to: the shard, or in instance scope its lane for the partition
	next      int64  // the offset after the last event applied (-1: none yet); written by the applier holding the shard's lock shared

	free  chan *slot                          // the partition's free slots, where a slot goes back once published
	ready *applyQueue                         // the prepared slots, in offset order, to the partition's applier
	done  func(*kafka.Message, time.Duration) // per event applied and published
	ran   func(n int)                         // per run of n such events, after their done
	// published is the offset after the last event whose records are
	// published (handed to the sink): a checkpoint waits for it to reach
	// the offsets it captured before it marks the publisher's stream.
	published atomic.Int64
}

// Slots per partition: the events of a partition prepared ahead of their
// application, or applied and not yet published. More of them let each
// of the goroutines an event passes through take more events per
// wake-up: 128 rather than 32 gave 10% more events/s and 11% less CPU per
// event in `streamer bench --no-broker` (linear mam, 4 partitions, 2
// vCPUs). A slot holds a worker (the decoded features and every model's
// preparation), so a partition's slots are bounded to slotMemory: fewer,
// down to minSlots, when the workers are large.
const (
	maxSlots   = 128
	minSlots   = 32
	slotMemory = 4 << 20
)

// slotsPerPartition is the number of slots of each partition (see
// maxSlots).
func (p *Pipeline) slotsPerPartition() int {
	return min(max(slotMemory/max(p.engine.workerBytes(), 1), minSlots), maxSlots)
}

// maxApplyBatch bounds the events a partition's applier adds to a hold of
// the shard's lock once it has applied those it took at the start: a hold
// applies what was queued when it began (at most the partition's slots)
// and, while it has applied fewer than maxApplyBatch, what was queued
// meanwhile.
const maxApplyBatch = 4 * minSlots

// apply runs a partition's events through engine shard sh on two
// goroutines: this one fetches, decodes and prepares each event (no lock),
// and the partition's applier (applyLoop) applies them in offset order
// holding the shard's lock shared, as many as are ready per hold (in
// instance scope through the partition's lane of the shard, in parallel
// with the other partitions' appliers), keeping each event's records in
// its slot's outbox; then, the lock released, it encodes the records and
// hands them to the publisher as one run, and frees the slots. An event is
// handed over once (its slot, to the applier). A checkpoint waits for each
// partition's applier to have published the records of the offsets it
// captured (feed.published). A ranking request or a capture waiting for
// the lock exclusively (pshard.requests) is let in between two events of
// a run (pshard.yield): it waits for the event each applier is applying
// (a few µs), not for their runs.
func (p *Pipeline) apply(sh *pshard, partition int, out Sink, fetch func() (kafka.Message, bool), done func(*kafka.Message, time.Duration), ran func(int)) {
	slots := p.slotsPerPartition()
	free := make(chan *slot, slots)
	f := &feed{partition: partition, free: free, ready: newApplyQueue(), done: done, ran: ran}
	floats := new(wire.FloatCache) // the partition's applier's
	for range slots {
		free <- &slot{w: p.engine.NewWorker(), out: outbox{sink: out, floats: floats}}
	}
	sh.lock()
	// Everything before the state's offset was published by the
	// partition's previous feed, which ended before this one began.
	f.published.Store(sh.next[partition])
	f.next = -1
	if off, ok := sh.next[partition]; ok {
		f.next = off
	}
	f.st = sh.st
	if sh.scope == "" {
		f.st = sh.st.lane(partition)
	}
	f.st.applies(partition)
	sh.feeds[partition] = f
	sh.unlock()
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		setStage(p.labels, "stage", "apply", "partition", strconv.Itoa(partition))
		sh.applyLoop(f, out)
	}()
	defer func() {
		f.ready.close()
		<-applied
		sh.lock()
		if sh.feeds[partition] == f {
			sh.foldNext()
			delete(sh.feeds, partition)
		}
		if f.st != sh.st {
			f.st.leave()
		}
		sh.unlock()
	}()
	var check *partitionCheck // rank.partitioner against the partition (partguard.go)
	if p.rank != nil {
		check = p.rank.guard.checker(partition)
	}
	for {
		msg, ok := fetch()
		if !ok {
			break
		}
		check.check(msg.Key)
		s := <-free
		s.msg = msg
		start := monotonic()
		s.w.Prepare(&s.msg) // no lock: reads no state
		s.busy = monotonic() - start
		f.ready.put(s)
	}
	for range slots { // every event sent is applied and published
		<-free
	}
}

// applyLoop is a partition's applier: it applies the slots put in
// f.ready, in the order put, under the shard's lock, as many as are ready
// per hold; then, the lock released, encodes their records and hands them
// to out as one run, and frees the slots. It returns once f.ready is
// closed and empty.
func (sh *pshard) applyLoop(f *feed, out Sink) {
	var batch []*slot
	var msgs []kafka.Message
	for {
		var ok bool
		var waited time.Duration
		if batch, ok = f.ready.take(batch[:0], false); ok && len(batch) == 0 {
			sh.mu.RLock()
			f.st.idle() // nothing waiting: a pause, or a run that drained the queue
			sh.mu.RUnlock()
			start := monotonic()
			batch, ok = f.ready.take(batch, true)
			waited = monotonic() - start
		}
		if !ok {
			return
		}
		sh.mu.RLock()
		if waited > 0 {
			f.st.waited(waited)
		}
		// One clock reading per event: the end of an event's
		// application is the start of the next one's, and its
		// scored_at.
		start := time.Now()
		for i := 0; i < len(batch); i++ {
			s := batch[i]
			if sh.requests.Load() > 0 {
				sh.yield()
				start = time.Now()
			}
			f.st.ApplyAt(s.w, &s.msg, &s.out, start)
			f.next = s.msg.Offset + 1
			end := time.Now()
			s.busy += end.Sub(start)
			start = end
			if i == len(batch)-1 && len(batch) < maxApplyBatch {
				batch, _ = f.ready.take(batch, false) // what was put meanwhile, in the same hold
			}
		}
		f.st.endRun()
		sh.mu.RUnlock()
		for _, s := range batch {
			start := monotonic()
			msgs = s.out.encode(msgs)
			s.busy += monotonic() - start
		}
		publishAll(out, msgs) // one run: the publisher's counts change once
		clear(msgs)
		msgs = msgs[:0]
		for _, s := range batch {
			f.published.Store(s.msg.Offset + 1)
			f.done(&s.msg, s.busy)
			f.free <- s
		}
		f.ran(len(batch))
		clear(batch)
	}
}

// applyQueue carries a partition's prepared slots to its applier: a
// slice under a mutex, which the applier empties at once (one lock for all
// the slots queued, where a channel takes one per slot: a shard's applier's
// receives were 4% of a score run's CPU), and a wake-up for an applier that
// found it empty. Its length is bounded by the partition's slots.
type applyQueue struct {
	mu      sync.Mutex
	slots   []*slot
	closed  bool
	waiting bool          // the applier waits for wake
	wake    chan struct{} // one token per wait
}

func newApplyQueue() *applyQueue { return &applyQueue{wake: make(chan struct{}, 1)} }

// put queues s.
func (q *applyQueue) put(s *slot) {
	q.mu.Lock()
	q.slots = append(q.slots, s)
	w := q.waiting
	q.waiting = false
	q.mu.Unlock()
	if w {
		q.wake <- struct{}{}
	}
}

// close says no slot follows; the applier ends once it took the last.
func (q *applyQueue) close() {
	q.mu.Lock()
	q.closed = true
	w := q.waiting
	q.waiting = false
	q.mu.Unlock()
	if w {
		q.wake <- struct{}{}
	}
}

// take appends the queued slots to dst, in the order put, and empties the
// queue. With wait it waits while the queue is empty and open; it reports
// false once the queue is closed and empty.
func (q *applyQueue) take(dst []*slot, wait bool) ([]*slot, bool) {
	q.mu.Lock()
	for len(q.slots) == 0 {
		if closed := q.closed; closed || !wait {
			q.mu.Unlock()
			return dst, !closed
		}
		q.waiting = true
		q.mu.Unlock()
		<-q.wake
		q.mu.Lock()
	}
	dst = append(dst, q.slots...)
	clear(q.slots)
	q.slots = q.slots[:0]
	q.mu.Unlock()
	return dst, true
}

// clockBase is the origin of monotonic.
var clockBase = time.Now()

// monotonic is the time since clockBase on the monotonic clock: for timing
// an interval, it reads the clock once where time.Now reads it twice (wall
// and monotonic).
func monotonic() time.Duration { return time.Since(clockBase) }

func (p *Pipeline) checkpointLoop(ctx context.Context, gen *kafka.Generation) {
	setStage(p.labels, "stage", "checkpoint")
	every := p.cfg.CommitInterval
	if p.store != nil {
		every = p.cfg.SnapshotEvery
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-p.kick:
		}
		if p.saves.backingOff() { // saves fail: the next attempt waits
			continue
		}
		p.checkpoint(ctx, gen)
	}
}

// shardCapture is one shard's part of a checkpoint.
type shardCapture struct {
	sh      *pshard
	offsets map[int]int64
	feeds   []*feed     // the partitions feeding sh at the capture
	cp      *Checkpoint // nil: nothing to save
}

// checkpoint is the one checkpoint path, for every shard of either scope:
// pause each shard in turn to capture its state with the offsets it
// includes; wait until the partitions' appliers have published the
// records of the captured events, and mark the publisher's
// stream after them; resume processing and wait until every record before the mark
// is delivered; make each captured shard's snapshot durable and write its
// key deltas to the key store; then commit the offsets of the partitions
// this member owns whose state is durable (all of them without a store).
func (p *Pipeline) checkpoint(ctx context.Context, gen *kafka.Generation) {
	p.ckptMu.Lock()
	defer p.ckptMu.Unlock()
	p.since.Store(0)
	p.mu.Lock()
	shards := slices.Collect(maps.Values(p.shards))
	p.mu.Unlock()
	slices.SortFunc(shards, func(a, b *pshard) int { return strings.Compare(a.scope, b.scope) })
	caps := make([]shardCapture, 0, len(shards))
	captured := false
	var failed error // the first capture or save that failed
	lost := false    // a shard's state is not durable: its capture or snapshot failed
	for _, sh := range shards {
		sh.lock()
		sh.foldNext()
		c := shardCapture{sh: sh, offsets: maps.Clone(sh.next), feeds: slices.Collect(maps.Values(sh.feeds))}
		// While saves fail, a shard whose snapshot is durable may still
		// have keys the key store did not take: captured again.
		if p.store != nil && sh.st != nil && (!maps.Equal(c.offsets, sh.saved) || p.saves.failing()) {
			cp, err := sh.st.Capture()
			if err != nil {
				sh.unlock()
				p.log.Error("checkpoint: capture state", "shard", sh.scope, "err", err)
				failed, lost = cmp.Or(failed, err), true
				continue
			}
			c.cp, captured = cp, true
		}
		sh.unlock()
		caps = append(caps, c)
	}
	// The records of the events the offsets cover must be delivered before
	// the offsets are committed; processing goes on meanwhile. They are
	// published once each partition's applier reaches the
	// captured offset; then the mark is after them.
	if err := awaitPublished(ctx, caps); err != nil {
		p.log.Warn("checkpoint: records not published; offsets not committed", "err", err)
		return
	}
	if err := p.pub.Await(ctx, p.pub.Mark()); err != nil {
		p.log.Warn("checkpoint: deliveries not acknowledged; offsets not committed", "err", err)
		return
	}
	if captured && p.partitioned {
		// The fence of partition snapshots judges the changelog as last read.
		if err := p.store.RefreshChangelog(ctx); err != nil {
			p.saves.logFailure(p.log, "", "checkpoint: partition states not saved, offsets not committed", err)
			p.saves.failed(err, true)
			return
		}
	}
	commit := map[int]int64{}
	for _, c := range caps {
		durable := true
		if c.cp != nil {
			var err error
			durable, err = p.save(ctx, c)
			failed, lost = cmp.Or(failed, err), lost || (err != nil && !durable)
		}
		if !durable {
			continue
		}
		if p.store != nil && !maps.Equal(c.offsets, c.sh.saved) {
			continue
		}
		p.mu.Lock()
		for part, off := range c.offsets {
			if p.owned[part] && p.committed[part] != off {
				commit[part] = off
			}
		}
		p.mu.Unlock()
	}
	p.savedAll(captured, failed, lost)
	if len(commit) == 0 {
		return
	}
	if err := gen.CommitOffsets(map[string]map[int]int64{p.cfg.Topic: commit}); err != nil {
		p.met.commitErrs.Inc()
		p.log.Warn("commit offsets", "offsets", commit, "err", err)
		return
	}
	p.met.commits.Inc()
	maps.Copy(p.committed, commit)
	p.saves.setCommitted(p.committed)
}

// awaitPublished waits until the records of every event the captures
// include are published: each feed's published offset reaches its
// partition's captured one.
func awaitPublished(ctx context.Context, caps []shardCapture) error {
	for _, c := range caps {
		for _, f := range c.feeds {
			want := c.offsets[f.partition]
			if err := waitUntil(ctx, func() bool { return f.published.Load() >= want }); err != nil {
				return fmt.Errorf("stream: partition %d: records of offsets before %d not published: %w", f.partition, want, err)
			}
		}
	}
	return nil
}

// savedAll records the outcome of a checkpoint's saves (captured: there
// was state to save; failed: the first save that failed, nil if none;
// lost: a shard's snapshot, or its capture, failed).
func (p *Pipeline) savedAll(captured bool, failed error, lost bool) {
	switch {
	case failed != nil:
		p.saves.failed(failed, lost)
	case captured:
		if d, n := p.saves.saved(); n > 0 {
			p.log.Info("checkpoint: saving again", "failed_for", roundDur(d), "failed_attempts", n)
		}
	}
}

// SavesFailing says why the service is not ready because its checkpoints'
// saves fail ("" when they do not; see saveHealth.NotReady).
func (p *Pipeline) SavesFailing(grace time.Duration) string { return p.saves.NotReady(grace) }

// Unsaved says what a stop leaves unsaved because the last checkpoint's
// saves failed, or because it did not finish (stuck): "" when neither.
func (p *Pipeline) Unsaved(stuck bool) string { return p.saves.unsaved(stuck) }

// save makes a captured shard durable: its snapshot, then its key deltas in
// the key store and, with a changelog, the changelog's key records. It
// reports whether the snapshot is durable, and the first of these saves
// that failed.
func (p *Pipeline) save(ctx context.Context, c shardCapture) (durable bool, failed error) {
	sh := c.sh
	if err := p.store.Save(ctx, sh.scope, p.cfg.Topic, c.offsets, c.cp.Models); err != nil {
		if errors.Is(err, ErrPartitionTakenOver) {
			// This member was cut off from the group (its session
			// expired) and the partition has a new owner: the state here
			// is stale; the group will revoke the partition.
			p.log.Warn("checkpoint: partition was taken over by another instance; not saving or committing its stale state", "shard", sh.scope, "err", err)
			return false, nil
		}
		p.saves.logFailure(p.log, sh.scope, "checkpoint: snapshot not durable; offsets not committed", err)
		return false, err
	}
	sh.saved = c.offsets
	// The snapshot holds the key deltas: if what follows fails, the
	// keys stay dirty and the next checkpoint writes them again, and a
	// restart redoes them from the snapshot.
	if err := p.store.PutKeys(ctx, sh.scope, c.cp); err != nil {
		p.saves.logFailure(p.log, sh.scope, "checkpoint: key records not written to the changelog (the next checkpoint writes them again)", err)
		return true, err
	}
	err := sh.st.Durable(c.cp)
	if err != nil {
		p.saves.logFailure(p.log, sh.scope, "checkpoint: keys not written to the key store (the next checkpoint writes them again)", err)
	}
	// The models whose keys were written are settled, also when another
	// model's write failed.
	sh.lock()
	sh.st.Settle(c.cp)
	sh.unlock()
	return true, err
}
