package stream

import (
	"github.com/streamer/streamer/online"
)

// mergedHolder is a mergeable mam in partition scope: the shard keeps its
// partition's own statistics, and every event is scored by the merge of
// all partitions' (mergedScorer, merged.go), learned into both.
type mergedHolder struct {
	single             // m: own
	own    *online.MAM // the partition's statistics
	s      *mergedScorer
}

func (h *mergedHolder) observe(_ []byte, in *input, y float64, labelled bool) (online.Prediction, int64) {
	p := h.s.observe(in, y, labelled, h.own)
	if labelled {
		h.fig.examples.Store(h.own.Examples())
	}
	return p, versionOf(p, h.own)
}

// find is nil: the merge scores every key.
func (h *mergedHolder) find([]byte) online.Model { return nil }

func (h *mergedHolder) peek(_ online.Model, in *input) (online.Prediction, int64) {
	return h.s.peek(in), 1
}

// attach merges the partition's statistics, replacing its remote state.
func (h *mergedHolder) attach(part int) {
	h.s.attach(part, h.own)
	h.def.met.version.Set(float64(h.own.Version()))
}

// detach keeps the partition's statistics merged as its remote state
// until a newer one arrives.
func (h *mergedHolder) detach(part int) { h.s.detach(part) }
