package vmath

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// ulps is |a − b| in units in the last place of b.
func ulps(a, b float64) float64 {
	if a == b {
		return 0
	}
	return math.Abs(a-b) / (math.Nextafter(math.Abs(b), math.Inf(1)) - math.Abs(b))
}

// bigExp is e^x to well beyond float64 (300-bit Taylor series of x/1024,
// squared ten times), rounded to float64.
func bigExp(x float64) float64 {
	const prec = 300
	z := new(big.Float).SetPrec(prec).SetFloat64(x / 1024)
	sum, term := new(big.Float).SetPrec(prec).SetInt64(1), new(big.Float).SetPrec(prec).SetInt64(1)
	for k := 1; k < 40; k++ {
		term.Mul(term, z)
		term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(int64(k)))
		sum.Add(sum, term)
	}
	for range 10 {
		sum.Mul(sum, sum)
	}
	f, _ := sum.Float64()
	return f
}

// TestExpNegAccuracy: ExpNeg within 1 ulp of e^v computed in 300-bit
// arithmetic on 4 000 arguments over [−707, 707] and within 2 ulps of
// math.Exp (itself up to about 1 ulp off) on 1.2 million, the rbf sums'
// arguments −γ‖x − x'‖² most densely; 0 below −707 and for NaN, math.Exp
// above 707; the table T_j = hi_j + lo_j equal to 2^(j/16) to 2⁻¹⁰⁰.
func TestExpNegAccuracy(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	args := func(n int) []float64 {
		v := make([]float64, n)
		for i := range v {
			if i%6 == 5 {
				v[i] = (2*r.Float64() - 1) * expLimit
			} else {
				v[i] = -r.ExpFloat64() * []float64{0.01, 1, 30, 300}[r.IntN(4)]
			}
		}
		return v
	}
	var worstExact, worstMath float64
	for _, x := range args(4000) {
		if x < -expLimit {
			continue
		}
		if u := ulps(ExpNeg(x), bigExp(x)); !(u <= 1) {
			t.Fatalf("ExpNeg(%v) = %v, e^x %v (%v ulps)", x, ExpNeg(x), bigExp(x), u)
		} else {
			worstExact = max(worstExact, u)
		}
	}
	same, n := 0, 0
	for _, x := range append(args(1_200_000), 0, math.Copysign(0, -1), 1e-300, -1e-300, -5e-324, math.Ln2, -math.Ln2, math.Ln2/32, -math.Ln2/32,
		expLimit, -expLimit, math.Nextafter(expLimit, 800), math.Nextafter(-expLimit, -800), 709.78, -745.2, -800,
		math.Inf(1), math.Inf(-1), math.NaN(), math.MaxFloat64, -math.MaxFloat64) {
		got, want := ExpNeg(x), math.Exp(x)
		if !(x >= -expLimit) {
			want = 0
		}
		if u := ulps(got, want); !(u <= 2) {
			t.Fatalf("ExpNeg(%v) = %v, math.Exp %v (%v ulps)", x, got, want, u)
		} else {
			worstMath = max(worstMath, u)
		}
		if got == want {
			same++
		}
		n++
	}
	root := new(big.Float).SetPrec(256).SetInt64(2)
	for range 4 {
		root.Sqrt(root)
	}
	want := new(big.Float).SetPrec(256).SetInt64(1)
	for j := range expN {
		got := new(big.Float).SetPrec(256).SetFloat64(expHi[j])
		got.Add(got, new(big.Float).SetPrec(256).SetFloat64(expLo[j]))
		if diff, _ := new(big.Float).Sub(got, want).Float64(); math.Abs(diff) > 0x1p-100 {
			t.Fatalf("T_%d off by %v", j, diff)
		}
		want.Mul(want, root)
	}
	t.Logf("worst %.2f ulp from e^x (4 000 arguments); %d arguments: %.1f%% the same bits as math.Exp, the worst %.2f ulp apart",
		worstExact, n, 100*float64(same)/float64(n), worstMath)
}

// refRBFSum is RBFSum's definition on the row-major x (n × d) and alpha.
func refRBFSum(xs []float64, n, d int, alpha, x []float64, g float64) float64 {
	var acc [8]float64
	for i := range n {
		var d2 float64
		for j := range d {
			t := xs[i*d+j] - x[j]
			d2 = math.FMA(t, t, d2)
		}
		acc[i%8] = math.FMA(alpha[i], ExpNeg(float64(-g*d2)), acc[i%8])
	}
	return sum8(&acc)
}

