package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/stream/engine"
)

// ScaleResult is the throughput of one consumer group of Instances
// instances with partitioned state (snapshot.scope: partition).
type ScaleResult struct {
	Instances int
	Events    int
	// Elapsed runs from the first consumed event until every partition is
	// processed and every score acknowledged; Stable from the moment the
	// last instance joined the group (the rate after the start-up
	// rebalances).
	Elapsed, Stable time.Duration
	StableEvents    int   // events processed after the group was stable
	Scored          int64 // score records acknowledged (≥ Events: replays after rebalances)
	ChangelogBytes  int64 // model state written to the changelog
	Snapshots       int64
}

// Rate is events per second over Elapsed.
func (r ScaleResult) Rate() float64 { return float64(r.Events) / r.Elapsed.Seconds() }

// StableRate is events per second once the group was stable.
func (r ScaleResult) StableRate() float64 { return float64(r.StableEvents) / r.Stable.Seconds() }

// ScaleOut measures end-to-end throughput with 1, 2, … instances of
// the scoring pipeline in one consumer group over one preloaded input
// topic, each instance with its own engine, producer and state store
// (partitioned state in a changelog topic, snapshots every
// cfg.SnapshotEvery, the other partitions merged every second): what
// running more processes gives on this machine, and the changelog's traffic
// per event. The instances run in this process; they share its cores with
// the embedded broker, as separate processes on one machine would.
//
// The instance counts run in the order given in every round (no
// interleaving, no warm-up: cfg.Warmup is not used), each round on fresh
// consumer groups and changelog topics. ScaleOut also returns what the
// preloaded events hold.
func ScaleOut(ctx context.Context, cfg Config, instances []int) ([]ScaleResult, Input, error) {
	if cfg.NoBroker {
		return nil, Input{}, errNoBrokerScale
	}
	defer brokerHeapGC()()
	models := cfg.complete()
	say := cfg.Progress
	b, err := stream.StartBroker(0, stream.TopicSpec{Name: inputTopic, Partitions: cfg.Partitions}, stream.TopicSpec{Name: "bench.scores", Partitions: cfg.Partitions}, stream.TopicSpec{Name: dlqTopic, Partitions: 1})
	if err != nil {
		return nil, Input{}, err
	}
	defer b.Close()
	say(fmt.Sprintf("preloading %d events (%s, labels %s) into %s (%d partitions) …", cfg.Events, models.input(), models.Labels(), inputTopic, cfg.Partitions))
	in, err := preload(ctx, b.Addrs(), inputTopic, cfg.Events, models)
	if err != nil {
		return nil, in, err
	}
	say("preloaded: " + in.Describe(cfg.Dim))
	every := cfg.SnapshotEvery
	if every <= 0 {
		every = time.Second
	}
	var out []ScaleResult
	for round := 1; round <= max(1, cfg.Rounds); round++ {
		for _, k := range instances {
			say(fmt.Sprintf("round %d: %d instance(s) …", round, k))
			r, err := benchScaleOne(ctx, b.Addrs(), cfg, k, every, fmt.Sprintf("%d-%d", k, round))
			if err != nil {
				return out, in, err
			}
			say(fmt.Sprintf("round %d: %d instance(s): %d events in %s (%.0f events/s; %.0f events/s once the group was stable), %d score records, changelog %.3g bytes/event",
				round, k, r.Events, r.Elapsed.Round(time.Millisecond), r.Rate(), r.StableRate(), r.Scored, float64(r.ChangelogBytes)/float64(r.Events)))
			out = append(out, r)
		}
	}
	return out, in, nil
}

