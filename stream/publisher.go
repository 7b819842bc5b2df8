package stream

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
)

// Publisher sends score and dead-letter records asynchronously in batches.
// Publish never waits on the network: records go to an in-memory queue that a
// single goroutine hands to kafka-go's asynchronous Writer in batches. Records
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
	in          chan kafka.Message
	pending     atomic.Int64
	epoch       atomic.Pointer[epoch] // the records published now count here
	free        chan []byte
	log         *slog.Logger
	met         *pubMetrics
	health      *BrokerHealth
	deliverErrs repeats // delivery errors, logged once while they repeat
	retryLogs   repeats
	keys        map[string]string

	retryMu sync.Mutex
	retry   []kafka.Message

	stopc chan struct{}
	donec chan struct{}
	once  sync.Once
}

// PublisherConfig configures a Publisher.
type PublisherConfig struct {
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
		in:     make(chan kafka.Message, 4*cfg.BatchSize+1024),
		free:   make(chan []byte, 8*cfg.BatchSize+1024),
		log:    log,
		met:    &pubMetrics{published: published, errors: errors},
		health: cfg.Health,
		keys:   cfg.TopicKeys,
		stopc:  make(chan struct{}),
		donec:  make(chan struct{}),
	}
	p.epoch.Store(&epoch{})
	transport := cfg.Transport
	if transport == nil {
		transport = &kafka.Transport{ClientID: cfg.ClientID}
	}
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
	go p.loop(cfg.BatchSize)
	return p
}

// Buffer returns an empty byte slice to encode a record into; it is recycled
// once the record is delivered.
func (p *Publisher) Buffer() []byte {
	select {
	case b := <-p.free:
		return b
	default:
		return make([]byte, 0, 512)
	}
}

// Publish queues m for delivery. It blocks only when the queue is full
// (explicit backpressure on the processing loop). m.WriterData is the
// publisher's.
func (p *Publisher) Publish(m kafka.Message) {
	p.pending.Add(1)
	e := p.epoch.Load()
	e.pending.Add(1)
	m.WriterData = e
	p.in <- m
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

// Flush waits until every record published so far has been acknowledged by
// the broker, or ctx ends.
func (p *Publisher) Flush(ctx context.Context) error {
	return p.poll(ctx, "flush producer", func() bool { return p.pending.Load() == 0 })
}

// poll waits, backing off from 100 µs to 5 ms, until done reports true or
// ctx ends.
func (p *Publisher) poll(ctx context.Context, what string, done func() bool) error {
	wait := 100 * time.Microsecond
	for !done() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("stream: %s (%d records pending): %w", what, p.pending.Load(), ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Millisecond)
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
	<-p.donec
	closed := make(chan error, 1)
	go func() { closed <- p.w.Close() }()
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

func (p *Publisher) loop(batchSize int) {
	defer close(p.donec)
	batch := make([]kafka.Message, 0, batchSize)
	retryTick := time.NewTicker(200 * time.Millisecond)
	defer retryTick.Stop()
	for {
		batch = batch[:0]
		select {
		case <-p.stopc:
			return
		case m := <-p.in:
			batch = append(batch, m)
		drain:
			for len(batch) < batchSize {
				select {
				case m := <-p.in:
					batch = append(batch, m)
				default:
					break drain
				}
			}
		case <-retryTick.C:
			p.retryMu.Lock()
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
		if err := p.w.WriteMessages(context.Background(), batch...); err != nil {
			// Rejected before reaching a partition queue (e.g. no metadata
			// yet): keep the records and try again later.
			p.met.errors(len(batch))
			p.log.Warn("queue records for delivery", "records", len(batch), "err", err)
			p.retryMu.Lock()
			p.retry = append(p.retry, batch...)
			p.retryMu.Unlock()
		}
	}
}

// completion runs on the writer's goroutines once a batch is acknowledged or
// has failed every attempt.
func (p *Publisher) completion(msgs []kafka.Message, err error) {
	topic := msgs[0].Topic
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
		p.retryMu.Lock()
		p.retry = append(p.retry, cp...)
		p.retryMu.Unlock()
		return
	}
	for i := range msgs {
		if e, ok := msgs[i].WriterData.(*epoch); ok {
			e.pending.Add(-1)
		}
		if b := msgs[i].Value; cap(b) <= maxPooledBuf && msgs[i].Headers == nil {
			select {
			case p.free <- b[:0]:
			default:
			}
		}
	}
	p.health.OK("publish " + topic)
	p.met.published(len(msgs))
	p.pending.Add(-int64(len(msgs)))
}