// TestRBFSumLevels: RBFSum at every level of this machine equals its
// definition bit for bit, and Σ α_i·math.Exp(−g‖x_i − x‖²) to 1e-14 of
// Σ|α_i·e_i| (plus the dropped terms below 2⁻¹⁰²⁰), for row counts around
// the panel of 8, dimensions 1 to 40, widths that put many rows beyond
// the table (e^v < 2⁻¹⁰²⁰) and one row at the input itself (d2 = 0);
// the rows come back out of the packing.
func TestRBFSumLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 100, 2001} {
		for _, d := range []int{1, 3, 13, 40} {
			t.Run(fmt.Sprintf("n%d_d%d", n, d), func(t *testing.T) {
				xs, alpha := randVec(r, n*d, 1), randVec(r, n, 2)
				rows := PackRows(xs, n, d, alpha)
				if back := rows.AppendRows(nil); len(back) != n*d || (n > 0 && !same(back[n*d-1], xs[n*d-1])) {
					t.Fatalf("AppendRows: %d values", len(back))
				}
				x := randVec(r, d, 1)
				if n > 2 {
					copy(x, xs[2*d:3*d])
				}
				for _, g := range []float64{1e-3, 0.3, 5, 300} {
					want := refRBFSum(xs, n, d, alpha, x, g)
					var exact, mag float64
					for i := range n {
						d2 := 0.0
						for j := range d {
							d2 += (xs[i*d+j] - x[j]) * (xs[i*d+j] - x[j])
						}
						e := alpha[i] * math.Exp(-g*d2)
						exact += e
						mag += math.Abs(e)
					}
					if math.Abs(want-exact) > 1e-14*mag+1e-300 {
						t.Errorf("g %v: definition %v, Σ α·math.Exp %v", g, want, exact)
					}
					forLevels(t, func(t *testing.T) {
						if got := rows.RBFSum(x, g); !same(got, want) {
							t.Errorf("g %v: %v, want %v", g, got, want)
						}
					})
				}
			})
		}
	}
}

// BenchmarkRBFSum2000: the score of an exact rbf model over a window of
// 2 000 rows, d = 13 (RBFSum; its AVX2 code, as machines without
// AVX-512F run it; its Go code), against the loop of math.Exp it replaces.
// Target: ≤ 5 µs, 0 allocs (3.0–3.6 µs here; AVX2 6.5–6.7 µs, the Go code
// 35–43 µs, the loop of math.Exp 69–94 µs, 2026-11-27).
func BenchmarkRBFSum2000(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const n, d = 2000, 13
	xs, alpha, x := randVec(r, n*d, 1), randVec(r, n, 1), randVec(r, d, 1)
	rows := PackRows(xs, n, d, alpha)
	b.Run("RBFSum", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			expSink = rows.RBFSum(x, 0.05)
		}
	})
	b.Run("RBFSum-avx2", func(b *testing.B) { // as on a machine with AVX2 but not AVX-512F
		atLevel(levelAVX2, func() {
			for b.Loop() {
				expSink = rows.RBFSum(x, 0.05)
			}
		})
	})
	b.Run("RBFSum-go", func(b *testing.B) { // the Go code (-tags purego, or no AVX2)
		atLevel(levelGo, func() {
			for b.Loop() {
				expSink = rows.RBFSum(x, 0.05)
			}
		})
	})
	b.Run("math.Exp", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var s float64
			for i := range n {
				var d2 float64
				for j := range d {
					t := xs[i*d+j] - x[j]
					d2 += t * t
				}
				s += alpha[i] * math.Exp(-0.05*d2)
			}
			expSink = s
		}
	})
}

var expSink float64

