package engine

import (
	"hash/maphash"

	"github.com/streamer/streamer/online"
)

// joinBuffer keeps events waiting for their label: the features and every
// model's prediction made when the event was scored, keyed by event id. A
// shard has two, apart: the stream's unlabelled events (impressions,
// Shard.join) and the items ranking requests showed (Shard.shown), so that
// no flood of requests can push the stream's impressions out. It is a ring
// of preallocated slots (oldest first) with a hash index, so that keeping
// and joining allocate nothing once warm. An event leaves when its label
// arrives, when it is older than maxAge, or when the ring is full and a
// newer one needs its slot; with a per-key limit, an event whose key
// already has that many waiting is not kept.
//
// The shown items' buffer also protects the keys that label: it remembers
// the keys whose labels the stream brought (the last `events` distinct
// ones: labelled events, and labels for impressions and items), and the
// items of any other key (a new key: a user yet to label, or a client
// making up keys) hold at most their share of the slots
// (joinConfig.newShare): once they do, one more takes the oldest's slot
// if that is a new key's, or is not kept (counted as reason new_keys). A
// flood of requests for made-up keys then evicts its own items, and the
// labelled keys' items keep the rest of the slots.
//
// Its memory is fixed by its configuration (joinBytes): the slots, the
// dense features and the predictions are allocated whole when it is made;
// hashed entries are kept in a ring of fixed size (joinConfig.entries) or,
// without one, in slices each slot keeps (bounded by the decoder's
// max_features per event).
type joinBuffer struct {
	slots  []joinSlot
	dim    int                 // dense features per slot (0: hashed, entries)
	models int                 // predictions per slot
	xs     []float64           // slot i's features: xs[i·dim : (i+1)·dim]
	preds  []online.Prediction // slot i's predictions: preds[i·models : (i+1)·models]
	head   int                 // oldest slot
	size   int
	index  map[uint64]int32 // id hash → slot
	maxAge int64            // nanoseconds; 0 = no limit
	seed   maphash.Seed     // the id's hash
	check  maphash.Seed     // the id's second hash, which a label must match too

	perKey int              // most events of one key waiting (0: no limit)
	keys   map[uint64]int32 // perKey > 0: key hash → events waiting
	ring   *entryRing       // hashed entries (nil: each slot keeps its own slices)

	// With protect, the hashes of the keys that labelled (the last
	// `events` distinct ones), the live events of other keys (fresh), and
	// how many slots those may hold.
	protect    bool
	labelled   recent
	fresh      int
	freshLimit int

	// Hashes of events that left unlabelled, to tell a label that came
	// too late from one for an id never seen.
	gone recent
}

// recent remembers the last len(ring) hashes added, in a ring with an
// index.
type recent struct {
	ring  []uint64
	head  int
	index map[uint64]int32
}

func newRecent(n int) recent {
	return recent{ring: make([]uint64, n), index: make(map[uint64]int32, min(n, 1<<16))}
}

// add remembers h, forgetting the oldest.
func (r *recent) add(h uint64) {
	if len(r.ring) == 0 {
		return
	}
	old := r.ring[r.head]
	if i, ok := r.index[old]; ok && int(i) == r.head {
		delete(r.index, old)
	}
	r.ring[r.head] = h
	r.index[h] = int32(r.head)
	r.head = (r.head + 1) % len(r.ring)
}

// has reports whether h is among the hashes remembered.
func (r *recent) has(h uint64) bool {
	_, ok := r.index[h]
	return ok
}

// joinConfig sizes a joinBuffer.
type joinConfig struct {
	events int   // slots
	dim    int   // dense features (0: hashed features, kept as entries)
	models int   // predictions per event
	maxAge int64 // nanoseconds; 0 = no limit
	perKey int   // most events of one key waiting; 0 = no limit
	// entries, with hashed features (dim 0): the ring that holds every
	// slot's entries; 0 = none (each slot keeps its own slices).
	entries int
	// protect: the events of keys that never labelled hold at most
	// newShare of the slots (the shown items' buffer).
	protect  bool
	newShare float64
}

