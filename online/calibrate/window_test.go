package calibrate_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/streamer/streamer/online/calibrate"
)

// TestWindowRing: the ring keeps the last Size pairs oldest first, ignores
// non-finite input, counts what it accepted, and CopyTo reuses dst.
func TestWindowRing(t *testing.T) {
	w := calibrate.NewWindow(4)
	if w.Len() != 0 || w.Added() != 0 || w.Size() != 4 || len(w.CopyTo(nil)) != 0 {
		t.Fatal("new window not empty")
	}
	w.Add(math.NaN(), true)
	w.Add(math.Inf(1), true)
	w.AddResidual(math.Inf(-1), 1)
	w.AddResidual(1, math.NaN())
	if w.Len() != 0 || w.Added() != 0 {
		t.Fatalf("non-finite input stored: len %d added %d", w.Len(), w.Added())
	}
	var buf []calibrate.Pair
	for i := range 10 {
		w.Add(float64(i), i%2 == 0)
		buf = w.CopyTo(buf)
		n := min(i+1, 4)
		if w.Len() != n || w.Added() != int64(i+1) || len(buf) != n {
			t.Fatalf("after %d adds: len %d added %d copy %d", i+1, w.Len(), w.Added(), len(buf))
		}
		for j, p := range buf {
			s := i - n + 1 + j
			y := 0.0
			if s%2 == 0 {
				y = 1
			}
			if p.Score != float64(s) || p.Y != y {
				t.Fatalf("after %d adds: copy[%d] = %+v, want {%d %v}", i+1, j, p, s, y)
			}
		}
	}
	if a := testing.AllocsPerRun(100, func() { buf = w.CopyTo(buf) }); a != 0 {
		t.Errorf("CopyTo into a large enough dst: %v allocs", a)
	}
	r := calibrate.NewWindow(2)
	r.AddResidual(1.5, 4)
	if got := r.CopyTo(nil); len(got) != 1 || got[0] != (calibrate.Pair{Score: 1.5, Y: 4}) {
		t.Errorf("AddResidual stored %+v", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("NewWindow(0) did not panic")
		}
	}()
	calibrate.NewWindow(0)
}

// TestCopyRecent: CopyRecentTo keeps the newest max(RecentMin, ⌈Added/2⌉)
// pairs, oldest first, all the held ones when fewer, across the ring's
// wrap, without allocating into a large enough dst.
func TestCopyRecent(t *testing.T) {
	const size = 3 * calibrate.RecentMin
	w := calibrate.NewWindow(size)
	var buf []calibrate.Pair
	for i := range 5 * size {
		w.Add(float64(i), true)
		added := i + 1
		want := min(added, size, max(calibrate.RecentMin, (added+1)/2))
		buf = w.CopyRecentTo(buf)
		if len(buf) != want {
			t.Fatalf("after %d adds: %d pairs, want %d", added, len(buf), want)
		}
		for j, p := range buf {
			if s := float64(added - want + j); p.Score != s {
				t.Fatalf("after %d adds: pair %d has score %v, want %v", added, j, p.Score, s)
			}
		}
	}
	if a := testing.AllocsPerRun(100, func() { buf = w.CopyRecentTo(buf) }); a != 0 {
		t.Errorf("CopyRecentTo into a large enough dst: %v allocs", a)
	}
}

// TestNoAllocations: Add, AddResidual, Probability and Interval do not
// allocate.
func TestNoAllocations(t *testing.T) {
	w := calibrate.NewWindow(100)
	v := calibrate.FitVennAbers(randomPairs(2000, 1))
	c := calibrate.FitConformalResiduals([]float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20})
	var sink float64
	for name, f := range map[string]func(){
		"Add":         func() { w.Add(0.3, true) },
		"AddResidual": func() { w.AddResidual(0.3, 1) },
		"Probability": func() { p, _, _ := v.Probability(0.1); sink += p },
		"Interval":    func() { lo, _, _ := c.Interval(1, 0.9); sink += lo },
	} {
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s: %v allocs per call", name, a)
		}
	}
	_ = sink
}

// TestConcurrentLookups: tables are immutable, so lookups on the serving
// table may run on many goroutines while the next one is fitted from a
// window snapshot (run with -race).
func TestConcurrentLookups(t *testing.T) {
	w := calibrate.NewWindow(500)
	for _, p := range randomPairs(500, 2) {
		w.Add(p.Score, p.Y > 0)
	}
	serving := calibrate.FitVennAbers(w.CopyTo(nil))
	want := make([][3]float64, 100)
	for i := range want {
		want[i][0], want[i][1], want[i][2] = serving.Probability(float64(i)/50 - 1)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				for i := range want {
					p, lo, hi := serving.Probability(float64(i)/50 - 1)
					if [3]float64{p, lo, hi} != want[i] {
						panic("a table changed under its readers")
					}
				}
			}
		})
	}
	var buf []calibrate.Pair
	for i := range 20 {
		for _, p := range randomPairs(50, uint64(10+i)) {
			w.Add(p.Score, p.Y > 0)
		}
		buf = w.CopyTo(buf)
		_ = calibrate.FitVennAbers(buf)
	}
	wg.Wait()
}

// randomPairs returns n classifier pairs: scores N(0, 1) rounded to 1e-3
// (some ties), labels with P(y = 1) = logistic(2s).
func randomPairs(n int, seed uint64) []calibrate.Pair {
	r := rand.New(rand.NewPCG(seed, 7))
	ps := make([]calibrate.Pair, n)
	for i := range ps {
		s := math.Round(r.NormFloat64()*1000) / 1000
		y := 0.0
		if r.Float64() < 1/(1+math.Exp(-2*s)) {
			y = 1
		}
		ps[i] = calibrate.Pair{Score: s, Y: y}
	}
	return ps
}

// TestWindowLoad: a window loaded with another's pairs and count keeps
// the same recent pairs (CopyRecentTo) and count; a smaller one keeps the
// newest; non-finite pairs are skipped.
func TestWindowLoad(t *testing.T) {
	w := calibrate.NewWindow(50)
	for i := range 130 {
		w.Add(float64(i), i%3 == 0)
	}
	v := calibrate.NewWindow(50)
	v.Add(-1, true) // emptied by Load
	v.Load(w.CopyTo(nil), w.Added())
	if v.Added() != w.Added() || v.Len() != w.Len() || !slices.Equal(v.CopyRecentTo(nil), w.CopyRecentTo(nil)) {
		t.Fatalf("loaded: added %d len %d, want %d %d", v.Added(), v.Len(), w.Added(), w.Len())
	}
	small := calibrate.NewWindow(10)
	small.Load(w.CopyTo(nil), 3)
	got := small.CopyTo(nil)
	if small.Len() != 10 || small.Added() != 10 || got[0].Score != 120 || got[9].Score != 129 {
		t.Fatalf("a smaller window: len %d added %d pairs %v", small.Len(), small.Added(), got)
	}
	small.Load([]calibrate.Pair{{Score: math.NaN(), Y: 1}, {Score: 2, Y: math.Inf(1)}, {Score: 1, Y: 0}}, 0)
	if got := small.CopyTo(nil); len(got) != 1 || got[0].Score != 1 {
		t.Fatalf("non-finite pairs kept: %v", got)
	}
}
