package vmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestExpShiftRowLevels checks ExpShiftRow against its element loop at
// every level, bit for bit (any NaN for a NaN): random distances above a
// shift with g from 1e-3 to 1e3, arguments across the subnormal range and
// past the clamp (700–800), 0, +Inf and NaN distances, every length to 40.
func TestExpShiftRowLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(16, 16))
	type tcase struct {
		src, want []float64
		g, m      float64
	}
	var cases []tcase
	for n := range 41 {
		for trial := range 12 {
			c := tcase{src: make([]float64, n), want: make([]float64, n), g: math.Exp(r.Float64()*14 - 7), m: math.Abs(r.NormFloat64())}
			for i := range c.src {
				c.src[i] = c.m + math.Abs(r.NormFloat64())*4
				switch {
				case trial >= 8 && r.IntN(3) == 0:
					c.src[i] = []float64{c.m, math.Inf(1), math.NaN(), c.m + 1e-300, 1e300}[r.IntN(5)]
				case trial >= 4 && r.IntN(2) == 0:
					c.src[i] = c.m + (700+r.Float64()*100)/c.g // e^−700 … e^−800: subnormals, the clamp
				}
			}
			for i, v := range c.src {
				c.want[i] = expShift(v, c.g, c.m)
			}
			cases = append(cases, c)
		}
	}
	// And one long row of 2¹⁸ arguments to 700: rare roundings.
	big := tcase{src: make([]float64, 1<<18), g: 0.7, m: 0.25}
	for i := range big.src {
		big.src[i] = big.m + r.Float64()*1000
	}
	big.want = make([]float64, len(big.src))
	for i, v := range big.src {
		big.want[i] = expShift(v, big.g, big.m)
	}
	cases = append(cases, big)
	forLevels(t, func(t *testing.T) {
		for _, c := range cases {
			dst := clone(c.src)
			ExpShiftRow(dst, c.g, c.m)
			for i, w := range c.want {
				if !same(dst[i], w) && !(math.IsNaN(w) && math.IsNaN(dst[i])) {
					t.Fatalf("n %d, element %d: e^−(%v·(%v − %v)) = %v, ExpShiftRow %v", len(c.src), i, c.g, c.src[i], c.m, w, dst[i])
				}
			}
		}
	})
}

// TestExpShiftAccuracy: within 2.5 ulp of math.Exp down to e^−708, over
// a million random arguments.
func TestExpShiftAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 17))
	src := make([]float64, 1<<20)
	for i := range src {
		src[i] = r.Float64() * 708
	}
	dst := clone(src)
	ExpShiftRow(dst, 1, 0)
	var worst float64
	for i, v := range src {
		w := math.Exp(-v)
		worst = max(worst, math.Abs(dst[i]-w)/w)
	}
	if worst > 2.5*0x1p-52 {
		t.Fatalf("largest relative error %.3g, want ≤ 2.5 ulp", worst)
	}
	t.Logf("largest relative error %.3g (%.2f ulp)", worst, worst/0x1p-52)
}

// BenchmarkExpShiftRow1000: an exact-kernel model's row of 1 000 shifted
// exps (the default budget), against the element loop. Target: ≤ 2 ns an
// entry, 0 allocs.
func BenchmarkExpShiftRow1000(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	src := make([]float64, 1000)
	for i := range src {
		src[i] = 2 + math.Abs(r.NormFloat64())*5
	}
	dst := make([]float64, len(src))
	b.Run("ExpShiftRow", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			copy(dst, src)
			ExpShiftRow(dst, 0.3, 2)
		}
	})
	b.Run("ExpShiftRow-avx2", func(b *testing.B) {
		atLevel(levelAVX2, func() {
			for b.Loop() {
				copy(dst, src)
				ExpShiftRow(dst, 0.3, 2)
			}
		})
	})
	b.Run("loop", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			copy(dst, src)
			for i, v := range dst {
				dst[i] = expShift(v, 0.3, 2)
			}
		}
	})
}

