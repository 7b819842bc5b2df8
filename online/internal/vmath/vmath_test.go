package vmath

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// forLevels runs f with every implementation of the kernels this machine
// has: AVX-512, AVX2 and the portable Go code, as far as available.
func forLevels(t *testing.T, f func(t *testing.T)) {
	t.Helper()
	saved := level
	defer func() { level = saved }()
	for l := saved; l >= levelGo; l-- {
		level = l
		t.Run([...]string{"go", "avx2", "avx512"}[l], f)
	}
}

// forMulVecKernels is forLevels, and at AVX-512 f runs again with the
// other projection kernel than the machine selected (gemv16 where
// wideGemv, gemv32 where not).
func forMulVecKernels(t *testing.T, f func(t *testing.T)) {
	forLevels(t, func(t *testing.T) {
		f(t)
		if level != levelAVX512 {
			return
		}
		saved := wideGemv
		defer func() { wideGemv = saved }()
		wideGemv = !saved
		t.Run(map[bool]string{true: "gemv32", false: "gemv16"}[wideGemv], f)
	})
}

// atLevel calls f with the kernels of level l (at most the machine's),
// restoring the switch.
func atLevel(l int, f func()) {
	saved := level
	defer func() { level = saved }()
	level = min(l, saved)
	f()
}

func same(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

// refMulVec is MulVec's definition, row by row on the row-major matrix a
// (rounded to float32).
func refMulVec(a []float64, rows, cols int, x []float64) []float64 {
	z := make([]float64, rows)
	for i := range rows {
		row := a[i*cols : (i+1)*cols]
		var e, o float64
		for j, v := range row {
			v = float64(float32(v))
			if j%2 == 0 {
				e = math.FMA(v, x[j], e)
			} else {
				o = math.FMA(v, x[j], o)
			}
		}
		z[i] = e + o
	}
	return z
}

func randMatrix(r *rand.Rand, rows, cols int) (a, x []float64) {
	a = make([]float64, rows*cols)
	for i := range a {
		a[i] = r.NormFloat64() * math.Exp(3*r.NormFloat64())
	}
	x = make([]float64, cols)
	for i := range x {
		x[i] = r.NormFloat64() * math.Exp(3*r.NormFloat64())
	}
	return a, x
}

// mulVecShapes are the shapes the tests cover: every panel split and both
// parities of rows and columns.
var mulVecShapes = func() (s [][2]int) {
	for _, rows := range []int{1, 2, 3, 4, 5, 7, 8, 15, 16, 17, 19, 20, 21, 31, 32, 35, 36, 37, 64, 255, 256, 257} {
		for _, cols := range []int{1, 2, 3, 4, 5, 6, 7, 8, 31, 32, 33} {
			s = append(s, [2]int{rows, cols})
		}
	}
	return s
}()

func TestMulVec(t *testing.T) {
	forMulVecKernels(t, func(t *testing.T) {
		r := rand.New(rand.NewPCG(1, 2))
		for _, sh := range mulVecShapes {
			rows, cols := sh[0], sh[1]
			a, x := randMatrix(r, rows, cols)
			m := Pack(a, rows, cols)
			if m.Rows() != rows || m.Cols() != cols {
				t.Fatalf("%d×%d: Pack gives %d×%d", rows, cols, m.Rows(), m.Cols())
			}
			z := make([]float64, rows)
			m.MulVec(z, x)
			want := refMulVec(a, rows, cols, x)
			for i := range z {
				if !same(z[i], want[i]) {
					t.Fatalf("%d×%d: z[%d] = %v, want %v", rows, cols, i, z[i], want[i])
				}
			}
		}
	})
}

// TestMulVecSpecial: zeros give +0, non-finite entries propagate as in the
// definition.
func TestMulVecSpecial(t *testing.T) {
	forMulVecKernels(t, func(t *testing.T) {
		for _, sh := range [][2]int{{16, 3}, {4, 2}, {3, 5}, {21, 4}} {
			rows, cols := sh[0], sh[1]
			for _, v := range []float64{0, math.Copysign(0, -1), math.Inf(1), math.NaN(), math.MaxFloat64} {
				a := make([]float64, rows*cols)
				x := make([]float64, cols)
				for i := range a {
					a[i] = -1
					if i%3 == 0 {
						a[i] = v
					}
				}
				for i := range x {
					x[i] = math.Copysign(0, -1)
					if i%2 == 1 {
						x[i] = v
					}
				}
				m := Pack(a, rows, cols)
				z := make([]float64, rows)
				m.MulVec(z, x)
				want := refMulVec(a, rows, cols, x)
				for i := range z {
					if !same(z[i], want[i]) && !(math.IsNaN(z[i]) && math.IsNaN(want[i])) {
						t.Fatalf("%d×%d, %v: z[%d] = %v, want %v", rows, cols, v, i, z[i], want[i])
					}
				}
			}
		}
	})
}

func TestMulVecPanics(t *testing.T) {
	m := Pack(make([]float64, 6), 2, 3)
	for _, tc := range []struct{ z, x int }{{2, 2}, {1, 3}, {3, 3}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("len(z) %d, len(x) %d: no panic", tc.z, tc.x)
				}
			}()
			m.MulVec(make([]float64, tc.z), make([]float64, tc.x))
		}()
	}
	var empty Matrix
	empty.MulVec(nil, nil)
	zc := Pack(nil, 3, 0)
	z := []float64{1, 2, 3}
	zc.MulVec(z, nil)
	if z[0] != 0 || z[1] != 0 || z[2] != 0 {
		t.Errorf("0 columns: z = %v, want 0", z)
	}
}

