package online

import "testing"

// BenchmarkMAMRBF256Auto measures one Observe of the balanced rbf MAM
// with gamma auto: d = 32, D = 256 random frequencies, 6 widths (one
// projection, then per width the sin/cos of the scaled projection, its
// score, and for a labelled event its update). "labelled" is score +
// learn (all 6 widths), "unlabelled" score only (the widths in the
// mixture: all 6 here, the labels being random). Warm state: past the
// warm-up. Target (issue 15): ≤ 3 µs per labelled event (one projection,
// one sin/cos, five double-angle steps, six fused passes); 0 allocs/op.
func BenchmarkMAMRBF256Auto(b *testing.B) {
	const d = 32
	x, y := benchEvents(d)
	for _, labelled := range []bool{true, false} {
		name := "labelled"
		if !labelled {
			name = "unlabelled"
		}
		b.Run(name, func(b *testing.B) {
			m := mustAuto(b, d, MAMParams{Kernel: KernelSpec{Type: KernelRBF, Features: 256, Seed: 1}, Balance: true, Delta: DefaultDelta})
			for i := range x {
				m.Observe(x[i], y[i], true)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				m.Observe(x[i&1023], y[i&1023], labelled)
				i++
			}
		})
	}
}
