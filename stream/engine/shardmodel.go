package engine

import (
	"sync"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/stream/holder"
)

// shardModel is one model's state in one shard: its holder (package holder),
// and what the shard's per-event path keeps for it.
type shardModel struct {
	def  *modelDef
	h    holder.Holder
	in   []float64    // an aggregator's input: the members' predictions, then the features
	view holder.Input // the input h takes (feed)
	// The hashed features of the namespaces the model takes (modelDef.use).
	useIdx   []int32
	useVal   []float64
	useField []uint8
	bound    *HistRun // an applier's (Shard.Applies): the published mistake bounds of its run, for its partition's shard of the histogram (flushed by EndRun)

	holder.Figures // for the scrape (stateCollector)
}

// input returns what the model observes for an event with features x,
// when preds are the shard's models' predictions for it so far: x, or for
// an aggregator its members' predicted classes followed by x.
func (m *shardModel) input(x []float64, preds []online.Prediction) []float64 {
	if m.in == nil {
		return x
	}
	ms := m.def.members
	for k, j := range ms {
		m.in[k] = float64(preds[j].Label)
	}
	copy(m.in[len(ms):], x)
	return m.in
}

// feed returns the input the model takes for the event in (shared by the
// models): in with prep, the worker's preparation for this model (nil:
// none), and for an aggregator its input (preds: the shard's models'
// predictions so far).
func (m *shardModel) feed(in *holder.Input, prep []float64, preds []online.Prediction) *holder.Input {
	v := &m.view
	*v = *in
	v.Prep = prep
	if m.in != nil {
		v.X = m.input(in.X, preds)
	}
	if u := m.def.use; u != nil && v.Sparse {
		m.useIdx, m.useVal, m.useField = m.useIdx[:0], m.useVal[:0], m.useField[:0]
		for k, f := range v.Field {
			if u[f] {
				m.useIdx, m.useVal, m.useField = append(m.useIdx, v.Idx[k]), append(m.useVal, v.Val[k]), append(m.useField, f)
			}
		}
		v.Idx, v.Val, v.Field = m.useIdx, m.useVal, m.useField
	}
	return v
}

// peek scores in with the model's instance for key without changing any
// state (holder.find, then holder.peek).
func (m *shardModel) peek(key []byte, in *holder.Input) (online.Prediction, int64) {
	mu := m.lock(key)
	defer unlock(mu)
	return m.h.Peek(m.h.Find(key), in)
}

// observe is h.observe, behind the lock of key's state when the shard's
// lanes share the holder.
func (m *shardModel) observe(key []byte, in *holder.Input, y float64, labelled bool) (online.Prediction, int64) {
	mu := m.lock(key)
	p, v := m.h.Observe(key, in, y, labelled)
	unlock(mu)
	return p, v
}

// lock takes the lock of key's state in the holder when the shard's lanes
// share it (holder.mutex), and returns it for unlock.
func (m *shardModel) lock(key []byte) *sync.Mutex {
	mu := m.h.Mutex(key)
	if mu != nil {
		mu.Lock()
	}
	return mu
}

func unlock(mu *sync.Mutex) {
	if mu != nil {
		mu.Unlock()
	}
}
