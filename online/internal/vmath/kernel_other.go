//go:build !amd64 || purego

package vmath

// useAsm is false: there are no assembly kernels on this platform (the
// tests' switch between kernels is then a no-op).
var useAsm = false

// Accelerated reports whether the kernels run as assembly: false here.
func Accelerated() bool { return false }

// PassesMatchGo is false: the callers keep their own Go loops here.
func PassesMatchGo() bool { return false }

func mulVec(m *Matrix, z, x []float64, r0 int) { mulVecGo(m, z, x, r0, r0*m.cols) }

func sincosBlocks(cs, sn []float64, a float64, acc *[8]float64) int {
	return sincosBlocksGo(cs, sn, a, acc)
}

func dotBlocks(a, b []float64, s *[4]float64) { dotBlocksGo(a, b, s) }

func plainBlocks(w, s, c, x []float64, y float64, acc *[2]float64) {
	plainBlocksGo(w, s, c, x, y, acc)
}

func balancedBlocks(w, t, tc, o, oc, x []float64, it, io, sgn float64, acc *[4]float64) {
	balancedBlocksGo(w, t, tc, o, oc, x, it, io, sgn, acc)
}

func doubleBlocks(dc, ds, sc, ss []float64, k float64, acc *[8]float64) {
	doubleBlocksGo(dc, ds, sc, ss, k, acc)
}
