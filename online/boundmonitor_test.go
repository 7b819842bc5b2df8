package online

import (
	"math"
	"math/rand/v2"
	"testing"
)

func TestBoundMonitorCounts(t *testing.T) {
	m := NewBoundMonitor(3, []float64{0, 0.5})
	if m.Count() != 0 || !math.IsNaN(m.Observed(0)) {
		t.Fatalf("empty: count %d observed %v", m.Count(), m.Observed(0))
	}
	if _, v := m.Check(func(float64) float64 { return 0 }, nil); v != 0 {
		t.Fatalf("empty monitor: %d violations", v)
	}
	for _, x := range []float64{-1, 0.2, -0.3, 0.9} { // -1 is evicted by 0.9
		m.Add(x)
	}
	if m.Count() != 3 {
		t.Fatalf("count %d, want 3", m.Count())
	}
	if got := m.Observed(0); got != 1.0/3 {
		t.Errorf("observed(0) = %v, want 1/3", got)
	}
	if got := m.Observed(1); got != 0 {
		t.Errorf("observed(0.5) = %v, want 0", got)
	}
	bounds, v := m.Check(func(rho float64) float64 { return 0.2 / (1 + rho) }, make([]float64, 0, 2))
	if v != 1 || len(bounds) != 2 || bounds[1] != 0.2/1.5 {
		t.Errorf("check: bounds %v violations %d, want 1 violation at rho 0", bounds, v)
	}

	c := NewBoundMonitor(0, DefaultBoundGrid())
	for i := range 10 {
		c.Add(-float64(i) / 10) // margins 0, -0.1, …, -0.9
	}
	for i := range 10 {
		if got, want := c.Observed(i), float64(10-i)/10; math.Abs(got-want) > 1e-15 {
			t.Errorf("cumulative observed(%d) = %v, want %v", i, got, want)
		}
	}
	c.Reset()
	if c.Count() != 0 {
		t.Errorf("count after reset %d", c.Count())
	}
}

func TestBoundMonitorAllocs(t *testing.T) {
	m := NewBoundMonitor(100, DefaultBoundGrid())
	x := 0.3
	if a := testing.AllocsPerRun(1000, func() { x = -x; m.Add(x) }); a != 0 {
		t.Errorf("Add allocates %v times", a)
	}
	dst := make([]float64, 10)
	mam := testRBFMAM(t, 10)
	if a := testing.AllocsPerRun(100, func() { dst, _ = m.Check(mam.Bound, dst) }); a != 0 {
		t.Errorf("Check allocates %v times", a)
	}
}

