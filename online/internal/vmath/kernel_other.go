//go:build !amd64 || purego

package vmath

// level is levelGo: there are no assembly kernels on this platform (the
// tests' switch between kernels is then a no-op).
var level = levelGo

// wideGemv is MulVec's AVX-512 kernel choice, which does not arise here
// (the tests' switch is then a no-op).
var wideGemv = false

func mulVec(m *Matrix, z, x []float64) { mulVecGo(m, z, x, 0, 0) }

func sincosBlocks(cs, sn, z []float64, s, a float64) int { return 0 }

func dotBlocks(a, b []float64, s *[8]float64) int { return 0 }

func plainBlocks(w, s, c, x []float64, y float64, acc *[16]float64) int { return 0 }

func balancedBlocks(w, t, tc, o, oc, x []float64, it, io float64, acc *[32]float64) int {
	return 0
}

func doubleBlocks(dc, ds, sc, ss []float64, k float64) int { return 0 }

func rbfPanels(r *Rows, x []float64, g float64, acc *[8]float64) int { return 0 }

func expBlocks(dst, src []float64, s float64) int { return 0 }

func wssMaxBlocks(y, g []float64, st []int8, skipPos, skipNeg int8, m *float64, i *int) int {
	return 0
}

func wssSecondBlocks(q []float32, qd, y, g []float64, st []int8, skipPos, skipNeg int8, gmax, qdi, c2yi, tau float64, max2, od *float64, j *int) int {
	return 0
}

func addPairBlocks(dst []float64, a, b []float32, s, t float64) int { return 0 }

func addScaledBlocks(dst []float64, a []float32, s float64) int { return 0 }

func panelDotsAsm(dst, panels []float64, d int, x []float64, np int) bool { return false }

func expShiftBlocks(dst []float64, g, m float64) int { return 0 }

func panelSeqAsm(dst, panels []float64, d int, x []float64, np int) bool { return false }

func accumBlocks(s, c, v []float64, a float64) int { return 0 }

func scaleBlocks(v []float64, f float64) int { return 0 }

func plainDecayBlocks(w, s, c, x []float64, y, lam float64, acc *[8]float64) int { return 0 }

func balancedDecayBlocks(w, t, tc, o, oc, x []float64, it, io, lam float64, acc *[32]float64) int {
	return 0
}

func welfordBlocks(mean, meanC, m2, m2C, inv, x []float64, invN, floor float64) int { return 0 }

func rowBlocks(dst []float32, dots, sqs, ys []float64, sq, yi, s float64) int { return 0 }

func dotRowsAsm(dst, x []float64, rows [][]float64) int { return -1 }

func sqDistPanels(r *Rows, x []float64, p0, p1 int, dst []float64) bool { return false }

func levelSumBlocks(w, tot, sum, sumC, coef []float64) int { return 0 }