// sincosArgs returns random and edge arguments: the ranges of the map's
// products, multiples of π/4, of the table step and of 2π up to the fast
// path's limit, the limit itself and its neighbours, zeros, subnormals and
// the extremes.
func sincosArgs() []float64 {
	r := rand.New(rand.NewPCG(8, 9))
	var args []float64
	for _, lim := range []float64{1e-300, 1e-8, 1e-2, 1, math.Pi, 10, 100, 1e3, 1e5, SincosFastLimit, 1e9, 1e300} {
		for range 20000 {
			args = append(args, (2*r.Float64()-1)*lim)
		}
	}
	// Near multiples of π/4 and of the table step 2π/SincosN, where the
	// reduction rounds either way.
	for k := -2000; k <= 2000; k++ {
		for _, e := range []float64{0, 1e-12, -1e-12, 1e-6} {
			args = append(args, float64(k)*math.Pi/4+e, float64(k)*math.Pi/SincosN+e,
				float64(k)*math.Pi/SincosN*1000+e)
		}
	}
	// Multiples of 2π up to the limit, and their neighbours.
	for k := 1.0; k*2*math.Pi < SincosFastLimit; k *= 1.5 {
		v := math.Round(k) * 2 * math.Pi
		args = append(args, v, -v, math.Nextafter(v, 0), math.Nextafter(v, math.Inf(1)))
	}
	lim := float64(SincosFastLimit)
	args = append(args, 0, math.Copysign(0, -1), math.Pi, -math.Pi, math.Pi/2, -math.Pi/2,
		lim, -lim, math.Nextafter(lim, 0), -math.Nextafter(lim, 0),
		math.Nextafter(lim, math.Inf(1)), 2*lim, math.MaxFloat64, -math.MaxFloat64,
		math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64, 0x1p-1022, 0x1p-1030)
	return args
}

