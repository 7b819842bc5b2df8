package online

import "testing"

// BenchmarkExactMAM measures one Observe (score + learn, evicting the
// oldest) of the exact-kernel rbf MAM with a full budget of 1000 examples
// and d = 8. Target: ≥ 50 k events/s on one core (≤ 20 µs/op), 0
// allocs/op. 6.0–6.5 µs since the row's exps run eight at a time
// (vmath.ExpShiftRow, 2026-11-27; 9.1–10.1 µs just before).
func BenchmarkExactMAM(b *testing.B) {
	for _, bal := range []struct {
		name string
		on   bool
	}{{"plain", false}, {"balanced", true}} {
		b.Run(bal.name, func(b *testing.B) {
			const budget, d = 1000, 8
			m := newExact(b, KernelSpec{Type: KernelRBF, Gamma: 1.0 / d}, d, budget, bal.on)
			x, y := benchEvents(d)
			for i := range budget + 24 { // filled and wrapped
				m.Observe(x[i&1023], y[i&1023], true)
			}
			if m.Stored() != budget {
				b.Fatalf("stored %d", m.Stored())
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				m.Observe(x[i&1023], y[i&1023], true)
				i++
			}
		})
	}
}

// BenchmarkExactMAMScore measures Observe without a label (score only) on
// the same model.
func BenchmarkExactMAMScore(b *testing.B) {
	const budget, d = 1000, 8
	m := newExact(b, KernelSpec{Type: KernelRBF, Gamma: 1.0 / d}, d, budget, false)
	x, y := benchEvents(d)
	for i := range budget {
		m.Observe(x[i&1023], y[i&1023], true)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.Observe(x[i&1023], 0, false)
		i++
	}
}
