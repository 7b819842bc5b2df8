//go:build !amd64 || purego

package dense

// useAsm is false: there are no assembly kernels on this platform (the
// tests' switch between kernels is then a no-op).
var useAsm = false

// canWide and useWide are false: kernel2 is two kernel calls.
var canWide, useWide = false, false

// kernel2 is kernel on two tiles side by side, C[0:mr, 0:2nr], from two
// packed B slivers one after the other in b.
func kernel2(k int, a, b, c []float64, ldc int, alpha float64) {
	kernelGo(k, a, b, c, ldc, alpha)
	kernelGo(k, a, b[k*nr:], c[nr:], ldc, alpha)
}

// kernel is kernelGo.
func kernel(k int, a, b, c []float64, ldc int, alpha float64) { kernelGo(k, a, b, c, ldc, alpha) }

// axpyTo computes y += alpha·x (len(y) ≥ len(x)).
func axpyTo(alpha float64, x, y []float64) { axpyGo(alpha, x, y[:len(x)]) }