// TestSincosAccuracy: against math.Sincos, |Δ| ≤ 5e-16 on random and edge
// arguments and cos² + sin² = 1 to 1e-15, for Sincos and SincosRFF.
func TestSincosAccuracy(t *testing.T) {
	args := sincosArgs()
	forLevels(t, func(t *testing.T) {
		p := make([]float64, 2*len(args))
		copy(p[len(args):], args)
		sq := SincosRFF(p, 1)
		if math.Abs(sq-float64(len(args))) > 1e-12*float64(len(args)) {
			t.Errorf("Σ cos² + sin² = %v, want %d", sq, len(args))
		}
		var worst, worstArg float64
		for k, x := range args {
			s, c := math.Sincos(x)
			gc, gs := p[k], p[len(args)+k]
			if ss, cc := Sincos(x); !same(ss, gs) || !same(cc, gc) {
				t.Fatalf("x = %v: SincosRFF gives (%v, %v), Sincos (%v, %v)", x, gs, gc, ss, cc)
			}
			if math.IsNaN(gc) || math.IsNaN(gs) {
				t.Fatalf("x = %v: NaN", x)
			}
			if d := max(math.Abs(gc-c), math.Abs(gs-s)); d > worst {
				worst, worstArg = d, x
			}
			if d := math.Abs(gc*gc + gs*gs - 1); d > 1e-15 {
				t.Fatalf("x = %v: cos² + sin² − 1 = %v", x, d)
			}
			if x == 0 && (gs != 0 || gc != 1) {
				t.Errorf("sincos(%v) = (%v, %v)", x, gs, gc)
			}
		}
		if worst > 5e-16 {
			t.Errorf("max |SincosRFF − math.Sincos| = %v at %v > 5e-16", worst, worstArg)
		}
		t.Logf("%d arguments: max |SincosRFF − math.Sincos| = %.3g (at %v)", len(args), worst, worstArg)
	})
}

// TestSinPolynomial: the table path's sin r = r + r³·(s₃ + s₅r² + s₇r⁴)
// and cos r − 1 = r²·(c₂ + … + c₈r⁶), evaluated as sincosScaled does, are
// within 4e-17 of sin r and cos r − 1 (a 200-bit series) on the reduced
// range |r| ≤ π/32 (and a little beyond).
func TestSinPolynomial(t *testing.T) {
	series := func(r float64, sin bool) float64 {
		const prec = 200
		x := new(big.Float).SetPrec(prec).SetFloat64(r)
		x2 := new(big.Float).SetPrec(prec).Mul(x, x)
		term := new(big.Float).SetPrec(prec).SetFloat64(1)
		k := 0
		if sin {
			term.Set(x)
			k = 1
		}
		sum := new(big.Float).SetPrec(prec)
		for range 40 {
			sum.Add(sum, term)
			term.Mul(term, x2)
			term.Neg(term)
			term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(int64((k+1)*(k+2))))
			k += 2
		}
		if !sin {
			sum.Sub(sum, big.NewFloat(1))
		}
		v, _ := sum.Float64()
		return v
	}
	var worstS, worstC float64
	const h = math.Pi / 32 * (1 + 1e-9)
	for i := -3000; i <= 3000; i++ {
		r := h * float64(i) / 3000
		u := float64(r * r)
		ps := math.FMA(u, sinC7, sinC5)
		ps = math.FMA(u, ps, sinC3)
		sr := math.FMA(float64(u*r), ps, r)
		pc := math.FMA(u, cosC8, cosC6)
		pc = math.FMA(u, pc, cosC4)
		pc = math.FMA(u, pc, cosC2)
		cm := float64(u * pc)
		worstS = max(worstS, math.Abs(sr-series(r, true)))
		worstC = max(worstC, math.Abs(cm-series(r, false)))
	}
	if worstS > 4e-17 || worstC > 4e-17 {
		t.Errorf("max error on |r| ≤ π/32: sin %.3g, cos − 1 %.3g (want ≤ 4e-17)", worstS, worstC)
	}
	t.Logf("max error on |r| ≤ π/32: sin %.3g, cos − 1 %.3g", worstS, worstC)
}

