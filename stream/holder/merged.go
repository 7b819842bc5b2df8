package holder

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/streamer/streamer/online"
)

// Merge is a mergeable model (mam without window or decay) in
// partition scope: a scorer composed over the statistics of every input
// partition. Each shard keeps its partition's own statistics; the scorer
// holds their exact merge together with the latest statistics of the
// partitions other instances own (read from the changelog, at most
// snapshot.every + scale_out.refresh old). Every labelled event is learned
// twice, into its partition's statistics and into the merge, so the merge
// follows this instance's partitions without delay.
//
// The merge is shared by the instance's shards: it has its own lock, held
// only while an event is scored and learned into it.
type Merge struct {
	mu       sync.Mutex
	g        *online.MAM
	own      map[int]*online.MAM // this instance's partitions: the shards' statistics
	remote   map[int]*online.MAM // partitions owned by other instances
	remoteAt map[int]time.Time   // when each remote state was made durable
}

func NewMerge(g *online.MAM) *Merge {
	return &Merge{g: g, own: map[int]*online.MAM{}, remote: map[int]*online.MAM{}, remoteAt: map[int]time.Time{}}
}

// Bound is the merge's certainty bound (for the live bound check).
func (s *Merge) Bound(rho float64) float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.g.Bound(rho)
}

func (s *Merge) Examples() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.g.Examples()
}

// View is the merge itself, for tests: read it only while no shard
// applies events.
func (s *Merge) View() *online.MAM { return s.g }

// Remotes calls fn with every partition whose statistics are another
// instance's, and when they were made durable.
func (s *Merge) Remotes(fn func(part int, at time.Time)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for part, at := range s.remoteAt {
		fn(part, at)
	}
}

// attach makes own partition part's statistics, replacing its remote state.
func (s *Merge) attach(part int, own *online.MAM) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.own[part] = own
	delete(s.remote, part)
	delete(s.remoteAt, part)
	s.rebuild()
}

// detach forgets partition part as this instance's; its statistics (just
// made durable) stay merged as its remote state until a newer one arrives.
func (s *Merge) detach(part int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	own := s.own[part]
	if own == nil {
		return
	}
	delete(s.own, part)
	s.remote[part] = own
	s.remoteAt[part] = time.Now()
	s.rebuild()
}

// SetRemote sets partition part's statistics from another instance's
// snapshot; a partition held here is left alone.
func (s *Merge) SetRemote(part int, m *online.MAM, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.own[part] != nil {
		return
	}
	s.remote[part] = m
	s.remoteAt[part] = at
	s.rebuild()
}

// rebuild sets the merge to the sum of every partition's statistics, own
// and remote, in partition order. s.mu must be held.
func (s *Merge) rebuild() {
	ids := make([]int, 0, len(s.own)+len(s.remote))
	for id := range s.own {
		ids = append(ids, id)
	}
	for id := range s.remote {
		if s.own[id] == nil {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	list := make([]*online.MAM, len(ids))
	for i, id := range ids {
		if m := s.own[id]; m != nil {
			list[i] = m
		} else {
			list[i] = s.remote[id]
		}
	}
	if err := s.g.MergeAll(list...); err != nil {
		// Same spec by construction (fingerprints are checked on restore).
		panic(fmt.Sprintf("holder: merge partition statistics: %v", err))
	}
}

// peek scores in with the merge, changing nothing.
func (s *Merge) peek(in *Input) online.Prediction {
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.Sparse {
		return online.PeekSparse(s.g, in.Idx, in.Val)
	}
	return online.Peek(s.g, in.X)
}

// observe scores in with the merge, then learns (in, y) into it and into
// own, a partition's statistics (observeTee).
func (s *Merge) observe(in *Input, y float64, labelled bool, own *online.MAM) online.Prediction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return observeTee(s.g, in, y, labelled, own)
}

// observeTee scores in with g, then learns (in, y) into g and into own
// when labelled: dense features through the tee, which computes the
// feature map once (prepared when in.prep is set); hashed ones (their
// fields unread) into own when g learned them (the sparse path has no tee
// that reuses φ, so own computes it again, O(nnz) for the linear kernel,
// O(D·nnz) for generated random features).
func observeTee(g *online.MAM, in *Input, y float64, labelled bool, own *online.MAM) online.Prediction {
	switch {
	case in.Sparse:
		before := g.Examples()
		p := g.ObserveSparse(in.Idx, in.Val, y, labelled)
		if labelled && g.Examples() != before {
			own.ObserveSparse(in.Idx, in.Val, y, true)
		}
		return p
	case in.Prep != nil:
		return g.ObserveTeePrepared(in.Prep, in.X, y, labelled, own)
	default:
		return g.ObserveTee(in.X, y, labelled, own)
	}
}

// mergedHolder is a mergeable mam in partition scope: the shard keeps its
// partition's own statistics, and every event is scored by the merge of
// all partitions' (Merge), learned into both.
type mergedHolder struct {
	single             // m: own
	own    *online.MAM // the partition's statistics
	s      *Merge
}

// NewMerged is the holder of own, a partition's statistics, scored
// through s, the merge.
func NewMerged(spec *Spec, fig *Figures, own *online.MAM, s *Merge) Holder {
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
