package sparse

// Ring keeps up to Cap rows first in, first out, in one arena of indices
// and values: each row is contiguous; a row that does not fit before the
// arena's end starts again at its beginning when the oldest rows have left
// room there, and the arena grows (doubling, the live rows compacted)
// only when neither place is free. Once the arena has grown to about twice
// the largest total of live entries it stops growing: Push then allocates
// nothing.
type Ring struct {
	idx []int32
	val []float64
	off []int32 // per slot: where its row starts in the arena
	n   []int32 // per slot: its entries
	sq  []float64

	head, size int  // oldest slot, rows held
	lo, hi     int  // arena: start of the oldest row, end of the newest
	wrapped    bool // the newest rows start again at the arena's beginning
	live       int  // entries held
}

// NewRing returns an empty ring of rows slots whose arena starts with
// room for entries entries.
func NewRing(rows, entries int) *Ring {
	return &Ring{
		idx: make([]int32, entries), val: make([]float64, entries),
		off: make([]int32, rows), n: make([]int32, rows), sq: make([]float64, rows),
	}
}

// Cap returns the number of slots.
func (r *Ring) Cap() int { return len(r.off) }

// Len returns the number of rows held.
func (r *Ring) Len() int { return r.size }

// Entries returns the number of entries held.
func (r *Ring) Entries() int { return r.live }

// Arena returns the arena's capacity in entries.
func (r *Ring) Arena() int { return len(r.idx) }

// Row returns the k-th oldest row (k < Len()); it aliases the arena until
// the row leaves or the next Push.
func (r *Ring) Row(k int) Row {
	s := r.slot(k)
	o, m := int(r.off[s]), int(r.n[s])
	return Row{Idx: r.idx[o : o+m : o+m], Val: r.val[o : o+m : o+m]}
}

// Sq returns ‖row‖² of the k-th oldest row, as given to Push.
func (r *Ring) Sq(k int) float64 { return r.sq[r.slot(k)] }

func (r *Ring) slot(k int) int {
	if k < 0 || k >= r.size {
		panic("sparse: Ring: row out of range")
	}
	s := r.head + k
	if s >= len(r.off) {
		s -= len(r.off)
	}
	return s
}

// Pop drops the oldest row. It panics when the ring is empty.
func (r *Ring) Pop() {
	if r.size == 0 {
		panic("sparse: Ring.Pop: empty")
	}
	r.live -= int(r.n[r.head])
	r.size--
	if r.head++; r.head == len(r.off) {
		r.head = 0
	}
	if r.size == 0 {
		r.lo, r.hi, r.wrapped = 0, 0, false
		return
	}
	next := int(r.off[r.head])
	if r.wrapped && next < r.lo { // the oldest row is now in the wrapped part
		r.wrapped = false
	}
	r.lo = next
}

// Push adds x (a copy) with its squared norm sq as the newest row. It
// panics when the ring is full (Pop first).
func (r *Ring) Push(x Row, sq float64) {
	if r.size == len(r.off) {
		panic("sparse: Ring.Push: full")
	}
	k := len(x.Idx)
	at := r.place(k)
	copy(r.idx[at:at+k], x.Idx)
	copy(r.val[at:at+k], x.Val[:k])
	s := r.head + r.size
	if s >= len(r.off) {
		s -= len(r.off)
	}
	r.off[s], r.n[s], r.sq[s] = int32(at), int32(k), sq
	r.size++
	r.live += k
	r.hi = at + k
}

// place returns where a row of k entries goes, growing the arena if
// needed.
func (r *Ring) place(k int) int {
	if r.size == 0 {
		r.lo, r.hi, r.wrapped = 0, 0, false
	}
	switch {
	case !r.wrapped && r.hi+k <= len(r.idx):
		return r.hi
	case !r.wrapped && k <= r.lo:
		r.wrapped = true
		return 0
	case r.wrapped && r.hi+k <= r.lo:
		return r.hi
	}
	r.grow(r.live + k)
	return r.hi
}

// grow moves the live rows, oldest first, to the start of a new arena of at
// least twice the old size and need entries.
func (r *Ring) grow(need int) {
	c := max(2*len(r.idx), need, 64)
	idx, val := make([]int32, c), make([]float64, c)
	o := 0
	for k := range r.size {
		s := r.slot(k)
		a, m := int(r.off[s]), int(r.n[s])
		copy(idx[o:o+m], r.idx[a:a+m])
		copy(val[o:o+m], r.val[a:a+m])
		r.off[s] = int32(o)
		o += m
	}
	r.idx, r.val = idx, val
	r.lo, r.hi, r.wrapped = 0, o, false
}

// Reset empties the ring (the arena is kept).
func (r *Ring) Reset() {
	r.head, r.size, r.live = 0, 0, 0
	r.lo, r.hi, r.wrapped = 0, 0, false
}
