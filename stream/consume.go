package stream

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/stream/engine"
	"github.com/streamer/streamer/stream/internal/stage"
	"github.com/streamer/streamer/stream/wire"
)

// consume reads partition from offset and applies its events to shard sh
// in offset order until ctx ends (revoked, or shutting down), then
// checkpoints.
func (p *Pipeline) consume(ctx context.Context, gen *kafka.Generation, sh *pshard, partition int, offset int64) {
	stage.Set(p.labels, "stage", "fetch", "partition", strconv.Itoa(partition))
	r := p.fetcher(partition, offset) // source.go
	defer r.Close()
	var out Sink
	switch {
	case p.cfg.Sink != nil:
		out = p.cfg.Sink
	case p.pub != nil:
		out = p.pub
	}
	if l, ok := out.(laneSink); ok {
		out = l.Lane(partition) // the partition's records through one of the publisher's queues, in order
	}
	t := p.newTally(partition)
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
	if sh.st == nil {
		var msg kafka.Message // one for the loop: Process takes its address, which escapes
		for {
			var ok bool
			if msg, ok = fetch(); !ok {
				break
			}
			start := time.Now()
			sh.mu.Lock() // no appliers to let go of it: no gate
			p.proc.Process(&msg, out)
			sh.next[partition] = msg.Offset + 1
			sh.mu.Unlock()
			t.done(&msg, time.Since(start))
			t.ran(1)
		}
	} else {
		p.apply(sh, partition, out, fetch, t)
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
	w    *engine.Worker
	out  *engine.Outbox // the records applying it produced, until its partition's publisher takes them
	busy time.Duration  // preparing and applying it
}

// feed is a partition feeding a shard: its slots, its applier's queue.
type feed struct {
	partition int
	st        *engine.Shard // what the applier applies events to: the shard, or in instance scope its lane for the partition
	next      int64         // the offset after the last event applied (-1: none yet); written by the applier holding the shard's lock shared

	free  *slotQueue // the partition's free slots, where the applier puts a run's slots back once published
	ready *slotQueue // the prepared slots, in offset order, to the partition's applier
	tally *tally     // counts the events applied and published (nil: not counted)
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

// prepareTimed: one event in this many has its decoding timed.
const prepareTimed = 8

// slotsPerPartition is the number of slots of each partition (see
// maxSlots).
func (p *Pipeline) slotsPerPartition() int {
	return min(max(slotMemory/max(p.engine.WorkerBytes(), 1), minSlots), maxSlots)
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
func (p *Pipeline) apply(sh *pshard, partition int, out Sink, fetch func() (kafka.Message, bool), t *tally) {
	slots := p.slotsPerPartition()
	f := &feed{partition: partition, free: newSlotQueue(), ready: newSlotQueue(), tally: t}
	floats := new(wire.FloatCache)   // the partition's applier's
	bufs := newBufCache(out)         // the partition's applier's
	spare := make([]*slot, 0, slots) // free slots this goroutine took from f.free, used first
	for range slots {
		spare = append(spare, &slot{w: p.engine.NewWorker(), out: engine.NewOutbox(bufs, floats)})
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
		f.st = sh.st.Lane(partition)
	}
	f.st.Applies(partition)
	sh.feeds[partition] = f
	sh.unlock()
	applied := make(chan struct{})
	go func() {
		defer close(applied)
		stage.Set(p.labels, "stage", "apply", "partition", strconv.Itoa(partition))
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
			f.st.Leave()
		}
		sh.unlock()
	}()
	var check *partitionCheck // rank.partitioner against the partition (partguard.go)
	if p.rank != nil {
		check = p.rank.guard.checker(partition)
	}
	var n int                  // events prepared
	var prepared time.Duration // the last timed decode
	for {
		msg, ok := fetch()
		if !ok {
			break
		}
		check.check(msg.Key)
		if len(spare) == 0 { // all are applied or waiting: those published since, at once
			spare, _ = f.free.take(spare, true)
		}
		s := spare[len(spare)-1]
		spare = spare[:len(spare)-1]
		s.msg = msg
		// The time decoding took, on one event in prepareTimed (two clock
		// readings, 60 ns on the 2-vCPU VM, a tenth of a decode): the
		// events between take the last one's, as an event's share of
		// its run's encoding is taken from the run's.
		if n++; n%prepareTimed == 1 {
			start := monotonic()
			s.w.Prepare(&s.msg) // no lock: reads no state
			prepared = monotonic() - start
		} else {
			s.w.Prepare(&s.msg)
		}
		s.busy = prepared
		f.ready.put(s)
	}
	for len(spare) < slots { // every event sent is applied and published
		spare, _ = f.free.take(spare, true)
	}
}
