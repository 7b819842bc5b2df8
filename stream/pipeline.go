package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/snapshot"
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

// Processor handles input messages. The pipeline calls Process for one
// message at a time (never concurrently), in offset order per partition, and
// the processor sends what the message produces to out.
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

	// Health receives the brokers' errors on the consumer group and the
	// fetches (nil: none).
	Health *BrokerHealth
}

// Pipeline is the consumer-group loop: one reader goroutine per assigned
// partition feeds the Processor in offset order; a checkpoint goroutine
// periodically pauses processing, flushes the publisher, captures the
// processor's state with the offsets it includes, makes that snapshot
// durable, and only then commits those offsets. Without a state store the
// checkpoint flushes and commits. Either way an offset is committed only
// after every record produced from the events before it is delivered, so a
// crash replays, and never skips, events (at-least-once publishing); with a
// state store a restart also resumes each partition exactly where the
// restored state ends, so no event is learned twice.
type Pipeline struct {
	cfg      PipelineConfig
	proc     Processor
	pub      *Publisher
	log      *slog.Logger
	met      *pipelineMetrics
	store    *StateStore
	stateful Stateful

	// Partitioned state (scale-out): see partition.go.
	pstate    PartitionedState
	refresh   time.Duration
	remoteSeq map[int]uint64 // per partition held elsewhere: seq of the state merged (guarded by mu)
	smet      *scaleMetrics

	ckptMu    sync.Mutex    // serialises checkpoints
	mu        sync.Mutex    // serialises Process and state capture
	next      map[int]int64 // per partition: next offset to process; the state includes everything before it
	owned     map[int]bool  // partitions of the current generation
	committed map[int]int64 // per partition: last committed offset
	saved     map[int]int64 // offsets of the last durable snapshot (guarded by ckptMu)
	since     int           // events since the last checkpoint
	kick      chan struct{} // asks for a checkpoint (snapshot.every_events)
	ready     atomic.Bool

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
	latency    *prometheus.HistogramVec
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
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "streamer_event_processing_seconds", Help: "Per-event processing time: decode, score, publish, learn (excludes fetch wait), by whether a background refit was running.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 2, 22)}, []string{"refit"}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "streamer_rebalances_total", Help: "Consumer-group generations joined."}),
	}
	if reg != nil {
		reg.MustRegister(m.consumed, m.lag, m.commits, m.commitErrs, m.fetchErrs, m.assigned, m.latency, m.rebalances)
	}
	return m
}

// NewPipeline builds a pipeline; Run starts it.
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
	return &Pipeline{
		cfg: cfg, proc: proc, pub: pub, log: log, met: newPipelineMetrics(reg), smet: newScaleMetrics(reg),
		next: map[int]int64{}, owned: map[int]bool{}, committed: map[int]int64{}, saved: map[int]int64{},
		kick: make(chan struct{}, 1), aborted: aborted, abort: abort,
	}
}

// Abort makes the stop of Run not wait for the publisher's deliveries (the
// final checkpoints give up at once): for when the brokers refuse them.
// What was not delivered is not committed, so it is processed again after
// a restart: nothing is lost.
func (p *Pipeline) Abort() { p.abort() }

// UseStateStore makes checkpoints save proc's state to store before
// committing; proc must be the pipeline's processor.
func (p *Pipeline) UseStateStore(store *StateStore, proc Stateful) {
	p.store, p.stateful = store, proc
}

// Resume sets the offsets the processor's (restored) state includes: each
// partition is consumed from there, whatever the group has committed.
func (p *Pipeline) Resume(offsets map[int]int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	maps.Copy(p.next, offsets)
	maps.Copy(p.saved, offsets)
}

// Ready reports whether the pipeline has joined its group and owns its
// partitions.
func (p *Pipeline) Ready() bool { return p.ready.Load() }

// Run consumes until ctx ends, then stops consuming, flushes the publisher,
// commits what was processed and returns nil. It returns an error if the
// group cannot be set up at all; the brokers' errors in joining it are
// retried and reported to Health.
func (p *Pipeline) Run(ctx context.Context) error {
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
	if p.pstate != nil {
		fctx, cancel := context.WithCancel(ctx)
		stopFollowing = cancel
		wg.Go(func() { p.followRemote(fctx) })
	}
	var joinErrs repeats // logged once while they repeat
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
			case <-time.After(time.Second):
			}
			continue
		}
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
	p.mu.Unlock()
	for _, a := range assigned {
		part, off := a.ID, a.Offset
		if p.pstate != nil {
			gen.Start(func(ctx context.Context) {
				if off, ok := p.restorePartition(ctx, part, off); ok {
					p.consume(ctx, gen, part, off)
				}
			})
			continue
		}
		p.mu.Lock()
		if mine, ok := p.next[part]; ok {
			// The state already includes the events before mine (restored
			// from a snapshot, or learned while we owned the partition
			// before): resume exactly there, whatever the group committed.
			if mine != off {
				p.log.Info("resuming partition at the state's offset", "partition", part, "offset", mine, "group_offset", off)
			}
			off = mine
		}
		p.mu.Unlock()
		gen.Start(func(ctx context.Context) { p.consume(ctx, gen, part, off) })
	}
	gen.Start(func(ctx context.Context) { p.checkpointLoop(ctx, gen) })
	p.ready.Store(true)
}

