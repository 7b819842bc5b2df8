// Package bench drives `streamer bench`: end-to-end throughput of the
// service's pipeline against a pass-through pipeline on an embedded
// Kafka-protocol broker, and the same with several instances of one
// consumer group (scale-out).
package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream"
)

// Config configures Run and ScaleOut.
type Config struct {
	Events     int // events to push through each pipeline
	Dim        int // features per event
	Partitions int // input partitions
	Rounds     int // each round runs the pipelines afresh (default 1)
	// SnapshotEvery > 0 adds a "score+snapshot" pipeline that also snapshots
	// the model to a temporary directory at this period.
	SnapshotEvery time.Duration
	Kernel        online.KernelSpec
	Progress      func(string) // optional progress messages
}

// Result is one pipeline's measured throughput.
type Result struct {
	Mode      string // "passthrough", "score" or "score+snapshot"
	Round     int
	Snapshots int // snapshots taken (score+snapshot)
	Events    int
	Elapsed   time.Duration
}

// Rate is events per second.
func (r Result) Rate() float64 { return float64(r.Events) / r.Elapsed.Seconds() }

// Run measures end-to-end throughput on an embedded broker. It preloads
// cfg.Events labelled events into an input topic, then runs two pipelines
// over them with the same consumer and producer settings, each in its own
// consumer group: "passthrough" (consume → publish the same bytes) and
// "score" (consume → decode → score → learn → publish a score record). Each
// is timed from its first consumed event until the broker has acknowledged
// its last published record.
func Run(ctx context.Context, cfg Config) ([]Result, error) {
	say := cfg.Progress
	if say == nil {
		say = func(string) {}
	}
	b, err := stream.StartBroker(0,
		stream.TopicSpec{Name: "bench.in", Partitions: cfg.Partitions}, stream.TopicSpec{Name: "bench.passthrough", Partitions: cfg.Partitions},
		stream.TopicSpec{Name: "bench.scores", Partitions: cfg.Partitions}, stream.TopicSpec{Name: "bench.dlq", Partitions: 1})
	if err != nil {
		return nil, err
	}
	defer b.Close()

	say(fmt.Sprintf("preloading %d events (d=%d) into bench.in …", cfg.Events, cfg.Dim))
	t0 := time.Now()
	if err := preload(ctx, b.Addrs(), "bench.in", cfg.Events, cfg.Dim); err != nil {
		return nil, err
	}
	say(fmt.Sprintf("preloaded in %s", time.Since(t0).Round(time.Millisecond)))

	pass := stream.ProcessorFunc(func(msg *kafka.Message, out stream.Sink) {
		out.Publish(kafka.Message{Topic: "bench.passthrough", Key: msg.Key, Value: msg.Value})
	})
	newEngine := func() (*stream.Engine, online.Model, error) {
		model, err := online.NewMAM(cfg.Dim, online.MAMParams{Kernel: cfg.Kernel, Balance: true, Delta: online.DefaultDelta})
		if err != nil {
			return nil, nil, err
		}
		engine, err := stream.NewEngine(stream.EngineConfig{OutputTopic: "bench.scores", DLQTopic: "bench.dlq", Dim: cfg.Dim},
			[]stream.NamedModel{{Name: "bench", Model: model}}, nil)
		return engine, model, err
	}
	var out []Result
	for round := 1; round <= max(1, cfg.Rounds); round++ {
		type run struct {
			mode  string
			proc  stream.Processor
			model online.Model
			store *stream.StateStore
		}
		runs := []run{{mode: "passthrough", proc: pass}}
		e, m, err := newEngine()
		if err != nil {
			return nil, err
		}
		runs = append(runs, run{mode: "score", proc: e, model: m})
		if cfg.SnapshotEvery > 0 {
			dir, err := os.MkdirTemp("", "streamer-bench-state")
			if err != nil {
				return nil, err
			}
			defer os.RemoveAll(dir)
			store, err := stream.OpenStateStore(ctx, config.Snapshot{Dir: dir, Every: cfg.SnapshotEvery, Keep: 3}, nil, "", "bench", nil, nil)
			if err != nil {
				return nil, err
			}
			e, m, err := newEngine()
			if err != nil {
				return nil, err
			}
			runs = append(runs, run{mode: "score+snapshot", proc: e, model: m, store: store})
		}
		for _, rn := range runs {
			say(fmt.Sprintf("round %d: running %s …", round, rn.mode))
			r, err := benchOne(ctx, b.Addrs(), fmt.Sprintf("%s-%d", rn.mode, round), rn.proc, cfg.Events, rn.store, cfg.SnapshotEvery)
			r.Mode, r.Round = rn.mode, round
			if err != nil {
				return out, err
			}
			if rn.model != nil && rn.model.Examples() != int64(cfg.Events) {
				return out, fmt.Errorf("bench: %s: model learned %d events, want %d", rn.mode, rn.model.Examples(), cfg.Events)
			}
			msg := fmt.Sprintf("round %d: %s: %d events in %s (%.0f events/s)", round, r.Mode, r.Events, r.Elapsed.Round(time.Millisecond), r.Rate())
			if rn.store != nil {
				_, n := rn.store.Written()
				r.Snapshots = int(n)
				msg += fmt.Sprintf(", %d snapshots", r.Snapshots)
			}
			say(msg)
			out = append(out, r)
		}
	}
	return out, nil
}

