package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
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
	StartOffset    int64 // kafka.FirstOffset or kafka.LastOffset for partitions without a committed offset
	CommitInterval time.Duration
	FetchMaxBytes  int
}

// Pipeline is the consumer-group loop: one reader goroutine per assigned
// partition feeds the Processor in offset order; a checkpoint goroutine
// periodically flushes the publisher and then commits the offsets whose
// results are acknowledged. Offsets are committed only after every record
// produced from the events before them has been delivered, so a crash
// replays, and never skips, events (at-least-once publishing).
type Pipeline struct {
	cfg  PipelineConfig
	proc Processor
	pub  *Publisher
	log  *slog.Logger
	met  *pipelineMetrics

	mu        sync.Mutex    // serialises Process and checkpoints
	next      map[int]int64 // per owned partition: next offset to process
	committed map[int]int64 // per partition: last committed offset
	released  map[int]int64 // partitions revoked from us: offset we had reached
	ready     atomic.Bool
}

type pipelineMetrics struct {
	consumed   prometheus.Counter
	lag        *prometheus.GaugeVec
	commits    prometheus.Counter
	commitErrs prometheus.Counter
	fetchErrs  prometheus.Counter
	assigned   prometheus.Gauge
	latency    prometheus.Histogram
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
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "streamer_event_processing_seconds", Help: "Per-event processing time: decode, score, publish, learn (excludes fetch wait).",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 10)}),
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
		cfg.FetchMaxBytes = 16 << 20
	}
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = time.Second
	}
	return &Pipeline{
		cfg: cfg, proc: proc, pub: pub, log: log, met: newPipelineMetrics(reg),
		next: map[int]int64{}, committed: map[int]int64{}, released: map[int]int64{},
	}
}

// Ready reports whether the pipeline has joined its group and owns its
// partitions.
func (p *Pipeline) Ready() bool { return p.ready.Load() }

// Run consumes until ctx ends, then stops consuming, flushes the publisher,
// commits what was processed and returns nil. It returns an error only if
// the group cannot be set up at all.
func (p *Pipeline) Run(ctx context.Context) error {
	group, err := kafka.NewConsumerGroup(kafka.ConsumerGroupConfig{
		ID:                p.cfg.Group,
		Brokers:           p.cfg.Brokers,
		Topics:            []string{p.cfg.Topic},
		StartOffset:       p.cfg.StartOffset,
		Dialer:            &kafka.Dialer{ClientID: p.cfg.ClientID, Timeout: 10 * time.Second, DualStack: true},
		HeartbeatInterval: time.Second,
		SessionTimeout:    10 * time.Second,
		RebalanceTimeout:  10 * time.Second,
		JoinGroupBackoff:  time.Second,
		ErrorLogger:       kafka.LoggerFunc(func(f string, a ...any) { p.log.Warn(fmt.Sprintf(f, a...), "component", "group") }),
	})
	if err != nil {
		return fmt.Errorf("stream: consumer group: %w", err)
	}
	for {
		gen, err := group.Next(ctx)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, kafka.ErrGroupClosed) {
				break
			}
			p.log.Warn("join consumer group", "group", p.cfg.Group, "err", err)
			p.ready.Store(false)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		p.startGeneration(gen)
	}
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
	for _, a := range assigned {
		part, off := a.ID, a.Offset
		p.mu.Lock()
		if mine, ok := p.released[part]; ok && (off < 0 || mine > off) {
			// Our state already includes events up to mine: resume there
			// rather than replaying them into the model a second time.
			off = mine
		}
		delete(p.released, part)
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
		MaxWait:       250 * time.Millisecond,
		QueueCapacity: 4096,
		Dialer:        &kafka.Dialer{ClientID: p.cfg.ClientID, Timeout: 10 * time.Second, DualStack: true},
		ErrorLogger: kafka.LoggerFunc(func(f string, a ...any) {
			p.log.Warn(fmt.Sprintf(f, a...), "component", "reader", "partition", partition)
		}),
	})
	defer r.Close()
	if err := r.SetOffset(offset); err != nil {
		p.log.Error("seek", "partition", partition, "offset", offset, "err", err)
		return
	}
	lag := p.met.lag.WithLabelValues(strconv.Itoa(partition))
	defer p.met.lag.DeleteLabelValues(strconv.Itoa(partition))
	for {
		msg, err := r.FetchMessage(ctx)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			p.met.fetchErrs.Inc()
			p.log.Warn("fetch", "partition", partition, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
			continue
		}
		start := time.Now()
		p.mu.Lock()
		p.proc.Process(&msg, p.pub)
		p.next[partition] = msg.Offset + 1
		p.mu.Unlock()
		p.met.latency.Observe(time.Since(start).Seconds())
		p.met.consumed.Inc()
		lag.Set(float64(msg.HighWaterMark - msg.Offset - 1))
	}
	// Revoked or shutting down: make what we processed durable and commit it
	// before the partition can move to another member.
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p.checkpoint(cctx, gen)
	p.mu.Lock()
	if off, ok := p.next[partition]; ok {
		p.released[partition] = off
		delete(p.next, partition)
	}
	p.mu.Unlock()
}

func (p *Pipeline) checkpointLoop(ctx context.Context, gen *kafka.Generation) {
	t := time.NewTicker(p.cfg.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.checkpoint(ctx, gen)
		}
	}
}

// checkpoint pauses processing, waits until every record produced so far is
// delivered, then commits the offsets reached.
func (p *Pipeline) checkpoint(ctx context.Context, gen *kafka.Generation) {
	p.mu.Lock()
	if err := p.pub.Flush(ctx); err != nil {
		p.mu.Unlock()
		p.log.Warn("checkpoint: flush", "err", err)
		return
	}
	offsets := map[int]int64{}
	for part, off := range p.next {
		if p.committed[part] != off {
			offsets[part] = off
		}
	}
	p.mu.Unlock()
	if len(offsets) == 0 {
		return
	}
	if err := gen.CommitOffsets(map[string]map[int]int64{p.cfg.Topic: offsets}); err != nil {
		p.met.commitErrs.Inc()
		p.log.Warn("commit offsets", "offsets", offsets, "err", err)
		return
	}
	p.met.commits.Inc()
	p.mu.Lock()
	for part, off := range offsets {
		p.committed[part] = off
	}
	p.mu.Unlock()
}