// TestExpNegScaledLevels checks ExpNegScaled against ExpNeg element by
// element, bit for bit, at every level: random squared distances and
// scales, arguments around the table path's limits (±707), beyond them
// (ExpNeg's 0 and math.Exp), ±0, ±Inf and NaN, at every length to 40, in
// place and not.
func TestExpNegScaledLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 11))
	edges := []float64{0, math.Copysign(0, -1), -706.999, -707, math.Nextafter(-707, -1000), -708, -745, -800,
		706.9, 707, math.Nextafter(707, 1000), 708, 709.7, 710, 1e300, -1e300, math.Inf(1), math.Inf(-1), math.NaN(),
		-1e-320, 1e-320, -0.5, -1, -1e-3}
	type tcase struct {
		src, want []float64
		s         float64
	}
	var cases []tcase
	for n := range 41 {
		for trial := range 12 {
			c := tcase{src: make([]float64, n), want: make([]float64, n), s: -math.Exp(r.Float64()*14 - 7)} // −γ from 1e-3 to 1e3
			for i := range c.src {
				c.src[i] = math.Abs(r.NormFloat64()) * 3
				if trial >= 6 && r.IntN(3) == 0 {
					c.src[i], c.s = edges[r.IntN(len(edges))], 1
				}
			}
			for i, v := range c.src {
				c.want[i] = ExpNeg(float64(c.s * v))
			}
			cases = append(cases, c)
		}
	}
	forLevels(t, func(t *testing.T) {
		for _, c := range cases {
			dst := make([]float64, len(c.src))
			ExpNegScaled(dst, c.src, c.s)
			in := clone(c.src)
			ExpNegScaled(in, in, c.s)
			for i, w := range c.want {
				if !same(dst[i], w) || !same(in[i], w) {
					t.Fatalf("n %d, element %d: ExpNeg(%v·%v) = %v; ExpNegScaled %v, in place %v", len(c.src), i, c.s, c.src[i], w, dst[i], in[i])
				}
			}
		}
	})
}

// TestRBFRow32Levels checks RBFRow32 against its definition, element by
// element, bit for bit, at every level: the dot products and norms of
// random vectors with −γ from −1e-3 to −1e3 and labels ±1, then edges
// (distances rounding below 0, ±0 norms, huge, infinite and NaN entries,
// labels other than ±1), at every length to 40; shorter inputs panic.
func TestRBFRow32Levels(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 12))
	edges := []float64{0, math.Copysign(0, -1), 1e-300, 1e300, math.Inf(1), math.Inf(-1), math.NaN(), 0.5, -3, 1e-3}
	type tcase struct {
		dots, sqs, ys []float64
		sq, yi, s     float64
		want          []float32
	}
	var cases []tcase
	for n := range 41 {
		for trial := range 12 {
			const d = 5
			xi := make([]float64, d)
			for k := range xi {
				xi[k] = r.NormFloat64()
			}
			c := tcase{dots: make([]float64, n), sqs: make([]float64, n), ys: make([]float64, n), want: make([]float32, n),
				sq: Dot4(xi, xi), yi: float64(1 - 2*r.IntN(2)), s: -math.Exp(r.Float64()*14 - 7)}
			for j := range n {
				xj := clone(xi)
				if r.IntN(4) > 0 { // else x_j = x_i: a distance that rounds to about 0
					for k := range xj {
						xj[k] = r.NormFloat64() * 2
					}
				}
				c.dots[j], c.sqs[j], c.ys[j] = Dot4(xi, xj), Dot4(xj, xj), float64(1-2*r.IntN(2))
				if trial >= 6 && r.IntN(3) == 0 {
					e := edges[r.IntN(len(edges))]
					switch r.IntN(4) {
					case 0:
						c.dots[j] = e
					case 1:
						c.sqs[j] = e
					case 2:
						c.ys[j] = e
					default:
						c.sq = e
					}
				}
			}
			for j := range n {
				tj := max(c.sq+c.sqs[j]-2*c.dots[j], 0)
				c.want[j] = float32(c.yi * c.ys[j] * ExpNeg(c.s*tj))
			}
			cases = append(cases, c)
		}
	}
	forLevels(t, func(t *testing.T) {
		for _, c := range cases {
			dst := make([]float32, len(c.want))
			RBFRow32(dst, c.dots, c.sqs, c.ys, c.sq, c.yi, c.s)
			for j, w := range c.want {
				if math.Float32bits(dst[j]) != math.Float32bits(w) {
					t.Fatalf("n %d, element %d (dot %v, sqs %v, y %v; sq %v, yi %v, s %v): want %v, got %v",
						len(c.want), j, c.dots[j], c.sqs[j], c.ys[j], c.sq, c.yi, c.s, w, dst[j])
				}
			}
		}
		for k := range 3 {
			in := [][]float64{make([]float64, 9), make([]float64, 9), make([]float64, 9)}
			in[k] = in[k][:8]
			func() {
				defer func() {
					if recover() == nil {
						t.Errorf("input %d shorter than dst: no panic", k)
					}
				}()
				RBFRow32(make([]float32, 9), in[0], in[1], in[2], 0, 1, -1)
			}()
		}
	})
}

