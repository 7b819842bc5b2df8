package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/internal/keystore"
	"github.com/streamer/streamer/snapshot"
	"github.com/streamer/streamer/stream/engine"
)

type scaleMetrics struct {
	remote, staleness prometheus.Gauge
	restores, merges  prometheus.Counter
}

// newScaleMetrics registers the scale-out metrics (always, so that
// dashboards find them; they stay 0 with snapshot.scope instance).
func newScaleMetrics(reg prometheus.Registerer) *scaleMetrics {
	m := &scaleMetrics{
		remote: prometheus.NewGauge(prometheus.GaugeOpts{Name: "streamer_scaleout_remote_partitions",
			Help: "holder.Input partitions owned by other instances whose statistics the global models merge (from the changelog)."}),
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

// restorePartition makes partition part's shard from its state in the
// changelog and returns it with the offset to consume from: the one the
// state includes, or groupOffset when the partition has no state yet. It
// retries until it succeeds or ctx ends (ok false).
func (p *Pipeline) restorePartition(ctx context.Context, part int, groupOffset int64) (sh *pshard, offset int64, ok bool) {
	wait := newBackoff(200*time.Millisecond, 5*time.Second)
	for {
		sh, offset, err := p.tryRestore(ctx, part, groupOffset)
		if err == nil {
			return sh, offset, true
		}
		if ctx.Err() != nil {
			return nil, 0, false
		}
		_, lost := errors.AsType[*partitionStateLost](err)
		if damaged := errors.Is(err, keystore.ErrCorrupt); lost || damaged {
			// Not consumed while owned: starting it empty would forget what
			// was learned without a word; a damaged key store fails the
			// same way at every try.
			reason := err.Error()
			if damaged {
				reason = fmt.Sprintf("partition %d: %v: the key store (snapshot.dir/keystore) is damaged (`streamer snapshot verify` lists the damage): stop the service, move it aside and start again: every partition's keys are rebuilt from snapshot.changelog_topic, losing nothing", part, err)
			}
			p.log.Error("partition held", "partition", part, "err", reason)
			p.mu.Lock()
			p.held["partition "+strconv.Itoa(part)] = reason
			p.mu.Unlock()
			<-ctx.Done()
			p.mu.Lock()
			delete(p.held, "partition "+strconv.Itoa(part))
			p.mu.Unlock()
			return nil, 0, false
		}
		d := wait.next()
		p.log.Error("restore partition state; retrying", "partition", part, "err", err, "in", d.String())
		select {
		case <-ctx.Done():
			return nil, 0, false
		case <-time.After(d):
		}
	}
}

func (p *Pipeline) tryRestore(ctx context.Context, part int, groupOffset int64) (*pshard, int64, error) {
	lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	scope := strconv.Itoa(part)
	snap, err := p.store.LoadPartition(lctx, part)
	if err != nil {
		return nil, 0, err
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
			return nil, 0, errors.New("the partition's snapshot has no offset for it (a changelog topic shared with another input topic?)")
		}
		saved = snap.Models
	} else if groupOffset >= 0 {
		if !p.cfg.AllowEmptyState {
			return nil, 0, &partitionStateLost{part: part, offset: groupOffset, topic: p.store.clTopic}
		}
		p.log.Warn("partition has a committed offset but no state in the changelog; --allow-empty-state: its models start empty there", "partition", part, "offset", groupOffset)
	}
	st, err := p.engine.NewShard(scope)
	if err != nil {
		return nil, 0, err
	}
	p.ckptMu.Lock()
	defer p.ckptMu.Unlock()
	fresh, dropped, err := st.Restore(saved, p.keySource(scope))
	if err != nil {
		return nil, 0, err
	}
	sh := newPShard(scope, st)
	sh.next[part] = offset
	sh.saved[part] = offset
	p.mu.Lock()
	p.shards[scope] = sh
	p.mu.Unlock()
	p.smet.restores.Inc()
	if snap != nil {
		p.log.Info("restored partition state", "partition", part, "seq", snap.Seq, "created", snap.CreatedAt,
			"offset", offset, "fresh_models", fresh, "dropped_models", dropped)
	} else {
		p.log.Info("partition has no state yet: models start empty", "partition", part, "offset", offset)
	}
	return sh, offset, nil
}

// Held says which partitions are held for lost state ("" when none).
func (p *Pipeline) Held() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return listed(p.held, func(s string) string { return s }) // nil map (instance scope): ""
}

// releasePartition forgets a revoked partition's shard after its final
// checkpoint; the statistics of its mergeable models stay merged as remote
// state until a newer version arrives from the changelog.
func (p *Pipeline) releasePartition(part int) {
	p.ckptMu.Lock()
	defer p.ckptMu.Unlock()
	scope := strconv.Itoa(part)
	p.mu.Lock()
	delete(p.owned, part)
	sh := p.shards[scope]
	delete(p.shards, scope)
	delete(p.committed, part)
	delete(p.remoteSeq, part) // merge the durable version at the next refresh
	p.mu.Unlock()
	if sh != nil {
		sh.mu.Lock()
		sh.st.Close()
		sh.mu.Unlock()
	}
}

// keySource is where a shard of scope rebuilds its key store's tables
// when they do not match its snapshot: the changelog's key records (nil
// without a changelog).
func (p *Pipeline) keySource(scope string) engine.KeySource {
	if p.store == nil || p.store.changelog == nil {
		return nil
	}
	// One read of the changelog serves every key-scoped model of the shard.
	var byModel map[string]keyRecords
	return func(model string) ([][]byte, [][]byte, error) {
		if byModel == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var err error
			if byModel, err = p.store.LoadKeys(ctx, scope); err != nil {
				return nil, nil, err
			}
		}
		r := byModel[model]
		return r.keys, r.states, nil
	}
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
			_, held := p.shards[scope]
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
			if _, held := p.shards[scope]; !held {
				if err := p.engine.SetRemote(part, snap.Models, snap.CreatedAt); err != nil {
					p.log.Warn("scale-out: merge state of partition", "partition", part, "seq", snap.Seq, "err", err)
				} else {
					p.remoteSeq[part] = snap.Seq
					p.smet.merges.Inc()
				}
			}
			p.mu.Unlock()
		}
		n, oldest := p.engine.RemoteState()
		p.smet.remote.Set(float64(n))
		if n > 0 {
			p.smet.staleness.Set(time.Since(oldest).Seconds())
		} else {
			p.smet.staleness.Set(0)
		}
	}
}
