package stream

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/config"
	"github.com/streamer/streamer/stream/engine"
	"github.com/streamer/streamer/stream/internal/stage"
)

// Publisher sends score and dead-letter records asynchronously in batches.
// Publish never waits on the network: records go to an in-memory queue that a
// goroutine hands to kafka-go's asynchronous Writer in batches. The queue
// carries runs of records (PublishBatch: an applier's run of events), one
// hand-over per run, so that the partitions' appliers do not contend for
// it record by record. With many cores there are several queues, each
// with its goroutine (PublisherConfig.Loops), and each partition's applier
// publishes through one of them (Lane), its records in order. Records
// that fail delivery after the writer's own retries are queued again with
// backoff, so nothing is dropped while the broker is unavailable. Flush waits
// until every record published so far is acknowledged. Mark and Await do
// the same for the records published before a point, while publishing goes
// on: the pipeline marks when it captures the offsets of a checkpoint and
// awaits the mark before committing them, without pausing processing for
// the deliveries in flight.
//
// Records are counted per epoch: each record carries its epoch (in
// kafka.Message.WriterData, which kafka-go hands back to the completion
// untouched) and Mark starts a new one.
type Publisher struct {
	w           *kafka.Writer
	meta        *metadataCache // the writers' transport
	ins         []*pubQueue    // one per loop; Publish and PublishBatch use the first
	runs        sync.Pool      // of *pubRun, empty
	pending     atomic.Int64
	pendingSize gate                  // the pending records' bytes (keys and values), bounded for the lanes
	epoch       atomic.Pointer[epoch] // the records published now count here
	free        bufStack
	log         *slog.Logger
	met         *pubMetrics
	health      *BrokerHealth
	deliverErrs repeats // delivery errors, logged once while they repeat
	retryLogs   repeats
	queueErrs   repeats
	truncated   prometheus.Counter
	keys        map[string]string
	discard     bool // PublisherConfig.Discard: see deliver

	// solo sends, one record per request, the records of a batch the
	// brokers refused as too large: one record cannot hold others back.
	solo       *kafka.Writer
	truncTopic string // records to this topic (dead letters) are cut to fit
	maxRecord  int    // the largest record the writer sends (its BatchBytes)
	undeliv    undeliverable

	retryMu   sync.Mutex
	retry     []kafka.Message
	retryAt   time.Time // the retry queue waits until then (backoff)
	retryWait *backoff
	backedOff atomic.Bool // retryWait has grown: reset it at the next delivery

	stopc chan struct{}
	loops sync.WaitGroup
	once  sync.Once
}

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
	// Labels is the context whose profiler labels the publisher's loops
	// (and the producer's goroutines they start) carry beside
	// stage=publish (package stage); nil: none.
	Labels       context.Context
	Brokers      []string
	ClientID     string
	BatchSize    int
	BatchTimeout time.Duration
	BatchBytes   int64
	RequiredAcks kafka.RequiredAcks
	// Transport carries the connections (TLS, SASL: see
	// KafkaSecurity.Transport); nil = plaintext.
	Transport *kafka.Transport
	// Health receives the delivery errors per topic ("publish <topic>"),
	// the permanent ones named by TopicKeys[topic] (nil: none).
	Health    *BrokerHealth
	TopicKeys map[string]string
	// Truncate names the topic (the dead-letter topic) whose records are
	// cut to fit BatchBytes rather than sent whole: a dead letter carries
	// the input value, which may be larger than the topic accepts.
	Truncate string
	// Undeliverable counts, by topic, the records the brokers refused
	// even alone (nil: not counted); Truncated counts the records cut.
	Undeliverable *prometheus.CounterVec
	Truncated     prometheus.Counter
	// Discard acknowledges every record at once instead of sending it
	// (Publisher.deliver): for benchmarks.
	Discard bool
	// Loops is the number of queues, each with the goroutine that hands
	// its records to the writer (Lane); 0: one per four GOMAXPROCS, at
	// least one and at most eight.
	Loops int
	// BufferBytes bounds the bytes (keys and values) of the records
	// published through the lanes and not yet acknowledged: past it a
	// lane's publisher waits (pubLane.Publish). 0: kafka.producer.buffer_bytes'
	// default (config.DefaultProducerBufferBytes).
	BufferBytes int64
}