// testRBFMAM is a balanced 2-D rbf MAM with 1024 random features.
func testRBFMAM(t *testing.T, gamma float64) *MAM {
	t.Helper()
	m, err := NewMAM(2, MAMParams{Balance: true, Delta: 0.05,
		Kernel: KernelSpec{Type: KernelRBF, Gamma: gamma, Features: 1024, Seed: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestBoundMonitorRipley streams i.i.d. draws from Ripley's data (training
// and test points together) through the rbf MAM and checks the bound against
// the last 1000 prequential margins every 100 events: no violations.
func TestBoundMonitorRipley(t *testing.T) {
	trX, trY := readCSV(t, "testdata/ripley_train.csv")
	teX, teY := readCSV(t, "testdata/ripley_test.csv")
	X, Y := append(trX, teX...), append(trY, teY...)
	r := rand.New(rand.NewPCG(1, 2))
	m, mon, first, total := runBoundMonitor(t, 10, 6000, 0, func() ([]float64, float64) {
		i := r.IntN(len(X))
		return X[i], Y[i]
	})
	if total != 0 {
		t.Fatalf("i.i.d. stream: %d violations, the first after %d events", total, first)
	}
	t.Logf("after 6000 events: observed(0) %.3f bound(0) %.3f, observed(0.3) %.3f bound(0.3) %.3f",
		mon.Observed(0), m.Bound(0), mon.Observed(3), m.Bound(0.3))
}

// TestBoundMonitorDrift flips the labels of a stream mid-way: the model,
// still essentially the one learned before, now errs on most events with
// large margins, and the check must notice. (Ripley's classes overlap so
// much that bound(0) ≥ 1 − M̂ ≈ 0.9 there, above any error rate a flip can
// show in the window; two well-separated Gaussian classes have M̂ ≈ 0.5.)
func TestBoundMonitorDrift(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const iid, drift = 4000, 1500
	_, mon, first, total := runBoundMonitor(t, 1, iid+drift, iid, func() ([]float64, float64) {
		y := 1.0
		if r.IntN(2) == 0 {
			y = -1
		}
		return []float64{y + 0.3*r.NormFloat64(), 0.3 * r.NormFloat64()}, y
	})
	if first <= iid {
		t.Fatalf("violation after %d i.i.d. events, before the flip at %d", first, iid)
	}
	t.Logf("drift: first violation %d events after the flip, %d violations over %d checks (observed(0) %.3f)",
		first-iid, total, drift/100, mon.Observed(0))
}

// runBoundMonitor feeds n events from next to an rbf MAM (gamma; labels negated
// after flipAt events when flipAt > 0), adds every prequential margin to a
// BoundMonitor over 1000 events and checks it every 100 events. It returns
// the event count at the first violation (0: none) and the violations summed
// over the checks.
func runBoundMonitor(t *testing.T, gamma float64, n, flipAt int, next func() ([]float64, float64)) (m *MAM, mon *BoundMonitor, first, total int) {
	t.Helper()
	m = testRBFMAM(t, gamma)
	mon = NewBoundMonitor(1000, DefaultBoundGrid())
	var bounds []float64
	for k := 1; k <= n; k++ {
		x, y := next()
		if flipAt > 0 && k > flipAt {
			y = -y
		}
		p := m.Observe(x, y, true)
		mon.Add(y * p.Score)
		if k%100 == 0 {
			var v int
			bounds, v = mon.Check(m.Bound, bounds)
			if v > 0 && first == 0 {
				first = k
			}
			total += v
		}
	}
	if total == 0 {
		first = 0
	}
	return m, mon, first, total
}

// BenchmarkBoundMonitorAdd is a judged event's margin into a full window of
// 2 000 over the default grid: margins of standard normal scores with
// random labels, so that which ρ a margin passes is as unpredictable as on
// a model's stream. 0 allocs/op.
func BenchmarkBoundMonitorAdd(b *testing.B) {
	rng := rand.New(rand.NewPCG(7, 8))
	margins := make([]float64, 4096)
	for i := range margins {
		margins[i] = rng.NormFloat64() * 0.5
	}
	m := NewBoundMonitor(2000, DefaultBoundGrid())
	for _, v := range margins[:2000] {
		m.Add(v)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.Add(margins[i&(len(margins)-1)])
		i++
	}
}

// The monitor's counts by prefix equal a count over the margins held, for
// every ρ of grids in any order, with repeated values, ±0, infinities and
// NaN, and margins that hit grid values exactly (ties), NaN and ±Inf, in
// windowed and cumulative mode: Observed and Check's violations both.
func TestBoundMonitorMatchesCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	grids := [][]float64{
		DefaultBoundGrid(),
		{0.5, 0, 0.25, 0.5, math.Copysign(0, -1), 0.9},
		{math.Inf(1), -0.3, math.NaN(), 0.2, math.Inf(-1), 0.2},
		{0.7},
	}
	for gi, grid := range grids {
		for _, window := range []int{0, 1, 7, 50} {
			m := NewBoundMonitor(window, grid)
			var held []float64
			for step := range 400 {
				var x float64
				switch r := rng.IntN(10); {
				case r == 0:
					x = -grid[rng.IntN(len(grid))] // a tie with a grid value
				case r == 1:
					x = []float64{math.NaN(), math.Inf(1), math.Inf(-1), 0, math.Copysign(0, -1)}[rng.IntN(5)]
				default:
					x = rng.NormFloat64() * 0.6
				}
				m.Add(x)
				held = append(held, x)
				if window > 0 && len(held) > window {
					held = held[1:]
				}
				limit := func(rho float64) float64 { return 0.3 }
				_, violations := m.Check(limit, nil)
				want := 0
				for i, rho := range grid {
					n := 0
					for _, h := range held {
						if h <= -rho {
							n++
						}
					}
					f := float64(n) / float64(len(held))
					if got := m.Observed(i); got != f {
						t.Fatalf("grid %d, window %d, step %d: observed(%v) = %v, want %v", gi, window, step, rho, got, f)
					}
					if f > limit(rho) {
						want++
					}
				}
				if violations != want {
					t.Fatalf("grid %d, window %d, step %d: %d violations, want %d", gi, window, step, violations, want)
				}
			}
		}
	}
}