// TestSincosNonFinite: NaN and ±Inf give NaN features and a NaN sum, in
// every lane of a block and in the tail.
func TestSincosNonFinite(t *testing.T) {
	forLevels(t, func(t *testing.T) {
		for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			for _, d := range []int{1, 3, 4, 5, 8, 11} {
				for at := range d {
					p := make([]float64, 2*d)
					for k := range d {
						p[d+k] = float64(k) + 0.5
					}
					p[d+at] = bad
					if sq := SincosRFF(p, 1); !math.IsNaN(sq) {
						t.Errorf("D = %d, %v at %d: Σ² = %v, want NaN", d, bad, at, sq)
					}
					for k := range d {
						if k != at && (math.IsNaN(p[k]) || math.IsNaN(p[d+k])) {
							t.Errorf("D = %d, %v at %d: feature %d is NaN", d, bad, at, k)
						}
					}
				}
			}
		}
	})
}

// refSincosRFF is SincosRFF's definition element by element.
func refSincosRFF(p []float64, a float64) float64 {
	d := len(p) / 2
	sq := float64(d) * float64(a*a)
	for k := range d {
		x := p[d+k]
		if math.IsNaN(x) || math.IsInf(x, 0) {
			sq = math.NaN()
		}
		p[d+k], p[k] = sincosScaled(x, a)
	}
	return sq
}

// TestSincosRFFBits: the kernels equal the definition bit for bit, with
// slow arguments (beyond the limit) at every position of a block, and
// every length.
func TestSincosRFFBits(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	forLevels(t, func(t *testing.T) {
		for d := 0; d <= 41; d++ {
			for _, slow := range []int{-1, 0, 1, 2, 3, 4, 5, 7, 8, 9, 12, d / 2, d - 1} {
				z := make([]float64, d)
				for k := range z {
					z[k] = 30 * r.NormFloat64()
				}
				if slow >= 0 && slow < d {
					z[slow] = 1e6 * (1 + r.Float64())
				}
				a := 1 / math.Sqrt(float64(d)+1)
				p, q := make([]float64, 2*d), make([]float64, 2*d)
				copy(p[d:], z)
				copy(q[d:], z)
				got, want := SincosRFF(p, a), refSincosRFF(q, a)
				if !same(got, want) {
					t.Fatalf("D = %d, slow %d: Σ² = %v, want %v", d, slow, got, want)
				}
				for i := range p {
					if !same(p[i], q[i]) {
						t.Fatalf("D = %d, slow %d: p[%d] = %v, want %v", d, slow, i, p[i], q[i])
					}
				}
				// SincosScaledRFF: the arguments s·z from another slice.
				const sc = 0.37
				for k, v := range z {
					q[d+k] = sc * v
				}
				want = refSincosRFF(q, a)
				got = SincosScaledRFF(p, z, sc, a)
				if !same(got, want) {
					t.Fatalf("D = %d, slow %d, scaled: Σ² = %v, want %v", d, slow, got, want)
				}
				for i := range p {
					if !same(p[i], q[i]) {
						t.Fatalf("D = %d, slow %d, scaled: p[%d] = %v, want %v", d, slow, i, p[i], q[i])
					}
				}
			}
		}
	})
}

func randVec(r *rand.Rand, n int, scale float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = scale * r.NormFloat64()
	}
	return v
}

func clone(v []float64) []float64 { return append([]float64(nil), v...) }

// naiveSum8 is the sum of the terms in lane order (the definition's sums).
func naiveSum8(terms func(i int) (a, b float64), n int) float64 {
	var l [8]float64
	for i := range n {
		a, b := terms(i)
		l[i%8] = math.FMA(a, b, l[i%8])
	}
	return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
}

