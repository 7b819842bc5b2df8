package stream

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/snapshot"
)

// Partitioned state, for scale-out (EngineConfig.Partitioned).
//
// Every model keeps its state per input partition, so that a partition's
// state can move with the partition to whichever instance of the consumer
// group owns it, restored from the partition's scope of the changelog topic
// at the offsets it includes:
//
//   - Mergeable models (mam without window or decay) are sums over their
//     examples. The instance scores with the global model: the exact merge
//     of its own partitions' statistics, learned live, and the other
//     partitions' latest statistics, read from the changelog (at most
//     snapshot.every + scale_out.refresh old). Every labelled event is
//     learned twice, into its partition's statistics and into the global
//     model, so the global model follows its own partitions without delay.
//   - Key-scoped models live with their key's partition: one set of keys
//     per partition.
//   - Every other model (heavy models refitted from a window, logistic,
//     windowed or decaying mam, omam, lda, exact kernels) is kept per
//     partition and scores that partition's events: its window or
//     statistics cover that partition's events, and its refits run on the
//     instance that owns the partition (no election needed: the consumer
//     group's assignment decides, and the refit load spreads with the
//     partitions).

// partModel is one input partition's state of a model.
type partModel struct {
	m     online.Model // the partition's instance (nil when key-scoped)
	keyed *keyedModels // key-scoped: the partition's keys
	view  mergedView   // mergeable: scores with the global merge
}

// mergedView scores with the global merge and learns into both the global
// merge and the partition's own statistics.
type mergedView struct {
	*online.MAM             // the partition's own statistics
	g           *online.MAM // the global merge
}

// Observe scores x with the global model, then learns (x, y) into it and
// into the partition's statistics.
func (v *mergedView) Observe(x []float64, y float64, labelled bool) online.Prediction {
	return v.g.ObserveTee(x, y, labelled, v.MAM)
}

func (em *engineModel) initPartitioned(nm NamedModel) {
	em.partitioned = true
	em.parts = map[int]*partModel{}
	if nm.Factory != nil {
		em.keyFactory, em.maxKeys, em.keyDir = nm.Factory, nm.MaxKeys, nm.KeyDir
		return
	}
	em.newInst = nm.New
	if g, ok := nm.Model.(*online.MAM); ok && g.Mergeable() {
		em.global = g
		em.remote = map[int]*online.MAM{}
		em.remoteAt = map[int]time.Time{}
	}
}

// background lists the instances that may run background work (refits).
// Unpartitioned it is the model itself.
func (em *engineModel) background() []online.Model { return em.bg }

// listBackground rebuilds em.bg after the partitions changed.
func (em *engineModel) listBackground() {
	em.bg = em.bg[:0]
	for _, p := range em.parts {
		if p.m != nil {
			em.bg = append(em.bg, p.m)
		}
	}
}

// keyCount is the number of key-scoped instances in memory.
func (em *engineModel) keyCount() int {
	if !em.partitioned {
		return em.keyed.len()
	}
	n := 0
	for _, p := range em.parts {
		if p.keyed != nil {
			n += p.keyed.len()
		}
	}
	return n
}

// buildPart makes an empty state for partition part (not yet installed).
func (em *engineModel) buildPart(part int) (*partModel, error) {
	pm := &partModel{}
	if em.keyFactory != nil {
		dir := em.keyDir
		if dir != "" {
			dir = filepath.Join(dir, "p"+strconv.Itoa(part))
		}
		k, err := newKeyedModels(em.keyFactory, em.maxKeys, dir)
		if err != nil {
			return nil, err
		}
		pm.keyed = k
		return pm, nil
	}
	m, err := em.newInst()
	if err != nil {
		return nil, err
	}
	pm.m = m
	if em.global != nil {
		own, ok := m.(*online.MAM)
		if !ok {
			return nil, fmt.Errorf("partition instance is a %T, want *online.MAM", m)
		}
		pm.view = mergedView{MAM: own, g: em.global}
	}
	return pm, nil
}

// installPart makes pm partition part's state, replacing any before.
func (em *engineModel) installPart(part int, pm *partModel, started bool) {
	em.dropPart(part, false)
	em.parts[part] = pm
	em.listBackground()
	if pm.keyed != nil {
		em.keyedBase += pm.keyed.examples()
		em.met.keys.Set(float64(em.keyCount()))
	}
	if r := refitOf(pm.m); r != nil {
		r.OnRefit(em.onRefit)
		if started {
			r.Start()
		}
	}
	if em.global != nil {
		delete(em.remote, part)
		delete(em.remoteAt, part)
		em.rebuild()
	}
	em.refresh()
}

// dropPart forgets partition part's state. With keepRemote, a mergeable
// model keeps the partition's statistics as the partition's remote state
// (they were just made durable) until a newer version arrives.
func (em *engineModel) dropPart(part int, keepRemote bool) {
	pm := em.parts[part]
	if pm == nil {
		return
	}
	delete(em.parts, part)
	em.listBackground()
	if pm.keyed != nil {
		em.keyedBase -= pm.keyed.examples()
		em.met.keys.Set(float64(em.keyCount()))
	}
	if r := refitOf(pm.m); r != nil {
		_ = r.Close()
	}
	if em.global != nil {
		if keepRemote {
			em.remote[part] = pm.view.MAM
			em.remoteAt[part] = time.Now()
		}
		em.rebuild()
	}
	em.refresh()
}

