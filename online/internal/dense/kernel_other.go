//go:build !amd64 || purego

package dense

// useAsm is false: there are no assembly kernels on this platform (the
// tests' switch between kernels is then a no-op).
var useAsm = false

// kernel is kernelGo.
func kernel(k int, a, b, c []float64, ldc int, alpha float64) { kernelGo(k, a, b, c, ldc, alpha) }

// axpyTo computes y += alpha·x (len(y) ≥ len(x)).
func axpyTo(alpha float64, x, y []float64) { axpyGo(alpha, x, y[:len(x)]) }
