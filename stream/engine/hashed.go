package engine

import (
	"fmt"
	"math"
	"math/bits"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/streamer/streamer/online"
)

// Hashed features (Config.Hash): events carry categorical, sparse
// and namespaced features, hashed by the decoder into indices of a 2^bits
// space (wire.Decoder.WithHashing); models that take sparse input
// (online.SparseModel) score and learn them in O(nnz), without densifying.

// checkHashed refuses what hashed features do not go with: models that
// take no sparse input, and aggregators. Delayed labels do (the join
// buffer keeps an impression's hashed entries), ranking requests do (a
// candidate's entries are combined with the request's own features,
// rank.go), with the policies greedy and epsilon (ucb and thompson keep
// dense statistics: checkRank), and so does partition scope (a mergeable
// mam learns each event into the merge and the partition's statistics,
// holder.Merge).
func checkHashed(cfg Config, models []NamedModel) error {
	if cfg.Hash == nil {
		return nil
	}
	for _, nm := range models {
		if len(nm.Members) > 0 {
			return fmt.Errorf("stream: model %s: an aggregating model does not take hashed features", nm.Name)
		}
		if err := online.SparseSupport(nm.Model); err != nil {
			return fmt.Errorf("stream: model %s: %w", nm.Name, err)
		}
	}
	return nil
}

// hashStats estimates the hash collisions of the features seen: the
// distinct features (a HyperLogLog sketch of their 64-bit hashes, 2^14
// registers: about 0.8% standard error) less the distinct indices they
// occupy (a bitmap of the 2^bits indices, up to 2^hashBitmapMax; beyond,
// the indices' own HyperLogLog sketch). With n distinct features in 2^b
// indices the expected number of collisions is about n − 2^b(1 − e^(−n/2^b)).
type hashStats struct {
	mu         sync.Mutex
	features   hll
	indices    hll      // when the bitmap would be too large
	used       []uint64 // bitmap of occupied indices (nil: indices sketch)
	nUsed      int64
	collisions float64 // the largest estimate yet (a counter does not go down)

	collDesc, distinctDesc *prometheus.Desc
}

const hashBitmapMax = 26 // 8 MiB

func newHashStats(bits int, reg prometheus.Registerer) *hashStats {
	h := &hashStats{
		collDesc: prometheus.NewDesc("streamer_features_hashed_collisions_total",
			"Estimated hashed features that share their index with another: the distinct features (a HyperLogLog sketch) less the distinct indices they occupy.", nil, nil),
		distinctDesc: prometheus.NewDesc("streamer_features_hashed_distinct",
			"Estimated distinct hashed features seen (HyperLogLog, about 0.8% standard error).", nil, nil),
	}
	if bits <= hashBitmapMax {
		h.used = make([]uint64, (1<<bits+63)/64)
	}
	if reg != nil {
		reg.MustRegister(h)
	}
	return h
}

// add records an event's features.
func (h *hashStats) add(hashes []uint64, idx []int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, x := range hashes {
		h.features.add(x)
		if h.used != nil {
			i := idx[k]
			if w, bit := i>>6, uint64(1)<<(i&63); h.used[w]&bit == 0 {
				h.used[w] |= bit
				h.nUsed++
			}
		} else {
			h.indices.add(mix64(uint64(idx[k])))
		}
	}
}

// estimate returns the estimated distinct features and collisions.
func (h *hashStats) estimate() (distinct, collisions float64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.features.estimate()
	used := float64(h.nUsed)
	if h.used == nil {
		used = h.indices.estimate()
	}
	h.collisions = max(h.collisions, n-used)
	return n, h.collisions
}

func (h *hashStats) Describe(ch chan<- *prometheus.Desc) {
	ch <- h.collDesc
	ch <- h.distinctDesc
}

func (h *hashStats) Collect(ch chan<- prometheus.Metric) {
	n, c := h.estimate()
	ch <- prometheus.MustNewConstMetric(h.collDesc, prometheus.CounterValue, c)
	ch <- prometheus.MustNewConstMetric(h.distinctDesc, prometheus.GaugeValue, n)
}

// mix64 spreads an index over 64 bits (SplitMix64's finaliser).
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// hll is a HyperLogLog sketch of 2^14 registers over 64-bit hashes.
type hll struct{ reg [1 << 14]uint8 }

func (s *hll) add(x uint64) {
	i := x >> 50
	r := uint8(bits.LeadingZeros64(x<<14|1<<13)) + 1
	if r > s.reg[i] {
		s.reg[i] = r
	}
}

// estimate returns the estimated number of distinct values (with the
// small-range correction).
func (s *hll) estimate() float64 {
	const m = 1 << 14
	var sum float64
	zeros := 0
	for _, r := range s.reg {
		sum += math.Ldexp(1, -int(r))
		if r == 0 {
			zeros++
		}
	}
	e := 0.7213 / (1 + 1.079/m) * m * m / sum
	if e <= 2.5*m && zeros > 0 {
		return m * math.Log(m/float64(zeros))
	}
	return e
}