func bufferBytes(b int64) int64 {
	if b <= 0 {
		return config.DefaultProducerBufferBytes
	}
	return b
}

// publisherLoops is the number of a publisher's loops for loops (the
// config's).
func publisherLoops(loops int) int {
	if loops > 0 {
		return loops
	}
	return min(8, max(1, runtime.GOMAXPROCS(0)/4))
}

type pubMetrics struct {
	published func(n int)
	errors    func(n int)
}

const maxPooledBuf = 4 << 10

// NewPublisher starts a publisher and its sending goroutine; Close stops it.
func NewPublisher(cfg PublisherConfig, log *slog.Logger, published, errors func(n int)) *Publisher {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if published == nil {
		published = func(int) {}
	}
	if errors == nil {
		errors = func(int) {}
	}
	p := &Publisher{
		truncTopic: cfg.Truncate,
		maxRecord:  int(cfg.BatchBytes),
		retryWait:  newBackoff(100*time.Millisecond, 5*time.Second),
		undeliv:    undeliverable{counter: cfg.Undeliverable, topics: map[string]int64{}},
		truncated:  cfg.Truncated,
		free:       bufStack{max: 8*cfg.BatchSize + 1024},
		log:        log,
		met:        &pubMetrics{published: published, errors: errors},
		health:     cfg.Health,
		keys:       cfg.TopicKeys,
		stopc:      make(chan struct{}),
		discard:    cfg.Discard,
	}
	p.epoch.Store(&epoch{})
	p.pendingSize.init(bufferBytes(cfg.BufferBytes))
	var base kafka.RoundTripper = cfg.Transport
	if cfg.Transport == nil {
		base = &kafka.Transport{ClientID: cfg.ClientID}
	}
	transport := newMetadataCache(base, time.Second)
	p.meta = transport
	p.w = &kafka.Writer{
		Addr:         kafka.TCP(cfg.Brokers...),
		Balancer:     &kafka.Murmur2Balancer{},
		BatchSize:    cfg.BatchSize,
		BatchTimeout: cfg.BatchTimeout,
		BatchBytes:   cfg.BatchBytes,
		RequiredAcks: cfg.RequiredAcks,
		Async:        true,
		Completion:   p.completion,
		Transport:    transport,
		ErrorLogger:  dedupLogger(log, "producer", nil),
	}
	if p.maxRecord <= 0 {
		p.maxRecord = 1 << 20 // kafka-go's default BatchBytes
	}
	p.solo = &kafka.Writer{
		Addr:         p.w.Addr,
		Balancer:     p.w.Balancer,
		BatchSize:    1,
		BatchBytes:   cfg.BatchBytes,
		RequiredAcks: cfg.RequiredAcks,
		Async:        true,
		Completion:   p.completion,
		Transport:    transport,
		ErrorLogger:  p.w.ErrorLogger,
	}
	for i := range publisherLoops(cfg.Loops) {
		in := newPubQueue(queuedRecords(cfg.BatchSize))
		p.ins = append(p.ins, in)
		p.loops.Add(1)
		go func() {
			defer p.loops.Done()
			stage.Set(cfg.Labels, "stage", "publish")
			p.loop(cfg.BatchSize, in, i == 0)
		}()
	}
	return p
}

// Lane returns the sink an applier (of input partition lane) publishes
// through: one of the publisher's queues, the same for the same lane, so
// that its records are handed to the writer in the order published.
func (p *Publisher) Lane(lane int) Sink {
	return &pubLane{p: p, in: p.ins[lane%len(p.ins)]}
}

// pubLane is a publisher's queue as a Sink (Publisher.Lane).
type pubLane struct {
	p  *Publisher
	in *pubQueue
}

func (l *pubLane) Buffer() []byte                       { return l.p.Buffer() }
func (l *pubLane) Buffers(dst [][]byte, n int) [][]byte { return l.p.Buffers(dst, n) }

