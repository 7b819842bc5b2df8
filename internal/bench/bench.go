// Package bench drives `streamer bench`: end-to-end throughput of the
// service's pipeline against a pass-through pipeline on an embedded
// Kafka-protocol broker, and the same with several instances of one
// consumer group (scale-out).
//
// Run measures in rounds. Every round runs each pipeline once over the
// same preloaded input topic, in its own consumer group and into its own
// output topic (created for the run and deleted after it, followed by a
// garbage collection, so that no run inherits a larger broker heap than
// another). The pipelines' order changes from round to round (Schedule),
// warm-up rounds run first and are discarded, and the summary gives each
// pipeline's median and interquartile range and the ratios of pipelines
// taken within each round (Summarize): the fixed order of earlier versions
// gave the later pipelines a warmer machine and the ratios its bias.
package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream"
	"github.com/streamer/streamer/stream/engine"
)

// Config configures Run and ScaleOut.
type Config struct {
	Events     int // events to push through each pipeline
	Dim        int // features per event (of the built-in MAM; Models.Dim when Models is set)
	Partitions int // input partitions
	Rounds     int // measured rounds; each runs every pipeline once (default 1)
	Warmup     int // rounds run first and discarded (Run only)
	// SnapshotEvery > 0 adds a "score+snapshot" pipeline that also snapshots
	// the model to a temporary directory at this period.
	SnapshotEvery time.Duration
	Kernel        online.KernelSpec // the built-in MAM's kernel
	// Calibration is the score pipelines' calibrated certainty, as the
	// service's calibration section (Window 0: off). The service has it on
	// by default, so `streamer bench` does too.
	Calibration engine.CalibrationConfig
	Models      *Models // what the score pipelines run; nil: BuiltinMAM(Dim, Kernel)
	// Stages CPU-profiles each measured run on its own and keeps its CPU by
	// goroutine labels (Result.Goroutines, stages.go). It needs the CPU
	// profiler: not with a profile of the whole bench.
	Stages bool
	// NoBroker takes the embedded broker off the data path (Run only):
	// each run's pipeline reads the events from memory (a MemorySource of
	// the events the preload would write, generated once before the
	// rounds) and publishes to a discarding Publisher, so the figures are
	// the service's path from fetch to publish alone. The consumer group
	// and its offset commits stay on the embedded broker.
	NoBroker bool
	// MergeLanes: whether the lanes learn a mergeable global mam in
	// parallel (engine.engine.Config.MergeLanes).
	MergeLanes engine.MergeLanes
	Progress   func(string) // optional progress messages
}

func (cfg *Config) complete() *Models {
	if cfg.Models == nil {
		cfg.Models = BuiltinMAM(cfg.Dim, cfg.Kernel)
	}
	cfg.Dim = cfg.Models.Dim
	cfg.Partitions = max(1, cfg.Partitions)
	cfg.Rounds = max(1, cfg.Rounds)
	cfg.Warmup = max(0, cfg.Warmup)
	if cfg.Progress == nil {
		cfg.Progress = func(string) {}
	}
	return cfg.Models
}

// Report is what Run measured; its JSON form is `streamer bench --json`.
type Report struct {
	Setup   Setup   `json:"setup"`
	Warmup  []Round `json:"warmup"` // discarded rounds (round 0)
	Rounds  []Round `json:"rounds"` // measured rounds 1..n
	Summary Summary `json:"summary"`
}

