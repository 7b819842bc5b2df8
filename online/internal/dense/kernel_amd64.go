//go:build amd64 && !purego

package dense

import "golang.org/x/sys/cpu"

// useAsm selects the AVX2/FMA kernels of kernel_amd64.s.
var useAsm = cpu.X86.HasAVX2 && cpu.X86.HasFMA

//go:noescape
func kern6x8(k int, a, b, c *float64, ldc int, alpha float64)

//go:noescape
func axpy(n int, alpha float64, x, y *float64)