type joinSlot struct {
	hash  uint64 // the id's hash; 0: joined or replaced (dead until the ring reuses the slot)
	check uint64 // the id's second hash
	key   uint64 // the key's hash (perKey > 0 or protect)
	at    int64
	x     []float64           // dense features (a view of xs)
	idx   []int32             // hashed features: x all zero but x[idx[k]] += val[k]
	val   []float64           // (x is then nil)
	field []uint8             // entry k's field (wire.Event.Field)
	span  int32               // ring: the entries' room in the ring, padding before them included
	fresh bool                // protect: its key had not labelled when it came
	preds []online.Prediction // a view of preds
	ope   opeMark             // an item a ranking request put first: what off-policy estimates need
}

// joinStatus is what became of a label.
type joinStatus int

const (
	joined joinStatus = iota
	unknownID
	tooLate
)

// joinDrops counts the events that left a join buffer unlabelled, by
// reason (the label values of streamer_join_dropped_total).
type joinDrops struct {
	full    int // the oldest, evicted for a newer one (the slots or the entries' ring were full)
	expired int // older than the buffer's time
	quota   int // not kept: its key had perKey events waiting
	newKeys int // not kept: a new key's, while new keys' events held their share and the oldest was not one
}

func (d *joinDrops) add(o joinDrops) {
	d.full += o.full
	d.expired += o.expired
	d.quota += o.quota
	d.newKeys += o.newKeys
}

// newJoinBuffer returns an empty buffer sized by c.
func newJoinBuffer(c joinConfig) *joinBuffer {
	j := &joinBuffer{
		slots:  make([]joinSlot, c.events),
		dim:    c.dim,
		models: c.models,
		xs:     make([]float64, c.events*c.dim),
		preds:  make([]online.Prediction, c.events*c.models),
		index:  make(map[uint64]int32, c.events),
		maxAge: c.maxAge,
		seed:   maphash.MakeSeed(),
		check:  maphash.MakeSeed(),
		perKey: c.perKey,
		gone:   recent{ring: make([]uint64, c.events), index: make(map[uint64]int32, c.events)},
	}
	if c.perKey > 0 {
		j.keys = make(map[uint64]int32, min(c.events, 1<<16))
	}
	if c.dim == 0 && c.entries > 0 {
		j.ring = newEntryRing(c.entries)
	}
	if c.protect {
		j.protect = true
		j.labelled = newRecent(c.events)
		j.freshLimit = int(c.newShare * float64(c.events))
	}
	return j
}

// joinSlotBytes is the size of a joinSlot (a test checks it).
const joinSlotBytes = 200

// joinBytes is the memory a buffer sized by c takes at most, in bytes:
// per slot, the slot, its dense features and predictions, and its share of
// the index, the too-late ring and the per-key counts (at most 40 bytes
// a map entry); plus the entries' ring (13 bytes an entry). Without a ring,
// hashed entries come on top: at most 2 × 13 bytes per entry of the
// largest event a slot held (its slices grow by appending).
func joinBytes(c joinConfig) int64 {
	per := int64(joinSlotBytes + 8*c.dim + predictionBytes*c.models + 8 + 2*mapEntryBytes)
	if c.perKey > 0 {
		per += mapEntryBytes
	}
	if c.protect { // the labelled keys' ring and index
		per += 8 + mapEntryBytes
	}
	total := int64(c.events) * per
	if c.dim == 0 && c.entries > 0 {
		total += int64(c.entries) * entryBytes
	}
	return total
}

const (
	predictionBytes = 88 // online.Prediction
	mapEntryBytes   = 40 // a map[uint64]int32 entry, with the table's slack (tables of a power of two, at most 7/8 full)
	entryBytes      = 4 + 8 + 1
)

func (j *joinBuffer) hash(id []byte) uint64 {
	if h := maphash.Bytes(j.seed, id); h != 0 {
		return h
	}
	return 1 // 0 marks a dead slot
}