func benchScaleOne(ctx context.Context, brokers []string, cfg Config, k int, every time.Duration, tag string) (ScaleResult, error) {
	res := ScaleResult{Instances: k, Events: cfg.Events}
	ends, err := partitionEnds(ctx, brokers, inputTopic, cfg.Partitions)
	if err != nil {
		return res, err
	}
	next := make([]atomic.Int64, cfg.Partitions) // per partition: highest offset processed + 1
	var processed, acked atomic.Int64
	var first atomic.Int64
	perEvent := int64(1) // score records per event: one per model
	type instance struct {
		pl    *stream.Pipeline
		pub   *stream.Publisher
		store *stream.StateStore
	}
	var insts []instance
	var engines []*engine.Engine
	defer func() {
		for _, in := range insts {
			_ = in.store.Close()
		}
		for _, e := range engines {
			e.Close()
		}
	}()
	for range k {
		models, err := cfg.Models.New()
		if err != nil {
			return res, err
		}
		perEvent = int64(len(models))
		engine, err := engine.New(engine.Config{OutputTopic: "bench.scores", DLQTopic: dlqTopic, Dim: cfg.Dim, Hash: cfg.Models.Hash,
			Calibration: cfg.Calibration}, models, nil)
		if err != nil {
			return res, err
		}
		engines = append(engines, engine)
		store, err := stream.OpenStateStore(ctx, config.Snapshot{ChangelogTopic: "bench.state-" + tag, Every: every, Keep: 1}, brokers, "streamer-bench", "bench", nil, nil, nil)
		if err != nil {
			return res, err
		}
		pub := stream.NewPublisher(stream.PublisherConfig{
			Brokers: brokers, ClientID: "streamer-bench", BatchSize: 1000, BatchTimeout: 5 * time.Millisecond,
			BatchBytes: 1 << 20, RequiredAcks: kafka.RequireAll,
		}, nil, func(n int) { acked.Add(int64(n)) }, nil)
		pl := stream.NewPipeline(stream.PipelineConfig{
			Brokers: brokers, Group: "bench-scale-" + tag, Topic: inputTopic, ClientID: "streamer-bench",
			StartOffset: kafka.FirstOffset, SnapshotEvery: every, SessionTimeout: 6 * time.Second,
			OnProcessed: func(msg *kafka.Message) {
				first.CompareAndSwap(0, time.Now().UnixNano())
				next[msg.Partition].Store(msg.Offset + 1)
				processed.Add(1)
			},
		}, nil, pub, nil, nil)
		if err := pl.UseEngine(engine, store, true, time.Second); err != nil {
			return res, err
		}
		insts = append(insts, instance{pl, pub, store})
	}
	for _, e := range engines {
		e.Start() // background refits, as the service
	}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, in := range insts {
		wg.Go(func() { _ = in.pl.Run(rctx) })
	}
	var stableAt time.Time
	var stableFrom int64
	deadline := time.After(10 * time.Minute)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			break wait
		case <-deadline:
			err = fmt.Errorf("bench: scale-out: timed out with %d of %d events processed", processed.Load(), cfg.Events)
			break wait
		case <-tick.C:
		}
		if stableAt.IsZero() {
			ready := true
			for _, in := range insts {
				ready = ready && in.pl.Ready()
			}
			if ready {
				stableAt, stableFrom = time.Now(), processed.Load()
			}
		}
		done := acked.Load() >= int64(cfg.Events)*perEvent
		for p := range next {
			done = done && next[p].Load() >= ends[p]
		}
		if done && processed.Load()*perEvent <= acked.Load() {
			break
		}
	}
	end := time.Now()
	cancel()
	wg.Wait()
	for _, in := range insts {
		_ = in.pub.Close(context.Background())
		bytes, n := in.store.Written()
		res.ChangelogBytes += bytes
		res.Snapshots += n
	}
	res.Elapsed = end.Sub(time.Unix(0, first.Load()))
	res.Stable = end.Sub(stableAt)
	res.StableEvents = cfg.Events - int(min(stableFrom, int64(cfg.Events)))
	res.Scored = acked.Load()
	return res, err
}

func partitionEnds(ctx context.Context, brokers []string, topic string, partitions int) ([]int64, error) {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	req := map[string][]kafka.OffsetRequest{}
	for p := range partitions {
		req[topic] = append(req[topic], kafka.LastOffsetOf(p))
	}
	resp, err := client.ListOffsets(ctx, &kafka.ListOffsetsRequest{Topics: req})
	if err != nil {
		return nil, fmt.Errorf("stream: list offsets of %s: %w", topic, err)
	}
	ends := make([]int64, partitions)
	for _, po := range resp.Topics[topic] {
		if po.Error != nil {
			return nil, fmt.Errorf("stream: list offsets of %s/%d: %w", topic, po.Partition, po.Error)
		}
		ends[po.Partition] = po.LastOffset
	}
	return ends, nil
}
