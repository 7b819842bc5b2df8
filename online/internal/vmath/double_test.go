package vmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDoubleAngleRFF: the assembly and the Go code agree bit for bit at
// every length (the tails included), the features are a·(cos 2z, sin 2z)
// to a few ulps of a direct math.Sincos, five
// doublings in a row (the default gamma-auto grid) stay within 1e-14·a of
// a direct evaluation at 32z, and the destination may be the source.
func TestDoubleAngleRFF(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	for _, d := range []int{1, 3, 4, 5, 8, 13, 16, 17, 24, 256} {
		a := 1 / math.Sqrt(float64(d))
		z := randVec(r, d, 3)
		z[0] = 0
		if d > 2 {
			z[1], z[2] = math.Pi, -2*math.Pi
		}
		src := make([]float64, 2*d)
		copy(src[d:], z)
		SincosRFF(src, a)
		// Every level, the definition's bits.
		want := make([]float64, 2*d)
		for i := range d {
			c, s := src[i], src[d+i]
			want[i] = float64(float64((c-s)*(c+s)) * (1 / a))
			want[d+i] = float64(float64(float64(c*s)*2) * (1 / a))
		}
		var outs [3][]float64
		for i, l := range []int{levelAVX512, levelAVX2, levelGo} {
			atLevel(l, func() {
				outs[i] = make([]float64, 2*d)
				DoubleAngleRFF(outs[i], src, 1/a)
			})
			if !slicesSame(outs[i], want) {
				t.Fatalf("d=%d: level %d differs from the definition", d, 2-i)
			}
		}
		for i, zi := range z {
			s, c := math.Sincos(2 * zi)
			if math.Abs(outs[0][i]-a*c) > 4e-16 || math.Abs(outs[0][d+i]-a*s) > 4e-16 {
				t.Fatalf("d=%d z=%v: (%v, %v), want (%v, %v)", d, zi, outs[0][i], outs[0][d+i], a*c, a*s)
			}
		}
		// Five doublings in place.
		p := append([]float64(nil), src...)
		for range 5 {
			DoubleAngleRFF(p, p, 1/a)
		}
		for i, zi := range z {
			s, c := math.Sincos(32 * zi)
			if math.Abs(p[i]-a*c) > 1e-14*a || math.Abs(p[d+i]-a*s) > 1e-14*a {
				t.Fatalf("d=%d z=%v after 5 doublings: (%v, %v), want (%v, %v)", d, zi, p[i], p[d+i], a*c, a*s)
			}
		}
	}
}

// BenchmarkDoubleAngleRFF256: one doubling of a 256-frequency map (the
// step between two gamma-auto bandwidths). Target: well under a quarter
// of BenchmarkSincosRFF256, 0 allocs.
func BenchmarkDoubleAngleRFF256(b *testing.B) {
	r := rand.New(rand.NewPCG(2, 2))
	src := make([]float64, 512)
	copy(src[256:], randVec(r, 256, 20))
	SincosRFF(src, 1.0/16)
	dst := make([]float64, 512)
	b.ReportAllocs()
	for b.Loop() {
		DoubleAngleRFF(dst, src, 16)
	}
}

func slicesSame(a, b []float64) bool {
	for i := range a {
		if !same(a[i], b[i]) {
			return false
		}
	}
	return len(a) == len(b)
}
