package stream

import (
	"context"
	"errors"
	"maps"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/snapshot"
)

// PartitionedState is a Processor whose state is kept per input partition
// (the Engine with EngineConfig.Partitioned), so that it can move with the
// partitions between the instances of a consumer group.
type PartitionedState interface {
	Processor
	RestorePartition(part int, saved []snapshot.Model) (fresh, dropped []string, err error)
	CapturePartition(part int) ([]snapshot.Model, error)
	DropPartition(part int)
	SetRemote(part int, saved []snapshot.Model, createdAt time.Time) error
	RemoteState() (n int, oldest time.Time)
}

type scaleMetrics struct {
	remote, staleness prometheus.Gauge
	restores, merges  prometheus.Counter
}

// UsePartitionedState makes the pipeline scale out (scale_out.enabled):
// each input partition's state is restored from its scope of the changelog
// when the partition is assigned, consumed from the offset that state
// includes, checkpointed to its scope, and dropped when the partition is
// revoked; every refresh the other partitions' latest state is read from
// the changelog and handed to proc.SetRemote. store must have a changelog.
func (p *Pipeline) UsePartitionedState(store *StateStore, proc PartitionedState, refresh time.Duration) {
	p.store, p.pstate, p.refresh = store, proc, refresh
	p.remoteSeq = map[int]uint64{}
}

// newScaleMetrics registers the scale-out metrics (always, so that
// dashboards find them; they stay 0 with snapshot.scope instance).
func newScaleMetrics(reg prometheus.Registerer) *scaleMetrics {
	m := &scaleMetrics{
		remote: prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamer_scaleout_remote_partitions",
			Help: "Input partitions owned by other instances whose statistics the global models merge (from the changelog)."}),
		staleness: prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamer_scaleout_remote_staleness_seconds",
			Help: "Age of the oldest other partition's statistics merged into the global models (bounded by snapshot.every + scale_out.refresh while the other instances are healthy)."}),
		restores: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamer_scaleout_partition_restores_total",
			Help: "Assigned partitions whose state was restored from the changelog before processing."}),
		merges: prometheus.NewCounter(prometheus.CounterOpts{Name: "streamer_scaleout_remote_updates_total",
			Help: "Newer states of other instances' partitions merged into the global models."}),
	}
	if reg != nil {
		reg.MustRegister(m.remote, m.staleness, m.restores, m.merges)
	}
	return m
}

