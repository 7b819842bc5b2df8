package holder

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/streamer/streamer/online"
)

// LanePublish is how many labelled events a lane learns between two
// publications of its statistics (and at most, while its partition's
// events keep coming, how many of them another lane's scores may not
// include yet).
const LanePublish = 64

// LaneWoke is how long an applier waits for an event before its lane
// rebuilds its view at once (a pause in its partition's events, after
// which the other lanes have published all they learned).
const LaneWoke = time.Millisecond

// mergingHolder is a mergeable mam (online.MAM.Mergeable: its state is a
// sum over its examples) in instance scope, whose lanes learn in parallel
// with no lock between them. Each lane (laneMAM) learns its partition's
// events into statistics of its own and scores with a view of its own: the
// merge as of the last fold (base, the configured instance), the other
// lanes' statistics as they last published them, and its own, which the
// view learns too. A lane publishes its statistics every lanePublish
// labelled events and whenever its applier finds no event waiting (idle);
// it rebuilds its view when another lane published, at most once per
// lanePublish events it applies unless its applier waited laneWoke or
// more for its event (a rebuild merges every lane's statistics:
// O(lanes × D)). So a lane's scores include every event of its partition
// before, and the other partitions' events up to a few of their lanes'
// publications before: a merged view refreshed as partition scope
// refreshes the partitions other instances own, here every few events,
// and exact once the stream pauses.
//
// The state (capture, the scrape, the bound of the non-lane path) is the
// exact merge: a capture, with every lane paused, folds the lanes'
// statistics into base (and empties them), as does a lane that ends.
// With one partition the lane's view is the model, as before.
type mergingHolder struct {
	plainHolder // m: base, the merge as of the last fold; the shard's own path (Process) learns into it directly

	mu      sync.Mutex // guards lanes and their published statistics (laneMAM.pub)
	lanes   []*laneMAM
	version atomic.Uint64 // bumped by every publication and fold: a lane whose view is older rebuilds it
	req     *online.MAM   // an exact merge for requests to the shard itself (find)
	parts   []*online.MAM // scratch of find
}

// laneMAM is one lane's part of a mergingHolder.
type laneMAM struct {
	*mergingHolder
	own, pub, view *online.MAM
	parts          []*online.MAM // scratch of rebuild
	seen           uint64        // the holder's version the view was built at
	applied        int           // events applied since the last rebuild
	woke           bool          // the applier waited laneWoke or more since the last rebuild
	unpublished    int           // labelled events learned since the last publication
	examples       atomic.Int64  // own's, for the scrape
}

// Lane is the holder an applier's lane of an instance-scope shard uses
// when it is not the shard's (forLane): told when its applier idles and
// waits, and when it ends.
type Lane interface {
	Holder
	Idle()                  // the applier found no event waiting
	Waited(d time.Duration) // the applier then waited d for its next event
	Leave()                 // the lane ends (the shard's lock held exclusively)
	// Bounder is the bound the lane's judged events are checked against:
	// its view's, which only the lane's goroutine touches.
	Bounder() online.Bounder
}

// ForLane is the holder that a lane of the shard holding h uses: h, shared
// with the other lanes, or for a mergeable mam (mergingHolder) statistics
// and a view of the lane's own.
func ForLane(h Holder) Holder {
	if mh, ok := h.(*mergingHolder); ok {
		return mh.laneFor()
	}
	return h
}

// NewMerging is the instance's holder of mergeable mam g.
func NewMerging(spec *Spec, fig *Figures, g *online.MAM) Holder {
	h := &mergingHolder{plainHolder: plainHolder{single: single{spec: spec, fig: fig, m: g}}}
	if spec.Prepared {
		h.prep = g
	}
	return h
}

func (h *mergingHolder) base() *online.MAM { return h.m.(*online.MAM) }

// Share: the lanes do not share the holder's state, each has its own
// (laneFor); nothing to lock.
func (h *mergingHolder) Share() {}

// laneFor returns the holder of a new lane (the shard's lock held
// exclusively): its view is the merge of base and the other lanes'
// published statistics.
func (h *mergingHolder) laneFor() Holder {
	g := h.base()
	l := &laneMAM{mergingHolder: h, own: g.Blank(), pub: g.Blank(), view: g.Blank()}
	h.mu.Lock()
	h.lanes = append(h.lanes, l)
	h.mu.Unlock()
	l.rebuild()
	return l
}

// leave folds lane l, which ends, into base (the shard's lock held
// exclusively).
func (h *mergingHolder) leave(l *laneMAM) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fold(l)
	h.lanes = slices.DeleteFunc(h.lanes, func(o *laneMAM) bool { return o == l })
	h.folded()
}

// fold adds l's statistics to base and empties them; l's view, whose
// merge is unchanged, stays. h.mu held, the lanes paused.
func (h *mergingHolder) fold(l *laneMAM) {
	if l.own.Examples() == 0 {
		return
	}
	h.base().AddBlank(l.own)
	l.own.Reset()
	l.pub.Reset()
	l.unpublished = 0
	l.examples.Store(0)
}

