package calibrate_test

import (
	"math"
	"testing"

	"github.com/streamer/streamer/online"
	"github.com/streamer/streamer/online/calibrate"
	"github.com/streamer/streamer/online/refit"
)

// TestConformalQuantile: q is the ⌈(n+1)·level⌉-th smallest |residual|,
// infinite when that rank exceeds n; invalid levels and non-finite
// residuals.
func TestConformalQuantile(t *testing.T) {
	// Residuals ±1..±9 shuffled: |r| = 1..9.
	res := []float64{-5, 3, 9, -1, 7, -2, 8, -6, 4}
	c := calibrate.FitConformalResiduals(res)
	if c.N() != 9 {
		t.Fatalf("N %d", c.N())
	}
	for _, tc := range []struct {
		level float64
		q     float64
		ok    bool
	}{
		{0.9, 9, true},  // ⌈10·0.9⌉ = 9 (exactly 9, not 9.000…02)
		{0.85, 9, true}, // ⌈8.5⌉ = 9
		{0.8, 8, true},  // ⌈8⌉ = 8
		{0.5, 5, true},  // ⌈5⌉ = 5
		{0.01, 1, true}, // ⌈0.1⌉ = 1
		{0.91, math.Inf(1), false},
		{0.95, math.Inf(1), false},
		{0, math.Inf(1), false},
		{1, math.Inf(1), false},
		{math.NaN(), math.Inf(1), false},
	} {
		q, ok := c.Quantile(tc.level)
		if q != tc.q || ok != tc.ok {
			t.Errorf("level %v: q %v ok %v, want %v %v", tc.level, q, ok, tc.q, tc.ok)
		}
		lo, hi, ok2 := c.Interval(10, tc.level)
		if ok2 != tc.ok || (ok2 && (lo != 10-tc.q || hi != 10+tc.q)) || (!ok2 && !(math.IsInf(lo, -1) && math.IsInf(hi, 1))) {
			t.Errorf("level %v: interval [%v, %v] ok %v", tc.level, lo, hi, ok2)
		}
	}
	// n = 99 at level 0.9: rank ⌈100·0.9⌉ = 90.
	var pairs []calibrate.Pair
	for i := range 99 {
		pairs = append(pairs, calibrate.Pair{Score: 1, Y: 1 + float64(99-i)})
	}
	pairs = append(pairs, calibrate.Pair{Score: math.NaN(), Y: 1}, calibrate.Pair{Score: 0, Y: math.Inf(1)})
	c = calibrate.FitConformal(pairs)
	if q, ok := c.Quantile(0.9); c.N() != 99 || q != 90 || !ok {
		t.Errorf("n %d: q %v ok %v, want n 99, q 90", c.N(), q, ok)
	}
	empty := calibrate.FitConformal(nil)
	if _, _, ok := empty.Interval(0, 0.5); ok {
		t.Error("empty table gave a finite interval")
	}
}

// TestConformalCoverage streams boston_ordinal (506 rows, 13 features,
// targets 1..5) in 10 shuffles through kernel ridge regression refitted
// from its window (refit.KRRType: exact solver, rbf gamma 0.03, λ 0.03 —
// the kernel of online/refit's boston tests —, window 2000 so all of the
// stream, refit every 100 labelled events, inline), standardised online.
// Every event's prediction is made before its label is learned (events
// before the first krr fit have none and are skipped); its residual enters
// a calibrate.Window and the conformal table is refitted every 100
// residuals. For each event after the first 200 that has a table, the
// interval at level 0.9 (δ = 0.1) comes from the current table; the
// coverage pooled over the shuffles must lie in [0.87, 0.93].
//
// As in TestIVAPValidity (and the engine), the judged table is fitted on
// the residuals of the later half of the stream so far
// (Window.CopyRecentTo): 0.920. The literal protocol (every residual in
// the window) runs on the same stream and is logged, not judged: it covers
// 0.934, above 0.93 — conservative, because the residuals of the early krr
// fits (100 events) are larger than those of the later ones. (Until
// 2026-11-27 the judged window left out the first 200 residuals instead,
// so its first table came at event 300.)
func TestConformalCoverage(t *testing.T) {
	const (
		level = 0.9
		skip  = 200
		every = 100
	)
	x, y := readCSV(t, bostonPath)
	type side struct {
		recent                    bool
		w                         *calibrate.Window
		table                     *calibrate.Conformal
		buf                       []calibrate.Pair
		covered, judged, infinite int
		width                     float64
	}
	judged := make([]*side, shuffles)
	literal := make([]*side, shuffles)
	parallel(shuffles, func(s int) {
		p := refit.DefaultKRRParams()
		p.Kernel = refit.RankKernel{Type: "rbf", Gamma: 0.03}
		p.Lambda = 0.03
		p.Window.Events, p.Refit.EveryEvents = 2000, every
		inner, err := refit.KRRType().New(len(x[0]), &p)
		if err != nil {
			panic(err)
		}
		m := online.Standardize(inner)
		judged[s] = &side{recent: true, w: calibrate.NewWindow(ivapWindow)}
		literal[s] = &side{w: calibrate.NewWindow(ivapWindow)}
		for k, i := range order(len(x), uint64(s), 0) {
			pred := m.Observe(x[i], y[i], true)
			if pred.Version == 0 { // no fitted model yet
				continue
			}
			for _, c := range []*side{judged[s], literal[s]} {
				if k >= skip && c.table != nil {
					lo, hi, ok := c.table.Interval(pred.Score, level)
					c.judged++
					if !ok {
						c.infinite++
					}
					if lo <= y[i] && y[i] <= hi {
						c.covered++
					}
					c.width += hi - lo
				}
				c.w.AddResidual(pred.Score, y[i])
				if c.w.Added()%every == 0 {
					if c.recent {
						c.buf = c.w.CopyRecentTo(c.buf)
					} else {
						c.buf = c.w.CopyTo(c.buf)
					}
					c.table = calibrate.FitConformal(c.buf)
				}
			}
		}
	})
	pool := func(name string, sides []*side) float64 {
		var cov, n, inf int
		var width float64
		for s, c := range sides {
			t.Logf("  %s shuffle %d: %d/%d covered (%.3f), mean width %.3f", name, s, c.covered, c.judged, float64(c.covered)/float64(c.judged), c.width/float64(c.judged))
			cov, n, inf, width = cov+c.covered, n+c.judged, inf+c.infinite, width+c.width
		}
		rate := float64(cov) / float64(n)
		t.Logf("boston_ordinal / krr, %s, level %.2f: coverage %.4f (%d of %d events, %d infinite intervals), mean width %.3f", name, level, rate, cov, n, inf, width/float64(n))
		if n == 0 {
			t.Fatalf("%s: no event judged", name)
		}
		return rate
	}
	pool("literal protocol (not judged)", literal)
	if rate := pool("the later half of the stream (judged)", judged); rate < 0.87 || rate > 0.93 {
		t.Fatalf("coverage %.4f, want [0.87, 0.93]", rate)
	}
}
