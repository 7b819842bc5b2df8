package online

import "github.com/streamer/streamer/online/internal/vmath"

// The MAM's per-event work over dim φ — the score's inner product and the
// compensated-sum passes of learn — on the vectorised kernels of
// online/internal/vmath (AVX2 assembly, four elements per instruction).
// The kernels keep the order of every sum of dot, plainPass and
// balancedPass (the independent sums run in the lanes of one register),
// and round every product as the Go code does, so the state, the scores
// and the bounds are the same to the bit: models restored from earlier
// snapshots (TestLegacyV1) and the refresh after a restore (which runs
// balancedPass and plainPass through derive as well) see no change. Where
// the assembly is not available (build tag purego, other architectures) or
// the compiler would fuse the Go loops' multiply-adds (GOAMD64=v3), the Go
// functions of mam.go run instead.

// dotFast is dot.
func dotFast(a, b []float64) float64 {
	if vmath.PassesMatchGo() {
		return vmath.Dot(a, b)
	}
	return dot(a, b)
}

// plainPassFast is plainPass.
func plainPassFast(w, s, c, x []float64, y float64) float64 {
	if vmath.PassesMatchGo() {
		return vmath.PlainPass(w, s, c, x, y)
	}
	return plainPass(w, s, c, x, y)
}

// balancedPassFast is balancedPass.
func balancedPassFast(w, t, tc, o, oc, x []float64, it, io, sgn float64) (ww, ws, tt, oo float64) {
	if vmath.PassesMatchGo() {
		return vmath.BalancedPass(w, t, tc, o, oc, x, it, io, sgn)
	}
	return balancedPass(w, t, tc, o, oc, x, it, io, sgn)
}
