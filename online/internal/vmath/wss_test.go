package vmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

// refWSSMax and refWSSSecond are the solver's loops that WSSMax and
// WSSSecond are documented by.
func refWSSMax(y, g []float64, st []int8, skipPos, skipNeg int8) (float64, int) {
	m, idx := math.Inf(-1), -1
	for t := range y {
		if y[t] > 0 {
			if st[t] != skipPos && -g[t] >= m {
				m, idx = -g[t], t
			}
		} else if st[t] != skipNeg && g[t] >= m {
			m, idx = g[t], t
		}
	}
	return m, idx
}

func refWSSSecond(q []float32, qd, y, g []float64, st []int8, skipPos, skipNeg int8, gmax, qdi, yi, tau float64) (float64, float64, int) {
	max2, od, j := math.Inf(-1), math.Inf(1), -1
	for t := range y {
		if y[t] > 0 {
			if st[t] != skipPos {
				d := gmax + g[t]
				if g[t] >= max2 {
					max2 = g[t]
				}
				if d > 0 {
					quad := qdi + qd[t] - 2*yi*float64(q[t])
					if quad <= 0 {
						quad = tau
					}
					if v := -(d * d) / quad; v <= od {
						j, od = t, v
					}
				}
			}
		} else if st[t] != skipNeg {
			d := gmax - g[t]
			if -g[t] >= max2 {
				max2 = -g[t]
			}
			if d > 0 {
				quad := qdi + qd[t] + 2*yi*float64(q[t])
				if quad <= 0 {
					quad = tau
				}
				if v := -(d * d) / quad; v <= od {
					j, od = t, v
				}
			}
		}
	}
	return max2, od, j
}

// TestWSSLevels checks WSSMax and WSSSecond against the solver's loops at
// every level, bit for bit (the value of max2 up to the sign of a zero,
// which the solver only adds to gmax to compare with eps): gradients with
// repeated values (ties, the last index must win), ±0, ±Inf and NaN;
// labels ±1 and others (0, NaN, 0.5: the loops' "y > 0" or not);
// statuses 0–2 skipped by every pair; rows with a negative curvature
// (tau); every length to 100, the kernels taking 32 and more.
func TestWSSLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 13))
	pool := []float64{-1, -0.5, 0, math.Copysign(0, -1), 0.25, 1, 2}
	edges := []float64{math.Inf(1), math.Inf(-1), math.NaN(), 1e300, -1e300, 1e-300}
	type tcase struct {
		q             []float32
		qd, y, g      []float64
		st            []int8
		sp, sn        int8
		gmax, qdi, yi float64
		wm            float64
		wi            int
		w2, wod       float64
		wj            int
	}
	var cases []tcase
	// Whole-array edges at lengths the kernels take: nothing eligible;
	// everything eligible at v = −Inf (the last index must win); all ties.
	for _, n := range []int{32, 37, 64, 99} {
		for kind := range 3 {
			c := tcase{q: make([]float32, n), qd: make([]float64, n), y: make([]float64, n), g: make([]float64, n), st: make([]int8, n),
				sp: 1, sn: 0, qdi: 1, yi: 1}
			for i := range n {
				c.y[i], c.qd[i], c.q[i] = 1, 1, 0.25
				switch kind {
				case 0:
					c.st[i] = 1 // skipPos for y > 0 in WSSMax; eligible for the second pass
				case 1:
					c.g[i] = math.Inf(1) // v = −Inf
				default:
					c.g[i] = -0.5
				}
			}
			c.wm, c.wi = refWSSMax(c.y, c.g, c.st, c.sp, c.sn)
			c.gmax = 1
			c.w2, c.wod, c.wj = refWSSSecond(c.q, c.qd, c.y, c.g, c.st, c.sp, c.sn, c.gmax, c.qdi, c.yi, 1e-12)
			cases = append(cases, c)
		}
	}
	for n := range 101 {
		for trial := range 16 {
			c := tcase{q: make([]float32, n), qd: make([]float64, n), y: make([]float64, n), g: make([]float64, n), st: make([]int8, n),
				sp: int8(r.IntN(3)), sn: int8(r.IntN(3)), qdi: 1, yi: float64(1 - 2*r.IntN(2))}
			for i := range n {
				c.y[i] = float64(1 - 2*r.IntN(2))
				c.st[i] = int8(r.IntN(3))
				c.qd[i] = 1
				c.q[i] = float32(r.NormFloat64() * 0.6)
				if trial%2 == 0 {
					c.g[i] = pool[r.IntN(len(pool))] // ties
				} else {
					c.g[i] = r.NormFloat64()
				}
				if trial >= 8 && r.IntN(5) == 0 {
					switch r.IntN(4) {
					case 0:
						c.g[i] = edges[r.IntN(len(edges))]
					case 1:
						c.y[i] = []float64{0, math.NaN(), 0.5, math.Copysign(0, -1)}[r.IntN(4)]
					case 2:
						c.q[i] = float32(2 * c.yi * c.y[i]) // quad 0: tau
					default:
						c.qd[i] = []float64{0, -1, 1e-300, math.Inf(1)}[r.IntN(4)]
					}
				}
			}
			c.wm, c.wi = refWSSMax(c.y, c.g, c.st, c.sp, c.sn)
			c.gmax = c.wm
			if trial%4 == 3 {
				c.gmax = r.NormFloat64()
			}
			c.w2, c.wod, c.wj = refWSSSecond(c.q, c.qd, c.y, c.g, c.st, c.sp, c.sn, c.gmax, c.qdi, c.yi, 1e-12)
			cases = append(cases, c)
		}
	}
	forLevels(t, func(t *testing.T) {
		for k, c := range cases {
			m, i := WSSMax(c.y, c.g, c.st, c.sp, c.sn)
			if !same(m, c.wm) || i != c.wi {
				t.Fatalf("case %d (n %d): WSSMax = %v at %d, want %v at %d", k, len(c.y), m, i, c.wm, c.wi)
			}
			m2, od, j := WSSSecond(c.q, c.qd, c.y, c.g, c.st, c.sp, c.sn, c.gmax, c.qdi, c.yi, 1e-12)
			if m2 != c.w2 && !(math.IsNaN(m2) && math.IsNaN(c.w2)) || !same(od, c.wod) || j != c.wj {
				t.Fatalf("case %d (n %d): WSSSecond = %v, %v at %d, want %v, %v at %d", k, len(c.y), m2, od, j, c.w2, c.wod, c.wj)
			}
		}
	})
}