// BenchmarkRBFRow32: a kernel row of 2 000 entries from its dot
// products (the svm's kernel rows), against the loops it replaces (the
// distances, ExpNegScaled, the conversion). Target: ≤ 2 ns an entry, 0
// allocs.
func BenchmarkRBFRow32(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const n = 2000
	dots, sqs, ys, ex := make([]float64, n), make([]float64, n), make([]float64, n), make([]float64, n)
	for j := range n {
		sqs[j] = 16 + r.NormFloat64()
		dots[j] = r.NormFloat64() * 4
		ys[j] = float64(1 - 2*r.IntN(2))
	}
	dst := make([]float32, n)
	const sq, yi, s = 16.0, 1.0, -1.0 / 16
	b.Run("RBFRow32", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			RBFRow32(dst, dots, sqs, ys, sq, yi, s)
		}
	})
	b.Run("RBFRow32-avx2", func(b *testing.B) {
		atLevel(levelAVX2, func() {
			for b.Loop() {
				RBFRow32(dst, dots, sqs, ys, sq, yi, s)
			}
		})
	})
	b.Run("loops", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for j, d := range dots {
				ex[j] = max(sq+sqs[j]-2*d, 0)
			}
			ExpNegScaled(ex, ex, s)
			for j, e := range ex {
				dst[j] = float32(yi * ys[j] * e)
			}
		}
	})
}

// BenchmarkExpNegScaled2000: the exps of a row of 2 000 kernel entries (an
// svm's kernel row), against a loop of ExpNeg. Target: ≤ 2 ns an entry,
// 0 allocs (1.2 µs here; the AVX2 code 2.4 µs, the loop 11.4–12.7 µs,
// 2026-11-27).
func BenchmarkExpNegScaled2000(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	src := make([]float64, 2000)
	for i := range src {
		src[i] = math.Abs(r.NormFloat64()) * 10
	}
	dst := make([]float64, len(src))
	b.Run("ExpNegScaled", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ExpNegScaled(dst, src, -0.05)
		}
	})
	b.Run("ExpNegScaled-avx2", func(b *testing.B) {
		atLevel(levelAVX2, func() {
			for b.Loop() {
				ExpNegScaled(dst, src, -0.05)
			}
		})
	})
	b.Run("ExpNeg", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for i, v := range src {
				dst[i] = ExpNeg(-0.05 * v)
			}
		}
	})
}

// TestDotRowsLevels checks DotRows against its definition, bit for bit,
// at every level: dimensions 1 to 41 (every tail), rows longer than x,
// swapped rows sharing storage, large and tiny magnitudes.
func TestDotRowsLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 13))
	type tcase struct {
		x    []float64
		rows [][]float64
		want []float64
	}
	var cases []tcase
	for d := 1; d <= 41; d++ {
		for _, nrows := range []int{1, 2, 7, 33} {
			c := tcase{x: randVec(r, d, math.Exp(r.NormFloat64()*20))}
			for range nrows {
				c.rows = append(c.rows, randVec(r, d+r.IntN(3), math.Exp(r.NormFloat64()*20)))
			}
			c.rows[0], c.rows[nrows-1] = c.rows[nrows-1], c.rows[0]
			for _, row := range c.rows {
				var s [4]float64
				k := 0
				for ; k+4 <= d; k += 4 {
					for l := range 4 {
						s[l] += float64(c.x[k+l] * row[k+l])
					}
				}
				for ; k < d; k++ {
					s[0] += float64(c.x[k] * row[k])
				}
				c.want = append(c.want, (s[0]+s[1])+(s[2]+s[3]))
			}
			cases = append(cases, c)
		}
	}
	forLevels(t, func(t *testing.T) {
		for _, c := range cases {
			dst := make([]float64, len(c.rows)+1)
			dst[len(c.rows)] = 7
			DotRows(dst, c.x, c.rows)
			for j, w := range c.want {
				if !same(dst[j], w) {
					t.Fatalf("d %d, row %d: %v, want %v", len(c.x), j, dst[j], w)
				}
			}
			if dst[len(c.rows)] != 7 {
				t.Fatalf("d %d: wrote past the rows", len(c.x))
			}
		}
	})
	forLevels(t, func(t *testing.T) {
		for _, f := range []func(){
			func() { DotRows(make([]float64, 1), make([]float64, 3), [][]float64{make([]float64, 2)}) },
			func() {
				DotRows(make([]float64, 3), make([]float64, 5), [][]float64{make([]float64, 5), make([]float64, 4), make([]float64, 5)})
			},
			func() { DotRows(nil, make([]float64, 3), [][]float64{make([]float64, 3)}) },
		} {
			func() {
				defer func() {
					if recover() == nil {
						t.Error("no panic for a short row or dst")
					}
				}()
				f()
			}()
		}
	})
}