// partInstance is the instance that scores and learns an event of
// partition part with this key; a partition seen for the first time starts
// empty.
func (em *engineModel) partInstance(part int, key []byte) online.Model {
	pm := em.parts[part]
	if pm == nil {
		var err error
		if pm, err = em.buildPart(part); err != nil {
			em.met.keyErrors.Inc()
			return em.m
		}
		em.installPart(part, pm, false)
	}
	switch {
	case pm.keyed != nil:
		return em.keyedInstance(pm.keyed, key)
	case em.global != nil:
		return &pm.view
	}
	return pm.m
}

// rebuild sets the global model to the merge of every partition's
// statistics, own and remote, in partition order.
func (em *engineModel) rebuild() {
	ids := make([]int, 0, len(em.parts)+len(em.remote))
	for id := range em.parts {
		ids = append(ids, id)
	}
	for id := range em.remote {
		if em.parts[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	list := make([]*online.MAM, len(ids))
	for i, id := range ids {
		if pm := em.parts[id]; pm != nil {
			list[i] = pm.view.MAM
		} else {
			list[i] = em.remote[id]
		}
	}
	if err := em.global.MergeAll(list...); err != nil {
		// Same spec by construction (fingerprints are checked on restore).
		panic("stream: merge partition statistics: " + err.Error())
	}
}

// RestorePartition installs partition part's state from a snapshot of its
// scope (nil or empty saved: fresh state). Models whose saved state is
// missing or was written by a different configuration start empty (fresh);
// saved models no longer configured are dropped. A saved state that does
// not decode is an error and leaves the engine unchanged.
func (e *Engine) RestorePartition(part int, saved []snapshot.Model) (fresh, dropped []string, err error) {
	byName := map[string]snapshot.Model{}
	for _, s := range saved {
		byName[s.Name] = s
	}
	built := make([]*partModel, len(e.models))
	discard := func() {
		for _, pm := range built {
			if pm != nil {
				if r := refitOf(pm.m); r != nil {
					_ = r.Close()
				}
			}
		}
	}
	for i, m := range e.models {
		if !m.partitioned {
			return nil, nil, fmt.Errorf("stream: model %s: state is not partitioned", m.name)
		}
		pm, err := m.buildPart(part)
		if err != nil {
			discard()
			return nil, nil, fmt.Errorf("stream: model %s: %w", m.name, err)
		}
		built[i] = pm
		s, ok := byName[m.name]
		delete(byName, m.name)
		if !ok || !m.accepts(s) {
			fresh = append(fresh, m.name)
			continue
		}
		if pm.keyed != nil {
			err = pm.keyed.UnmarshalBinary(s.Data)
		} else {
			err = pm.m.UnmarshalBinary(s.Data)
		}
		if err != nil {
			discard()
			return nil, nil, fmt.Errorf("stream: restore model %s of partition %d: %w", m.name, part, err)
		}
	}
	for i, m := range e.models {
		m.installPart(part, built[i], e.started)
	}
	for name := range byName {
		dropped = append(dropped, name)
	}
	return fresh, dropped, nil
}

// CapturePartition serialises partition part's state of every model.
func (e *Engine) CapturePartition(part int) ([]snapshot.Model, error) {
	out := make([]snapshot.Model, len(e.models))
	for i, m := range e.models {
		pm := m.parts[part]
		if pm == nil {
			return nil, fmt.Errorf("stream: capture model %s: partition %d is not held", m.name, part)
		}
		var data []byte
		var err error
		if pm.keyed != nil {
			data, err = pm.keyed.MarshalBinary()
		} else {
			data, err = pm.m.MarshalBinary()
		}
		if err != nil {
			return nil, fmt.Errorf("stream: capture model %s of partition %d: %w", m.name, part, err)
		}
		out[i] = snapshot.Model{Name: m.name, Type: m.m.Type(), Fingerprint: m.fingerprint, Data: data}
	}
	return out, nil
}

// DropPartition forgets partition part's state (it was revoked). Its
// statistics stay in the global merge as the partition's remote state until
// SetRemote brings a newer one.
func (e *Engine) DropPartition(part int) {
	for _, m := range e.models {
		m.dropPart(part, true)
	}
}

// SetRemote sets the statistics of partition part, owned by another
// instance, from its latest snapshot (made durable at createdAt), and merges
// them into the global models. Partitions held here are left alone; models
// that do not merge ignore remote state.
func (e *Engine) SetRemote(part int, saved []snapshot.Model, createdAt time.Time) error {
	for _, m := range e.models {
		if m.global == nil || m.parts[part] != nil {
			continue
		}
		i := slices.IndexFunc(saved, func(s snapshot.Model) bool { return s.Name == m.name })
		if i < 0 || !m.accepts(saved[i]) {
			continue
		}
		r := m.remote[part]
		if r == nil {
			inst, err := m.newInst()
			if err != nil {
				return err
			}
			r = inst.(*online.MAM)
		}
		if err := r.UnmarshalBinary(saved[i].Data); err != nil {
			return fmt.Errorf("stream: model %s of partition %d: %w", m.name, part, err)
		}
		m.remote[part] = r
		m.remoteAt[part] = createdAt
		m.rebuild()
		m.refresh()
	}
	return nil
}

// RemoteState reports how many partitions' remote statistics the global
// models merge, and when the oldest of them was made durable.
func (e *Engine) RemoteState() (n int, oldest time.Time) {
	seen := map[int]bool{}
	for _, m := range e.models {
		for part, at := range m.remoteAt {
			seen[part] = true
			if oldest.IsZero() || at.Before(oldest) {
				oldest = at
			}
		}
	}
	return len(seen), oldest
}
