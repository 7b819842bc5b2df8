package stream

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/stream/engine"
	"github.com/streamer/streamer/stream/internal/stage"
)

// checkpointLoop checkpoints every snapshot.every (without a state store,
// every commit interval: offsets only) and whenever kicked
// (snapshot.every_events, or key-scoped models holding too many changed
// keys), skipping the turns of a backoff while saves fail, until ctx ends.
func (p *Pipeline) checkpointLoop(ctx context.Context, gen *kafka.Generation) {
	stage.Set(p.labels, "stage", "checkpoint")
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
	feeds   []*feed            // the partitions feeding sh at the capture
	cp      *engine.Checkpoint // nil: nothing to save
	change  uint64             // sh.change at the capture
	n       []int64            // with versions: the models' examples at the capture
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
		c := shardCapture{sh: sh, offsets: maps.Clone(sh.next), feeds: slices.Collect(maps.Values(sh.feeds)), change: sh.change}
		// While saves fail, a shard whose snapshot is durable may still
		// have keys the key store did not take: captured again. A
		// rollback is a change without events.
		if p.store != nil && sh.st != nil && (!maps.Equal(c.offsets, sh.saved) || c.change != sh.savedChange || p.saves.failing()) {
			cp, err := sh.st.Capture()
			if err != nil {
				sh.unlock()
				p.log.Error("checkpoint: capture state", "shard", sh.scope, "err", err)
				failed, lost = cmp.Or(failed, err), true
				continue
			}
			c.cp, captured = cp, true
			if p.versions.on() && sh.scope == "" {
				c.n = sh.st.ModelExamples()
			}
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
			var w poller
			for f.published.Load() < want {
				if err := w.sleep(ctx); err != nil {
					return fmt.Errorf("stream: partition %d: records of offsets before %d not published: %w", f.partition, want, err)
				}
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
	sh.saved, sh.savedChange = c.offsets, c.change
	if sh.scope == "" && p.versions.on() {
		// Off the event path, after the save: a version that is not
		// written is logged and counted, the checkpoint goes on.
		p.versions.checkpointed(c.cp.Models, c.n, p.store.LastSeq(), time.Now(), versionOffsets(p.cfg.Topic, c.offsets), c.change)
	}
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
