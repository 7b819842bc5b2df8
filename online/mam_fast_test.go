package online

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"
)

func sameBits(a, b float64) bool { return math.Float64bits(a) == math.Float64bits(b) }

func randFloats(r *rand.Rand, n int, scale float64) []float64 {
	v := make([]float64, n)
	for i := range v {
		v[i] = scale * r.NormFloat64()
	}
	return v
}

// TestPassesFastBits: the vectorised MAM passes (mam_fast.go) equal dot,
// plainPass and balancedPass to the bit, including the state they update,
// for every length (the kernels take blocks of four and finish in Go).
func TestPassesFastBits(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, n := range []int{0, 1, 2, 3, 4, 5, 7, 8, 9, 64, 127, 510, 512, 513} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			for range 5 {
				a, b := randFloats(r, n, 1), randFloats(r, n, 1)
				if got, want := dotFast(a, b), dot(a, b); !sameBits(got, want) {
					t.Fatalf("dotFast = %v, dot = %v", got, want)
				}
				for _, y := range []float64{1, -1} {
					s, c, x := randFloats(r, n, 50), randFloats(r, n, 1e-15), randFloats(r, n, 0.05)
					s1, c1, s2, c2 := append([]float64(nil), s...), append([]float64(nil), c...), append([]float64(nil), s...), append([]float64(nil), c...)
					w1, w2 := make([]float64, n), make([]float64, n)
					got, want := plainPassFast(w1, s1, c1, x, y), plainPass(w2, s2, c2, x, y)
					if !sameBits(got, want) {
						t.Fatalf("plainPassFast: ‖w‖² = %v, plainPass %v", got, want)
					}
					for i := range w1 {
						if !sameBits(w1[i], w2[i]) || !sameBits(s1[i], s2[i]) || !sameBits(c1[i], c2[i]) {
							t.Fatalf("plainPassFast: element %d differs", i)
						}
					}
				}
				for _, sgn := range []float64{1, -1} {
					tt, tc, o, oc := randFloats(r, n, 50), randFloats(r, n, 1e-15), randFloats(r, n, 40), randFloats(r, n, 1e-15)
					x := randFloats(r, n, 0.05)
					t1, tc1 := append([]float64(nil), tt...), append([]float64(nil), tc...)
					t2, tc2 := append([]float64(nil), tt...), append([]float64(nil), tc...)
					w1, w2 := make([]float64, n), make([]float64, n)
					it, io := 1/float64(3+r.IntN(1000)), 1/float64(3+r.IntN(1000))
					var g, h [4]float64
					g[0], g[1], g[2], g[3] = balancedPassFast(w1, t1, tc1, o, oc, x, it, io, sgn)
					h[0], h[1], h[2], h[3] = balancedPass(w2, t2, tc2, o, oc, x, it, io, sgn)
					for i := range g {
						if !sameBits(g[i], h[i]) {
							t.Fatalf("balancedPassFast: sum %d = %v, balancedPass %v", i, g[i], h[i])
						}
					}
					for i := range w1 {
						if !sameBits(w1[i], w2[i]) || !sameBits(t1[i], t2[i]) || !sameBits(tc1[i], tc2[i]) {
							t.Fatalf("balancedPassFast: element %d differs", i)
						}
					}
				}
			}
		})
	}
}

// TestProjectMatchesGonum: project equals gonum's Dgemv (its amd64
// assembly, which project called before) to the bit, so that φ and the
// recorded predictions of TestLegacyV1 do not change.
func TestProjectMatchesGonum(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("gonum's reference order is its amd64 assembly")
	}
	r := rand.New(rand.NewPCG(13, 14))
	for _, features := range []int{1, 3, 4, 15, 16, 17, 21, 64, 256, 259} {
		for _, dim := range []int{1, 2, 3, 5, 32, 33} {
			fm := rbfMap(t, 0.7, features, dim, uint64(features*100+dim))
			x := randFloats(r, dim, 3)
			z := make([]float64, features)
			fm.project(z, x)
			want := make([]float64, features)
			blas64.Gemv(blas.NoTrans, 1,
				blas64.General{Rows: features, Cols: dim, Stride: dim, Data: fm.omega},
				blas64.Vector{N: dim, Inc: 1, Data: x}, 0,
				blas64.Vector{N: features, Inc: 1, Data: want})
			for k := range z {
				if !sameBits(z[k], want[k]) {
					t.Fatalf("D = %d, d = %d: z[%d] = %v, gonum %v", features, dim, k, z[k], want[k])
				}
			}
		}
	}
}

// TestMapArgumentRange: inputs up to kafka.max_feature_abs (1e15) give
// products far beyond the table path's limit; the map stays finite, ok and
// within 5e-16 of math.Sincos, and reports ok = false for NaN and ±Inf.
func TestMapArgumentRange(t *testing.T) {
	r := rand.New(rand.NewPCG(15, 16))
	fm := rbfMap(t, 10, 64, 8, 3)
	dst := make([]float64, fm.Dim())
	z := make([]float64, 64)
	x := make([]float64, 8)
	for _, scale := range []float64{0, 1e-310, 1e-3, 1, 1e4, sincosFastLimit / 40, 1e8, 1e15} {
		for range 50 {
			for i := range x {
				x[i] = scale * (2*r.Float64() - 1)
			}
			sq, ok := fm.Map(dst, x)
			if !ok || math.Abs(sq-1) > 1e-12 {
				t.Fatalf("scale %v: ‖φ‖² = %v, ok %v", scale, sq, ok)
			}
			fm.project(z, x)
			for k, v := range z {
				s, c := math.Sincos(v)
				if d := max(math.Abs(dst[k]-fm.scale*c), math.Abs(dst[64+k]-fm.scale*s)); d > 5e-16*fm.scale || math.IsNaN(dst[k]) {
					t.Fatalf("scale %v: feature %d (z = %v) off by %v", scale, k, v, d)
				}
			}
		}
	}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		x[3] = bad
		if _, ok := fm.Map(dst, x); ok {
			t.Errorf("x with %v: ok", bad)
		}
	}
}
