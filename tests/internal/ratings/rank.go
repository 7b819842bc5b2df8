package ratings

import (
	"cmp"
	"math"
	"slices"
)

// DCG returns Σ_{j<k} gains[j]/log2(j+2): the discounted cumulative gain of
// the first k positions of an order whose gains are gains.
func DCG(gains []float64, k int) float64 {
	var s float64
	for j := range min(k, len(gains)) {
		s += gains[j] / math.Log2(float64(j+2))
	}
	return s
}

// NDCG returns DCG(gains, k) over the DCG of the best order of the same
// gains; 0 when that is 0.
func NDCG(gains []float64, k int) float64 {
	ideal := slices.Clone(gains)
	slices.SortFunc(ideal, func(a, b float64) int { return cmp.Compare(b, a) })
	best := DCG(ideal, k)
	if best == 0 {
		return 0
	}
	return DCG(gains, k) / best
}

// Request is a ranking request of the replay: at event Index, the items
// the event's user rates next (from Index on, distinct, in the order rated)
// with the user's ratings of them.
type Request struct {
	Index   int
	User    int
	Items   []int
	Ratings []float64
}

// Requests returns the ranking requests of the replay of rs: one at every
// every-th event from start on (start, start+every, …), whose candidates
// are the n distinct items the event's user rates from that event on;
// events whose user rates fewer than n distinct items from there on are
// skipped.
func Requests(rs []Rating, start, every, n int) []Request {
	// next[i]: the index of the user's next rating after i (-1: none).
	next := make([]int, len(rs))
	last := map[int]int{}
	for i := len(rs) - 1; i >= 0; i-- {
		j, ok := last[rs[i].User]
		if !ok {
			j = -1
		}
		next[i] = j
		last[rs[i].User] = i
	}
	var out []Request
	for i := start; i < len(rs); i += every {
		req := Request{Index: i, User: rs[i].User}
		for j := i; j >= 0 && len(req.Items) < n; j = next[j] {
			if !slices.Contains(req.Items, rs[j].Item) {
				req.Items = append(req.Items, rs[j].Item)
				req.Ratings = append(req.Ratings, rs[j].Value)
			}
		}
		if len(req.Items) == n {
			out = append(out, req)
		}
	}
	return out
}

// ItemMeans is the item-mean ranking baseline: items in decreasing order
// of their mean rating so far, an item not rated yet at the mean of all
// ratings so far; ties by increasing item id.
type ItemMeans struct {
	all Mean
	sum map[int]float64
	n   map[int]int
}

// NewItemMeans returns an empty baseline.
func NewItemMeans() *ItemMeans { return &ItemMeans{sum: map[int]float64{}, n: map[int]int{}} }

// Learn takes a rating of item.
func (m *ItemMeans) Learn(item int, y float64) {
	m.all.Learn(y)
	m.sum[item] += y
	m.n[item]++
}

// Mean returns item's mean rating so far (the mean of all ratings for an
// item not rated yet).
func (m *ItemMeans) Mean(item int) float64 {
	if n := m.n[item]; n > 0 {
		return m.sum[item] / float64(n)
	}
	return m.all.Predict()
}

// Order returns the positions of items (indices into items) in the
// baseline's order.
func (m *ItemMeans) Order(items []int) []int { return OrderBy(items, m.Mean) }

// PopularOrder returns the positions of items in the order of their
// ratings so far, most first (popularity), ties by id.
func (m *ItemMeans) PopularOrder(items []int) []int {
	return OrderBy(items, func(it int) float64 { return float64(m.n[it]) })
}

// OrderBy returns the positions of items (indices into items) by score,
// highest first, ties by id.
func OrderBy(items []int, score func(item int) float64) []int {
	pos := make([]int, len(items))
	sc := make([]float64, len(items))
	for j, it := range items {
		pos[j], sc[j] = j, score(it)
	}
	slices.SortStableFunc(pos, func(a, b int) int {
		return cmp.Or(cmp.Compare(sc[b], sc[a]), cmp.Compare(items[a], items[b]))
	})
	return pos
}