// Setup records what was measured.
type Setup struct {
	Events         int      `json:"events"`
	Dim            int      `json:"dim"`
	Input          Input    `json:"input"`     // what the events hold: dense arrays of dim numbers, or hashed categorical events
	DataPath       DataPath `json:"data_path"` // where the records come from and go to: the broker, or memory and discarded (NoBroker)
	Partitions     int      `json:"partitions"`
	Rounds         int      `json:"rounds"`
	WarmupRounds   int      `json:"warmup_rounds"`
	SnapshotEveryS float64  `json:"snapshot_every_s"` // 0: no score+snapshot pipeline
	Models         string   `json:"models"`
	Labels         string   `json:"labels"` // "±1", "1..m" or "0.5..5 (ratings)"
	Pipelines      []string `json:"pipelines"`
	GOMAXPROCS     int      `json:"gomaxprocs"`
	// The calibration window and refit period (0: calibration off).
	CalibrationWindow int `json:"calibration_window"`
	CalibrationEvery  int `json:"calibration_every"`
	// The least time between refits' starts, seconds (0: none).
	CalibrationMinIntervalS float64 `json:"calibration_min_interval_s"`
}

// Topics of the embedded broker: the preloaded input and the dead-letter
// topic (which stays empty in a valid run); output topics are made per run.
const (
	inputTopic = "bench.in"
	dlqTopic   = "bench.dlq"
)

