package calibrate_test

import (
	"testing"

	"github.com/streamer/streamer/online/calibrate"
)

// BenchmarkVennAbersLookup: one Probability call on a table of n = 2000
// pairs (the per-event cost). Target: ≤ 100 ns, 0 allocs.
func BenchmarkVennAbersLookup(b *testing.B) {
	v := calibrate.FitVennAbers(randomPairs(2000, 1))
	qs := randomPairs(1024, 9) // test scores
	b.ReportAllocs()
	var sink float64
	i := 0
	for b.Loop() {
		p, lo, hi := v.Probability(qs[i&1023].Score)
		sink += p + lo + hi
		i++
	}
	_ = sink
}

// BenchmarkVennAbersFit: FitVennAbers on n = 2000 pairs (the background
// refit, every K labelled events). Target: none, reported (O(n log n)).
func BenchmarkVennAbersFit(b *testing.B) {
	ps := randomPairs(2000, 1)
	b.ReportAllocs()
	for b.Loop() {
		calibrate.FitVennAbers(ps)
	}
}

// BenchmarkFitterVennAbers: a Fitter's fit on n = 2000 pairs, its
// working memory reused (the engine's background refit, up to hundreds a
// second at a high event rate). Target: the table's one allocation (3k + 2
// floats) per fit, and ≤ 100 µs (82–98 µs on the 2-vCPU VM, 2026-11-27;
// 121–138 µs when it sorted the pairs with a comparison function).
func BenchmarkFitterVennAbers(b *testing.B) {
	ps := randomPairs(2000, 1)
	var f calibrate.Fitter
	b.ReportAllocs()
	for b.Loop() {
		f.VennAbers(ps)
	}
}

// BenchmarkWindowAdd: Window.Add into a full window of 2000. Target: O(1),
// 0 allocs.
func BenchmarkWindowAdd(b *testing.B) {
	w := calibrate.NewWindow(2000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		w.Add(float64(i&1023)*1e-3, i&1 == 0)
		i++
	}
}

// BenchmarkConformalInterval: one Interval call at level 0.9 on a table of
// 2000 residuals. Target: O(1), 0 allocs.
func BenchmarkConformalInterval(b *testing.B) {
	r := make([]float64, 2000)
	for i, p := range randomPairs(2000, 3) {
		r[i] = p.Score
	}
	c := calibrate.FitConformalResiduals(r)
	b.ReportAllocs()
	var sink float64
	i := 0
	for b.Loop() {
		lo, hi, _ := c.Interval(float64(i&1023), 0.9)
		sink += lo + hi
		i++
	}
	_ = sink
}
