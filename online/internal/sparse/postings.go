package sparse

import "math/bits"

// Postings is an inverted index of a window of rows that enter and leave
// first in, first out (the exact kernel mode's budget): for every feature
// of the rows held, the slots of the rows holding it with their values,
// oldest first. Add and Remove cost O(nnz) of the row; Dots gives the dot
// products of an input with every row held at the cost of the entries they
// share. Features are found through an open-addressing table (linear
// probing, deletion by backward shift: no tombstones). A list's storage
// has a power-of-two capacity; storage that a list leaves (it emptied, or
// outgrew it) is kept for reuse by capacity, so that once the table and
// the pools have grown to the window's peak content nothing is allocated,
// however the features come and go.
type Postings struct {
	keys  []int32 // table slot → feature, −1 if empty
	ids   []int32 // table slot → list id
	shift uint    // 32 − log2(len(keys))
	n     int     // features present
	lists []plist
	free  []int32     // ids of empty lists (no storage)
	spare [32][]plist // storage for reuse, by log2 of its capacity
}

type plist struct {
	slot []int32
	val  []float64
	head int
}

// minClass is log2 of a new list's capacity: most features of hashed data
// are rare.
const minClass = 2

// take returns empty storage of capacity 2^c.
func (p *Postings) take(c int) plist {
	if n := len(p.spare[c]); n > 0 {
		s := p.spare[c][n-1]
		p.spare[c] = p.spare[c][:n-1]
		return s
	}
	return plist{slot: make([]int32, 0, 1<<c), val: make([]float64, 0, 1<<c)}
}

// give keeps the storage of l for reuse.
func (p *Postings) give(l plist) {
	c := bits.TrailingZeros(uint(cap(l.slot)))
	p.spare[c] = append(p.spare[c], plist{slot: l.slot[:0], val: l.val[:0]})
}

// NewPostings returns an empty index with room for about features
// features before its table grows.
func NewPostings(features int) *Postings {
	p := &Postings{}
	p.resize(max(16, 2*features))
	return p
}

func (p *Postings) resize(want int) {
	c, bits := 16, uint(4)
	for c < want {
		c *= 2
		bits++
	}
	p.shift = 32 - bits
	old, oldIDs := p.keys, p.ids
	p.keys, p.ids = make([]int32, c), make([]int32, c)
	for i := range p.keys {
		p.keys[i] = -1
	}
	for t, k := range old {
		if k >= 0 {
			h := p.find(k)
			p.keys[h], p.ids[h] = k, oldIDs[t]
		}
	}
}

// find returns the table slot of feature k, or the empty slot where it
// would go.
func (p *Postings) find(k int32) int {
	mask := len(p.keys) - 1
	h := p.home(k)
	for {
		if c := p.keys[h]; c == k || c < 0 {
			return h
		}
		h = (h + 1) & mask
	}
}

// home is the table slot where feature k's probe starts.
func (p *Postings) home(k int32) int { return int((uint32(k) * 0x9E3779B1) >> p.shift) }

// Add adds the row x held in slot s as the newest row.
func (p *Postings) Add(s int32, x Row) {
	for k, i := range x.Idx {
		h := p.find(i)
		if p.keys[h] < 0 {
			if 2*(p.n+1) > len(p.keys) {
				p.resize(4 * (p.n + 1))
				h = p.find(i)
			}
			var id int32
			if n := len(p.free); n > 0 {
				id, p.free = p.free[n-1], p.free[:n-1]
			} else {
				id = int32(len(p.lists))
				p.lists = append(p.lists, plist{})
			}
			p.lists[id] = p.take(minClass)
			p.keys[h], p.ids[h] = i, id
			p.n++
		}
		l := &p.lists[p.ids[h]]
		if len(l.slot) == cap(l.slot) {
			if l.head > 0 { // move the live part down
				m := copy(l.slot, l.slot[l.head:])
				copy(l.val, l.val[l.head:])
				l.slot, l.val, l.head = l.slot[:m], l.val[:m], 0
			} else { // move to storage twice as large
				ns := p.take(bits.TrailingZeros(uint(cap(l.slot))) + 1)
				ns.slot, ns.val = append(ns.slot, l.slot...), append(ns.val, l.val...)
				p.give(*l)
				*l = ns
			}
		}
		l.slot = append(l.slot, s)
		l.val = append(l.val, x.Val[k])
	}
}

// Remove removes the row x held in slot s, which must be the oldest row
// holding each of its features (it panics otherwise).
func (p *Postings) Remove(s int32, x Row) {
	for _, i := range x.Idx {
		h := p.find(i)
		if p.keys[h] != i {
			panic("sparse: Postings.Remove: feature not indexed")
		}
		id := p.ids[h]
		l := &p.lists[id]
		if l.head >= len(l.slot) || l.slot[l.head] != s {
			panic("sparse: Postings.Remove: not the oldest row of its features")
		}
		l.head++
		if l.head == len(l.slot) {
			p.give(*l)
			*l = plist{}
			p.free = append(p.free, id)
			p.delete(h)
		}
	}
}

// delete empties table slot h and shifts back the entries after it that
// probed past it.
func (p *Postings) delete(h int) {
	mask := len(p.keys) - 1
	p.keys[h] = -1
	p.n--
	for j := (h + 1) & mask; p.keys[j] >= 0; j = (j + 1) & mask {
		home := p.home(p.keys[j])
		// Move j to h if its home is not in (h, j] (cyclically).
		if (j > h && (home <= h || home > j)) || (j < h && home <= h && home > j) {
			p.keys[h], p.ids[h] = p.keys[j], p.ids[j]
			p.keys[j] = -1
			h = j
		}
	}
}

// Features returns the number of features indexed.
func (p *Postings) Features() int { return p.n }

// Dots adds x's dot product with each row held to dst[slot] (clear dst
// first): each sum over the common features in x's index order, as Dot
// sums them. It does not allocate.
func (p *Postings) Dots(dst []float64, x Row) {
	for k, i := range x.Idx {
		h := p.find(i)
		if p.keys[h] != i {
			continue
		}
		l := &p.lists[p.ids[h]]
		v := x.Val[k]
		vals := l.val[l.head:]
		for t, s := range l.slot[l.head:] {
			dst[s] += v * vals[t]
		}
	}
}