// Publish and PublishBatch wait while the records pending are at
// BufferBytes. kafka-go's asynchronous writer queues whatever it is
// handed, so without a bound a service that consumes faster than the
// brokers take its records (a backlog caught up, a slow or refusing output
// topic) held every record in memory: 128–285 k records at the peak of a
// million-event bench run on 2 vCPUs, without bound on a longer stream.
// With it the applier waits, its partition's reader stops fetching, and
// the lag grows where it is seen. Publisher.Publish (a ranking response)
// does not wait: its callers are bounded by their requests.
func (l *pubLane) Publish(m kafka.Message) {
	l.p.pendingSize.wait()
	l.p.publish(l.in, []kafka.Message{m})
}

func (l *pubLane) PublishBatch(msgs []kafka.Message) {
	l.p.pendingSize.wait()
	l.p.publish(l.in, msgs)
}

// recordSize is what a record counts towards BufferBytes.
func recordSize(m *kafka.Message) int64 { return int64(len(m.Key) + len(m.Value)) }

// gate bounds a count that goers add to after waiting and completions
// take from: wait returns once the count is under max (≤ 0: no bound) or
// the gate is released. A goer adds all it brings once under max, so a
// large addition is never starved by small ones, and the count passes max
// by at most what the goers that passed together bring. add, lowering the
// count, looks at one more atomic when no one waits.
type gate struct {
	n       atomic.Int64
	max     int64
	mu      sync.Mutex
	cond    sync.Cond
	waiting atomic.Int32
	free    atomic.Bool // released: no one waits any more

	// Under mu: the time the goers waited (waits ended) and the sum
	// of the monotonic clock's readings when the current waits began.
	waited, began time.Duration
}

func (g *gate) init(max int64) {
	g.max = max
	g.cond.L = &g.mu
}

func (g *gate) open() bool { return g.max <= 0 || g.n.Load() < g.max || g.free.Load() }

// wait returns once the count is under max, or the gate is released.
func (g *gate) wait() {
	if g.open() {
		return
	}
	g.mu.Lock()
	start := monotonic()
	g.waiting.Add(1)
	g.began += start
	for !g.open() {
		g.cond.Wait()
	}
	g.waiting.Add(-1)
	g.began -= start
	g.waited += monotonic() - start
	g.mu.Unlock()
}

// waitedFor returns the time spent waiting, summed over the goers, the
// waits still going on included.
func (g *gate) waitedFor() time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.waited + time.Duration(g.waiting.Load())*monotonic() - g.began
}

// add adds d to the count; when that brings it under max, it wakes the
// waiters. (A waiter that counted itself after the load of waiting below
// reads the count after the addition.)
func (g *gate) add(d int64) {
	if n := g.n.Add(d); d >= 0 || g.waiting.Load() == 0 || n >= g.max {
		return
	}
	g.wake()
}

// release ends every wait, now and later.
func (g *gate) release() {
	g.free.Store(true)
	g.wake()
}

func (g *gate) wake() {
	g.mu.Lock() // a waiter between its check and its Wait gets there first
	g.mu.Unlock()
	g.cond.Broadcast()
}

// Release lets the lanes' publishers go on without waiting for
// acknowledgements (the service gives up on the deliveries at its
// shutdown_timeout): what they publish is queued, not delivered, and the
// offsets of its events are not committed.
func (p *Publisher) Release() { p.pendingSize.release() }

// Buffer returns an empty byte slice to encode a record into; it is recycled
// once the record is delivered.
func (p *Publisher) Buffer() []byte { return p.free.get() }

// Buffers appends n empty byte slices to dst, as n calls of Buffer would
// return them, under one hold of the free list's lock.
func (p *Publisher) Buffers(dst [][]byte, n int) [][]byte { return p.free.getN(dst, n) }

// bufStack is the publisher's free record buffers, the most recently freed
// handed out first: its bytes were the writer's latest copy, likely still
// in the core's cache, where the oldest of thousands is not.
type bufStack struct {
	mu   sync.Mutex
	bufs [][]byte
	max  int // buffers kept at most
}

func (s *bufStack) get() []byte {
	s.mu.Lock()
	n := len(s.bufs)
	if n == 0 {
		s.mu.Unlock()
		return make([]byte, 0, 512)
	}
	b := s.bufs[n-1]
	s.bufs[n-1] = nil
	s.bufs = s.bufs[:n-1]
	s.mu.Unlock()
	return b
}