// keyHash is the hash a key's count is kept under.
func (j *joinBuffer) keyHash(key []byte) uint64 { return maphash.Bytes(j.seed, key) }

// put keeps an event with dense features x and the models' predictions
// preds under id (key: its key, for the per-key limit). It reports
// whether the event was kept, and what left unlabelled meanwhile (the
// event itself, when its key is over its limit, included).
func (j *joinBuffer) put(id, key []byte, x []float64, preds []online.Prediction, now int64) (bool, joinDrops) {
	s, d := j.reserve(id, key, 0, now)
	if s == nil {
		return false, d
	}
	copy(s.x, x)
	copy(s.preds, preds)
	return true, d
}

// putSparse is put for hashed features: the event keeps its entries (idx,
// val) and their fields, in the ring or in slices its slot reuses (no
// allocation once every slot has held an event as long as this one).
func (j *joinBuffer) putSparse(id, key []byte, idx []int32, val []float64, field []uint8, preds []online.Prediction, now int64) (bool, joinDrops) {
	s, d := j.reserve(id, key, len(idx), now)
	if s == nil {
		return false, d
	}
	copy(s.preds, preds)
	if j.ring != nil {
		copy(s.idx, idx)
		copy(s.val, val)
		copy(s.field, field)
		return true, d
	}
	s.idx = append(s.idx[:0], idx...)
	s.val = append(s.val[:0], val...)
	s.field = append(s.field[:0], field...)
	return true, d
}

// reserve makes room for an event of n hashed entries with this id and key
// and returns its slot, the features and predictions still to be filled
// in; nil when the event is not kept (its key is over its limit, or its
// entries do not fit in the ring even empty).
func (j *joinBuffer) reserve(id, key []byte, n int, now int64) (*joinSlot, joinDrops) {
	var d joinDrops
	d.expired = j.expire(now)
	h := j.hash(id)
	if i, ok := j.index[h]; ok {
		// A repeated id: the newest event wins.
		j.kill(&j.slots[i])
		delete(j.index, h)
	}
	var kh uint64
	if j.perKey > 0 || j.protect {
		kh = j.keyHash(key)
	}
	if j.perKey > 0 && int(j.keys[kh]) >= j.perKey {
		d.quota++
		return nil, d
	}
	if len(j.slots) == 0 {
		d.full++
		return nil, d
	}
	fresh := j.protect && !j.labelled.has(kh)
	if fresh && j.fresh >= j.freshLimit {
		// New keys' events hold their share: this one takes the oldest's
		// slot if that is a new key's, or is not kept.
		if s := &j.slots[j.head]; j.size == 0 || s.hash == 0 || !s.fresh {
			d.newKeys++
			return nil, d
		}
		j.drop()
		d.full++
	}
	if j.size == len(j.slots) {
		if j.drop() {
			d.full++
		}
	}
	var off int
	if j.ring != nil {
		var pad int
		for {
			var ok bool
			if off, pad, ok = j.ring.room(n); ok {
				break
			}
			if j.size == 0 { // larger than the ring
				d.full++
				return nil, d
			}
			if j.drop() {
				d.full++
			}
		}
		j.ring.take(off, pad, n)
	}
	i := (j.head + j.size) % len(j.slots)
	s := &j.slots[i]
	s.hash = h
	s.check = maphash.Bytes(j.check, id)
	s.key = kh
	s.at = now
	s.ope = opeMark{}
	s.fresh = fresh
	if fresh {
		j.fresh++
	}
	if j.dim > 0 {
		s.x = j.xs[i*j.dim : (i+1)*j.dim : (i+1)*j.dim]
	}
	s.preds = j.preds[i*j.models : (i+1)*j.models : (i+1)*j.models]
	if j.ring != nil {
		r := j.ring
		s.idx, s.val, s.field = r.idx[off:off+n:off+n], r.val[off:off+n:off+n], r.field[off:off+n:off+n]
		s.span = int32(j.ring.last)
	}
	j.size++
	j.index[h] = int32(i)
	if j.perKey > 0 {
		j.keys[kh]++
	}
	return s, d
}

