package vmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDecayLevels checks PlainDecay and BalancedDecay against their Go
// loops (the go level; TestPassesLevels ties those at λ = 1
// to the fused forms) at every level, bit for bit, over twenty successive
// updates of the same sums (decay 1 − 2⁻⁷ … 1 − 2⁻¹⁴, inputs from 1e-6 to
// 1e6 so that the compensations carry), every length to 41.
func TestDecayLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 20))
	vec := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			v[i] = r.NormFloat64() * math.Pow(10, float64(r.IntN(13)-6))
		}
		return v
	}
	for n := range 42 {
		xs := make([][]float64, 20)
		ys, lams := make([]float64, 20), make([]float64, 20)
		for k := range xs {
			xs[k] = vec(n)
			ys[k] = float64(1 - 2*r.IntN(2))
			lams[k] = 1 - math.Ldexp(1, -7-r.IntN(8))
		}
		it, io := 1/r.Float64(), 1/r.Float64()
		s0, c0, t0, tc0, o0, oc0 := vec(n), make([]float64, n), vec(n), make([]float64, n), vec(n), make([]float64, n)
		// The references, once.
		ws, wc := clone(s0), clone(c0)
		wt, wtc, wo, woc := clone(t0), clone(tc0), clone(o0), clone(oc0)
		ww1, ww2, pt2, po2 := make([]float64, 20), make([]float64, 20), make([]float64, 20), make([]float64, 20)
		w1, w2 := make([][]float64, 20), make([][]float64, 20)
		atLevel(levelGo, func() {
			for k := range xs {
				w1[k], w2[k] = make([]float64, n), make([]float64, n)
				ww1[k] = PlainDecay(w1[k], ws, wc, xs[k], ys[k], lams[k])
				ww2[k], pt2[k], po2[k] = BalancedDecay(w2[k], wt, wtc, wo, woc, xs[k], it, io, lams[k])
			}
		})
		forLevels(t, func(t *testing.T) {
			s, c := clone(s0), clone(c0)
			tt, tc, o, oc := clone(t0), clone(tc0), clone(o0), clone(oc0)
			w := make([]float64, n)
			for k := range xs {
				if ww := PlainDecay(w, s, c, xs[k], ys[k], lams[k]); !same(ww, ww1[k]) {
					t.Fatalf("n %d, step %d: PlainDecay ww %v, want %v", n, k, ww, ww1[k])
				}
				eqVec(t, "PlainDecay w", w, w1[k])
				ww, pt, po := BalancedDecay(w, tt, tc, o, oc, xs[k], it, io, lams[k])
				if !same(ww, ww2[k]) || !same(pt, pt2[k]) || !same(po, po2[k]) {
					t.Fatalf("n %d, step %d: BalancedDecay (%v, %v, %v), want (%v, %v, %v)", n, k, ww, pt, po, ww2[k], pt2[k], po2[k])
				}
				eqVec(t, "BalancedDecay w", w, w2[k])
			}
			eqVec(t, "PlainDecay s", s, ws)
			eqVec(t, "PlainDecay c", c, wc)
			eqVec(t, "BalancedDecay t", tt, wt)
			eqVec(t, "BalancedDecay tc", tc, wtc)
			eqVec(t, "BalancedDecay o", o, wo)
			eqVec(t, "BalancedDecay oc", oc, woc)
		})
	}
}