func (p *Pipeline) consume(ctx context.Context, gen *kafka.Generation, partition int, offset int64) {
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:       p.cfg.Brokers,
		Topic:         p.cfg.Topic,
		Partition:     partition,
		MinBytes:      1,
		MaxBytes:      p.cfg.FetchMaxBytes,
		MaxWait:       2 * time.Second, // kafka-go uses it as the fetch response deadline too: keep it generous
		QueueCapacity: 4096,
		Dialer:        p.cfg.dialer(),
		ErrorLogger:   dedupLogger(p.log.With("partition", partition), "reader", nil),
	})
	defer r.Close()
	if err := r.SetOffset(offset); err != nil {
		p.log.Error("seek", "partition", partition, "offset", offset, "err", err)
		return
	}
	lag := p.met.lag.WithLabelValues(strconv.Itoa(partition))
	idle, running := p.met.latency.WithLabelValues("idle"), p.met.latency.WithLabelValues("running")
	refitting, _ := p.proc.(interface{ Refitting() bool })
	defer p.met.lag.DeleteLabelValues(strconv.Itoa(partition))
	component := fmt.Sprintf("fetch %s/%d", p.cfg.Topic, partition)
	input := &topicUse{key: "kafka.input_topic", topic: p.cfg.Topic, needs: "READ"}
	fetched := false
	var fetchErrs repeats // logged once while they repeat
	for {
		msg, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			p.met.fetchErrs.Inc()
			fetched = false
			if p.cfg.Health.Report(component, err, input) == nil {
				fetchErrs.warn(p.log, err.Error(), "fetch", "partition", partition, "err", err)
			}
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		if !fetched {
			p.cfg.Health.OK(component)
			fetched = true
		}
		start := time.Now()
		p.mu.Lock()
		p.proc.Process(&msg, p.pub)
		p.next[partition] = msg.Offset + 1
		p.since++
		if n := p.cfg.SnapshotEveryEvents; n > 0 && p.since >= n {
			select {
			case p.kick <- struct{}{}:
			default:
			}
		}
		p.mu.Unlock()
		if refitting != nil && refitting.Refitting() {
			running.Observe(time.Since(start).Seconds())
		} else {
			idle.Observe(time.Since(start).Seconds())
		}
		p.met.consumed.Inc()
		lag.Set(float64(msg.HighWaterMark - msg.Offset - 1))
	}
	// Revoked or shutting down: make what we processed durable and commit it
	// before the partition can move to another member.
	cctx, cancel := context.WithTimeout(p.aborted, 30*time.Second)
	defer cancel()
	p.checkpoint(cctx, gen)
	if p.pstate != nil {
		p.releasePartition(partition)
		return
	}
	p.mu.Lock()
	delete(p.owned, partition)
	p.mu.Unlock()
}

func (p *Pipeline) checkpointLoop(ctx context.Context, gen *kafka.Generation) {
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
		p.checkpoint(ctx, gen)
	}
}

// checkpoint pauses processing to capture the state with the offsets it
// includes and mark the publisher's stream there, resumes processing, waits
// until every record published before the mark is delivered, makes the
// snapshot durable and then commits the offsets of the partitions this
// member owns.
func (p *Pipeline) checkpoint(ctx context.Context, gen *kafka.Generation) {
	if p.pstate != nil {
		p.checkpointPartitions(ctx, gen)
		return
	}
	p.ckptMu.Lock()
	defer p.ckptMu.Unlock()
	p.mu.Lock()
	delivered := p.pub.Mark()
	p.since = 0
	offsets := maps.Clone(p.next)
	var models []snapshot.Model
	save := p.store != nil && !maps.Equal(offsets, p.saved)
	if save {
		var err error
		if models, err = p.stateful.Capture(); err != nil {
			p.mu.Unlock()
			p.log.Error("checkpoint: capture state", "err", err)
			return
		}
	}
	commit := map[int]int64{}
	for part, off := range offsets {
		if p.owned[part] && p.committed[part] != off {
			commit[part] = off
		}
	}
	p.mu.Unlock()
	// The records of the events the offsets cover must be delivered before
	// the offsets are committed; processing goes on meanwhile.
	if err := p.pub.Await(ctx, delivered); err != nil {
		p.log.Warn("checkpoint: deliveries not acknowledged; offsets not committed", "err", err)
		return
	}
	if save {
		if err := p.store.Save(ctx, p.cfg.Topic, offsets, models); err != nil {
			p.log.Error("checkpoint: snapshot not durable; offsets not committed", "err", err)
			return
		}
		p.saved = offsets
	}
	if len(commit) == 0 {
		return
	}
	if err := gen.CommitOffsets(map[string]map[int]int64{p.cfg.Topic: commit}); err != nil {
		p.met.commitErrs.Inc()
		p.log.Warn("commit offsets", "offsets", commit, "err", err)
		return
	}
	p.met.commits.Inc()
	p.mu.Lock()
	maps.Copy(p.committed, commit)
	p.mu.Unlock()
}
