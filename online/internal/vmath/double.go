package vmath

import "math"

// DoubleAngleRFF maps the random-feature pair form of z to that of 2z:
// with src = a·[cos z; sin z] (D = len(src)/2 cosines, then D sines) and
// k = 1/a, it sets
//
//	dst[i]   = ((C − S)·(C + S))·k = a·cos 2z_i
//	dst[D+i] = ((C·S)·2)·k         = a·sin 2z_i
//
// for C = src[i], S = src[D+i] (every product rounded, no FMA), and
// returns Σ dst[i]², summed as SincosRFF sums (by FMA in sixteen lanes:
// the cosines' and the sines' of the features i ≡ l (mod 8) in lanes l and
// 8 + l).
//
// It serves the gamma-auto MAM, whose bandwidths' frequencies double from
// one to the next: one pass here costs a fraction of a sin/cos. The angle
// error doubles with each doubling (a relative error of a few ulps per
// step on top of that), so after the five doublings of the default grid
// the features are within about 1e-14 of a direct sin/cos.
//
// dst and src must have the same even length and must not overlap unless
// they are the same slice. It does not allocate.
func DoubleAngleRFF(dst, src []float64, k float64) float64 {
	if len(dst) != len(src) || len(src)%2 != 0 {
		panic("vmath: DoubleAngleRFF: bad lengths")
	}
	d := len(src) / 2
	var acc [16]float64
	n := doubleBlocks(dst[:d:d], dst[d:2*d:2*d], src[:d:d], src[d:2*d:2*d], k, &acc)
	for i := n; i < d; i++ {
		doubleOne(dst, src, d, i, k, &acc)
	}
	return sum16(&acc)
}

func doubleOne(dst, src []float64, d, i int, k float64, acc *[16]float64) {
	c, s := src[i], src[d+i]
	c2 := float64(float64((c-s)*(c+s)) * k)
	s2 := float64(float64(float64(c*s)*2) * k)
	dst[i], dst[d+i] = c2, s2
	l := i & 7
	acc[l] = math.FMA(c2, c2, acc[l])
	acc[8+l] = math.FMA(s2, s2, acc[8+l])
}

// doubleGo is DoubleAngleRFF on the features of dc, ds (cosines and sines
// out) from sc, ss (in), the first one in lane 0.
func doubleGo(dc, ds, sc, ss []float64, k float64, acc *[16]float64) {
	n := len(dc)
	ds, sc, ss = ds[:n], sc[:n], ss[:n]
	for i := range n {
		c, s := sc[i], ss[i]
		c2 := float64(float64((c-s)*(c+s)) * k)
		s2 := float64(float64(float64(c*s)*2) * k)
		dc[i], ds[i] = c2, s2
		l := i & 7
		acc[l] = math.FMA(c2, c2, acc[l])
		acc[8+l] = math.FMA(s2, s2, acc[8+l])
	}
}
