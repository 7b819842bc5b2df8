package stream

import (
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
)

// partitionGuard checks that rank.partitioner maps the key of every keyed
// event consumed to the partition the event came on. POST /v1/rank finds
// the shard (partition scope) or the instance (key-scoped models) holding
// a key's state with that mapping: when it is not the producers', a
// request for such a key is answered from an empty model, or misdirected,
// without a word. The check runs while requests map keys to partitions
// (partition scope, or a key-scoped model: once the input topic's
// partition count is known) on each partition's reader, before the event
// is prepared: one hash of the key and two atomic additions on counters
// of the partition's own. A mismatch is counted
// (streamer_rank_partitioner_mismatch_total, of
// streamer_rank_partitioner_checked_total), logged at most once a minute
// with an example, and reported by /readyz (Warning) for guardRecent after
// the last one; readiness itself does not change (docs/metrics.md).
type partitionGuard struct {
	name     string // rank.partitioner
	balancer kafka.Balancer
	log      *slog.Logger
	parts    atomic.Int32 // the input topic's partitions; 0: not known, nothing checked

	mu     sync.Mutex
	counts map[int]*guardCounts // by partition: kept when the partition goes (the totals are counters)

	last    atomic.Int64 // monotonic time of the last mismatch (0: none)
	warned  atomic.Int64 // monotonic time of the last warning logged (0: none)
	example atomic.Pointer[guardExample]
}

// guardCounts are one partition's counts.
type guardCounts struct{ checked, mismatched atomic.Int64 }

// guardExample is a mismatch, for the log and /readyz.
type guardExample struct {
	key       string
	came, got int
}

// guardWarnEvery spaces the warnings; guardRecent is how long /readyz
// reports a mismatch after the last one.
const (
	guardWarnEvery = time.Minute
	guardRecent    = 10 * time.Minute
)

func newPartitionGuard(name string, b kafka.Balancer, reg prometheus.Registerer, log *slog.Logger) *partitionGuard {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	g := &partitionGuard{name: name, balancer: b, log: log, counts: map[int]*guardCounts{}}
	if reg != nil {
		reg.MustRegister(&guardCollector{g})
	}
	return g
}

// checker returns the check of partition part's reader (one goroutine).
func (g *partitionGuard) checker(part int) *partitionCheck {
	if g == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.counts[part]
	if c == nil {
		c = &guardCounts{}
		g.counts[part] = c
	}
	return &partitionCheck{g: g, part: part, counts: c}
}

// partitionCheck checks the events of one partition's reader.
type partitionCheck struct {
	g      *partitionGuard
	part   int
	counts *guardCounts
	parts  []int // 0..n−1, for the balancer
}

// check checks the key of an event that came on the reader's partition
// (nil receiver, an event without a key, or no partition count yet: no
// check).
func (c *partitionCheck) check(key []byte) {
	if c == nil || len(key) == 0 {
		return
	}
	n := int(c.g.parts.Load())
	if n <= 0 {
		return
	}
	if len(c.parts) != n {
		c.parts = c.parts[:0]
		for i := range n {
			c.parts = append(c.parts, i)
		}
	}
	got := c.g.balancer.Balance(kafka.Message{Key: key}, c.parts...)
	c.counts.checked.Add(1)
	if got != c.part {
		c.counts.mismatched.Add(1)
		c.g.mismatch(key, c.part, got)
	}
}

// mismatch notes that key came on partition came where the partitioner
// maps it to got, and logs it unless it logged one in the last minute.
func (g *partitionGuard) mismatch(key []byte, came, got int) {
	now := int64(monotonic())
	g.last.Store(now)
	w := g.warned.Load()
	if (w != 0 && now-w < int64(guardWarnEvery)) || !g.warned.CompareAndSwap(w, now) {
		return
	}
	ex := &guardExample{key: string(key), came: came, got: got}
	g.example.Store(ex)
	checked, mismatched := g.totals()
	g.log.Warn("rank.partitioner does not map keys to the partitions their events come on: POST /v1/rank looks for such keys' state in another shard or instance; set rank.partitioner to the producers' partitioner (logged at most once a minute)",
		"partitioner", g.name, "key", ex.key, "partition", came, "mapped_to", got, "mismatched", mismatched, "checked", checked)
}

// totals returns the events checked and mismatched over every partition.
func (g *partitionGuard) totals() (checked, mismatched int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.counts {
		checked += c.checked.Load()
		mismatched += c.mismatched.Load()
	}
	return checked, mismatched
}

// warning says, for /readyz, what the guard saw if a mismatch came in the
// last guardRecent ("" otherwise).
func (g *partitionGuard) warning() string {
	if g == nil {
		return ""
	}
	last := g.last.Load()
	if last == 0 || time.Duration(int64(monotonic())-last) > guardRecent {
		return ""
	}
	checked, mismatched := g.totals()
	s := fmt.Sprintf("rank.partitioner %s maps %d of the %d keyed input events checked to another partition than the one they came on", g.name, mismatched, checked)
	if ex := g.example.Load(); ex != nil {
		s += fmt.Sprintf(" (key %q came on partition %d, %s maps it to %d)", ex.key, ex.came, g.name, ex.got)
	}
	return s + ": POST /v1/rank looks for such keys' state in the wrong place; set rank.partitioner to the producers' partitioner"
}

// guardCollector exports the guard's totals.
type guardCollector struct{ g *partitionGuard }

var (
	guardCheckedDesc = prometheus.NewDesc("streamer_rank_partitioner_checked_total",
		"Keyed input events whose key rank.partitioner mapped to a partition, to check it is the one they came on (while POST /v1/rank maps keys to partitions: partition scope or a key-scoped model).", nil, nil)
	guardMismatchDesc = prometheus.NewDesc("streamer_rank_partitioner_mismatch_total",
		"Keyed input events that came on another partition than the one rank.partitioner maps their key to: POST /v1/rank looks for such keys' state in the wrong place (set rank.partitioner to the producers' partitioner).", nil, nil)
)

func (c *guardCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- guardCheckedDesc
	ch <- guardMismatchDesc
}

func (c *guardCollector) Collect(ch chan<- prometheus.Metric) {
	checked, mismatched := c.g.totals()
	ch <- prometheus.MustNewConstMetric(guardCheckedDesc, prometheus.CounterValue, float64(checked))
	ch <- prometheus.MustNewConstMetric(guardMismatchDesc, prometheus.CounterValue, float64(mismatched))
}