// getN appends n buffers to dst, the most recently freed last: taken
// from dst's end, they come in the order n calls of get return them.
func (s *bufStack) getN(dst [][]byte, n int) [][]byte {
	s.mu.Lock()
	k := min(n, len(s.bufs))
	for range n - k { // handed out last (the caller takes from dst's end)
		dst = append(dst, make([]byte, 0, 512))
	}
	top := s.bufs[len(s.bufs)-k:]
	dst = append(dst, top...) // the most recently freed at the end
	clear(top)
	s.bufs = s.bufs[:len(s.bufs)-k]
	s.mu.Unlock()
	return dst
}

// putValues keeps the values of msgs that are small enough to reuse and
// were not given headers (records that are not the publisher's encoding).
func (s *bufStack) putValues(msgs []kafka.Message) {
	s.mu.Lock()
	for i := range msgs {
		if len(s.bufs) >= s.max {
			break
		}
		if b := msgs[i].Value; cap(b) <= maxPooledBuf && msgs[i].Headers == nil {
			s.bufs = append(s.bufs, b[:0])
		}
	}
	s.mu.Unlock()
}

// pubRun is a run of records on the publisher's queue, in order.
type pubRun struct{ msgs []kafka.Message }

// queuedRecords is the capacity of each of the publisher's queues in
// records.
func queuedRecords(batchSize int) int { return 4*batchSize + 1024 }

// pubQueue is one of the publisher's queues: runs of records in the order
// published, bounded by the records they hold, not by the runs, so that a
// publisher of one record at a time (Publish: a ranking response, a
// processor's record) has as much room as an applier's runs of a hundred.
// (Bounded by runs, a queue of 39 runs held 39 single records: their
// publishers blocked on every write of a batch, and pass-through lost 16%
// of its events/s.) A run is taken while the queue holds fewer records
// than its capacity (gate).
type pubQueue struct {
	runs   chan *pubRun // as many runs as records fit: a send waits only when runs passed the gate together
	queued gate         // the records in runs
}

func newPubQueue(records int) *pubQueue {
	q := &pubQueue{runs: make(chan *pubRun, records)}
	q.queued.init(int64(records))
	return q
}

// put queues r, waiting while the queue is full (backpressure on the
// publisher's caller).
func (q *pubQueue) put(r *pubRun) {
	q.queued.wait()
	q.queued.add(int64(len(r.msgs)))
	q.runs <- r
}

// Publish queues m for delivery. It blocks only when the queue is full
// (explicit backpressure on the processing loop). m.WriterData is the
// publisher's.
func (p *Publisher) Publish(m kafka.Message) {
	p.publish(p.ins[0], []kafka.Message{m})
}

// PublishBatch queues msgs for delivery, in order, as one run (see
// Publisher), counting them at once; the caller keeps msgs (the records
// are copied, and own their byte slices from then on). It blocks only
// when the queue is full (explicit backpressure on the processing loop).
// Dead letters too large for their topic are cut. Every record's
// WriterData is the publisher's.
func (p *Publisher) PublishBatch(msgs []kafka.Message) { p.publish(p.ins[0], msgs) }

// publish is PublishBatch onto queue in.
func (p *Publisher) publish(in *pubQueue, msgs []kafka.Message) {
	if len(msgs) == 0 {
		return
	}
	p.pending.Add(int64(len(msgs)))
	e := p.epoch.Load() // a Mark taken meanwhile waits for all of them: never for fewer
	e.pending.Add(int64(len(msgs)))
	r, _ := p.runs.Get().(*pubRun)
	if r == nil {
		r = &pubRun{}
	}
	var size int64
	for _, m := range msgs {
		if m.Topic == p.truncTopic && p.truncTopic != "" {
			if n := recordBytes(&m); n > p.maxRecord {
				m = p.cut(m, n)
			}
		}
		m.WriterData = e
		size += recordSize(&m)
		r.msgs = append(r.msgs, m)
	}
	p.pendingSize.add(size)
	in.put(r)
}

