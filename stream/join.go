package stream

import (
	"bytes"
	"hash/maphash"

	"github.com/streamer/streamer/online"
)

// joinBuffer keeps unlabelled events (impressions) waiting for their label:
// the features and every model's prediction made at impression time, keyed
// by event id. It is a ring of preallocated slots (oldest first) with a hash
// index, so that keeping and joining allocate nothing once warm. An
// impression leaves when its label arrives, when it is older than maxAge, or
// when the ring is full and a newer one needs its slot.
type joinBuffer struct {
	slots  []joinSlot
	head   int // oldest slot
	size   int
	index  map[uint64]int32 // id hash → slot
	maxAge int64            // nanoseconds; 0 = no limit
	seed   maphash.Seed

	// Hashes of impressions that left unlabelled, to tell a label that came
	// too late from one for an id never seen.
	gone      []uint64
	goneHead  int
	goneIndex map[uint64]int32
}

type joinSlot struct {
	hash  uint64
	id    []byte
	x     []float64
	idx   []int32   // hashed features (putSparse): x all zero but x[idx[k]] += val[k]
	val   []float64 // (x is then nil)
	field []uint8   // entry k's field (wire.Event.Field)
	at    int64
	preds []online.Prediction
	ope   opeMark // an item a ranking request put first: what off-policy estimates need
}

// opeMark is what the off-policy estimates need of the item a ranking
// request put first: the probability with which the exploration policy put
// it there, and whether the greedy order would have.
type opeMark struct {
	first  bool
	prop   float64
	greedy bool
}

// joinStatus is what became of a label.
type joinStatus int

const (
	joined joinStatus = iota
	unknownID
	tooLate
)

// newJoinBuffer returns a buffer of capacity impressions of dim features
// (dim 0: hashed features, kept by their entries, putSparse).
func newJoinBuffer(capacity, dim, models int, maxAge int64) *joinBuffer {
	j := &joinBuffer{
		slots:     make([]joinSlot, capacity),
		index:     make(map[uint64]int32, capacity),
		maxAge:    maxAge,
		seed:      maphash.MakeSeed(),
		gone:      make([]uint64, capacity),
		goneIndex: make(map[uint64]int32, capacity),
	}
	for i := range j.slots {
		if dim > 0 {
			j.slots[i].x = make([]float64, dim)
		}
		j.slots[i].preds = make([]online.Prediction, models)
	}
	return j
}

func (j *joinBuffer) hash(id []byte) uint64 {
	if h := maphash.Bytes(j.seed, id); h != 0 {
		return h
	}
	return 1 // 0 marks a joined slot
}

// put keeps an impression; it returns how many impressions left unlabelled
// to make room or because they were too old.
func (j *joinBuffer) put(id []byte, x []float64, preds []online.Prediction, now int64) (dropped int) {
	dropped = j.expire(now)
	if j.size == len(j.slots) {
		j.drop()
		dropped++
	}
	i := (j.head + j.size) % len(j.slots)
	s := &j.slots[i]
	s.hash = j.hash(id)
	s.id = append(s.id[:0], id...)
	copy(s.x, x)
	copy(s.preds, preds)
	s.ope = opeMark{}
	s.at = now
	j.size++
	j.index[s.hash] = int32(i) // a repeated id: the newest impression wins
	return dropped
}

// putSparse is put for hashed features: the impression keeps the event's
// entries (idx, val) and their fields, in slices it reuses (no allocation
// once every slot has held an event as long as this one).
func (j *joinBuffer) putSparse(id []byte, idx []int32, val []float64, field []uint8, preds []online.Prediction, now int64) (dropped int) {
	dropped = j.put(id, nil, preds, now)
	s := &j.slots[(j.head+j.size-1)%len(j.slots)]
	s.idx = append(s.idx[:0], idx...)
	s.val = append(s.val[:0], val...)
	s.field = append(s.field[:0], field...)
	return dropped
}

// take finds and removes the impression with this id. The returned slot is
// valid until the next put.
// mark sets the off-policy mark of the impression put last.
func (j *joinBuffer) mark(o opeMark) {
	j.slots[(j.head+j.size-1)%len(j.slots)].ope = o
}

func (j *joinBuffer) take(id []byte, now int64) (*joinSlot, joinStatus, int) {
	dropped := j.expire(now)
	h := j.hash(id)
	i, ok := j.index[h]
	if !ok || !bytes.Equal(j.slots[i].id, id) {
		if _, late := j.goneIndex[h]; late {
			return nil, tooLate, dropped
		}
		return nil, unknownID, dropped
	}
	delete(j.index, h)
	s := &j.slots[i]
	s.hash = 0 // joined: its slot is dead until the ring reuses it
	return s, joined, dropped
}

// expire drops impressions older than maxAge.
func (j *joinBuffer) expire(now int64) (dropped int) {
	if j.maxAge <= 0 {
		return 0
	}
	for j.size > 0 && now-j.slots[j.head].at > j.maxAge {
		if j.drop() {
			dropped++
		}
	}
	return dropped
}

// drop removes the oldest slot; it reports whether that was a live
// impression (not one already joined).
func (j *joinBuffer) drop() bool {
	s := &j.slots[j.head]
	live := false
	if s.hash != 0 {
		if i, ok := j.index[s.hash]; ok && int(i) == j.head {
			delete(j.index, s.hash)
			live = true
			j.remember(s.hash)
		}
	}
	j.head = (j.head + 1) % len(j.slots)
	j.size--
	return live
}

func (j *joinBuffer) remember(h uint64) {
	old := j.gone[j.goneHead]
	if i, ok := j.goneIndex[old]; ok && int(i) == j.goneHead {
		delete(j.goneIndex, old)
	}
	j.gone[j.goneHead] = h
	j.goneIndex[h] = int32(j.goneHead)
	j.goneHead = (j.goneHead + 1) % len(j.gone)
}

// pending is the number of impressions waiting for a label.
func (j *joinBuffer) pending() int { return len(j.index) }
