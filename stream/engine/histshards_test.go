package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/expfmt"
)

// TestHistShards: observations spread over the shards of a series (and a
// slot asked for twice gets the same shard) expose exactly what one
// prometheus.Histogram exposes for them all.
func TestHistShards(t *testing.T) {
	bounds := prometheus.ExponentialBuckets(1e-6, 2, 22)
	h := NewHistShards("h_seconds", "help", "refit", bounds)
	ref := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h_seconds", Help: "help", Buckets: bounds}, []string{"refit"})
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 5000 {
		v := []string{"idle", "running"}[i%2]
		x := rng.ExpFloat64() * 1e-4
		if i%97 == 0 {
			x = 10 // above every bound: +Inf only
		}
		h.Shard(v, i%5-1).Observe(x)
		ref.WithLabelValues(v).Observe(x)
	}
	// An applier's runs (HistRun): bounds themselves, values between and
	// beyond them, NaN, in runs of 1 to 40 added at their ends.
	run := h.Shard("runs", 3).Run()
	for i := 0; i < 3000; {
		for k := 1 + rng.IntN(40); k > 0; k-- {
			x := rng.ExpFloat64() * 1e-4
			switch i % 13 {
			case 0:
				x = bounds[rng.IntN(len(bounds))]
			case 5:
				x = math.NaN()
			case 7:
				x = 10
			}
			run.Observe(x)
			ref.WithLabelValues("runs").Observe(x)
			i++
		}
		run.Flush()
		if run.n != 0 || run.sum != 0 || run.lo <= run.hi || slices.ContainsFunc(run.buckets, func(c uint64) bool { return c != 0 }) {
			t.Fatalf("run not emptied by flush: %+v", *run)
		}
	}
	if h.Shard("idle", 2) != h.Shard("idle", 2) || h.Shard("idle", 2) == h.Shard("running", 2) {
		t.Fatal("a slot's shard is not the series' one for that slot")
	}
	want, err := testutil.CollectAndFormat(ref, expfmt.TypeTextPlain, "h_seconds")
	if err != nil {
		t.Fatal(err)
	}
	got, err := testutil.CollectAndFormat(h, expfmt.TypeTextPlain, "h_seconds")
	if err != nil {
		t.Fatal(err)
	}
	if withoutSums(got) != withoutSums(want) {
		t.Fatalf("exposition differs from one histogram's:\n%s\nwant:\n%s", got, want)
	}
	if n := testutil.CollectAndCount(h); n != 3 {
		t.Fatalf("%d series, want 3", n)
	}
}

// withoutSums is a text exposition without its histograms' _sum lines,
// which differ in the last digits when the same observations are added in
// another order (by shards, by runs).
func withoutSums(b []byte) string {
	var keep []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.Contains(l, "_sum") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// BenchmarkHistogramObserveParallel: every goroutine observing into one
// prometheus.Histogram (shared), as every partition's applier did, against
// each into its own shard (sharded). On two vCPUs the shared one's lines
// move between the two cores; on sixteen, between all of them.
func BenchmarkHistogramObserveParallel(b *testing.B) {
	bounds := prometheus.ExponentialBuckets(1e-6, 2, 22)
	b.Run("shared", func(b *testing.B) {
		h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "h", Help: "h", Buckets: bounds})
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			x := 3e-6
			for pb.Next() {
				h.Observe(x)
			}
		})
	})
	b.Run("sharded", func(b *testing.B) {
		h := NewHistShards("h", "h", "refit", bounds)
		var slots atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			s := h.Shard("idle", int(slots.Add(1)))
			x := 3e-6
			for pb.Next() {
				s.Observe(x)
			}
		})
	})
}