// Run measures end-to-end throughput on an embedded broker. It preloads
// cfg.Events labelled events into an input topic, then runs cfg.Warmup
// discarded rounds and cfg.Rounds measured ones. A round runs, in the
// order Schedule gives it, "passthrough" (consume → publish the same
// bytes), "score" (consume → decode → score → learn → publish a score
// record per model) and, with cfg.SnapshotEvery, "score+snapshot" (score
// and snapshot the models to a temporary directory at that period), all
// with the same consumer and producer settings. Each run reads the whole
// input topic in a fresh consumer group, publishes to a fresh output topic
// and gets fresh models; it is timed from its first consumed event until
// the broker has acknowledged its last published record.
//
// With cfg.NoBroker the events are generated in memory instead (once,
// before the rounds, untimed: memoryInput), every run reads them from
// there and its publisher discards what it publishes, acknowledging it
// at once; the consumer group stays on the embedded broker. A run is then
// timed until its last record is discarded.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	defer brokerHeapGC()()
	models := cfg.complete()
	say := cfg.Progress
	pipelines := []string{PassThrough, Score}
	if cfg.SnapshotEvery > 0 {
		pipelines = append(pipelines, ScoreSnapshot)
	}
	rep := &Report{
		Setup: Setup{Events: cfg.Events, Dim: cfg.Dim, Partitions: cfg.Partitions, Rounds: cfg.Rounds, WarmupRounds: cfg.Warmup,
			SnapshotEveryS: cfg.SnapshotEvery.Seconds(), Models: models.Name, Labels: models.Labels(), Pipelines: pipelines,
			GOMAXPROCS: runtime.GOMAXPROCS(0), CalibrationWindow: cfg.Calibration.Window, CalibrationEvery: cfg.Calibration.Every,
			CalibrationMinIntervalS: cfg.Calibration.MinInterval.Seconds(), DataPath: dataPath(cfg.NoBroker)},
		Warmup: []Round{}, Rounds: []Round{},
	}
	// The broker's goroutines (its request loop, a reader and a writer
	// per connection) carry the profiler label stage=broker, from the
	// goroutine that starts them: --stages gives the embedded broker's CPU
	// apart from the clients' and the collector's.
	var b *stream.Broker
	var err error
	pprof.Do(ctx, pprof.Labels("stage", "broker"), func(context.Context) {
		b, err = stream.StartBroker(0, stream.TopicSpec{Name: inputTopic, Partitions: cfg.Partitions}, stream.TopicSpec{Name: dlqTopic, Partitions: 1})
	})
	if err != nil {
		return nil, err
	}
	defer b.Close()

	var mem *stream.MemorySource // NoBroker: the input
	var in Input
	t0 := time.Now()
	if cfg.NoBroker {
		say(fmt.Sprintf("generating %d events (%s, labels %s) in memory, the input of every run (--no-broker) …", cfg.Events, models.input(), models.Labels()))
		if mem, in, err = memoryInput(inputTopic, cfg.Events, cfg.Partitions, models); err != nil {
			return nil, err
		}
		say(fmt.Sprintf("generated in %s: %s", time.Since(t0).Round(time.Millisecond), in.Describe(cfg.Dim)))
	} else {
		say(fmt.Sprintf("preloading %d events (%s, labels %s) into %s …", cfg.Events, models.input(), models.Labels(), inputTopic))
		if in, err = preload(ctx, b.Addrs(), inputTopic, cfg.Events, models); err != nil {
			return nil, err
		}
		say(fmt.Sprintf("preloaded in %s: %s", time.Since(t0).Round(time.Millisecond), in.Describe(cfg.Dim)))
	}
	rep.Setup.Input = in

	sched := Schedule(len(pipelines), cfg.Rounds)
	for i := range cfg.Warmup + cfg.Rounds {
		warm := i < cfg.Warmup
		rd := Round{Round: i - cfg.Warmup + 1, Order: []string{}}
		name, tag := fmt.Sprintf("round %d", rd.Round), fmt.Sprintf("r%d", rd.Round)
		order := sched[0]
		if warm {
			rd.Round, name, tag = 0, "warm-up", fmt.Sprintf("w%d", i+1)
		} else {
			order = sched[i-cfg.Warmup]
		}
		for _, p := range order {
			rd.Order = append(rd.Order, pipelines[p])
		}
		say(fmt.Sprintf("%s: order %s", name, strings.Join(rd.Order, ", ")))
		for pos, mode := range rd.Order {
			// The run's goroutines (the service's, the clients') carry the
			// profiler label pipeline=MODE, the broker's stage=broker: `go tool
			// pprof -tags` splits a --cpuprofile between the pipelines, the
			// broker and the rest.
			var r Result
			var err error
			var prof bytes.Buffer
			profiling := cfg.Stages && !warm
			if profiling {
				if err := pprof.StartCPUProfile(&prof); err != nil {
					return rep, fmt.Errorf("bench: stages: %w", err)
				}
			}
			pprof.Do(ctx, pprof.Labels("pipeline", mode), func(ctx context.Context) { r, err = runOne(ctx, b, mem, cfg, mode, tag) })
			if profiling {
				pprof.StopCPUProfile()
				if err == nil {
					r.Goroutines, err = cpuByGoroutineLabels(prof.Bytes(), []string{"stage", "partition", "shard"}, brokerLoop)
				}
			}
			r.Round, r.Position = rd.Round, pos
			if err != nil {
				return rep, err
			}
			msg := fmt.Sprintf("%s: %s: %d events in %s (%.0f events/s)", name, r.Mode, r.Events, r.Elapsed.Round(time.Millisecond), r.Rate())
			if mode == ScoreSnapshot {
				msg += fmt.Sprintf(", %d snapshots", r.Snapshots)
			}
			say(msg)
			rd.Results = append(rd.Results, r)
		}
		rd.ratios()
		var rs []string
		for _, d := range Ratios {
			if v, ok := rd.Ratios[d.Name]; ok {
				rs = append(rs, fmt.Sprintf("%s %.2f", d.Name, v))
			}
		}
		if warm {
			say(fmt.Sprintf("%s (discarded): %s", name, strings.Join(rs, ", ")))
			rep.Warmup = append(rep.Warmup, rd)
		} else {
			say(fmt.Sprintf("%s: %s", name, strings.Join(rs, ", ")))
			rep.Rounds = append(rep.Rounds, rd)
		}
	}
	rep.Summary = Summarize(rep.Rounds, SpreadWarning)
	return rep, nil
}

// BrokerGCPercent is the garbage collector's target percentage (GOGC) while
// the bench runs, unless GOGC is set. The embedded broker lives in the
// bench's process and holds every preloaded event (about 600 MB for the
// default million), which every collection marks: with Go's default 100,
// a pipeline pays several such collections per run, a cost the service
// (whose broker is elsewhere, and whose heap is small) never pays, and
// whether a collection falls inside a run or just after it swung a run's
// events/s by a third. At 400 a run sees about one.
const BrokerGCPercent = 400

