package svm

// cache is LIBSVM's kernel-row cache: for each row index it keeps the first len entries of the
// row Q[i][0:len) (in the solver's current, permuted index order), evicting whole rows in
// least-recently-used order when the entry budget is exhausted. swapIndex keeps the cached
// rows consistent with the solver's swaps of shrinking.
type cache struct {
	head []cacheHead
	size int64 // free budget, in float32 entries (rows are charged by capacity)
	// lru is a circular doubly linked list threaded through head; the sentinel is index l.

	// swaps holds the index swaps (i < j, in pairs) not yet applied to the
	// cached rows' entries (flush).
	swaps []int32
}

type cacheHead struct {
	prev, next int32
	data       []float32
	len        int
}

// cacheEntryBytes is the size of one cached Q entry; rows are float32 like LIBSVM's Qfloat.
const cacheEntryBytes = 4

func newCache(l int, bytes int64) *cache {
	c := &cache{head: make([]cacheHead, l+1)}
	s := l
	c.head[s].prev, c.head[s].next = int32(s), int32(s)
	// LIBSVM: size = bytes/sizeof(Qfloat) − l*sizeof(head_t)/sizeof(Qfloat), at least 2l.
	c.size = bytes/cacheEntryBytes - int64(l)*40/cacheEntryBytes
	if c.size < 2*int64(l) {
		c.size = 2 * int64(l)
	}
	return c
}

func (c *cache) lruDelete(i int) {
	h := &c.head[i]
	c.head[h.prev].next = h.next
	c.head[h.next].prev = h.prev
}

func (c *cache) lruInsert(i int) {
	s := len(c.head) - 1
	h := &c.head[i]
	h.next = int32(s)
	h.prev = c.head[s].prev
	c.head[h.prev].next = int32(i)
	c.head[s].prev = int32(i)
}

// get returns the row buffer of i, at least n long, and the index from which the entries still
// have to be filled (n when the row was fully cached). The budget is charged by capacity; a row
// evicted to make room is reused as the new buffer when it is long enough, so a warm cache
// allocates nothing.
func (c *cache) get(i, n int) ([]float32, int) {
	c.flush()
	h := &c.head[i]
	if h.len > 0 {
		c.lruDelete(i)
	}
	start := h.len
	if n > h.len {
		if cap(h.data) >= n {
			h.data = h.data[:n]
		} else {
			var nd []float32
			s := len(c.head) - 1
			for nd == nil {
				if c.size >= int64(n) || int(c.head[s].next) == s {
					nd = make([]float32, n)
					c.size -= int64(n)
					break
				}
				old := int(c.head[s].next)
				c.lruDelete(old)
				o := &c.head[old]
				if cap(o.data) >= n {
					nd = o.data[:n] // its budget moves to row i
				} else {
					c.size += int64(cap(o.data))
				}
				o.data, o.len = nil, 0
			}
			copy(nd, h.data[:h.len])
			c.size += int64(cap(h.data))
			h.data = nd
		}
		h.len = n
	} else {
		start = n
	}
	c.lruInsert(i)
	return h.data, start
}

// swapIndex mirrors a swap of indices i and j in the solver: the rows
// held at i and j trade places now, and every cached row's entries i and
// j are exchanged (or the row given up when it holds i but not j) at the
// next flush. Shrinking makes its swaps in a run with no row read in
// between; applying the run row by row touches each row's memory once
// (a shrinking's pairs have i rising and j falling: two streams) where
// visiting every row for each swap took a cache miss per row and swap,
// a fifth of training (LIBSVM's swap_index does the latter).
func (c *cache) swapIndex(i, j int) {
	if i == j {
		return
	}
	hi, hj := &c.head[i], &c.head[j]
	if hi.len > 0 {
		c.lruDelete(i)
	}
	if hj.len > 0 {
		c.lruDelete(j)
	}
	hi.data, hj.data = hj.data, hi.data
	hi.len, hj.len = hj.len, hi.len
	if hi.len > 0 {
		c.lruInsert(i)
	}
	if hj.len > 0 {
		c.lruInsert(j)
	}
	c.swaps = append(c.swaps, int32(min(i, j)), int32(max(i, j)))
}

// flush applies the pending swaps to the cached rows' entries, each row
// taking them in order: entries i and j exchanged when the row holds
// both, the row given up at the first swap where it holds i but not j.
// A row's length moves with it, so this is what applying each swap to
// every row at once gives; rows dropped later than they would have been
// only trail the others in the LRU list, which keeps their order.
func (c *cache) flush() {
	if len(c.swaps) == 0 {
		return
	}
	s := len(c.head) - 1
	for k := int(c.head[s].next); k != s; {
		h := &c.head[k]
		next := int(h.next)
		data := h.data[:h.len]
		for p := 0; p < len(c.swaps); p += 2 {
			i, j := int(c.swaps[p]), int(c.swaps[p+1])
			if i >= len(data) {
				continue
			}
			if j >= len(data) {
				c.lruDelete(k)
				c.size += int64(cap(h.data))
				h.data, h.len = nil, 0
				break
			}
			data[i], data[j] = data[j], data[i]
		}
		k = next
	}
	c.swaps = c.swaps[:0]
}