// foldAll folds every lane (the lanes paused).
func (h *mergingHolder) foldAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, l := range h.lanes {
		h.fold(l)
	}
	h.folded()
}

// folded publishes a fold: the scrape's count, and the views rebuild
// (within lanePublish events, at once after a pause). h.mu held.
func (h *mergingHolder) folded() {
	h.fig.Examples.Store(h.base().Examples())
	h.version.Add(1)
}

func (h *mergingHolder) Capture() ([]byte, *Delta, error) {
	h.foldAll()
	return h.single.Capture()
}

func (h *mergingHolder) Restore(data []byte, d *Delta, src KeySource, lossy bool) error {
	h.foldAll() // the lanes' statistics are replaced with the state's
	if err := h.single.Restore(data, d, src, lossy); err != nil {
		return err
	}
	h.version.Add(1)
	for _, l := range h.lanes {
		l.woke = true // the views rebuild before their next event
	}
	return nil
}

// Find is the exact merge, for a request to the shard itself (its lock
// held exclusively: the lanes paused); with no lanes, base.
func (h *mergingHolder) Find([]byte) online.Model {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.lanes) == 0 {
		return h.base()
	}
	if h.req == nil {
		h.req = h.base().Blank()
	}
	h.merge(h.req, &h.parts, nil)
	return h.req
}

// merge sets dst to base and every lane's statistics: a lane's own for
// self (nil: every lane's own, the lanes paused), the others' as last
// published. parts is the caller's scratch. h.mu held.
func (h *mergingHolder) merge(dst *online.MAM, parts *[]*online.MAM, self *laneMAM) {
	ps := append((*parts)[:0], h.base())
	for _, o := range h.lanes {
		if self == nil || o == self {
			ps = append(ps, o.own)
		} else {
			ps = append(ps, o.pub)
		}
	}
	*parts = ps
	dst.MergeBlanks(ps...)
}

// counts: base's examples as of the last fold, and the lanes' since.
func (h *mergingHolder) Counts() (examples, hot, stored int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.fig.Examples.Load()
	for _, l := range h.lanes {
		n += l.examples.Load()
	}
	return n, 0, 0
}

// publishStats makes l's statistics what the other lanes' views take
// (not Holder.Publish, the scrape's figures, which is the shard's).
func (l *laneMAM) publishStats() {
	h := l.mergingHolder
	h.mu.Lock()
	defer h.mu.Unlock()
	l.pub.CopySums(l.own)
	l.unpublished = 0
	h.version.Add(1)
}

// rebuild sets l's view to base, the other lanes' published statistics
// and its own.
func (l *laneMAM) rebuild() {
	h := l.mergingHolder
	h.mu.Lock()
	defer h.mu.Unlock()
	l.seen, l.applied, l.woke = h.version.Load(), 0, false
	h.merge(l.view, &l.parts, l)
}

// Unpublished is how many labelled events the lane learned since it last
// published its statistics (at most LanePublish − 1 after an event).
func (l *laneMAM) Unpublished() int { return l.unpublished }

// Idle publishes what the lane learned since its last publication: its
// applier found no event waiting.
func (l *laneMAM) Idle() {
	if l.unpublished > 0 {
		l.publishStats()
	}
}

// Waited tells the lane its applier waited d for its next event.
func (l *laneMAM) Waited(d time.Duration) {
	if d >= LaneWoke {
		l.woke = true
	}
}

// stale reports whether the view is to be rebuilt before the next event.
func (l *laneMAM) stale() bool {
	return l.mergingHolder.version.Load() != l.seen && (l.applied >= LanePublish || l.woke)
}

// Observe scores with the lane's view and learns into it and into the
// lane's statistics.
func (l *laneMAM) Observe(_ []byte, in *Input, y float64, labelled bool) (online.Prediction, int64) {
	if l.stale() {
		l.rebuild()
	}
	l.applied++
	p := observeTee(l.view, in, y, labelled, l.own)
	if labelled {
		l.examples.Store(l.own.Examples())
		if l.unpublished++; l.unpublished >= LanePublish {
			l.publishStats()
		}
	}
	return p, versionOf(p, l.view)
}

// Find is the lane's view (a request in the lane's partition), rebuilt
// as observe rebuilds it.
func (l *laneMAM) Find([]byte) online.Model {
	if l.stale() {
		l.rebuild()
	}
	return l.view
}

// bounder is the bound the lane's judged events are checked against: its
// view's, which only the lane's goroutine touches.
func (l *laneMAM) Bounder() online.Bounder { return l.view }

// Leave folds the lane into base (it ends; the shard's lock held
// exclusively).
func (l *laneMAM) Leave() { l.mergingHolder.leave(l) }
