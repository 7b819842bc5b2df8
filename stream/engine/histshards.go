package engine

import (
	"maps"
	"math"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// HistShards is a histogram metric, one series per value of one label,
// whose observations are kept in shards: a partition's applier observes
// into its partition's shard, whose cache lines stay on its core, and a
// scrape sums the shards. A prometheus.Histogram shared by every applier
// takes three atomic writes per observation on lines every core writes
// (its count, its bucket, a compare-and-swap loop on its sum): with many
// partitions on many cores, each event would wait for those lines.
// The exposition is a histogram's, as if one were observed.
type HistShards struct {
	desc   *prometheus.Desc
	bounds []float64 // upper bounds, increasing; +Inf implied

	mu     sync.Mutex
	series map[string]map[int]*HistShard // by label value, then slot (an input partition; -1: the goroutines of none)
}

// HistShard is one shard's counts. Observations may come from any
// goroutine (every write is atomic); they are cheap when one goroutine
// writes a shard.
type HistShard struct {
	bounds  []float64
	count   atomic.Uint64
	sum     atomic.Uint64 // float64 bits
	buckets []atomic.Uint64
	_       [64]byte // the next shard's counts on lines of their own
}

func NewHistShards(name, help, label string, bounds []float64) *HistShards {
	return &HistShards{
		desc:   prometheus.NewDesc(name, help, []string{label}, nil),
		bounds: bounds,
		series: map[string]map[int]*HistShard{},
	}
}

// Shard returns the Shard of slot (an input partition, whose applier
// keeps it for its observations; -1 for the goroutines of none) in the
// series for label value v. A slot's Shard stays, with its counts, when
// its partition moves away and comes back: the counts only grow.
func (h *HistShards) Shard(v string, slot int) *HistShard {
	h.mu.Lock()
	defer h.mu.Unlock()
	byslot := h.series[v]
	if byslot == nil {
		byslot = map[int]*HistShard{}
		h.series[v] = byslot
	}
	s := byslot[slot]
	if s == nil {
		s = &HistShard{bounds: h.bounds, buckets: make([]atomic.Uint64, len(h.bounds)+1)}
		byslot[slot] = s
	}
	return s
}

// Observe adds an observation of x.
func (s *HistShard) Observe(x float64) {
	s.buckets[sort.SearchFloat64s(s.bounds, x)].Add(1)
	for {
		old := s.sum.Load()
		if s.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+x)) {
			break
		}
	}
	s.count.Add(1)
}

// histRun holds the observations of one applier's run for a HistShard,
// in plain memory: one atomic write per bucket a run touched, and one to
// the sum and the count, at the run's end (HistShard.addRun), where each
// observation would take three.
type histRun struct {
	buckets []uint64 // len(bounds)+1 once observed
	sum     float64
	n       uint64
}

// observe adds an observation of x, for a shard with these bounds.
func (r *histRun) observe(bounds []float64, x float64) {
	if r.buckets == nil {
		r.buckets = make([]uint64, len(bounds)+1)
	}
	i := 0
	for i < len(bounds) && !(bounds[i] >= x) { // sort.SearchFloat64s(bounds, x), NaN last; a dozen bounds
		i++
	}
	r.buckets[i]++
	r.sum += x
	r.n++
}

// addRun adds r's observations to s and empties r.
func (s *HistShard) addRun(r *histRun) {
	if r.n == 0 {
		return
	}
	for i, c := range r.buckets {
		if c > 0 {
			s.buckets[i].Add(c)
			r.buckets[i] = 0
		}
	}
	for {
		old := s.sum.Load()
		if s.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+r.sum)) {
			break
		}
	}
	s.count.Add(r.n)
	r.sum, r.n = 0, 0
}

func (h *HistShards) Describe(ch chan<- *prometheus.Desc) { ch <- h.desc }

func (h *HistShards) Collect(ch chan<- prometheus.Metric) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, v := range slices.Sorted(maps.Keys(h.series)) {
		var count uint64
		var sum float64
		cum := make(map[float64]uint64, len(h.bounds))
		per := make([]uint64, len(h.bounds)+1)
		for _, s := range h.series[v] {
			// The count last, so that the buckets' sum is never below it
			// in one scrape's reading of a shard being observed.
			for i := range per {
				per[i] += s.buckets[i].Load()
			}
			sum += math.Float64frombits(s.sum.Load())
			count += s.count.Load()
		}
		var n uint64
		for i, b := range h.bounds {
			n += per[i]
			cum[b] = n
		}
		count = max(count, n+per[len(h.bounds)])
		ch <- prometheus.MustNewConstHistogram(h.desc, count, sum, cum, v)
	}
}