// TestPassesLevels: every implementation of Dot, PlainFused and
// BalancedFused gives the bits of the Go code (state included), for every
// length (the kernels take blocks of eight and finish in Go); the Go code
// gives its definition (TwoSum updates, the sums of the updated state);
// the balanced pass gives the negated sums when the other class is
// updated, and the decaying passes with λ = 1 equal the plain ones.
func TestPassesLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 4))
	for _, n := range []int{0, 1, 3, 4, 5, 7, 8, 9, 13, 16, 17, 64, 511, 512, 513} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			a, b := randVec(r, n, 1), randVec(r, n, 1)
			want := naiveSum8(func(i int) (float64, float64) { return a[i], b[i] }, n)
			forLevels(t, func(t *testing.T) {
				if got := Dot(a, b); !same(got, want) {
					t.Errorf("Dot = %v, want %v", got, want)
				}
			})

			for _, y := range []float64{1, -1} {
				s, c, x, w := randVec(r, n, 100), randVec(r, n, 1e-14), randVec(r, n, 0.1), randVec(r, n, 0.3)
				// The definition.
				s0, c0, w0 := clone(s), clone(c), clone(w)
				f0 := naiveSum8(func(i int) (float64, float64) { return w[i], x[i] }, n)
				for i := range s0 {
					v := y * x[i]
					t2 := s0[i] + v
					bp := t2 - s0[i]
					c0[i] += (s0[i] - (t2 - bp)) + (v - bp)
					s0[i] = t2
					w0[i] = s0[i] + c0[i]
				}
				ww0 := naiveSum8(func(i int) (float64, float64) { return w0[i], w0[i] }, n)
				forLevels(t, func(t *testing.T) {
					s1, c1, w1 := clone(s), clone(c), clone(w)
					f, ww := PlainFused(w1, s1, c1, x, y)
					if !same(f, f0) || !same(ww, ww0) {
						t.Errorf("PlainFused y %v: (%v, %v), want (%v, %v)", y, f, ww, f0, ww0)
					}
					eqVec(t, "PlainFused w", w1, w0)
					eqVec(t, "PlainFused s", s1, s0)
					eqVec(t, "PlainFused c", c1, c0)
				})
				s2, c2, w2 := clone(s), clone(c), clone(w)
				if ww := PlainDecay(w2, s2, c2, x, y, 1); !same(ww, ww0) {
					t.Errorf("PlainDecay λ = 1: ‖w‖² = %v, want %v", ww, ww0)
				}
				eqVec(t, "PlainDecay w", w2, w0)
				eqVec(t, "PlainDecay s", s2, s0)
				eqVec(t, "PlainDecay c", c2, c0)
			}

			tt, tc, o, oc := randVec(r, n, 100), randVec(r, n, 1e-14), randVec(r, n, 80), randVec(r, n, 1e-14)
			x, w := randVec(r, n, 0.1), randVec(r, n, 0.3)
			const it, io = 1.0 / 300, 1.0 / 700
			t0, tc0, w0 := clone(tt), clone(tc), clone(w)
			f0 := naiveSum8(func(i int) (float64, float64) { return w[i], x[i] }, n)
			av, bv := make([]float64, n), make([]float64, n)
			for i := range t0 {
				s := t0[i] + x[i]
				bp := s - t0[i]
				tc0[i] += (t0[i] - (s - bp)) + (x[i] - bp)
				t0[i] = s
				av[i], bv[i] = (t0[i]+tc0[i])*it, (o[i]+oc[i])*io
				w0[i] = av[i] - bv[i]
			}
			ww0 := naiveSum8(func(i int) (float64, float64) { return w0[i], w0[i] }, n)
			pt0 := naiveSum8(func(i int) (float64, float64) { return w0[i], av[i] }, n)
			po0 := naiveSum8(func(i int) (float64, float64) { return w0[i], bv[i] }, n)
			forLevels(t, func(t *testing.T) {
				t1, tc1, w1 := clone(tt), clone(tc), clone(w)
				f, ww, pt, po := BalancedFused(w1, t1, tc1, o, oc, x, it, io)
				if !same(f, f0) || !same(ww, ww0) || !same(pt, pt0) || !same(po, po0) {
					t.Errorf("BalancedFused: (%v, %v, %v, %v), want (%v, %v, %v, %v)", f, ww, pt, po, f0, ww0, pt0, po0)
				}
				eqVec(t, "BalancedFused w", w1, w0)
				eqVec(t, "BalancedFused t", t1, t0)
				eqVec(t, "BalancedFused tc", tc1, tc0)
				// The same state seen from the other class (sgn −1): the
				// other class's sums are passed as t, the inverses negated.
				wn := make([]float64, n)
				zero := make([]float64, n)
				o2, oc2 := clone(o), clone(oc)
				_, ww2, pt2, po2 := BalancedFused(wn, o2, oc2, t1, tc1, zero, -io, -it)
				if neg := func(a, b float64) bool { return same(a, -b) || a == 0 && b == 0 }; !same(ww2, ww) || !neg(pt2, po) || !neg(po2, pt) {
					t.Errorf("other class: (%v, %v, %v), want (%v, %v, %v)", ww2, pt2, po2, ww, -po, -pt)
				}
				eqVec(t, "other class w", wn, w1)
			})
			t3, tc3, o3, oc3, w3 := clone(tt), clone(tc), clone(o), clone(oc), clone(w)
			ww, pt, po := BalancedDecay(w3, t3, tc3, o3, oc3, x, it, io, 1)
			if !same(ww, ww0) || !same(pt, pt0) || !same(po, po0) {
				t.Errorf("BalancedDecay λ = 1: (%v, %v, %v), want (%v, %v, %v)", ww, pt, po, ww0, pt0, po0)
			}
			eqVec(t, "BalancedDecay w", w3, w0)
			eqVec(t, "BalancedDecay t", t3, t0)
			eqVec(t, "BalancedDecay o", o3, o)
		})
	}
}

