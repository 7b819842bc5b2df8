package engine

import (
	"maps"
	"math"
	"slices"
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
	s.buckets[bucket(s.bounds, x)].Add(1)
	s.addSum(x)
	s.count.Add(1)
}

// bucket is the index of x's bucket: the first bound ≥ x, len(bounds) for
// a value above them all or NaN (sort.SearchFloat64s's answer, by a scan:
// a histogram has a few dozen bounds at most).
func bucket(bounds []float64, x float64) int {
	i := 0
	for i < len(bounds) && !(bounds[i] >= x) {
		i++
	}
	return i
}

// addSum adds x to the sum of the observations.
func (s *HistShard) addSum(x float64) {
	for {
		old := s.sum.Load()
		if s.sum.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+x)) {
			return
		}
	}
}

// HistRun holds the observations of one applier's run for its shard, in
// plain memory: at the run's end (Flush) they take one atomic write per
// bucket the run touched, and one to the sum and one to the count, where
// each observation would take three. A run is one goroutine's.
type HistRun struct {
	s       *HistShard
	buckets []uint64
	lo, hi  int // the buckets observed into lie in [lo, hi] (lo > hi: none)
	sum     float64
	n       uint64
}

// Run returns an empty run of observations for s.
func (s *HistShard) Run() *HistRun {
	return &HistRun{s: s, buckets: make([]uint64, len(s.buckets)), lo: len(s.buckets), hi: -1}
}

// Observe adds an observation of x to the run.
func (r *HistRun) Observe(x float64) {
	i := bucket(r.s.bounds, x)
	r.buckets[i]++
	r.lo, r.hi = min(r.lo, i), max(r.hi, i)
	r.sum += x
	r.n++
}

// Flush adds the run's observations to its shard and empties the run. It
// reads only the buckets between the lowest and the highest observed
// into: a run of one event (the stateless loop's) is one bucket.
func (r *HistRun) Flush() {
	if r.n == 0 {
		return
	}
	for i := r.lo; i <= r.hi; i++ {
		if c := r.buckets[i]; c > 0 {
			r.s.buckets[i].Add(c)
			r.buckets[i] = 0
		}
	}
	r.s.addSum(r.sum)
	r.s.count.Add(r.n)
	r.sum, r.n, r.lo, r.hi = 0, 0, len(r.buckets), -1
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