// brokerHeapGC sets BrokerGCPercent unless GOGC is set, and returns what
// restores the previous setting.
func brokerHeapGC() func() {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	prev := debug.SetGCPercent(BrokerGCPercent)
	return func() { debug.SetGCPercent(prev) }
}

// runOne runs pipeline mode once on fresh models, a fresh consumer group
// and a fresh output topic, which it deletes afterwards. With mem
// (Config.NoBroker) the input is mem's and the output discarded: there is
// no output topic.
func runOne(ctx context.Context, b *stream.Broker, mem *stream.MemorySource, cfg Config, mode, tag string) (Result, error) {
	res := Result{Mode: mode}
	slug := tag + "." + strings.ReplaceAll(mode, "+", "-")
	out := "bench.out." + slug
	if mem == nil {
		if err := b.CreateTopic(ctx, out, cfg.Partitions); err != nil {
			return res, err
		}
	}
	defer func() {
		if mem == nil {
			if err := deleteTopic(b.Addrs(), out); err != nil {
				cfg.Progress(fmt.Sprintf("could not delete %s: %v", out, err))
			}
		}
		runtime.GC() // the next run starts from the same heap
	}()
	var proc stream.Processor
	var eng *engine.Engine
	var models []engine.NamedModel
	var store *stream.StateStore
	var reg *prometheus.Registry // the engine's metrics: what the models learned
	if mode == PassThrough {
		proc = stream.ProcessorFunc(func(msg *kafka.Message, sink engine.Sink) {
			sink.Publish(kafka.Message{Topic: out, Key: msg.Key, Value: msg.Value})
		})
	} else {
		var err error
		if models, err = cfg.Models.New(); err != nil {
			return res, err
		}
		reg = prometheus.NewRegistry()
		cal := cfg.Calibration
		cal.Labels = ctx // the refits' goroutines keep pipeline=MODE
		eng, err = engine.New(engine.Config{OutputTopic: out, DLQTopic: dlqTopic, Dim: cfg.Dim, Hash: cfg.Models.Hash,
			Calibration: cal, MergeLanes: cfg.MergeLanes}, models, reg)
		if err != nil {
			return res, err
		}
		eng.Start() // background refits, as the service
		defer eng.Close()
		if mode == ScoreSnapshot {
			dir, err := os.MkdirTemp("", "streamer-bench-state")
			if err != nil {
				return res, err
			}
			defer os.RemoveAll(dir)
			store, err = stream.OpenStateStore(ctx, config.Snapshot{Dir: dir, Every: cfg.SnapshotEvery, Keep: 3}, nil, "", "bench", nil, nil, nil)
			if err != nil {
				return res, err
			}
			defer store.Close()
		}
	}
	r, err := benchOne(ctx, b.Addrs(), mem, "bench-"+slug, proc, eng, reg, cfg.Events, store, cfg.SnapshotEvery)
	r.Mode = mode
	if err != nil {
		return r, err
	}
	for _, nm := range models {
		if n := r.Learned[nm.Name]; n != int64(cfg.Events) {
			return r, fmt.Errorf("bench: %s: model %s learned %d events, want %d", mode, nm.Name, n, cfg.Events)
		}
	}
	if store != nil {
		_, n := store.Written()
		r.Snapshots = int(n)
	}
	return r, nil
}

