package vmath

// DoubleAngleRFF maps the random-feature pair form of z to that of 2z:
// with src = a·[cos z; sin z] (D = len(src)/2 cosines, then D sines) and
// k = 1/a, it sets
//
//	dst[i]   = ((C − S)·(C + S))·k = a·cos 2z_i
//	dst[D+i] = ((C·S)·2)·k         = a·sin 2z_i
//
// for C = src[i], S = src[D+i], and returns Σ dst[i]², summed in
// SincosRFF's eight accumulators (the cosines' and the sines' of the
// features i ≡ l (mod 4) in accumulator l and 4 + l). Every operation
// rounds (no FMA), so the assembly and the Go code agree bit for bit.
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
	var acc [8]float64
	n := d &^ 3
	if n > 0 {
		doubleBlocks(dst[:n], dst[d:d+n], src[:n], src[d:d+n], k, &acc)
	}
	for i := n; i < d; i++ {
		doubleOne(dst, src, d, i, k, &acc, i%4)
	}
	return sumSquares(&acc)
}

func doubleOne(dst, src []float64, d, i int, k float64, acc *[8]float64, l int) {
	c, s := src[i], src[d+i]
	c2 := float64(float64((c-s)*(c+s)) * k)
	s2 := float64(float64(float64(c*s)*2) * k)
	dst[i], dst[d+i] = c2, s2
	acc[l] += float64(c2 * c2)
	acc[4+l] += float64(s2 * s2)
}

// doubleBlocksGo is DoubleAngleRFF on n = len(dc) (a multiple of 4)
// features: cosines dc, sines ds from sc, ss.
func doubleBlocksGo(dc, ds, sc, ss []float64, k float64, acc *[8]float64) {
	n := len(dc)
	ds, sc, ss = ds[:n], sc[:n], ss[:n]
	for i := range n {
		c, s := sc[i], ss[i]
		c2 := float64(float64((c-s)*(c+s)) * k)
		s2 := float64(float64(float64(c*s)*2) * k)
		dc[i], ds[i] = c2, s2
		l := i & 3
		acc[l] += float64(c2 * c2)
		acc[4+l] += float64(s2 * s2)
	}
}