// BenchmarkDotRows2000: the dot products of a row of an svm's kernel
// matrix, 2 000 rows of d = 16 (letter), against the scalar loop it
// replaces. Target: ≤ 3 ns a row, 0 allocs.
func BenchmarkDotRows2000(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	rows := make([][]float64, 2000)
	for i := range rows {
		rows[i] = randVec(r, 16, 1)
	}
	x, dst := randVec(r, 16, 1), make([]float64, len(rows))
	b.Run("DotRows", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			DotRows(dst, x, rows)
		}
	})
	b.Run("DotRows-go", func(b *testing.B) {
		atLevel(levelGo, func() {
			for b.Loop() {
				DotRows(dst, x, rows)
			}
		})
	})
}

// TestSqDistsLevels checks Rows.SqDists against its definition, bit for
// bit, at every level, from every panel (padding rows included).
func TestSqDistsLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 17))
	for _, n := range []int{1, 7, 8, 9, 17, 100} {
		for _, d := range []int{1, 3, 13, 40} {
			xs := randVec(r, n*d, 1)
			rows := PackRows(xs, n, d, make([]float64, n))
			x := randVec(r, d, 1)
			np := (n + 7) / 8
			for p0 := 0; p0 <= np; p0++ {
				want := make([]float64, 8*(np-p0))
				for k := range want {
					i := 8*p0 + k
					var d2 float64
					for j := range d {
						v := 0.0 // a padding row is 0
						if i < n {
							v = xs[i*d+j]
						}
						t := v - x[j]
						d2 = math.FMA(t, t, d2)
					}
					want[k] = d2
				}
				forLevels(t, func(t *testing.T) {
					dst := make([]float64, len(want)+1)
					dst[len(want)] = 7
					if got := rows.SqDists(dst, x, p0); got != len(want) {
						t.Fatalf("n %d, d %d, p0 %d: %d distances, want %d", n, d, p0, got, len(want))
					}
					for k, w := range want {
						if !same(dst[k], w) {
							t.Fatalf("n %d, d %d, p0 %d, row %d: %v, want %v", n, d, p0, 8*p0+k, dst[k], w)
						}
					}
					if dst[len(want)] != 7 {
						t.Fatalf("n %d, d %d, p0 %d: wrote past the panels", n, d, p0)
					}
					// Every range [p0, p1): SqDistsRange's distances, and
					// Dots4's, are the rows' (padding rows: 0).
					for p1 := p0; p1 <= np; p1++ {
						part, dots := make([]float64, 8*(p1-p0)+1), make([]float64, 8*(p1-p0)+1)
						part[len(part)-1], dots[len(dots)-1] = 7, 7
						if got := rows.SqDistsRange(part, x, p0, p1); got != 8*(p1-p0) {
							t.Fatalf("n %d, d %d, [%d, %d): %d distances", n, d, p0, p1, got)
						}
						rows.Dots4(dots, x, p0, p1)
						for k := range 8 * (p1 - p0) {
							i := 8*p0 + k
							wd := 0.0
							if i < n {
								wd = Dot4(x, xs[i*d:(i+1)*d])
							}
							if !same(part[k], want[k]) || !same(dots[k], wd) {
								t.Fatalf("n %d, d %d, [%d, %d), row %d: %v and %v, want %v and %v", n, d, p0, p1, i, part[k], dots[k], want[k], wd)
							}
						}
						if part[len(part)-1] != 7 || dots[len(dots)-1] != 7 {
							t.Fatalf("n %d, d %d, [%d, %d): wrote past the range", n, d, p0, p1)
						}
					}
				})
			}
		}
	}
}

