package stream

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/stream/engine"
)

// pshard is a shard as the pipeline runs it: the engine's state (nil for a
// stateless Processor), the lock its partitions' appliers take for a run of
// events, and its offsets.
//
// The partitions' appliers hold mu shared, each applying its own events
// (in instance scope through a lane of the shard: Shard.Lane); checkpoint
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
	st    *engine.Shard // nil: stateless
	next  map[int]int64 // per partition: next offset to process; the state includes everything before it (guarded by mu; a feed's applier keeps its own, feed.next)
	feeds map[int]*feed // per partition feeding the shard now (guarded by mu)
	saved map[int]int64 // offsets of the last durable snapshot (guarded by the pipeline's ckptMu)
	// change counts the changes of the state no event made (rollbacks:
	// versions.go), under mu; savedChange is the count the last durable
	// snapshot holds (guarded by the pipeline's ckptMu).
	change, savedChange uint64

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

func newPShard(scope string, st *engine.Shard) *pshard {
	sh := &pshard{scope: scope, st: st, next: map[int]int64{}, feeds: map[int]*feed{}, saved: map[int]int64{}}
	sh.gate.L = &sh.gateMu
	return sh
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
			f.st.Idle() // nothing waiting: a pause, or a run that drained the queue
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
			f.st.Waited(waited)
		}
		// One clock reading per event: the end of an event's
		// application is the start of the next one's, and its
		// scored_at. The wall clock is read once per run (base), and
		// an event's time is base plus the monotonic clock's reading
		// since (time.Since reads one clock, time.Now two: 30 against
		// 60 ns on the 2-vCPU VM).
		base := time.Now()
		start := base
		for i := 0; i < len(batch); i++ {
			s := batch[i]
			if sh.requests.Load() > 0 {
				sh.yield()
				base = time.Now()
				start = base
			}
			f.st.ApplyAt(s.w, &s.msg, s.out, start)
			f.next = s.msg.Offset + 1
			end := base.Add(time.Since(base))
			s.busy += end.Sub(start)
			start = end
			if i == len(batch)-1 && len(batch) < maxApplyBatch {
				batch, _ = f.ready.take(batch, false) // what was put meanwhile, in the same hold
			}
		}
		f.st.EndRun()
		sh.mu.RUnlock()
		start = time.Now()
		for _, s := range batch {
			msgs = s.out.Encode(msgs)
		}
		// Each event's share of the run's encoding (two clock readings a
		// run, where two an event cost as much as encoding a float).
		share := time.Since(start) / time.Duration(len(batch))
		for _, s := range batch {
			s.busy += share
		}
		publishAll(out, msgs) // one run: the publisher's counts change once
		clear(msgs)
		msgs = msgs[:0]
		for _, s := range batch {
			f.published.Store(s.msg.Offset + 1)
			f.tally.done(&s.msg, s.busy)
		}
		f.free.putAll(batch)
		f.tally.ran(len(batch))
		clear(batch)
	}
}

// slotQueue carries a partition's slots between its two goroutines: the
// prepared ones to the applier (feed.ready), and the published ones back
// to the reader (feed.free). It is a slice under a mutex that the taker
// empties at once (one lock for all the slots queued, where a channel
// takes one per slot: a shard's applier's receives were 4% of a score
// run's CPU, and the free slots' channel, a send and a receive per event,
// 4.4% in `bench --no-broker`), and a wake-up for a taker that found it
// empty. Its length is bounded by the partition's slots.
type slotQueue struct {
	mu      sync.Mutex
	slots   []*slot
	closed  bool
	waiting bool          // the taker waits for wake
	wake    chan struct{} // one token per wait
}

func newSlotQueue() *slotQueue { return &slotQueue{wake: make(chan struct{}, 1)} }

// put queues s.
func (q *slotQueue) put(s *slot) { q.putAll([]*slot{s}) }

// putAll queues ss, in their order, under one lock.
func (q *slotQueue) putAll(ss []*slot) {
	q.mu.Lock()
	q.slots = append(q.slots, ss...)
	w := q.waiting
	q.waiting = false
	q.mu.Unlock()
	if w {
		q.wake <- struct{}{}
	}
}

// close says no slot follows; the taker ends once it took the last.
func (q *slotQueue) close() {
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
func (q *slotQueue) take(dst []*slot, wait bool) ([]*slot, bool) {
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

// tally is a partition's accounting of the events processed, by its
// applier (or the stateless loop, consume), one goroutine's: per event its
// latency and the partition's lag, noted in plain memory and moved to the
// metrics once per run (ran) with the counters every partition shares
// (consumed, and the events towards snapshot.every_events): the
// latencies through the partition's shard of the histogram (HistRun),
// the lag as the run's last event left it. A nil tally counts nothing.
type tally struct {
	p             *Pipeline
	lag           prometheus.Gauge
	idle, running *engine.HistRun
	lagNow        float64 // the last done event's lag, for ran
}

func (p *Pipeline) newTally(partition int) *tally {
	return &tally{p: p, lag: p.met.lag.WithLabelValues(strconv.Itoa(partition)),
		idle: p.met.latency.Shard("idle", partition).Run(), running: p.met.latency.Shard("running", partition).Run()}
}

// done accounts for a processed event that took busy of processing.
func (t *tally) done(msg *kafka.Message, busy time.Duration) {
	if t == nil {
		return
	}
	p := t.p
	if p.engine != nil && p.engine.Refitting() {
		t.running.Observe(busy.Seconds())
	} else {
		t.idle.Observe(busy.Seconds())
	}
	t.lagNow = float64(msg.HighWaterMark - msg.Offset - 1)
	if p.cfg.OnProcessed != nil {
		p.cfg.OnProcessed(msg)
	}
}

// ran accounts for a run of n ≥ 1 processed events, after their done: it
// moves their latencies and lag to the metrics and may ask for a
// checkpoint (snapshot.every_events, or key-scoped models holding too
// many changed keys).
func (t *tally) ran(n int) {
	if t == nil {
		return
	}
	p := t.p
	t.idle.Flush()
	t.running.Flush()
	t.lag.Set(t.lagNow)
	p.met.consumed.Add(float64(n))
	if every := p.cfg.SnapshotEveryEvents; (every > 0 && p.since.Add(int64(n)) >= int64(every)) || (p.engine != nil && p.store != nil && p.engine.CheckpointWanted()) {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
}
