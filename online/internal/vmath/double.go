package vmath

// DoubleAngleRFF maps the random-feature pair form of z to that of 2z:
// with src = a·[cos z; sin z] (D = len(src)/2 cosines, then D sines) and
// k = 1/a, it sets
//
//	dst[i]   = ((C − S)·(C + S))·k = a·cos 2z_i
//	dst[D+i] = ((C·S)·2)·k         = a·sin 2z_i
//
// for C = src[i], S = src[D+i] (every product rounded, no FMA); the
// result's norm is the pair form's, as for SincosRFF.
//
// It serves the gamma-auto MAM, whose bandwidths' frequencies double from
// one to the next: one pass here costs a fraction of a sin/cos. The angle
// error doubles with each doubling (a relative error of a few ulps per
// step on top of that), so after the five doublings of the default grid
// the features are within about 1e-14 of a direct sin/cos.
//
// dst and src must have the same even length and must not overlap unless
// they are the same slice. It does not allocate.
func DoubleAngleRFF(dst, src []float64, k float64) {
	if len(dst) != len(src) || len(src)%2 != 0 {
		panic("vmath: DoubleAngleRFF: bad lengths")
	}
	d := len(src) / 2
	n := doubleBlocks(dst[:d:d], dst[d:2*d:2*d], src[:d:d], src[d:2*d:2*d], k)
	doubleGo(dst[n:d], dst[d+n:2*d], src[n:d], src[d+n:2*d], k)
}

// doubleGo is DoubleAngleRFF on the features of dc, ds (cosines and sines
// out) from sc, ss (in).
func doubleGo(dc, ds, sc, ss []float64, k float64) {
	n := len(dc)
	ds, sc, ss = ds[:n], sc[:n], ss[:n]
	for i := range n {
		c, s := sc[i], ss[i]
		dc[i] = float64(float64((c-s)*(c+s)) * k)
		ds[i] = float64(float64(float64(c*s)*2) * k)
	}
}
