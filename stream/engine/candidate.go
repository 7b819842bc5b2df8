package engine

import (
	"github.com/streamer/streamer/stream/holder"
	"github.com/streamer/streamer/stream/wire"
)

// candidate sets rk.in to candidate i of request ev as the models take
// it and returns it: its features, or with hashed features its entries
// combined with the request's own, with their fields (and their hashes,
// for the collision estimate; nil when dense).
func (rk *rankScratch) candidate(ev *wire.Event, i int, hashed bool) (*holder.Input, []uint64) {
	if !hashed {
		rk.in.SetDense(ev.CandidateFeatures(i))
		return &rk.in, nil
	}
	idx, val, hash, field := ev.CandidateHashed(i)
	rk.in.SetHashed(idx, val, field)
	return &rk.in, hash
}

// candidate is rk.candidate with the profiles of the entities it names
// joined (key: the request's key).
func (s *Shard) candidate(ev *wire.Event, i int, key []byte, hashed bool) (*holder.Input, []uint64) {
	rk := s.rk
	if len(s.profiles) == 0 {
		return rk.candidate(ev, i, hashed)
	}
	idx, val, hash, field := ev.CandidateHashed(i)
	c := &ev.Cands[i]
	return s.joinProfiles(&rk.in, idx, val, field, ev, key, c.Item, c.IDOnly), hash
}