// TestPanelDots4Levels checks PanelDots4 against Dot4 row by row, bit for
// bit (any NaN for a NaN), at every level: 1 to 41 columns (every tail), 1 to 3 panels with
// the last partly padding, edges (±0, ±Inf, NaN, huge and tiny entries),
// and SwapPanelRows against swapping the rows before packing.
func TestPanelDots4Levels(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 15))
	forLevels(t, func(t *testing.T) {
		for d := 1; d <= 41; d++ {
			for _, n := range []int{1, 7, 8, 13, 24} {
				rows, x := panelCase(r, n, d, 2) // rows longer than d: only d entries count
				p := PackPanels(rows, d)
				i, j := r.IntN(n), r.IntN(n)
				SwapPanelRows(p, d, i, j)
				rows[i], rows[j] = rows[j], rows[i]
				dst := make([]float64, (n+7)/8*8)
				PanelDots4(dst, p, x)
				for k, row := range rows {
					if w := Dot4(x, row); !same(dst[k], w) && !(math.IsNaN(w) && math.IsNaN(dst[k])) { // NaN payloads: the operands' order
						t.Fatalf("d %d, n %d, row %d: %v, Dot4 %v", d, n, k, dst[k], w)
					}
				}
				for k := n; k < len(dst); k++ {
					if dst[k] != 0 {
						t.Fatalf("d %d, n %d: padding row %d: %v", d, n, k, dst[k])
					}
				}
			}
		}
	})
}

// panelCase returns n random rows of d + extra entries (one in twenty an
// edge: ±0, ±Inf, NaN, 1e300, −1e-300) and an x of d entries.
func panelCase(r *rand.Rand, n, d, extra int) ([][]float64, []float64) {
	edges := []float64{0, math.Copysign(0, -1), math.Inf(1), math.Inf(-1), math.NaN(), 1e300, -1e-300}
	rows := make([][]float64, n)
	for i := range rows {
		rows[i] = make([]float64, d+extra)
		for k := range rows[i] {
			rows[i][k] = r.NormFloat64()
			if r.IntN(20) == 0 {
				rows[i][k] = edges[r.IntN(len(edges))]
			}
		}
	}
	x := make([]float64, d)
	for k := range x {
		x[k] = r.NormFloat64() * 3
	}
	return rows, x
}

// BenchmarkPanelDots2000: the dot products of 2 000 packed rows of d = 16
// (an svm kernel row of the letter data), against DotRows on the same rows
// (per row, four lanes). Target: ≤ 1.5 ns a row, 0 allocs: 2.5 µs, at
// the L2 cache's bandwidth (1 KB a panel), against 7.1 µs for DotRows
// (AVX2 panels 2.75 µs; 2026-11-27).
func BenchmarkPanelDots2000(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	const n, d = 2000, 16
	rows := make([][]float64, n)
	for i := range rows {
		rows[i] = randVec(r, d, 1)
	}
	x := randVec(r, d, 1)
	p := PackPanels(rows, d)
	dst := make([]float64, n)
	b.Run("PanelDots4", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			PanelDots4(dst, p, x)
		}
	})
	b.Run("PanelDots4-avx2", func(b *testing.B) {
		atLevel(levelAVX2, func() {
			for b.Loop() {
				PanelDots4(dst, p, x)
			}
		})
	})
	b.Run("DotRows", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			DotRows(dst, x, rows)
		}
	})
}

// TestPanelDotsSeqLevels checks PanelDotsSeq against the plain loop
// Σ_k (row_k·x_k) row by row, bit for bit (any NaN for a NaN), at every
// level: 1 to 41 columns, 1 to 3 panels, edges as TestPanelDots4Levels.
func TestPanelDotsSeqLevels(t *testing.T) {
	r := rand.New(rand.NewPCG(18, 18))
	forLevels(t, func(t *testing.T) {
		for d := 1; d <= 41; d++ {
			for _, n := range []int{1, 7, 8, 13, 24} {
				rows, x := panelCase(r, n, d, 0)
				dst := make([]float64, (n+7)/8*8)
				PanelDotsSeq(dst, PackPanels(rows, d), x)
				for i, row := range rows {
					var w float64
					for k, v := range row {
						w += float64(v * x[k])
					}
					if !same(dst[i], w) && !(math.IsNaN(w) && math.IsNaN(dst[i])) {
						t.Fatalf("d %d, n %d, row %d: %v, the loop %v", d, n, i, dst[i], w)
					}
				}
			}
		}
	})
}