// take appends r's records, taken off queue in, to batch and frees r.
func (p *Publisher) take(in *pubQueue, batch []kafka.Message, r *pubRun) []kafka.Message {
	in.queued.add(-int64(len(r.msgs)))
	batch = append(batch, r.msgs...)
	clear(r.msgs)
	r.msgs = r.msgs[:0]
	p.runs.Put(r)
	return batch
}

// epoch counts the records published between two marks that are not
// acknowledged yet; prev is the epoch before it, nil once it and all before
// it are acknowledged.
type epoch struct {
	pending atomic.Int64
	prev    atomic.Pointer[epoch]
}

// Mark is a point in the publisher's stream of records: see Await.
type Mark struct{ e *epoch }

// Mark returns a mark after every record published so far (whose Publish
// has returned) and starts a new epoch for the records published from now.
func (p *Publisher) Mark() Mark {
	next := &epoch{}
	prev := p.epoch.Swap(next)
	next.prev.Store(prev)
	return Mark{prev}
}

// Await waits until every record published before m was made is
// acknowledged by the brokers, or ctx ends. Records published since do not
// hold it up.
func (p *Publisher) Await(ctx context.Context, m Mark) error {
	e := m.e
	err := p.poll(ctx, "await deliveries", func() bool {
		for e != nil && e.pending.Load() == 0 {
			e = e.prev.Load()
		}
		return e == nil
	})
	if err == nil {
		m.e.prev.Store(nil) // all acknowledged up to m: the epochs before are done with
	}
	return err
}

// Pending is the number of records published but not yet acknowledged.
func (p *Publisher) Pending() int64 { return p.pending.Load() }

// PendingBytes returns the bytes (keys and values) of the records
// published and not yet acknowledged: what BufferBytes bounds.
func (p *Publisher) PendingBytes() int64 { return p.pendingSize.n.Load() }

// Waited returns the time the lanes' publishers have spent waiting at
// BufferBytes, summed over them, the waits going on included:
// back-pressure from the brokers.
func (p *Publisher) Waited() time.Duration { return p.pendingSize.waitedFor() }

// Flush waits until every record published so far has been acknowledged by
// the broker, or ctx ends.
func (p *Publisher) Flush(ctx context.Context) error {
	return p.poll(ctx, "flush producer", func() bool { return p.pending.Load() == 0 })
}

// poll waits, backing off from 100 µs to 5 ms, until done reports true or
// ctx ends.
func (p *Publisher) poll(ctx context.Context, what string, done func() bool) error {
	var w poller
	for !done() {
		if err := w.sleep(ctx); err != nil {
			return fmt.Errorf("stream: %s (%d records pending): %w", what, p.pending.Load(), err)
		}
	}
	return nil
}

// Close flushes what is queued and stops the publisher, both bounded by
// ctx: the writer's own close waits for its retries of undeliverable
// batches, so when ctx ends first Close returns without it (the process is
// stopping; what was not delivered is not committed either).
func (p *Publisher) Close(ctx context.Context) error {
	err := p.Flush(ctx)
	p.once.Do(func() { close(p.stopc) })
	p.pendingSize.release() // nothing is delivered from now: no lane waits for it
	p.loops.Wait()
	closed := make(chan error, 1)
	go func() { closed <- errors.Join(p.w.Close(), p.solo.Close()) }()
	select {
	case cerr := <-closed:
		if err == nil {
			err = cerr
		}
	case <-ctx.Done():
		if err == nil {
			err = fmt.Errorf("stream: close producer: %w", ctx.Err())
		}
	}
	return err
}

