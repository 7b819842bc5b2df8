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
	s      *Merge
}

// newMergedHolder is the holder of own, a partition's statistics, scored
// through s, the merge.
func newMergedHolder(spec *Spec, fig *Figures, own *online.MAM, s *Merge) *mergedHolder {
	return &mergedHolder{single: single{spec: spec, fig: fig, m: own}, own: own, s: s}
}

func (h *mergedHolder) Observe(_ []byte, in *Input, y float64, labelled bool) (online.Prediction, int64) {
	p := h.s.observe(in, y, labelled, h.own)
	if labelled {
		h.fig.Examples.Store(h.own.Examples())
	}
	return p, versionOf(p, h.own)
}

// Find is nil: the merge scores every key.
func (h *mergedHolder) Find([]byte) online.Model { return nil }

func (h *mergedHolder) Peek(_ online.Model, in *Input) (online.Prediction, int64) {
	return h.s.peek(in), 1
}

// Attach merges the partition's statistics, replacing its remote state.
func (h *mergedHolder) Attach(part int) {
	h.s.attach(part, h.own)
	h.spec.Version.Set(float64(h.own.Version()))
}

// Detach keeps the partition's statistics merged as its remote state
// until a newer one arrives.
func (h *mergedHolder) Detach(part int) { h.s.detach(part) }
