package stream

import (
	"fmt"

	"github.com/streamer/streamer/online"
)

// Hashed features (EngineConfig.Hash): events carry categorical, sparse
// and namespaced features, hashed by the decoder into indices of a 2^bits
// space (wire.Decoder.WithHashing); models that take sparse input
// (online.SparseModel) score and learn them in O(nnz), without densifying.

// checkHashed refuses what hashed features do not go with yet.
func checkHashed(cfg EngineConfig, models []NamedModel) error {
	if cfg.Hash == nil {
		return nil
	}
	switch {
	case cfg.JoinEvents > 0 || cfg.JoinTime > 0:
		return fmt.Errorf("stream: hashed features do not go with delayed labels yet (the join window keeps dense features)")
	case cfg.Rank.Model != "":
		return fmt.Errorf("stream: hashed features do not go with ranking requests yet")
	case cfg.Partitioned:
		return fmt.Errorf("stream: hashed features do not go with partition scope yet")
	}
	for _, nm := range models {
		if len(nm.Members) > 0 {
			return fmt.Errorf("stream: model %s: an aggregating model does not take hashed features", nm.Name)
		}
		if _, ok := nm.Model.(online.SparseModel); !ok {
			return fmt.Errorf("stream: model %s: type %s does not take hashed (sparse) features yet; logistic does", nm.Name, nm.Model.Type())
		}
	}
	return nil
}

// observeSparse is observe for a hashed event (idx, val).
func (m *shardModel) observeSparse(key []byte, idx []int32, val []float64, y float64, labelled bool) (online.Prediction, int64) {
	var inst online.Model
	if m.keyed != nil {
		ent, err := m.keyed.get(key)
		if err != nil {
			m.def.met.keyErrors.Inc()
			inst, _ = m.keyed.factory()
			return inst.(online.SparseModel).ObserveSparse(idx, val, y, false), inst.Version()
		}
		inst = ent.m
		p := inst.(online.SparseModel).ObserveSparse(idx, val, y, labelled)
		if labelled {
			m.keyed.learned(ent)
		}
		if m.keyed.held > m.hold {
			m.want.Store(true)
		}
		m.hot.Store(int64(m.keyed.len()))
		m.examples.Store(m.keyed.examples)
		return p, versionOf(p, inst)
	}
	inst = m.m
	p := inst.(online.SparseModel).ObserveSparse(idx, val, y, labelled)
	if labelled {
		m.examples.Store(inst.Examples())
	}
	return p, versionOf(p, inst)
}

// versionOf is the version to publish for p made by inst.
func versionOf(p online.Prediction, inst online.Model) int64 {
	if p.Version != 0 {
		return p.Version
	}
	return inst.Version()
}
