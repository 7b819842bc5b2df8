//go:build amd64 && !purego

package dense

import "golang.org/x/sys/cpu"

// useAsm selects the AVX2/FMA kernels of kernel_amd64.s (the tests turn it
// off to check the portable ones on this machine too).
var useAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func kern6x8(k int, a, b, c *float64, ldc int, alpha float64)

//go:noescape
func axpy(n int, alpha float64, x, y *float64)

// kernel computes C[0:mr, 0:nr] += alpha·Σ_p a[p·mr+r]·b[p·nr+q] for
// k > 0 packed steps; c holds the tile's rows at stride ldc.
func kernel(k int, a, b, c []float64, ldc int, alpha float64) {
	_ = a[k*mr-1]
	_ = b[k*nr-1]
	_ = c[(mr-1)*ldc+nr-1]
	if useAsm {
		kern6x8(k, &a[0], &b[0], &c[0], ldc, alpha)
		return
	}
	kernelGo(k, a, b, c, ldc, alpha)
}

// axpyTo computes y += alpha·x (len(y) ≥ len(x)).
func axpyTo(alpha float64, x, y []float64) {
	if len(x) == 0 {
		return
	}
	y = y[:len(x)]
	if useAsm {
		axpy(len(x), alpha, &x[0], &y[0])
		return
	}
	axpyGo(alpha, x, y)
}
