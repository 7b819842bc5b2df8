//go:build amd64 && !purego

package dense

import (
	"golang.org/x/sys/cpu"

	"github.com/streamer/streamer/online/internal/cpuinfo"
)

// useAsm selects the AVX2/FMA kernels of kernel_amd64.s (the tests turn it
// off to check the portable ones on this machine too).
var useAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// canWide: the machine can run kern6x16 (AVX-512F).
var canWide = useAsm && cpu.X86.HasAVX512F

// useWide makes the products take two B slivers at a time (macro, kernel2)
// where 512-bit instructions are full width (cpuinfo.Wide512), for
// kern6x16: two tiles at once on AVX-512. The same bits as two kern6x8
// calls. (The tests turn it on elsewhere too: kernel2 is then two kernel
// calls.)
var useWide = canWide && cpuinfo.Wide512

//go:noescape
func kern6x8(k int, a, b, c *float64, ldc int, alpha float64)

//go:noescape
func kern6x16(k int, a, b, c *float64, ldc int, alpha float64)

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

// kernel2 is kernel on two tiles side by side, C[0:mr, 0:2nr], from two
// packed B slivers one after the other in b.
func kernel2(k int, a, b, c []float64, ldc int, alpha float64) {
	_ = a[k*mr-1]
	_ = b[2*k*nr-1]
	_ = c[(mr-1)*ldc+2*nr-1]
	if canWide && useAsm {
		kern6x16(k, &a[0], &b[0], &c[0], ldc, alpha)
		return
	}
	kernel(k, a, b, c, ldc, alpha)
	kernel(k, a, b[k*nr:], c[nr:], ldc, alpha)
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