// benchOne runs proc over the input topic in consumer group group until
// every event is processed and every record it published acknowledged.
// With an engine, Result.Learned is what its models had learned then
// (streamer_model_examples of reg, the engine's registry). With mem the
// pipeline reads mem's records instead of the broker's and publishes to
// a discarding publisher (Config.NoBroker).
func benchOne(ctx context.Context, brokers []string, mem *stream.MemorySource, group string, proc stream.Processor, eng *engine.Engine, reg *prometheus.Registry,
	events int, store *stream.StateStore, every time.Duration) (Result, error) {
	var processed, acked atomic.Int64
	var sink *countingSink // around the publisher, once built
	done := make(chan struct{})
	var once sync.Once
	// Done when every event is processed (so sink.records is final) and
	// every record acknowledged.
	check := func() {
		if processed.Load() >= int64(events) && acked.Load() >= sink.records.Load() {
			once.Do(func() { close(done) })
		}
	}
	pub := stream.NewPublisher(stream.PublisherConfig{
		Brokers: brokers, ClientID: "streamer-bench", BatchSize: 1000, BatchTimeout: 5 * time.Millisecond,
		BatchBytes: 1 << 20, RequiredAcks: kafka.RequireAll, Labels: ctx, Discard: mem != nil,
	}, nil, func(n int) {
		acked.Add(int64(n))
		check()
	}, nil)
	sink = newCountingSink(pub)
	var first, cpu0, wait0, allocs0 atomic.Int64
	var source func(partition int, offset int64) stream.Fetcher
	if mem != nil {
		source = mem.Fetcher
	}
	pl := stream.NewPipeline(stream.PipelineConfig{
		Brokers: brokers, Group: group, Topic: inputTopic, ClientID: "streamer-bench",
		StartOffset: kafka.FirstOffset, CommitInterval: time.Second, SnapshotEvery: every, Sink: sink, Source: source,
		OnProcessed: func(*kafka.Message) {
			if first.Load() == 0 { // one clock reading, not one per event
				if first.CompareAndSwap(0, time.Now().UnixNano()) {
					c, _ := processCPU()
					cpu0.Store(int64(c))
					wait0.Store(int64(lockWait()))
					allocs0.Store(heapAllocs())
				}
			}
			processed.Add(1)
			check()
		},
	}, proc, pub, nil, nil)
	if eng != nil {
		if err := pl.UseEngine(eng, store, false, 0); err != nil {
			return Result{}, err
		}
		if err := pl.Restore(ctx); err != nil {
			return Result{}, err
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- pl.Run(rctx) }()
	var err error
	stopped := false
	select {
	case <-done:
	case err = <-errc:
		stopped = true
		if err == nil {
			err = errors.New("pipeline stopped early")
		}
		err = fmt.Errorf("bench: %s: %w", group, err)
	case <-ctx.Done():
		err = ctx.Err()
	case <-time.After(10 * time.Minute):
		err = fmt.Errorf("bench: %s: timed out with %d of %d events processed, %d of %d records acknowledged",
			group, processed.Load(), events, acked.Load(), sink.records.Load())
	}
	end := time.Now()
	cpu1, cpuOK := processCPU()
	wait1 := lockWait()
	allocs1 := heapAllocs()
	var learned map[string]int64
	if reg != nil && err == nil {
		// Before the pipeline stops: closing a shard zeroes its figures.
		var gerr error
		if learned, gerr = modelExamples(reg); gerr != nil {
			err = fmt.Errorf("bench: %s: %w", group, gerr)
		}
	}
	cancel()
	if !stopped {
		<-errc
	}
	_ = pub.Close(context.Background())
	res := Result{Events: int(processed.Load()), Records: acked.Load(), Elapsed: end.Sub(time.Unix(0, first.Load())), Learned: learned}
	if cpuOK {
		res.CPU = cpu1 - time.Duration(cpu0.Load())
	}
	res.LockWait = wait1 - time.Duration(wait0.Load())
	res.Allocs = allocs1 - allocs0.Load()
	if n := sink.dead.Load(); err == nil && n > 0 {
		err = fmt.Errorf("bench: %s: %d of %d events were dead-lettered (%s): the figures would not be the service's", group, n, events, sink.reason())
	}
	return res, err
}

// modelExamples reads every model's streamer_model_examples from reg: the
// examples it has learned, a key-scoped model's over every key.
func modelExamples(reg prometheus.Gatherer) (map[string]int64, error) {
	mfs, err := reg.Gather()
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, mf := range mfs {
		if mf.GetName() != "streamer_model_examples" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "model" {
					out[l.GetValue()] = int64(m.GetGauge().GetValue())
				}
			}
		}
	}
	return out, nil
}