func eqVec(t *testing.T, what string, a, b []float64) {
	t.Helper()
	for i := range a {
		if !same(a[i], b[i]) {
			t.Fatalf("%s[%d]: asm %v, go %v", what, i, a[i], b[i])
		}
	}
}

// BenchmarkMulVec256x32: the rbf map's projection for D = 256, d = 32.
// Target (conversion-bound): ≤ 300 ns with gemv32 (AVX-512, Zen 5; 400 ns
// there with gemv16), ≤ 450 ns under AVX2 on Zen 4, 0 allocs.
func BenchmarkMulVec256x32(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	a, x := randMatrix(r, 256, 32)
	m := Pack(a, 256, 32)
	z := make([]float64, 256)
	b.ReportAllocs()
	for b.Loop() {
		m.MulVec(z, x)
	}
}

// BenchmarkSincosRFF256: the map's sin/cos of 256 arguments. Target:
// ≤ 300 ns under AVX-512, 0 allocs.
func BenchmarkSincosRFF256(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	z := randVec(r, 256, 20)
	p := make([]float64, 512)
	b.ReportAllocs()
	for b.Loop() {
		copy(p[256:], z)
		SincosRFF(p, 1)
	}
}

// BenchmarkBalancedFused512: one labelled event's pass of the balanced
// MAM over dim φ = 512 (score, update, direction and its sums). Target:
// ≤ 250 ns under AVX-512, 0 allocs.
func BenchmarkBalancedFused512(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	tt, tc, o, oc, x := randVec(r, 512, 100), randVec(r, 512, 1e-14), randVec(r, 512, 80), randVec(r, 512, 1e-14), randVec(r, 512, 0.01)
	w := make([]float64, 512)
	b.ReportAllocs()
	for b.Loop() {
		BalancedFused(w, tt, tc, o, oc, x, 1.0/300, 1.0/700)
	}
}

// BenchmarkPlainFused512: BenchmarkBalancedFused512 for the plain MAM.
func BenchmarkPlainFused512(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	s, c, x := randVec(r, 512, 100), randVec(r, 512, 1e-14), randVec(r, 512, 0.01)
	w := make([]float64, 512)
	b.ReportAllocs()
	for b.Loop() {
		PlainFused(w, s, c, x, 1)
	}
}

// BenchmarkDot512: an unlabelled event's score over dim φ = 512 (eight
// chains of FMAs: bound by their latency).
func BenchmarkDot512(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	x, y := randVec(r, 512, 1), randVec(r, 512, 1)
	var s float64
	b.ReportAllocs()
	for b.Loop() {
		s += Dot(x, y)
	}
	_ = s
}