// TestAccumScaledLevels checks AccumScaled against its loop at every
// level, bit for bit (any NaN for a NaN): sums built by repeated updates
// with magnitudes from 1e-8 to 1e8 (so that the compensations matter),
// edges (±0, ±Inf, NaN), every length to 40.
func TestAccumScaledLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 19))
	edges := []float64{0, math.Copysign(0, -1), math.Inf(1), math.NaN(), 1e300}
	for n := range 41 {
		for trial := range 8 {
			s, c := make([]float64, n), make([]float64, n)
			for j := range s {
				s[j] = r.NormFloat64() * math.Pow(10, float64(r.IntN(17)-8))
				c[j] = s[j] * 1e-17
			}
			type step struct {
				v []float64
				a float64
			}
			var steps []step
			for range 6 {
				v := make([]float64, n)
				for j := range v {
					v[j] = r.NormFloat64() * math.Pow(10, float64(r.IntN(17)-8))
					if trial >= 4 && r.IntN(6) == 0 {
						v[j] = edges[r.IntN(len(edges))]
					}
				}
				steps = append(steps, step{v, r.NormFloat64()})
			}
			ws, wc := clone(s), clone(c)
			for _, st := range steps {
				for j, vj := range st.v {
					x := float64(st.a * vj)
					t := ws[j] + x
					bp := t - ws[j]
					wc[j] += (ws[j] - (t - bp)) + (x - bp)
					ws[j] = t
				}
			}
			f := r.NormFloat64()
			wf := clone(steps[0].v)
			for j := range wf {
				wf[j] *= f
			}
			forLevels(t, func(t *testing.T) {
				gs, gc := clone(s), clone(c)
				for _, st := range steps {
					AccumScaled(gs, gc, st.v, st.a)
				}
				gf := clone(steps[0].v)
				Scale(gf, f)
				for j := range gf {
					if !same(gf[j], wf[j]) && !(math.IsNaN(gf[j]) && math.IsNaN(wf[j])) {
						t.Fatalf("n %d: Scale %v, want %v", n, gf[j], wf[j])
					}
				}
				for j := range n {
					for _, p := range [][2]float64{{gs[j], ws[j]}, {gc[j], wc[j]}} {
						if !same(p[0], p[1]) && !(math.IsNaN(p[0]) && math.IsNaN(p[1])) {
							t.Fatalf("n %d, trial %d, j %d: sum %v (%v), compensation %v (%v)", n, trial, j, gs[j], ws[j], gc[j], wc[j])
						}
					}
				}
			})
		}
	}
}

// TestWelfordAddLevels checks WelfordAdd against its loop at every level,
// bit for bit (any NaN for a NaN), over 50 successive events of features
// with means from 1e-4 to 1e4, a constant feature (the variance floor),
// and edges (±Inf, NaN, 1e300), every dimension to 40.
func TestWelfordAddLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 21))
	for n := range 41 {
		scale, off := make([]float64, n), make([]float64, n)
		for i := range scale {
			scale[i] = math.Pow(10, float64(r.IntN(9)-4))
			off[i] = r.NormFloat64() * scale[i] * 10
		}
		xs := make([][]float64, 50)
		for k := range xs {
			xs[k] = make([]float64, n)
			for i := range xs[k] {
				xs[k][i] = off[i] + scale[i]*r.NormFloat64()
				if i == 0 {
					xs[k][i] = 3 // constant: variance 0, inv 1
				}
				if k >= 40 && r.IntN(8) == 0 {
					xs[k][i] = []float64{math.Inf(1), math.NaN(), 1e300, math.Inf(-1)}[r.IntN(4)]
				}
			}
		}
		ref := func(mean, meanC, m2, m2C, inv, x []float64, invN float64) {
			for i, xi := range x {
				d := xi - (mean[i] + meanC[i])
				mi, mc := TwoSum(mean[i], meanC[i], float64(d*invN))
				mean[i], meanC[i] = mi, mc
				qi, qc := TwoSum(m2[i], m2C[i], float64(d*(xi-(mi+mc))))
				m2[i], m2C[i] = qi, qc
				inv[i] = 1
				if v := float64((qi + qc) * invN); !(v < 1e-12) {
					inv[i] = 1 / math.Sqrt(v)
				}
			}
		}
		state := func() [5][]float64 {
			var s [5][]float64
			for j := range s {
				s[j] = make([]float64, n)
			}
			return s
		}
		want := state()
		var wantInv [][]float64
		for k, x := range xs {
			ref(want[0], want[1], want[2], want[3], want[4], x, 1/float64(k+1))
			wantInv = append(wantInv, clone(want[4]))
		}
		forLevels(t, func(t *testing.T) {
			got := state()
			for k, x := range xs {
				WelfordAdd(got[0], got[1], got[2], got[3], got[4], x, 1/float64(k+1), 1e-12)
				for i := range n {
					if a, b := got[4][i], wantInv[k][i]; !same(a, b) && !(math.IsNaN(a) && math.IsNaN(b)) {
						t.Fatalf("n %d, event %d, feature %d: inv %v, want %v", n, k, i, a, b)
					}
				}
			}
			for j := range got {
				for i := range n {
					if a, b := got[j][i], want[j][i]; !same(a, b) && !(math.IsNaN(a) && math.IsNaN(b)) {
						t.Fatalf("n %d: statistic %d, feature %d: %v, want %v", n, j, i, a, b)
					}
				}
			}
		})
	}
}