// loop hands the runs of queue in to the writer in batches of about
// batchSize records, until Close; with retries, it also sends the records
// that failed again once their backoff has passed (one loop does).
func (p *Publisher) loop(batchSize int, in *pubQueue, retries bool) {
	batch := make([]kafka.Message, 0, batchSize)
	var retry <-chan time.Time // nil: never
	if retries {
		retryTick := time.NewTicker(50 * time.Millisecond)
		defer retryTick.Stop()
		retry = retryTick.C
	}
	for {
		batch = batch[:0]
		select {
		case <-p.stopc:
			return
		case r := <-in.runs:
			batch = p.take(in, batch, r)
		drain:
			for len(batch) < batchSize {
				select {
				case r := <-in.runs:
					batch = p.take(in, batch, r)
				default:
					break drain
				}
			}
		case <-retry:
			p.retryMu.Lock()
			if time.Now().Before(p.retryAt) {
				p.retryMu.Unlock()
				continue
			}
			batch = append(batch, p.retry...)
			p.retry = p.retry[:0]
			p.retryMu.Unlock()
			if len(batch) == 0 {
				continue
			}
			if ok, n := p.retryLogs.pass("retry"); ok { // once a minute while it goes on
				p.log.Info("retrying undelivered records", "records", len(batch), "retries_since_last_logged", n)
			}
		}
		p.deliver(batch)
	}
}

// write hands batch to the writer. A record larger than the writer takes
// (kafka-go refuses the whole call for it) is undeliverable; the others
// go on. Other refusals (e.g. no metadata yet, the brokers away) keep the
// records for a retry after a backoff.
func (p *Publisher) write(batch []kafka.Message) {
	for len(batch) > 0 {
		p.meta.Tick()
		err := p.w.WriteMessages(context.Background(), batch...)
		if err == nil {
			return
		}
		if tl, ok := errors.AsType[kafka.MessageTooLargeError](err); ok {
			p.give(tl.Message, err)
			batch = tl.Remaining
			continue
		}
		p.met.errors(len(batch))
		if ok, n := p.queueErrs.pass(err.Error()); ok {
			p.log.Warn("queue records for delivery: retrying", "records", len(batch), "err", err, "repeated_since_last_logged", n)
		}
		p.requeue(batch)
		return
	}
}

// requeue keeps msgs for the retry loop, which takes them after a backoff
// that grows while deliveries fail.
func (p *Publisher) requeue(msgs []kafka.Message) {
	p.retryMu.Lock()
	p.retry = append(p.retry, msgs...)
	p.retryAt = time.Now().Add(p.retryWait.next())
	p.backedOff.Store(true)
	p.retryMu.Unlock()
}

// tooLarge reports whether err is the brokers refusing a record batch for
// its size (the topic's max.message.bytes).
func tooLarge(err error) bool {
	code, ok := brokerCode(err)
	return ok && (code == kafka.MessageSizeTooLarge || code == kafka.RecordListTooLarge)
}

// recordBytes is an upper bound of the bytes m takes in a record batch,
// as kafka-go counts it against BatchBytes.
func recordBytes(m *kafka.Message) int {
	n := 32 + len(m.Key) + len(m.Value)
	for i := range m.Headers {
		n += 10 + len(m.Headers[i].Key) + len(m.Headers[i].Value)
	}
	return n
}

// cut returns m with its value cut so that the record fits maxRecord,
// and a header with the value's original length.
func (p *Publisher) cut(m kafka.Message, n int) kafka.Message {
	orig := len(m.Value)
	hs := make([]kafka.Header, len(m.Headers), len(m.Headers)+1)
	copy(hs, m.Headers)
	m.Headers = append(hs, kafka.Header{Key: engine.HeaderOriginalBytes, Value: strconv.AppendInt(nil, int64(orig), 10)})
	keep := max(0, orig-(recordBytes(&m)-p.maxRecord))
	m.Value = m.Value[:keep:keep]
	if p.truncated != nil {
		p.truncated.Inc()
	}
	return m
}

// give gives up on m: the brokers refuse it even alone (err). It is
// counted, logged once per topic, and stops readiness (Undeliverable);
// its delivery is no longer awaited, so checkpoints go on.
func (p *Publisher) give(m kafka.Message, err error) {
	if p.undeliv.add(m.Topic) {
		p.log.Error("a record cannot be delivered: the brokers refuse it even alone; it is dropped and counted (streamer_records_undeliverable_total), /readyz is 503 until a restart",
			"topic", m.Topic, "bytes", recordBytes(&m), "err", err)
	}
	p.settle(m)
}