// countingSink counts the records a processor publishes, and those it
// dead-letters with the first one's reason. Its lanes (Lane) count into
// the same counts.
type countingSink struct {
	bufferingSink
	*sinkCounts
	pub *stream.Publisher // whose lanes Lane hands out
}

// bufferingSink is the publisher, or one of its lanes: a Sink that takes
// runs of records and hands out record buffers a run at a time, as the
// service's appliers use them.
type bufferingSink interface {
	engine.Sink
	PublishBatch(msgs []kafka.Message)
	Buffers(dst [][]byte, n int) [][]byte
}

type sinkCounts struct {
	records, dead atomic.Int64
	mu            sync.Mutex
	why           string
}

func newCountingSink(pub *stream.Publisher) *countingSink {
	return &countingSink{bufferingSink: pub, sinkCounts: &sinkCounts{}, pub: pub}
}

// Lane is the publisher's lane for partition (Publisher.Lane), counted
// with s: each partition's records take the service's path, through one
// of the publisher's queues.
func (s *countingSink) Lane(partition int) stream.Sink {
	return &countingSink{bufferingSink: s.pub.Lane(partition).(bufferingSink), sinkCounts: s.sinkCounts, pub: s.pub}
}

func (s *countingSink) Publish(m kafka.Message) {
	s.records.Add(1)
	s.count(&m)
	s.bufferingSink.Publish(m)
}

// PublishBatch counts msgs and hands them on as one run, as the service's
// publishing goroutines give them to the publisher (stream.Publisher's
// PublishBatch).
func (s *countingSink) PublishBatch(msgs []kafka.Message) {
	s.records.Add(int64(len(msgs)))
	for i := range msgs {
		s.count(&msgs[i])
	}
	s.bufferingSink.PublishBatch(msgs)
}

// count keeps the first dead letter's reason.
func (s *countingSink) count(m *kafka.Message) {
	if m.Topic == dlqTopic && s.dead.Add(1) == 1 {
		reason, detail := engine.DeadLetterHeader(m, engine.HeaderReason), engine.DeadLetterHeader(m, engine.HeaderDetail)
		s.mu.Lock()
		s.why = fmt.Sprintf("the first: %s: %s", reason, detail)
		s.mu.Unlock()
	}
}

func (s *countingSink) reason() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.why
}

// deleteTopic deletes a run's output topic.
func deleteTopic(brokers []string, topic string) error {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	resp, err := client.DeleteTopics(context.Background(), &kafka.DeleteTopicsRequest{Topics: []string{topic}})
	if err != nil {
		return err
	}
	return resp.Errors[topic]
}

// preload writes n labelled events of models' kind (newSource) in large
// synchronous batches, each event to the partition of its key (round
// robin without one), and returns what the events hold.
func preload(ctx context.Context, brokers []string, topic string, n int, models *Models) (Input, error) {
	src, err := newSource(models)
	if err != nil {
		return Input{}, err
	}
	w := &kafka.Writer{Addr: kafka.TCP(brokers...), Topic: topic, Balancer: &kafka.Hash{},
		BatchSize: 2000, BatchTimeout: time.Millisecond, RequiredAcks: kafka.RequireOne}
	defer w.Close()
	const batch = 20000
	msgs := make([]kafka.Message, 0, batch)
	for i := 0; i < n; i++ {
		k, v, err := src.next(i)
		if err != nil {
			return Input{}, err
		}
		msgs = append(msgs, kafka.Message{Key: k, Value: v})
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
				return Input{}, fmt.Errorf("bench: preload: %w", err)
			}
			msgs = msgs[:0]
		}
	}
	return src.input(), nil
}