func benchOne(ctx context.Context, brokers []string, mode string, proc stream.Processor, events int, store *stream.StateStore, every time.Duration) (Result, error) {
	var acked atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	pub := stream.NewPublisher(stream.PublisherConfig{
		Brokers: brokers, ClientID: "streamer-bench", BatchSize: 1000, BatchTimeout: 5 * time.Millisecond,
		BatchBytes: 1 << 20, RequiredAcks: kafka.RequireAll,
	}, nil, func(n int) {
		if acked.Add(int64(n)) >= int64(events) {
			once.Do(func() { close(done) })
		}
	}, nil)
	var first atomic.Int64
	timed := stream.ProcessorFunc(func(msg *kafka.Message, p stream.Sink) {
		if first.Load() == 0 {
			first.Store(time.Now().UnixNano())
		}
		proc.Process(msg, p)
	})
	pl := stream.NewPipeline(stream.PipelineConfig{
		Brokers: brokers, Group: "bench-" + mode, Topic: "bench.in", ClientID: "streamer-bench",
		StartOffset: kafka.FirstOffset, CommitInterval: time.Second, SnapshotEvery: every,
	}, timed, pub, nil, nil)
	if store != nil {
		pl.UseStateStore(store, stateful{timed, proc.(stream.Stateful)})
	}
	rctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- pl.Run(rctx) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	case <-time.After(10 * time.Minute):
		err = fmt.Errorf("bench: %s: timed out with %d of %d records acknowledged", mode, acked.Load(), events)
	}
	end := time.Now()
	cancel()
	<-errc
	_ = pub.Close(context.Background())
	return Result{Mode: mode, Events: events, Elapsed: end.Sub(time.Unix(0, first.Load()))}, err
}

// stateful pairs a wrapping stream.Processor with the state of the wrapped one.
type stateful struct {
	stream.Processor
	st stream.Stateful
}

func (s stateful) Capture() ([]snapshot.Model, error) { return s.st.Capture() }

// preload writes n labelled events with dim features in large synchronous
// batches. The label is the sign of a fixed random linear function.
func preload(ctx context.Context, brokers []string, topic string, n, dim int) error {
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.RoundRobin{},
		BatchSize: 2000, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireOne}
	defer w.Close()
	rng := rand.New(rand.NewPCG(7, 11))
	dir := make([]float64, dim)
	for i := range dir {
		dir[i] = rng.NormFloat64()
	}
	const batch = 20000
	msgs := make([]kafka.Message, 0, batch)
	for i := 0; i < n; i++ {
		v := make([]byte, 0, 24*dim+96)
		v = append(v, `{"id":"b-`...)
		v = strconv.AppendInt(v, int64(i), 10)
		v = append(v, `","features":[`...)
		var dot float64
		for j := range dim {
			x := rng.NormFloat64()
			dot += x * dir[j]
			if j > 0 {
				v = append(v, ',')
			}
			v = strconv.AppendFloat(v, x, 'f', 6, 64)
		}
		label := "1"
		if dot < 0 {
			label = "-1"
		}
		v = append(v, `],"label":`...)
		v = append(v, label...)
		v = append(v, '}')
		msgs = append(msgs, kafka.Message{Value: v})
		if len(msgs) == batch || i == n-1 {
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				var werr kafka.WriteErrors
				if errors.As(err, &werr) {
					for _, e := range werr {
						if e != nil {
							err = e
							break
						}
					}
				}
				return fmt.Errorf("bench: preload: %w", err)
			}
			msgs = msgs[:0]
		}
	}
	return nil
}
