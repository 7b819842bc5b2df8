package vmath

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestDoubleAngleRFF: the assembly and the Go code agree bit for bit at
// every length (the tails included), the features are a·(cos 2z, sin 2z)
// to a few ulps of a direct math.Sincos, the returned sum is theirs, five
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
		var outs [2][]float64
		var sums [2]float64
		var outs3 [3][]float64
		var sums3 [3]float64
		for i, l := range []int{levelAVX512, levelAVX2, levelGo} {
			atLevel(l, func() {
				outs3[i] = make([]float64, 2*d)
				sums3[i] = DoubleAngleRFF(outs3[i], src, 1/a)
			})
		}
		for i := 1; i < 3; i++ {
			if !same(sums3[i], sums3[0]) || !slicesSame(outs3[i], outs3[0]) {
				t.Fatalf("d=%d: level %d differs from the machine's", d, 2-i)
			}
		}
		for i, l := range []int{levelAVX512, levelGo} {
			atLevel(l, func() {
				outs[i] = make([]float64, 2*d)
				sums[i] = DoubleAngleRFF(outs[i], src, 1/a)
			})
		}
		if !same(sums[0], sums[1]) {
			t.Fatalf("d=%d: sum asm %v, go %v", d, sums[0], sums[1])
		}
		var want float64
		for i := range outs[0] {
			if !same(outs[0][i], outs[1][i]) {
				t.Fatalf("d=%d [%d]: asm %v, go %v", d, i, outs[0][i], outs[1][i])
			}
			want += outs[0][i] * outs[0][i]
		}
		if math.Abs(sums[0]-want) > 1e-14 {
			t.Fatalf("d=%d: sum %v, features' squares %v", d, sums[0], want)
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