// restorePartition loads partition part's state from the changelog into
// the processor and returns the offset to consume from: the one the state
// includes, or groupOffset when the partition has no state yet. It retries
// until it succeeds or ctx ends (ok false).
func (p *Pipeline) restorePartition(ctx context.Context, part int, groupOffset int64) (offset int64, ok bool) {
	wait := 200 * time.Millisecond
	for {
		offset, err := p.tryRestore(ctx, part, groupOffset)
		if err == nil {
			return offset, true
		}
		if ctx.Err() != nil {
			return 0, false
		}
		p.log.Error("restore partition state; retrying", "partition", part, "err", err, "in", wait)
		select {
		case <-ctx.Done():
			return 0, false
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

func (p *Pipeline) tryRestore(ctx context.Context, part int, groupOffset int64) (int64, error) {
	lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	snap, err := p.store.LoadPartition(lctx, part)
	if err != nil {
		return 0, err
	}
	offset := groupOffset
	var saved []snapshot.Model
	if snap != nil {
		found := false
		for _, o := range snap.Offsets {
			if o.Topic == p.cfg.Topic && int(o.Partition) == part {
				offset, found = o.Offset, true
			}
		}
		if !found {
			return 0, errors.New("the partition's snapshot has no offset for it (a changelog topic shared with another input topic?)")
		}
		saved = snap.Models
	} else if groupOffset >= 0 {
		p.log.Warn("partition has a committed offset but no state in the changelog: its models start empty there", "partition", part, "offset", groupOffset)
	}
	p.ckptMu.Lock()
	defer p.ckptMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	fresh, dropped, err := p.pstate.RestorePartition(part, saved)
	if err != nil {
		return 0, err
	}
	p.next[part] = offset
	p.saved[part] = offset
	p.smet.restores.Inc()
	if snap != nil {
		p.log.Info("restored partition state", "partition", part, "seq", snap.Seq, "created", snap.CreatedAt,
			"offset", offset, "fresh_models", fresh, "dropped_models", dropped)
	} else {
		p.log.Info("partition has no state yet: models start empty", "partition", part, "offset", offset)
	}
	return offset, nil
}

// releasePartition forgets a revoked partition's state after its final
// checkpoint; its statistics stay merged as remote state until a newer
// version arrives from the changelog.
func (p *Pipeline) releasePartition(part int) {
	p.ckptMu.Lock()
	defer p.ckptMu.Unlock()
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.owned, part)
	if _, held := p.next[part]; !held {
		return
	}
	p.pstate.DropPartition(part)
	delete(p.next, part)
	delete(p.saved, part)
	delete(p.committed, part)
	delete(p.remoteSeq, part) // merge the durable version at the next refresh
}

// checkpointPartitions is checkpoint for partitioned state: every held
// partition that advanced since its last snapshot is captured (all at one
// pause), saved to its scope of the changelog, and then its offset is
// committed.
func (p *Pipeline) checkpointPartitions(ctx context.Context, gen *kafka.Generation) {
	p.ckptMu.Lock()
	defer p.ckptMu.Unlock()
	p.mu.Lock()
	delivered := p.pub.Mark()
	p.since = 0
	offsets := maps.Clone(p.next)
	captured := map[int][]snapshot.Model{}
	for part, off := range offsets {
		if off == p.saved[part] {
			continue
		}
		models, err := p.pstate.CapturePartition(part)
		if err != nil {
			p.log.Error("checkpoint: capture state", "partition", part, "err", err)
			continue
		}
		captured[part] = models
	}
	p.mu.Unlock()
	// The records of the events the offsets cover must be delivered before
	// the offsets are committed; processing goes on meanwhile.
	if err := p.pub.Await(ctx, delivered); err != nil {
		p.log.Warn("checkpoint: deliveries not acknowledged; offsets not committed", "err", err)
		return
	}
	if len(captured) > 0 {
		if err := p.store.RefreshChangelog(ctx); err != nil {
			p.log.Error("checkpoint: partition states not saved, offsets not committed", "err", err)
			return
		}
	}
	for part, models := range captured {
		if err := p.store.SavePartition(ctx, p.cfg.Topic, part, offsets[part], models); err != nil {
			if errors.Is(err, ErrPartitionTakenOver) {
				// This member was cut off from the group (its session
				// expired) and the partition has a new owner: the state
				// here is stale; the group will revoke the partition.
				p.log.Warn("checkpoint: partition was taken over by another instance; not saving or committing its stale state", "partition", part, "err", err)
				continue
			}
			p.log.Error("checkpoint: partition state not durable; its offset is not committed", "partition", part, "err", err)
			continue
		}
		p.saved[part] = offsets[part]
	}
	p.mu.Lock()
	commit := map[int]int64{}
	for part, off := range offsets {
		if p.owned[part] && p.saved[part] == off && p.committed[part] != off {
			commit[part] = off
		}
	}
	p.mu.Unlock()
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

// followRemote reads the changelog every refresh and merges the newest
// state of every partition this instance does not hold.
func (p *Pipeline) followRemote(ctx context.Context) {
	tail := p.store.Tail()
	t := time.NewTicker(p.refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err := tail.Poll(pctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				p.log.Warn("scale-out: read changelog", "err", err)
			}
			continue
		}
		for _, scope := range tail.Scopes() {
			part, err := strconv.Atoi(scope)
			if err != nil {
				continue
			}
			p.mu.Lock()
			_, held := p.next[part]
			seen := p.remoteSeq[part]
			p.mu.Unlock()
			if held {
				continue
			}
			snap, err := tail.Latest(scope)
			if err != nil || snap.Seq == seen {
				continue
			}
			p.mu.Lock()
			if _, held := p.next[part]; !held {
				if err := p.pstate.SetRemote(part, snap.Models, snap.CreatedAt); err != nil {
					p.log.Warn("scale-out: merge state of partition", "partition", part, "seq", snap.Seq, "err", err)
				} else {
					p.remoteSeq[part] = snap.Seq
					p.smet.merges.Inc()
				}
			}
			p.mu.Unlock()
		}
		p.mu.Lock()
		n, oldest := p.pstate.RemoteState()
		p.mu.Unlock()
		p.smet.remote.Set(float64(n))
		if n > 0 {
			p.smet.staleness.Set(time.Since(oldest).Seconds())
		} else {
			p.smet.staleness.Set(0)
		}
	}
}