// BenchmarkWSS: both passes over 5 000 active indices (an svm solver's
// iteration on 10 000 letter rows, half shrunk), against the scalar
// loops. Target: ≤ 0.5 ns an index for the pair, 0 allocs.
func BenchmarkWSS(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const n = 5000
	q, qd, y, g, st := make([]float32, n), make([]float64, n), make([]float64, n), make([]float64, n), make([]int8, n)
	for i := range n {
		y[i] = float64(1 - 2*r.IntN(2))
		st[i] = int8(r.IntN(3))
		qd[i] = 1
		q[i] = float32(r.Float64())
		g[i] = r.NormFloat64()
	}
	run := func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			gm, i := WSSMax(y, g, st, 1, 0)
			_, _, j := WSSSecond(q, qd, y, g, st, 0, 1, gm, qd[i], y[i], 1e-12)
			wssSink += j
		}
	}
	b.Run("kernels", run)
	b.Run("avx2", func(b *testing.B) { atLevel(levelAVX2, func() { run(b) }) })
	b.Run("loops", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			gm, i := refWSSMax(y, g, st, 1, 0)
			_, _, j := refWSSSecond(q, qd, y, g, st, 0, 1, gm, qd[i], y[i], 1e-12)
			wssSink += j
		}
	})
}

var wssSink int

// TestAddPair32Levels checks AddPair32 and AddScaled32 against their
// definitions (each product and the sum rounded) at every level, bit for
// bit, at every length to 40, with edges (±0, ±Inf, NaN, huge products).
func TestAddPair32Levels(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 14))
	edges := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.NaN()), 3e38, -1e-40}
	for n := range 41 {
		for trial := range 8 {
			a, b, g := make([]float32, n+1), make([]float32, n+1), make([]float64, n)
			for k := range n {
				a[k], b[k], g[k] = float32(r.NormFloat64()), float32(r.NormFloat64()), r.NormFloat64()*1e3
				if trial >= 4 && r.IntN(4) == 0 {
					a[k] = edges[r.IntN(len(edges))]
				}
			}
			s, u := r.NormFloat64(), r.NormFloat64()*1e300
			want2, want1 := clone(g), clone(g)
			for k := range n {
				p1 := float64(float64(a[k]) * s)
				p2 := float64(float64(b[k]) * u)
				want2[k] = g[k] + (p1 + p2)
				want1[k] = g[k] + float64(s*float64(a[k]))
			}
			forLevels(t, func(t *testing.T) {
				got2, got1 := clone(g), clone(g)
				AddPair32(got2, a, b, s, u)
				AddScaled32(got1, a, s)
				for k := range n {
					if !same(got2[k], want2[k]) || !same(got1[k], want1[k]) {
						t.Fatalf("n %d, k %d: AddPair32 %v want %v; AddScaled32 %v want %v", n, k, got2[k], want2[k], got1[k], want1[k])
					}
				}
			})
		}
	}
}