// mark sets the off-policy mark of the event put last.
func (j *joinBuffer) mark(o opeMark) {
	j.slots[(j.head+j.size-1)%len(j.slots)].ope = o
}

// take finds and removes the event with this id. The returned slot is
// valid until the next put.
func (j *joinBuffer) take(id []byte, now int64) (*joinSlot, joinStatus, int) {
	dropped := j.expire(now)
	h := j.hash(id)
	i, ok := j.index[h]
	if !ok || j.slots[i].check != maphash.Bytes(j.check, id) {
		if j.gone.has(h) {
			return nil, tooLate, dropped
		}
		return nil, unknownID, dropped
	}
	delete(j.index, h)
	s := &j.slots[i]
	j.kill(s)
	if j.protect { // the request's key (the label's is marked by Shard.ApplyAt)
		j.labelledHash(s.key)
	}
	return s, joined, dropped
}

// labelledKey remembers that key has labelled (an event of the stream
// with a label: a rating, a click, a late label), so that its items keep
// their place against new keys' (protect).
func (j *joinBuffer) labelledKey(key []byte) { j.labelledHash(j.keyHash(key)) }

// labelledHash remembers the key with hash kh as labelled, once.
func (j *joinBuffer) labelledHash(kh uint64) {
	if !j.labelled.has(kh) {
		j.labelled.add(kh)
	}
}

// kill marks the live slot s dead (joined or replaced): it stays in the
// ring, holding its entries, until the ring reuses it.
func (j *joinBuffer) kill(s *joinSlot) {
	s.hash = 0
	if s.fresh {
		s.fresh = false
		j.fresh--
	}
	if j.perKey > 0 {
		if c := j.keys[s.key] - 1; c > 0 {
			j.keys[s.key] = c
		} else {
			delete(j.keys, s.key)
		}
	}
}

// expire drops events older than maxAge.
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

// drop removes the oldest slot; it reports whether that was a live event
// (not one already joined or replaced).
func (j *joinBuffer) drop() bool {
	s := &j.slots[j.head]
	live := s.hash != 0
	if live {
		delete(j.index, s.hash)
		j.gone.add(s.hash)
		j.kill(s)
	}
	if j.ring != nil {
		j.ring.free(int(s.span))
	}
	j.head = (j.head + 1) % len(j.slots)
	j.size--
	return live
}

// pending is the number of events waiting for a label.
func (j *joinBuffer) pending() int { return len(j.index) }

// entryRing holds the hashed entries of a join buffer's slots, oldest
// first like the slots, in three parallel arrays of fixed size used as a
// ring: a slot's entries are contiguous (when they do not fit before the
// end they start over at 0, and the room left at the end is the slot's
// too, freed with it).
type entryRing struct {
	idx   []int32
	val   []float64
	field []uint8
	end   int // where the next slot's entries go
	used  int // entries' room held by the slots, padding included
	last  int // the room (padding and entries) of the last take
}

func newEntryRing(n int) *entryRing {
	return &entryRing{idx: make([]int32, n), val: make([]float64, n), field: make([]uint8, n)}
}

// room returns where n entries would go (off) after pad entries of
// padding, and whether they fit in the free room.
func (r *entryRing) room(n int) (off, pad int, ok bool) {
	c := len(r.idx)
	if r.used == 0 {
		r.end = 0
	}
	off = r.end
	if off+n > c {
		off, pad = 0, c-r.end
	}
	return off, pad, r.used+pad+n <= c
}

// take holds n entries at off after pad entries of padding (from room).
func (r *entryRing) take(off, pad, n int) {
	r.end = off + n
	r.used += pad + n
	r.last = pad + n
}

// free gives back the room of the oldest slot.
func (r *entryRing) free(span int) { r.used -= span }
