package stream

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"

	"github.com/streamer/streamer/internal/allocs"
	"github.com/streamer/streamer/stream/engine"
	"github.com/streamer/streamer/stream/internal/testkit"
)

// TestPartitionGuard: keys produced with each of the three partitioners
// over 6 partitions, checked against each rank.partitioner on the
// partitions they came on: the producers' own reports no mismatch, the
// others about 5 in 6 of the keys, counted in the metrics, logged once
// (at most once a minute) with an example, and said by the warning for
// /readyz; before the partition count is known nothing is checked. The
// check allocates nothing, matching or not.
func TestPartitionGuard(t *testing.T) {
	balancers := map[string]kafka.Balancer{
		"murmur2": kafka.Murmur2Balancer{Consistent: true},
		"fnv1a":   &kafka.Hash{},
		"crc32":   kafka.CRC32Balancer{Consistent: true},
	}
	const parts, keys = 6, 600
	all := []int{0, 1, 2, 3, 4, 5}
	for producer, pb := range balancers {
		for configured, cb := range balancers {
			t.Run(producer+"/"+configured, func(t *testing.T) {
				reg := prometheus.NewRegistry()
				var logs bytes.Buffer
				g := newPartitionGuard(configured, cb, reg, slog.New(slog.NewTextHandler(&logs, nil)))
				checks := make([]*partitionCheck, parts)
				for p := range parts {
					checks[p] = g.checker(p)
				}
				key := func(i int) []byte { return fmt.Appendf(nil, "user-%d", i) }
				checks[0].check(key(0)) // no count yet
				g.parts.Store(parts)
				for i := range keys {
					k := key(i)
					checks[pb.Balance(kafka.Message{Key: k}, all...)].check(k)
				}
				checked, mismatched := g.totals()
				body := testkit.Samples(t, reg, "streamer_rank_partitioner_checked_total", "streamer_rank_partitioner_mismatch_total")
				want := fmt.Sprintf("streamer_rank_partitioner_checked_total %d\nstreamer_rank_partitioner_mismatch_total %d\n", checked, mismatched)
				if checked != keys || body != want {
					t.Fatalf("checked %d, metrics\n%s\nwant %d checked:\n%s", checked, body, keys, want)
				}
				warning := g.warning()
				if producer == configured {
					if mismatched != 0 || warning != "" || logs.Len() != 0 {
						t.Fatalf("the producers' partitioner: %d mismatched, warning %q, log %q", mismatched, warning, logs.String())
					}
					return
				}
				if mismatched < keys*3/4 || mismatched == keys {
					t.Fatalf("%d of %d mismatched, want about 5/6", mismatched, keys)
				}
				if !strings.Contains(warning, fmt.Sprintf("rank.partitioner %s maps %d of the %d keyed input events checked to another partition", configured, mismatched, keys)) ||
					!strings.Contains(warning, "(key \"user-") {
					t.Fatalf("warning %q", warning)
				}
				if n := strings.Count(logs.String(), "rank.partitioner does not map keys"); n != 1 {
					t.Fatalf("%d warnings logged, want 1:\n%s", n, logs.String())
				}
				if raceEnabled {
					return
				}
				i := 0
				ks := make([][]byte, keys)
				for i := range ks {
					ks[i] = key(i)
				}
				if n := allocs.PerRun(1000, func() {
					checks[i%parts].check(ks[i%keys])
					i++
				}); n != 0 {
					t.Fatalf("%v allocations a check", n)
				}
			})
		}
	}
}

// TestRankWarning: the pipeline's warning for /readyz comes from its
// guard, which POST /v1/rank's set-up makes with the partitioner
// configured and whose partition count follows the one requests use.
func TestRankWarning(t *testing.T) {
	p := rankPipeline(t, exploreEngine(t, 4, 10, nil, engine.PolicyGreedy, 0))
	if w := p.RankWarning(); w != "" {
		t.Fatalf("warning %q before any event", w)
	}
	p.rank.mu.Lock()
	p.rank.setParts(3)
	p.rank.mu.Unlock()
	c := p.rank.guard.checker(1)
	for i := range 40 {
		c.check(fmt.Appendf(nil, "k%d", i))
	}
	w := p.RankWarning()
	if !strings.Contains(w, "rank.partitioner murmur2 maps") || !strings.Contains(w, "of the 40 keyed input events checked") {
		t.Fatalf("warning %q", w)
	}
}

// BenchmarkPartitionCheck is the check's cost on a partition's reader per
// keyed event (murmur2 over 12 partitions, keys of 10 bytes, all
// matching): 0 allocs.
func BenchmarkPartitionCheck(b *testing.B) {
	bal := kafka.Murmur2Balancer{Consistent: true}
	g := newPartitionGuard("murmur2", bal, nil, nil)
	g.parts.Store(12)
	all := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}
	var keys [12][]byte
	var checks [12]*partitionCheck
	for i := range keys {
		checks[i] = g.checker(i)
	}
	for i := 0; ; i++ {
		k := fmt.Appendf(nil, "user-%05d", i)
		if p := bal.Balance(kafka.Message{Key: k}, all...); keys[p] == nil {
			keys[p] = k
			if !slices.ContainsFunc(keys[:], func(k []byte) bool { return k == nil }) {
				break
			}
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		checks[i%12].check(keys[i%12])
		i++
	}
	if _, m := g.totals(); m != 0 {
		b.Fatalf("%d mismatched", m)
	}
}