// settle accounts for m as done with: its epoch's and the total pending
// counts.
func (p *Publisher) settle(m kafka.Message) {
	p.pending.Add(-1) // first: an Await that returns sees it
	if e, ok := m.WriterData.(*epoch); ok {
		e.pending.Add(-1)
	}
	p.pendingSize.add(-recordSize(&m))
}

// Undeliverable says, for /readyz, how many records the brokers refused
// even alone, by topic ("" when none).
func (p *Publisher) Undeliverable() string { return p.undeliv.reason() }

// undeliverable counts the records given up, by topic.
type undeliverable struct {
	counter *prometheus.CounterVec
	mu      sync.Mutex
	topics  map[string]int64
}

// add counts one on topic; it reports whether it is the topic's first.
func (u *undeliverable) add(topic string) bool {
	if u.counter != nil {
		u.counter.WithLabelValues(topic).Inc()
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.topics[topic]++
	return u.topics[topic] == 1
}

func (u *undeliverable) reason() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return listed(u.topics, func(n int64) string {
		return fmt.Sprintf("%d records could not be delivered (the brokers refuse them even alone: larger than the topic's max.message.bytes?); dropped, see the log", n)
	})
}

// completion runs on the writer's goroutines once a batch is acknowledged or
// has failed every attempt.
func (p *Publisher) completion(msgs []kafka.Message, err error) {
	topic := msgs[0].Topic
	if err != nil && tooLarge(err) {
		// Refused for its size: alone, the record is undeliverable; in a
		// batch, each record is sent again by itself.
		if len(msgs) == 1 {
			p.give(msgs[0], err)
			return
		}
		for i := range msgs {
			m := msgs[i]
			m.Partition, m.Offset = 0, 0
			p.meta.Tick()
			if werr := p.solo.WriteMessages(context.Background(), m); werr != nil {
				if _, ok := errors.AsType[kafka.MessageTooLargeError](werr); ok {
					p.give(m, werr)
				} else {
					p.requeue([]kafka.Message{m})
				}
			}
		}
		return
	}
	if err != nil {
		p.met.errors(len(msgs))
		if p.health.Report("publish "+topic, err, &topicUse{key: p.keys[topic], topic: topic, needs: "WRITE"}) == nil {
			p.deliverErrs.warn(p.log, topic+err.Error(), "deliver records", "records", len(msgs), "topic", topic, "err", err)
		}
		cp := make([]kafka.Message, len(msgs))
		copy(cp, msgs)
		for i := range cp { // the writer fills these in; a retry must not keep them
			cp[i].Partition, cp[i].Offset = 0, 0
		}
		p.requeue(cp)
		return
	}
	if p.backedOff.Load() {
		p.retryMu.Lock()
		p.retryWait.reset()
		p.backedOff.Store(false)
		p.retryMu.Unlock()
	}
	p.health.OK("publish " + topic)
	p.delivered(msgs)
}

// delivered accounts for msgs acknowledged: their epochs' and the total
// pending counts go down, their values are recycled into Buffer's, and
// the published callback gets their count.
func (p *Publisher) delivered(msgs []kafka.Message) {
	// The callback and the total first: an Await that the epochs' counts
	// below let return sees them done.
	p.met.published(len(msgs))
	p.pending.Add(-int64(len(msgs)))
	var e *epoch // the epoch of a run of records, counted down once
	var n, size int64
	for i := range msgs {
		size += recordSize(&msgs[i])
		m, _ := msgs[i].WriterData.(*epoch)
		if m != e {
			if e != nil {
				e.pending.Add(-n)
			}
			e, n = m, 0
		}
		n++
	}
	if e != nil {
		e.pending.Add(-n)
	}
	p.pendingSize.add(-size)
	p.free.putValues(msgs)
}

// deliver hands a batch of the publisher's loop to the writer or, with
// PublisherConfig.Discard, acknowledges it at once without sending it
// (delivered, as completion does a batch the brokers took). A discarding
// publisher keeps Publish, Buffer, Mark, Await, Flush and Close as they
// are, and the queue and the loop that batches the records: what it leaves
// out is kafka-go's writer and the brokers. It allocates nothing per
// record.
func (p *Publisher) deliver(batch []kafka.Message) {
	if p.discard {
		p.delivered(batch)
		return
	}
	p.write(batch)
}
